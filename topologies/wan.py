"""WAN topologies and traffic matrices (pure data, no Mininet).

A :class:`WanTopology` is a set of routers and directed links with capacities; a
:class:`TrafficMatrices` holds T demand matrices ``(T, n, n)`` over its routers (``[t, src, dst]``,
in the unit of the capacities). Bundled (``topologies/data/wan/<name>/``, each with a README
giving its provenance and licence):

- ``b4``: Google's B4 (12 routers, 38 links) with 36 measured Abilene matrices (Teal's artefact);
- ``abilene``: the Abilene backbone (SNDlib, 12 routers, 30 links) with the same 36 measured
  matrices on their own routers;
- ``geant``: GEANT (SNDlib, 22 routers, 72 links) with 36 gravity-model matrices
  (:func:`gravity_series`, seeded) around SNDlib's measured matrix.

A directory holding ``topology.json`` and ``traffic_matrices.csv`` in the same format is a WAN
too (``scripts/make_wan_data.py`` writes one from any topohub graph).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "wan"

#: WAN topologies bundled with their measured traffic matrices.
BUNDLED = ("b4", "abilene", "geant")


class WanError(ValueError):
    """A WAN topology or traffic matrix that cannot be used (one line naming what is wrong)."""


@dataclass(frozen=True)
class WanTopology:
    """Routers ``0..n-1`` (``names[i]`` is router i's label in the source data) and directed
    links ``links[e] = (u, v)`` with ``capacity[e]`` (the unit of the traffic matrices).

    :raises WanError: a link joins a router to itself, repeats, or has no positive capacity.
    """

    name: str
    names: tuple[str, ...]
    links: tuple[tuple[int, int], ...]
    capacity: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.links) != len(self.capacity):
            raise WanError("links: one capacity per link")
        if len(set(self.links)) != len(self.links):
            raise WanError("links: a directed link appears twice")
        n = len(self.names)
        for (u, v), c in zip(self.links, self.capacity):
            if not (0 <= u < n and 0 <= v < n) or u == v:
                raise WanError(f"links: {u}->{v} is not a link between two of the {n} routers")
            if not c > 0:
                raise WanError(f"capacity: link {u}->{v} has capacity {c}, must be positive")

    @property
    def routers(self) -> int:
        """Number of routers n."""
        return len(self.names)

    def graph(self):
        """The topology as a ``networkx.DiGraph`` (edge attributes ``capacity`` and ``index``)."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(self.routers))
        for e, ((u, v), c) in enumerate(zip(self.links, self.capacity)):
            g.add_edge(u, v, capacity=c, index=e)
        return g


@dataclass(frozen=True)
class TrafficMatrices:
    """``matrices[t, src, dst]``: the demand from ``src`` to ``dst`` in interval t (the unit of
    the capacities; the diagonal is 0)."""

    matrices: np.ndarray

    def __len__(self) -> int:
        return self.matrices.shape[0]

    def __getitem__(self, t: int) -> np.ndarray:
        return self.matrices[t]


def wan_directory(name: str) -> Path:
    """The directory of WAN ``name``: a bundled one (:data:`BUNDLED`) or a path to a directory
    holding ``topology.json`` and ``traffic_matrices.csv``.

    :raises WanError: neither.
    """
    if name in BUNDLED:
        return DATA / name
    path = Path(name)
    if (path / "topology.json").is_file() and (path / "traffic_matrices.csv").is_file():
        return path
    raise WanError(f"unknown WAN {name!r} (bundled: {', '.join(BUNDLED)}; or a directory with "
                   "topology.json and traffic_matrices.csv)")


def load_bundled(name: str, matrices: str | Path = "bundled") -> tuple[WanTopology, TrafficMatrices]:
    """A WAN (:func:`wan_directory`) and its traffic matrices: its own (``"bundled"``) or those of
    a ``tm,src,dst,demand`` CSV over its routers.

    :raises WanError: unknown name, unreadable files.
    """
    where = wan_directory(name)
    csv_path = where / "traffic_matrices.csv" if str(matrices) == "bundled" else Path(matrices)
    return read_wan(where / "topology.json", csv_path, Path(name).name)


def gravity_series(sources: np.ndarray, sinks: np.ndarray, count: int, seed: int = 0,
                   sigma: float = 0.2, diurnal: float = 0.15, period: int = 288) -> np.ndarray:
    """``(count, n, n)`` traffic matrices from a gravity model with seeded fluctuations.

    Interval t: every router's source mass ``sources[i]`` and sink mass ``sinks[j]`` is multiplied
    by its own log-normal factor ``exp(sigma z - sigma^2 / 2)`` (mean 1, z ~ N(0, 1) per router and
    interval); the total volume ``sum(sources) x (1 + diurnal x sin(2 pi t / period))`` (a daily
    cycle of ``period`` five-minute intervals) is split in proportion to
    ``source_i(t) x sink_j(t)`` over the pairs i != j (the gravity model of WAN traffic,
    Roughan, "Simplifying the synthesis of Internet traffic matrices", CCR 2005).

    :raises WanError: masses of different lengths, negative, or all zero.
    """
    src = np.asarray(sources, dtype=float)
    dst = np.asarray(sinks, dtype=float)
    if src.shape != dst.shape or src.ndim != 1 or (src < 0).any() or (dst < 0).any() or src.sum() <= 0:
        raise WanError("gravity model: source and sink masses must be equal-length, >= 0, not all 0")
    n = src.size
    rng = np.random.default_rng(seed)
    off = ~np.eye(n, dtype=bool)
    out = np.zeros((count, n, n))
    for t in range(count):
        s = src * np.exp(sigma * rng.standard_normal(n) - sigma ** 2 / 2)
        d = dst * np.exp(sigma * rng.standard_normal(n) - sigma ** 2 / 2)
        w = np.outer(s, d) * off
        total = src.sum() * (1 + diurnal * np.sin(2 * np.pi * t / period))
        out[t] = total * w / w.sum()
    return out


def write_wan(topo: WanTopology, tms: TrafficMatrices, where: Path) -> None:
    """Write ``topology.json`` (directed node-link, links with ``capacity``; nodes carry their
    ``name``) and ``traffic_matrices.csv`` (``tm,src,dst,demand``, non-zero demands) into
    directory ``where`` (created)."""
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    data = {"directed": True, "multigraph": False, "graph": {"name": topo.name},
            "nodes": [{"id": i, "name": nm} for i, nm in enumerate(topo.names)],
            "links": [{"source": u, "target": v, "capacity": c} for (u, v), c in zip(topo.links, topo.capacity)]}
    (where / "topology.json").write_text(json.dumps(data, indent=1) + "\n")
    with open(where / "traffic_matrices.csv", "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["tm", "src", "dst", "demand"])
        for t in range(len(tms)):
            for s, d in zip(*np.nonzero(tms[t])):
                out.writerow([t, int(s), int(d), f"{tms[t][s, d]:.6g}"])


def read_wan(topology_json: Path, matrices_csv: Path, name: str) -> tuple[WanTopology, TrafficMatrices]:
    """Read a networkx node-link JSON topology (directed, links with ``capacity``) and a CSV of
    ``tm,src,dst,demand`` rows; routers are renumbered ``0..n-1`` in ascending order of their ids.

    :raises WanError: unreadable files, a demand between unknown routers or negative.
    """
    try:
        data = json.loads(Path(topology_json).read_text())
        ids = sorted(n["id"] for n in data["nodes"])
        label = {n["id"]: str(n.get("name", n["id"])) for n in data["nodes"]}
        index = {v: i for i, v in enumerate(ids)}
        links = [(index[l["source"]], index[l["target"]]) for l in data["links"]]
        caps = [float(l["capacity"]) for l in data["links"]]
    except (OSError, ValueError, KeyError) as e:
        raise WanError(f"{topology_json}: not a node-link topology with capacities: {e}") from None
    order = sorted(range(len(links)), key=lambda e: links[e])
    topo = WanTopology(name, tuple(label[v] for v in ids), tuple(links[e] for e in order), tuple(caps[e] for e in order))
    return topo, read_matrices(matrices_csv, index)


def read_matrices(matrices_csv: Path, index: dict[int, int]) -> TrafficMatrices:
    """The matrices of a ``tm,src,dst,demand`` CSV over routers whose ids ``index`` maps to
    ``0..n-1``.

    :raises WanError: unreadable file, a demand between unknown routers or negative.
    """
    rows = []
    try:
        with open(matrices_csv, newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append((int(r["tm"]), int(r["src"]), int(r["dst"]), float(r["demand"])))
    except (OSError, ValueError, KeyError) as e:
        raise WanError(f"{matrices_csv}: not a tm,src,dst,demand table: {e}") from None
    count = 1 + max((t for t, *_ in rows), default=-1)
    tms = np.zeros((count, len(index), len(index)))
    for t, s, d, v in rows:
        if s not in index or d not in index or v < 0 or s == d:
            raise WanError(f"{matrices_csv}: bad demand {s}->{d} = {v} in matrix {t}")
        tms[t, index[s], index[d]] += v
    return TrafficMatrices(tms)
