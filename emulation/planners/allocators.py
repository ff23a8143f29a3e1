"""Slice allocators for a multi-tenant rack (:class:`topologies.torus_rack.TorusRack`) and the
cluster state they share. Pure Python over the rack model: no Mininet, no scenario kind.

- :class:`TorusContiguous` (the electrical baseline): a slice is a free contiguous block of its
  legal shape, first fit; its collective uses only the ports inside the block
  (:meth:`TorusRack.usable_ports`: 2x2x1 33% ... 4x4x4 100% of the bandwidth).
- :class:`Photonic` (Morphlux, arXiv 2508.03674): a programmable photonic interposer under every
  server steers any accelerator port in any direction, and a circuit may pass through other
  servers' interposers. The slice's servers form a logical ring (every server's accelerators in
  a row inside it, bidirectional: each accelerator's 6 ports are 3 lanes each way); between
  consecutive servers of the ring it needs ``lanes`` = 3 circuits, so that the ring runs at every
  accelerator's full injection bandwidth (*bandwidth redirection*). Those circuits are routed
  over the server boundaries' fibres by an integer program (:func:`route_circuits`: K = 5
  candidate routes per server pair, minimising the most circuits on any boundary, within every
  boundary's fibres less what other tenants hold), solved by HiGHS (``scipy.optimize.milp``).
  A contiguous block is tried first, then any free servers (chosen compactly); where even that
  cannot be routed, fewer lanes (less bandwidth: ``lanes / 3``).

Allocation is in whole servers: every legal shape is. Spares are servers held back from tenants
(for failure swaps). An allocation's ``bandwidth`` is the share of each accelerator's 6 ports its
collective can drive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from pydantic import Field
from scipy.optimize import Bounds, LinearConstraint, milp

from emulation.sections import StrictModel
from topologies.torus_rack import PORTS, TorusRack

#: Circuits between consecutive servers of a photonic slice's ring for full bandwidth: each
#: accelerator's 6 ports as 3 lanes each way of a bidirectional ring.
FULL_LANES = PORTS // 2
#: Candidate routes per server pair in the photonic allocator's integer program.
K_ROUTES = 5
#: Integer programs whose answers a photonic allocator remembers (the same ring on the same
#: boundary loads recurs often in a trace; an answer depends on nothing else).
CACHE_SIZE = 100_000


class PhotonicSpec(StrictModel):
    """``photonic:`` the Morphlux allocator's candidate routes per server pair and the
    interposer's reconfiguration delay R (s; 3.7 us measured on silicon photonics)."""

    k_routes: int = Field(default=K_ROUTES, ge=1, le=50)
    """Candidate routes per server pair the Morphlux allocator chooses among."""
    reconfiguration_delay_s: float = Field(default=3.7e-6, ge=0, le=60)
    """The interposer's reconfiguration delay R, seconds (3.7 us measured on silicon photonics)."""


@dataclass(frozen=True)
class Allocation:
    """A tenant's slice: its ``servers`` (ring order for a photonic slice), ``accelerators``
    (ascending), whether it is a ``contiguous`` block, its ``bandwidth`` (share of every
    accelerator's 6 ports its collective drives, in (0, 1]) and, photonic (Morphlux, arXiv
    2508.03674), the ``circuits`` it holds on every server boundary (``{(s, t) with s < t:
    circuits}``; empty on the electrical torus)."""

    servers: tuple[int, ...]
    accelerators: tuple[int, ...]
    contiguous: bool
    bandwidth: float
    circuits: dict[tuple[int, int], int] = field(default_factory=dict)


class ClusterState:
    """Free servers, spares and circuits on every server boundary of one rack: ``free`` (server
    ids), ``spares`` (server ids), ``circuits`` (``{(s, t) with s < t: circuits held}``, every
    boundary of :attr:`TorusRack.boundaries`).

    :param spares: servers held back from tenants (the highest-numbered ones).
    :raises ValueError: ``spares`` negative or not fewer than the rack's servers.
    """

    def __init__(self, rack: TorusRack, spares: int = 0):
        if not 0 <= spares < rack.servers:
            raise ValueError(f"spares: {spares} servers of a {rack.servers}-server rack")
        self.rack = rack
        self.spares = frozenset(range(rack.servers - spares, rack.servers))
        self.free: set[int] = set(range(rack.servers)) - self.spares
        self.circuits: dict[tuple[int, int], int] = {tuple(sorted(e)): 0 for e in rack.boundaries.edges}

    @property
    def usable_accelerators(self) -> int:
        """Accelerators tenants may have (the rack less the spares)."""
        return (self.rack.servers - len(self.spares)) * self.rack.per_server

    @property
    def free_accelerators(self) -> int:
        """Accelerators free now."""
        return len(self.free) * self.rack.per_server

    def take(self, a: Allocation) -> None:
        """Mark ``a``'s servers and circuits used.

        :raises ValueError: a server is not free or a boundary would exceed its fibres (nothing
            is taken then)."""
        if not set(a.servers) <= self.free:
            raise ValueError(f"servers {sorted(set(a.servers) - self.free)} are not free")
        for e, c in a.circuits.items():
            if self.circuits[e] + c > self.rack.boundaries.edges[e]["fibres"]:
                raise ValueError(f"boundary {e} has {self.rack.boundaries.edges[e]['fibres']} fibres")
        self.free -= set(a.servers)
        for e, c in a.circuits.items():
            self.circuits[e] += c

    def release(self, a: Allocation) -> None:
        """Give ``a``'s servers and circuits back (``a`` must have been taken: not checked)."""
        self.free |= set(a.servers)
        for e, c in a.circuits.items():
            self.circuits[e] -= c


class TorusContiguous:
    """The electrical torus's allocator (Lumorph arXiv 2501.18169 and Morphlux arXiv 2508.03674's
    baseline; module doc): first free block of the shape, in the order of
    :meth:`TorusRack.blocks`; its bandwidth is :meth:`TorusRack.usable_ports` / 6."""

    name = "torus-contiguous"

    def __init__(self, rack: TorusRack):
        self.rack = rack
        self._blocks = {}

    def _candidates(self, accelerators: int):
        if accelerators not in self._blocks:
            shape = self.rack.shape_for(accelerators)
            out = []
            for b in self.rack.blocks(shape):
                members = self.rack.members(b)
                servers = tuple(sorted({self.rack.server_of(a) for a in members}))
                out.append((frozenset(servers), servers, members, self.rack.usable_ports(members) / PORTS))
            self._blocks[accelerators] = out
        return self._blocks[accelerators]

    def allocate(self, state: ClusterState, accelerators: int, allowed: frozenset[int] | None = None) -> Allocation | None:
        """A slice of ``accelerators`` on free servers (within ``allowed``, server ids, if given),
        or None when no block of its shape is free. Does not take it (:meth:`ClusterState.take`).

        :raises RackError: no legal shape has that many accelerators."""
        pool = state.free if allowed is None else state.free & allowed
        for key, servers, members, bw in self._candidates(accelerators):
            if key <= pool:
                return Allocation(servers, members, True, bw)
        return None

    def placements(self, state: ClusterState, accelerators: int, allowed: frozenset[int] | None = None) -> int:
        """How many placements of ``accelerators`` are free now (within ``allowed``): the scarcity
        of a size, overlapping placements counted each.

        :raises RackError: no legal shape has that many accelerators."""
        pool = state.free if allowed is None else state.free & allowed
        return sum(1 for key, *_ in self._candidates(accelerators) if key <= pool)


class Photonic(TorusContiguous):
    """Morphlux's allocator (arXiv 2508.03674; module doc).

    :param k_routes: candidate routes per server pair in the integer program (K).
    :param candidates: sets of free servers tried per lane count when no contiguous block fits.
    """

    name = "photonic"

    def __init__(self, rack: TorusRack, k_routes: int = K_ROUTES, candidates: int = 3):
        super().__init__(rack)
        self.k_routes = k_routes
        self.candidates = candidates
        g = rack.boundaries
        self._dist = dict(nx.all_pairs_shortest_path_length(g))
        self._routes: dict[tuple[int, int], list[list[tuple[int, int]]]] = {}
        self._solved: dict[tuple, dict | None] = {}  # route_circuits' answers by their inputs

    def routes(self, s: int, t: int) -> list[list[tuple[int, int]]]:
        """Up to ``k_routes`` shortest simple server paths between s and t (either order), each
        a list of boundaries ``(u, v)`` with u < v, shortest first.

        :raises networkx.NetworkXNoPath: s and t are not connected (never on a torus)."""
        key = (min(s, t), max(s, t))
        if key not in self._routes:
            paths = []
            for p in nx.shortest_simple_paths(self.rack.boundaries, key[0], key[1]):
                paths.append([tuple(sorted(e)) for e in zip(p, p[1:])])
                if len(paths) == self.k_routes:
                    break
            self._routes[key] = paths
        return self._routes[key]

    def ring(self, servers) -> tuple[int, ...]:
        """``servers`` (non-empty) in a ring order of few hops: nearest neighbour (in server
        boundaries crossed) from the lowest."""
        left = sorted(servers)
        order = [left.pop(0)]
        while left:
            here = order[-1]
            nxt = min(left, key=lambda s: (self._dist[here][s], s))
            left.remove(nxt)
            order.append(nxt)
        return tuple(order)

    def _compact(self, pool: set[int], k: int) -> list[tuple[int, ...]]:
        """Candidate sets of ``k`` free servers: grown from every free server by nearest free
        server, the ``candidates`` with the shortest rings."""
        sets = set()
        for seed in sorted(pool):
            chosen = [seed]
            rest = set(pool) - {seed}
            while len(chosen) < k:
                nxt = min(rest, key=lambda s: (sum(self._dist[c][s] for c in chosen), s))
                chosen.append(nxt)
                rest.remove(nxt)
            sets.add(tuple(sorted(chosen)))

        def length(servers):
            r = self.ring(servers)
            return sum(self._dist[a][b] for a, b in zip(r, r[1:] + r[:1]))

        return sorted(sets, key=lambda s: (length(s), s))[:self.candidates]

    def _place(self, state: ClusterState, servers, members, contiguous: bool, lanes: int) -> Allocation | None:
        ring = self.ring(servers)
        if len(ring) == 1:
            return Allocation(ring, members, contiguous, 1.0)
        pairs = list(zip(ring, ring[1:] + ring[:1]))
        candidates = [self.routes(a, b) for a, b in pairs]
        # the program depends only on the pairs, the lanes and what is held on the routes' boundaries
        near = sorted({e for routes in candidates for r in routes for e in r})
        key = (tuple(pairs), lanes, tuple(state.circuits[e] for e in near))
        if key not in self._solved:
            if len(self._solved) >= CACHE_SIZE:
                self._solved.clear()
            self._solved[key] = route_circuits(self.rack.boundaries, state.circuits, candidates, lanes)
        used = self._solved[key]
        if used is None:
            return None
        return Allocation(ring, members, contiguous, min(1.0, 2 * lanes / PORTS), used)

    def allocate(self, state: ClusterState, accelerators: int, allowed: frozenset[int] | None = None) -> Allocation | None:
        """A slice of ``accelerators`` on free servers (within ``allowed``, server ids, if given;
        module doc), or None when no free servers can be wired even with one lane. Does not take
        it (:meth:`ClusterState.take`).

        :raises RackError: no legal shape has that many accelerators (raised once enough
            servers are free to try)."""
        pool = state.free if allowed is None else state.free & allowed
        k = accelerators // self.rack.per_server
        if k > len(pool):
            return None
        for lanes in range(FULL_LANES, 0, -1):
            for key, servers, members, _bw in self._candidates(accelerators):
                if key <= pool:
                    a = self._place(state, servers, members, True, lanes)
                    if a is not None:
                        return a
                    break  # one contiguous try per lane count
            for servers in self._compact(pool, k):
                members = tuple(sorted(m for s in servers for m in self.rack.server_members[s]))
                a = self._place(state, servers, members, False, lanes)
                if a is not None:
                    return a
        return None

    def placements(self, state: ClusterState, accelerators: int, allowed: frozenset[int] | None = None) -> int:
        """How many disjoint slices of ``accelerators`` the free servers (within ``allowed``)
        hold: any servers will do."""
        pool = state.free if allowed is None else state.free & allowed
        return len(pool) // max(1, accelerators // self.rack.per_server)


def route_circuits(boundaries: nx.Graph, held: dict[tuple[int, int], int], candidates: list[list[list[tuple[int, int]]]],
                   lanes: int) -> dict[tuple[int, int], int] | None:
    """Route ``lanes`` circuits for every server pair over its candidate routes (Morphlux's
    integer program, arXiv 2508.03674; solved by HiGHS through ``scipy.optimize.milp``): integer ``y[p, r]`` circuits of pair p on route r, ``sum_r y[p, r] = lanes``;
    on every boundary e, ``held[e] + sum of y over routes through e <= fibres[e]``; minimise the
    most circuits on any boundary the routes cross, then (by a weight below one circuit) the total
    route length.

    :param boundaries: the rack's server boundaries (:attr:`TorusRack.boundaries`, edge
        attribute ``fibres``).
    :param held: circuits already held per boundary ``(s, t)``, s < t (every boundary the routes
        cross must be a key).
    :param candidates: per pair, its routes, each a list of boundaries ``(s, t)`` with s < t.
    :param lanes: circuits each pair needs (1 to :data:`FULL_LANES`).
    :returns: the new circuits per boundary (``{(s, t): circuits}``, only boundaries used), or
        None if no routing fits.
    :raises KeyError: a route crosses a boundary missing from ``held`` or ``boundaries``.
    """
    # only the boundaries the routes cross: the others' loads do not change, and leaving them out
    # keeps the answer a function of what the routes meet
    edges = sorted({e for routes in candidates for r in routes for e in r})
    col = {e: i for i, e in enumerate(edges)}
    var = [(p, r) for p, routes in enumerate(candidates) for r in range(len(routes))]
    n = len(var) + 1  # the last variable: the most circuits on a boundary
    A_eq = np.zeros((len(candidates), n))
    A_e = np.zeros((len(edges), n))
    cost = np.zeros(n)
    cost[-1] = 1.0
    total_len = sum(len(candidates[p][r]) for p, r in var) * lanes + 1
    for j, (p, r) in enumerate(var):
        A_eq[p, j] = 1
        for e in candidates[p][r]:
            A_e[col[e], j] += 1
        cost[j] = len(candidates[p][r]) / total_len
    fibres = np.array([boundaries.edges[e]["fibres"] for e in edges], dtype=float)
    load0 = np.array([held[e] for e in edges], dtype=float)
    A_max = A_e.copy()
    A_max[:, -1] = -1
    cons = [LinearConstraint(A_eq, lanes, lanes), LinearConstraint(A_e, -np.inf, fibres - load0),
            LinearConstraint(A_max, -np.inf, -load0)]
    integrality = np.ones(n)
    integrality[-1] = 0
    res = milp(cost, constraints=cons, integrality=integrality, bounds=Bounds(0, np.inf))
    if res.status != 0 or res.x is None:
        return None
    y = np.round(res.x[:-1]).astype(int)
    used: dict[tuple[int, int], int] = {}
    for j, (p, r) in enumerate(var):
        if y[j]:
            for e in candidates[p][r]:
                used[e] = used.get(e, 0) + int(y[j])
    return used


#: The allocators by the name a tenancy scenario gives (``tenancy.allocators``): each class takes
#: the :class:`TorusRack` (and, photonic, ``k_routes``).
ALLOCATORS = {"torus-contiguous": TorusContiguous, "photonic": Photonic}
