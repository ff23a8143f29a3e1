#!/usr/bin/env python3
"""Write a WAN directory (``topology.json`` + ``traffic_matrices.csv``) from a topohub graph.

Links: every undirected edge of the graph becomes two directed links of ``--capacity`` (topohub's
SNDlib and Topology Zoo graphs carry no capacities). Matrices: ``--matrices gravity`` draws
``--count`` matrices from a gravity model (:func:`topologies.wan.gravity_series`, seeded by
``--seed``) whose source and sink masses are the row and column sums of the graph's own demand
matrix (SNDlib's measured one) or, without one, every router's degree; ``--matrices FILE.csv``
takes measured matrices (``tm,src,dst,demand``, routers in the graph's node order). Both are then
multiplied by one factor so that the mean matrix's optimal min-MLU over k = 4 shortest tunnels is
``--mlu`` (1.0: a scenario's ``traffic.scale`` is then the load relative to what optimal TE
carries on average).

The bundled ``abilene`` and ``geant`` were made with::

    scripts/make_wan_data.py sndlib/abilene --matrices topologies/data/wan/b4/traffic_matrices.csv \
        --out topologies/data/wan/abilene
    scripts/make_wan_data.py sndlib/geant --matrices gravity --count 36 --seed 0 \
        --out topologies/data/wan/geant
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulation.planners.te import solve  # noqa: E402
from emulation.planners.tunnels import k_shortest  # noqa: E402
from topologies.wan import TrafficMatrices, WanError, WanTopology, gravity_series, read_matrices, write_wan  # noqa: E402


def from_topohub(key: str, capacity: float) -> tuple[WanTopology, np.ndarray | None]:
    """The topohub graph ``key`` as a WanTopology (both directions of every edge at ``capacity``)
    and its demand matrix ``(n, n)`` if it has one.

    :raises WanError: unknown key.
    """
    import topohub

    try:
        g = topohub.get(key)
    except KeyError:
        raise WanError(f"topohub: no graph {key!r}") from None
    ids = sorted(n["id"] for n in g["nodes"])
    index = {v: i for i, v in enumerate(ids)}
    names = {n["id"]: str(n.get("name", n["id"])) for n in g["nodes"]}
    links = sorted({(index[e["source"]], index[e["target"]]) for e in g["edges"]}
                   | {(index[e["target"]], index[e["source"]]) for e in g["edges"]})
    topo = WanTopology(key.split("/")[-1], tuple(names[v] for v in ids), tuple(links),
                       tuple(float(capacity) for _ in links))
    demands = g["graph"].get("demands")
    if not demands:
        return topo, None
    m = np.zeros((topo.routers, topo.routers))
    for s, row in demands.items():
        for d, v in row.items():
            m[index[int(s)], index[int(d)]] = float(v)
    return topo, m


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("key", help="topohub key, e.g. sndlib/geant, topozoo/Abilene")
    ap.add_argument("--out", type=Path, required=True, help="directory to write")
    ap.add_argument("--capacity", type=float, default=10_000.0, help="every link, Mbit/s (default 10000)")
    ap.add_argument("--matrices", default="gravity", help="gravity, or a tm,src,dst,demand CSV")
    ap.add_argument("--count", type=int, default=36, help="gravity matrices (default 36)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mlu", type=float, default=1.0, help="optimal min-MLU of the mean matrix")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    a = parser().parse_args(argv)
    if a.capacity <= 0 or a.count < 1 or a.mlu <= 0:
        parser().error("--capacity, --count and --mlu must be positive")
    from emulation.output import writing

    with writing(a.out):
        try:
            topo, base = from_topohub(a.key, a.capacity)
            if a.matrices == "gravity":
                masses = (base.sum(axis=1), base.sum(axis=0)) if base is not None else \
                    (np.bincount([u for u, _ in topo.links], minlength=topo.routers).astype(float),) * 2
                series = gravity_series(*masses, count=a.count, seed=a.seed)
            else:
                series = read_matrices(Path(a.matrices), {i: i for i in range(topo.routers)}).matrices
            tunnels = k_shortest(topo, 4)
            mlu = solve(tunnels, series.mean(axis=0), np.array(topo.capacity), "min-mlu").value
        except WanError as e:
            print(f"make_wan_data: {e}", file=sys.stderr)
            return 2
        series = series * (a.mlu / mlu)
        write_wan(topo, TrafficMatrices(series), a.out)
        print(f"{a.out}: {topo.routers} routers, {len(topo.links)} links of {a.capacity:g}, "
              f"{len(series)} matrices x {a.mlu / mlu:.4g} (mean matrix optimal MLU {a.mlu})")
        return 0


if __name__ == "__main__":
    sys.exit(main())
