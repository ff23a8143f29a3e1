"""WAN topologies and traffic matrices (pure data, no Mininet).

A :class:`WanTopology` is a set of routers and directed links with capacities; a
:class:`TrafficMatrices` holds T demand matrices ``(T, n, n)`` over its routers (``[t, src, dst]``,
in the unit of the capacities). Bundled: ``b4`` (Google's B4, 12 routers, with 36 measured
Abilene matrices, ``topologies/data/wan/b4/``, MIT licence).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "wan"

#: WAN topologies bundled with their measured traffic matrices.
BUNDLED = ("b4",)


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


def load_bundled(name: str) -> tuple[WanTopology, TrafficMatrices]:
    """A bundled WAN (:data:`BUNDLED`) and its measured traffic matrices.

    :raises WanError: unknown name.
    """
    if name not in BUNDLED:
        raise WanError(f"unknown bundled WAN {name!r} (known: {', '.join(BUNDLED)})")
    return load(DATA / name / "topology.json", DATA / name / "traffic_matrices.csv", name)


def load(topology_json: Path, matrices_csv: Path, name: str) -> tuple[WanTopology, TrafficMatrices]:
    """Read a networkx node-link JSON topology (directed, links with ``capacity``) and a CSV of
    ``tm,src,dst,demand`` rows; routers are renumbered ``0..n-1`` in ascending order of their ids.

    :raises WanError: unreadable files, a demand between unknown routers or negative.
    """
    try:
        data = json.loads(Path(topology_json).read_text())
        ids = sorted(n["id"] for n in data["nodes"])
        index = {v: i for i, v in enumerate(ids)}
        links = [(index[l["source"]], index[l["target"]]) for l in data["links"]]
        caps = [float(l["capacity"]) for l in data["links"]]
    except (OSError, ValueError, KeyError) as e:
        raise WanError(f"{topology_json}: not a node-link topology with capacities: {e}") from None
    order = sorted(range(len(links)), key=lambda e: links[e])
    topo = WanTopology(name, tuple(str(v) for v in ids), tuple(links[e] for e in order), tuple(caps[e] for e in order))
    rows = []
    try:
        with open(matrices_csv, newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append((int(r["tm"]), int(r["src"]), int(r["dst"]), float(r["demand"])))
    except (OSError, ValueError, KeyError) as e:
        raise WanError(f"{matrices_csv}: not a tm,src,dst,demand table: {e}") from None
    count = 1 + max((t for t, *_ in rows), default=-1)
    tms = np.zeros((count, topo.routers, topo.routers))
    for t, s, d, v in rows:
        if s not in index or d not in index or v < 0 or s == d:
            raise WanError(f"{matrices_csv}: bad demand {s}->{d} = {v} in matrix {t}")
        tms[t, index[s], index[d]] += v
    return topo, TrafficMatrices(tms)
