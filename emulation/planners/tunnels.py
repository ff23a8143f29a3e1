"""Tunnels: the k shortest simple paths (hop count, Yen's algorithm via networkx) of every
ordered router pair, as Symphony's artefact uses them (k = 4; arXiv 2510.11937)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Literal

import numpy as np
from pydantic import Field

from emulation.sections import StrictModel
from topologies.wan import WanError, WanTopology


class TunnelSpec(StrictModel):
    """``tunnels:`` ``k`` shortest simple paths per demand (``ksp``: hop count, Yen;
    :func:`k_shortest`)."""

    k: int = Field(default=4, ge=1, le=16)
    """Tunnels per demand: its k shortest simple paths."""
    method: Literal["ksp"] = "ksp"
    """How the tunnels are found: ``ksp`` (Yen's k shortest paths by hop count)."""


@dataclass(frozen=True)
class Tunnels:
    """The tunnels of every demand (ordered router pair ``demands[d] = (src, dst)``):
    ``paths[t]`` is tunnel t as link indices of the topology, ``demand_of[t]`` its demand.

    :ivar incidence: ``(links, tunnels)`` 0/1: tunnel t crosses link e.
    """

    demands: tuple[tuple[int, int], ...]
    paths: tuple[tuple[int, ...], ...]
    demand_of: np.ndarray
    incidence: np.ndarray

    def of(self, d: int) -> np.ndarray:
        """Indices of demand ``d``'s tunnels."""
        return np.flatnonzero(self.demand_of == d)

    @classmethod
    def from_paths(cls, links: int, demands, paths, demand_of) -> "Tunnels":
        """Tunnels over a topology of ``links`` links: ``paths[t]`` (link indices) of demand
        ``demand_of[t]`` (an index into ``demands``, ordered ``(src, dst)`` pairs)."""
        inc = np.zeros((links, len(paths)))
        for j, p in enumerate(paths):
            inc[list(p), j] = 1.0
        return cls(tuple(tuple(d) for d in demands), tuple(tuple(p) for p in paths),
                   np.asarray(demand_of, dtype=int), inc)

    def avoiding(self, failed) -> tuple["Tunnels", np.ndarray]:
        """The tunnels that cross none of the ``failed`` links (same demands, some of which may
        have no tunnel left) and their indices in ``self``."""
        down = set(int(e) for e in failed)
        keep = np.array([j for j, p in enumerate(self.paths) if not down.intersection(p)], dtype=int)
        return (Tunnels.from_paths(self.incidence.shape[0], self.demands, [self.paths[j] for j in keep],
                                   self.demand_of[keep]), keep)

    def volumes(self, matrix: np.ndarray) -> np.ndarray:
        """``(demands,)`` volume of every demand in ``matrix`` (``[src, dst]``)."""
        s, d = np.array(self.demands).T
        return np.asarray(matrix, dtype=float)[s, d]


def k_shortest(topo: WanTopology, k: int = 4) -> Tunnels:
    """Up to ``k`` shortest simple paths (fewest hops, ties in networkx's order) for every
    ordered pair of routers.

    :raises WanError: k < 1, or a pair has no path (the topology is not strongly connected).
    """
    import networkx as nx

    if k < 1:
        raise WanError(f"tunnels.k: must be at least 1, got {k}")
    g = topo.graph()
    demands, paths, owner = [], [], []
    for s in range(topo.routers):
        for t in range(topo.routers):
            if s == t:
                continue
            try:
                found = list(islice(nx.shortest_simple_paths(g, s, t), k))
            except nx.NetworkXNoPath:
                raise WanError(f"{topo.name}: no path from router {topo.names[s]} to {topo.names[t]}") from None
            d = len(demands)
            demands.append((s, t))
            for p in found:
                paths.append(tuple(g.edges[u, v]["index"] for u, v in zip(p, p[1:])))
                owner.append(d)
    return Tunnels.from_paths(len(topo.links), demands, paths, owner)
