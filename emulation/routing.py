"""Destination-based ECMP routing over the current circuit graph.

One routing function for both backends: the controller's routing app installs exactly these
next hops as OpenFlow rules, and the flow simulator moves fluid along exactly these paths.

Rule: every node forwards a packet for GPU ``dst`` on channel ``c`` over its shortest-path
out-links toward ``dst`` (hop count), sorted by ``(next node, out port, in port)``, taking
entry ``c mod k`` of the ``k`` candidates. Channels therefore spread over parallel circuits and
over equal-cost directions (a ring's two halves), and every (dst, channel) forms a tree, so
forwarding on (destination, channel) alone is loop-free.

The tables are computed with numpy for every (node, destination) at once (hop distances by
``scipy.sparse.csgraph``), so a 1,024-GPU fabric routes in milliseconds; :meth:`Routes.paths`
and :meth:`Routes.subflow_arrays` route whole steps of transfers as arrays (the flow
simulator's form), and the scalar methods (:meth:`Routes.path`, :meth:`Routes.subflows`,
:meth:`Routes.next_hop`) read the same tables.

Spec: ``docs/architecture.md`` (packet-level backend: multi-hop through intermediate GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulation.fabric import Configuration, Fabric, Link


class RoutingError(RuntimeError):
    """No path between two GPUs under the current configuration."""


def _expand(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every integer of every range ``[lo[i], hi[i])``, ranges in order."""
    n = hi - lo
    if not n.size:
        return np.zeros(0, dtype=np.int64)
    return np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n - lo, n)


@dataclass(frozen=True)
class LinkRuns:
    """Paths as runs of consecutive positions in a *lane* order of the links: subflow
    ``flow[i]`` crosses the links ``lane[start[i]:start[i] + length[i]]``, in path order. A
    path of h hops on a ring of links is one or two runs, whatever h, where (subflow, link) pairs
    would be h entries.

    :ivar flow: (R,) subflow of each run (runs of one subflow in path order).
    :ivar start: (R,) first lane position. :ivar length: (R,) links in the run (>= 1).
    :ivar lane: (P,) link index at each lane position (each link at most once).
    """

    flow: np.ndarray
    start: np.ndarray
    length: np.ndarray
    lane: np.ndarray

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pair_flow, pair_link)``: the runs as (subflow, link) pairs, (N,) each, in path order."""
        return np.repeat(self.flow, self.length), self.lane[_expand(self.start, self.start + self.length)]

    def link_loads(self, flow_weight: np.ndarray, links: int) -> np.ndarray:
        """(links,) the sum of ``flow_weight`` ((F,), e.g. bytes) over the subflows crossing each
        link (exact for integer or half-integer weights below 2^53: a prefix sum over the lanes)."""
        p = self.lane.size
        w = flow_weight[self.flow]
        edge = (np.bincount(self.start, weights=w, minlength=p + 1)
                - np.bincount(self.start + self.length, weights=w, minlength=p + 1))
        return np.bincount(self.lane, weights=np.cumsum(edge)[:p], minlength=links)


class SubflowArrays:
    """How a batch of T transfers is spread over the fabric, as flat arrays.

    One *subflow* per (transfer, distinct channel path); F subflows, N (subflow, link) pairs.

    :ivar transfer: (F,) index of the transfer (0..T-1) each subflow belongs to.
    :ivar channel: (F,) lowest channel taking that path.
    :ivar fraction: (F,) share of the transfer's bytes on it (channels on the path / channels).
    :ivar hops: (F,) links on the path.
    :ivar pair_flow: (N,) subflow of each (subflow, link) pair.
    :ivar pair_link: (N,) link index (into :attr:`Routes.links`) of each pair.
    :ivar runs: the same paths as :class:`LinkRuns` where the routes made them (a ring of links),
        else None; the pairs are then made from them on first use.
    """

    def __init__(self, transfer: np.ndarray, channel: np.ndarray, fraction: np.ndarray, hops: np.ndarray,
                 pair_flow: np.ndarray | None = None, pair_link: np.ndarray | None = None,
                 runs: LinkRuns | None = None):
        if (pair_flow is None) == (runs is None):
            raise ValueError("give either (subflow, link) pairs or link runs")
        self.transfer, self.channel, self.fraction, self.hops = transfer, channel, fraction, hops
        self._pairs = None if runs is not None else (pair_flow, pair_link)
        self.runs = runs

    @property
    def pair_flow(self) -> np.ndarray:
        """(N,) subflow of each (subflow, link) pair."""
        return self._pair_arrays()[0]

    @property
    def pair_link(self) -> np.ndarray:
        """(N,) link index of each pair."""
        return self._pair_arrays()[1]

    def _pair_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pairs is None:
            self._pairs = self.runs.pairs()
        return self._pairs

    @property
    def pair_count(self) -> int:
        """N, the (subflow, link) pairs (= the sum of ``hops``), without making them."""
        return int(self.hops.sum())

    def flow_bytes(self, nbytes: np.ndarray) -> np.ndarray:
        """(F,) bytes of every subflow, given the transfers' bytes ``nbytes`` (T,)."""
        return np.asarray(nbytes, dtype=float)[self.transfer] * self.fraction

    def link_loads(self, flow_bytes: np.ndarray, links: int, link_ids: np.ndarray | None = None) -> np.ndarray:
        """(links,) bytes every directed link carries, given every subflow's bytes (F,)
        (:meth:`flow_bytes`); ``link_ids`` maps this batch's link indices to another index
        space of ``links`` links (the flow simulator's links of all configurations)."""
        if self._pairs is None:
            if link_ids is None:
                return self.runs.link_loads(flow_bytes, links)
            return np.bincount(link_ids, weights=self.runs.link_loads(flow_bytes, link_ids.size), minlength=links)
        ids = self.pair_link if link_ids is None else link_ids[self.pair_link]
        return np.bincount(ids, weights=flow_bytes[self.pair_flow], minlength=links)


class Routes:
    """Next hops and paths over ``fabric`` in ``config``, with ``channels`` channels per flow.

    :ivar links: every directed link of the configuration (:meth:`Fabric.links` order); link
        indices in the array methods refer to this list.
    :ivar dist: (nodes, gpus) int array, hops from every node to every GPU (-1: unreachable).
    """

    def __init__(self, fabric: Fabric, config: Configuration | None = None, channels: int = 1):
        if channels < 1:
            raise ValueError("channels must be >= 1")
        self.fabric = fabric
        self.channels = channels
        nodes, gpus = fabric.nodes, fabric.gpus
        self.rows = fabric.link_rows(config)  # (L, 4): u, up, v, vp of every link, in links order
        self.link_u, self.link_up, self.link_v, self.link_vp = (np.ascontiguousarray(self.rows[:, k]) for k in range(4))
        self._links: list[Link] | None = None
        # Out-links of each node, contiguous, in canonical order (v, up, vp).
        self._order = np.lexsort((self.link_vp, self.link_up, self.link_v, self.link_u)).astype(np.int64)
        self._start = np.searchsorted(self.link_u[self._order], np.arange(nodes + 1))
        # Hop counts to GPU destinations, one column per destination, computed on first use by
        # a BFS over the reversed graph (a fabric of n GPUs would need n^2 of them at once; a
        # run needs the columns of the destinations it sends to, and the paths touch few rows).
        from scipy.sparse import csr_matrix  # here, not at import: the CLI's refusals need no SciPy
        self._rev = csr_matrix((np.ones(self.rows.shape[0]), (self.link_v, self.link_u)), shape=(nodes, nodes))
        self._cols: np.ndarray | None = None  # (nodes, gpus), allocated at the first BFS
        self._known = np.zeros(gpus, dtype=bool)
        # Links sorted by (u, v, ...): the links from u to v are a contiguous run of _order.
        self._uv = (self.link_u * nodes + self.link_v)[self._order]
        self._tables: dict[int, np.ndarray] = {}
        self._component: np.ndarray | None = None
        self._index: dict[Link, int] | None = None
        self._ring: tuple[np.ndarray, np.ndarray, np.ndarray] | None | bool = False  # False: not looked at yet
        self._star: tuple[np.ndarray, np.ndarray] | None | bool = False

    @property
    def links(self) -> list[Link]:
        """Every directed link of the configuration (:meth:`Fabric.links` order), made on first
        use (the array methods work on :attr:`rows`)."""
        if self._links is None:
            self._links = [Link(*r) for r in self.rows.tolist()]
        return self._links

    @property
    def index(self) -> dict[Link, int]:
        """``{Link: its index in links}`` (built on first use)."""
        if self._index is None:
            self._index = {l: i for i, l in enumerate(self.links)}
        return self._index

    def component(self) -> np.ndarray:
        """(nodes,) int: the connected component of every node (every link has its reverse, so a
        GPU reaches exactly the GPUs of its component)."""
        if self._component is None:
            from scipy.sparse.csgraph import connected_components

            self._component = connected_components(self._rev, directed=True, connection="weak")[1]
        return self._component

    def ring(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(order, position, lane)`` if the links form one ring through every GPU (no switch,
        every GPU one link to each of two distinct neighbours, in each direction), else None:
        ``order[i]`` is the GPU at position i around the ring (GPU 0 first, then its lower-id
        neighbour), ``position[g]`` its inverse, and ``lane`` (2n,) the link index of the link
        from position i to i+1 at lane i and of the link from position p to p-1 at lane
        ``n + (n - p) mod n``, so every shortest path is one or two runs of lanes."""
        if self._ring is not False:
            return self._ring
        self._ring = None
        n = self.fabric.gpus
        if self.fabric.nodes != n or n < 3 or self.rows.shape[0] != 2 * n or (np.diff(self._start) != 2).any():
            return None
        outs = self.link_v[self._order].reshape(n, 2)  # each GPU's two neighbours, ascending
        if (outs[:, 0] == outs[:, 1]).any():
            return None
        order = np.empty(n, dtype=np.int64)
        order[0], order[1] = 0, outs[0, 0]
        for i in range(2, n):  # walk the ring: the neighbour that is not where we came from
            a, b = outs[order[i - 1]]
            order[i] = b if a == order[i - 2] else a
        if outs[order[-1], 0] != 0 and outs[order[-1], 1] != 0:
            return None
        position = np.full(n, -1, dtype=np.int64)
        position[order] = np.arange(n)
        if (position < 0).any():
            return None
        nxt = np.roll(order, -1)
        fwd = self._link_index(order, nxt)
        back = self._link_index(nxt, order)  # the link from position i+1 to i, at lane n + (n - i - 1) mod n
        lane = np.empty(2 * n, dtype=np.int64)
        lane[:n] = fwd
        lane[n + (n - np.arange(1, n + 1)) % n] = back
        self._ring = (order, position, lane)
        return self._ring

    def star(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(up, down)`` if every GPU has exactly one link, to one packet switch, and back (a
        non-blocking switch, one port per GPU), else None: ``up[g]`` and ``down[g]`` are the
        indices of GPU g's links to and from the switch; every path is ``[up[src], down[dst]]``."""
        if self._star is not False:
            return self._star
        self._star = None
        n = self.fabric.gpus
        if self.fabric.nodes != n + 1 or self.rows.shape[0] != 2 * n or (np.diff(self._start)[:n] != 1).any():
            return None
        g = np.arange(n, dtype=np.int64)
        if (self.link_v[self._order[self._start[:n]]] != n).any():
            return None
        self._star = (self._link_index(g, np.full(n, n)), self._link_index(np.full(n, n), g))
        return self._star

    def _link_index(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Index of the (first, canonical order) link from ``u[i]`` to ``v[i]``; every pair joined."""
        return self._order[np.searchsorted(self._uv, u * self.fabric.nodes + v)]

    def _hops(self, nodes: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Hops from ``nodes`` to GPUs ``dst`` (arrays of one shape; -1: unreachable).

        Pairs joined by a link (1 hop) or through one low-degree intermediate node (2 hops: a
        GPU's switch) are answered from the sorted link list; only farther pairs need a BFS
        column of their destination, so one-hop steps (Ring on a ring) and two-hop ones (any
        collective on a switch) of any size never compute the all-pairs table."""
        nodes, dst = np.broadcast_arrays(np.asarray(nodes, dtype=np.int64), np.asarray(dst, dtype=np.int64))
        shape = nodes.shape
        nodes, dst = nodes.ravel(), dst.ravel()
        out = np.full(nodes.size, -3, dtype=np.int64)
        known = self._known[dst]
        if known.any():
            out[known] = self._cols[nodes[known], dst[known]]
        todo = np.flatnonzero(out == -3)
        out[todo[nodes[todo] == dst[todo]]] = 0
        todo = todo[out[todo] == -3]
        out[todo[self._linked(nodes[todo], dst[todo])]] = 1
        todo = todo[out[todo] == -3]
        deg = np.diff(self._start)
        for d in np.unique(deg[nodes[todo]]):
            if 0 < d <= 64:
                b = todo[deg[nodes[todo]] == d]
                via = self.link_v[self._order[self._start[nodes[b]][:, None] + np.arange(d)]]  # (B, d)
                two = self._linked(via.ravel(), np.repeat(dst[b], d)).reshape(-1, d).any(axis=1)
                out[b[two]] = 2
        todo = todo[out[todo] == -3]
        if todo.size:
            self._columns(dst[todo])
            out[todo] = self._cols[nodes[todo], dst[todo]]
        return out.reshape(shape)

    def _linked(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Whether a link goes from node ``u[i]`` to node ``v[i]`` (bool array)."""
        if not self._uv.size:
            return np.zeros(u.size, dtype=bool)
        key = u * self.fabric.nodes + v
        i = np.minimum(np.searchsorted(self._uv, key), self._uv.size - 1)
        return self._uv[i] == key

    def _columns(self, dst: np.ndarray) -> None:
        """Compute the hop-count columns of GPUs ``dst`` not computed yet."""
        from scipy.sparse.csgraph import shortest_path
        need = np.unique(dst)
        need = need[~self._known[need]]
        if need.size and self._cols is None:
            nodes, gpus = self.fabric.nodes, self.fabric.gpus
            self._cols = np.full((nodes, gpus), -2, dtype=np.int16 if nodes < 2 ** 15 - 1 else np.int32)
        for k in range(0, need.size, 256):
            block = need[k:k + 256]
            if self.rows.shape[0]:
                d = shortest_path(self._rev, unweighted=True, indices=block)  # (B, nodes)
                self._cols[:, block] = np.where(np.isinf(d), -1, d).T
            else:
                self._cols[:, block] = -1
                self._cols[block, block] = 0
            self._known[block] = True

    @property
    def dist(self) -> np.ndarray:
        """(nodes, gpus) int array: hops from every node to every GPU (-1: unreachable). All
        pairs at once: O(nodes x gpus) memory; the path methods compute only what they use."""
        self._columns(np.arange(self.fabric.gpus))
        return self._cols.astype(np.int64)

    def _next_links(self, cur: np.ndarray, dst: np.ndarray, hops: np.ndarray, channel: int) -> np.ndarray:
        """Out-link of every node ``cur[i]`` toward GPU ``dst[i]`` (``hops[i]`` >= 1 away) on
        ``channel``: the ``channel mod k``-th of its k shortest-path out-links in canonical
        order, as :meth:`table` (-1 where there is none)."""
        out = np.full(cur.size, -1, dtype=np.int64)
        last = np.flatnonzero(hops == 1)  # the links from cur straight to dst
        if last.size:
            key = cur[last] * self.fabric.nodes + dst[last]
            lo = np.searchsorted(self._uv, key, "left")
            k = np.searchsorted(self._uv, key, "right") - lo
            out[last] = np.where(k > 0, self._order[np.minimum(lo + channel % np.maximum(k, 1), self._uv.size - 1)], -1)
        rest = np.flatnonzero(hops > 1)
        deg = np.diff(self._start)
        for d in np.unique(deg[cur[rest]]):
            if d == 0:
                continue
            of_d = rest[deg[cur[rest]] == d]
            for k0 in range(0, of_d.size, max(1, (1 << 22) // d)):
                b = of_d[k0:k0 + max(1, (1 << 22) // d)]
                outs = self._order[self._start[cur[b]][:, None] + np.arange(d)]  # (B, d)
                dv = self._hops(self.link_v[outs], np.broadcast_to(dst[b][:, None], outs.shape))
                mask = dv == (hops[b] - 1)[:, None]
                k = mask.sum(axis=1)
                pick = mask & (np.cumsum(mask, axis=1) - 1 == (channel % np.maximum(k, 1))[:, None])
                link = outs[np.arange(b.size), pick.argmax(axis=1)]
                out[b] = np.where(k > 0, link, -1)
        return out

    # ---- tables ------------------------------------------------------------------------------
    def table(self, channel: int) -> np.ndarray:
        """(nodes, gpus) int array: out-link index of each node toward each GPU on ``channel``
        (-1 at the destination itself or where unreachable)."""
        c = channel % self.channels
        tab = self._tables.get(c)
        if tab is not None:
            return tab
        nodes, gpus = self.fabric.nodes, self.fabric.gpus
        dist = self.dist
        tab = np.full((nodes, gpus), -1, dtype=np.int64)
        deg = np.diff(self._start)
        for d in np.unique(deg[deg > 0]):
            us = np.flatnonzero(deg == d)
            outs = self._order[self._start[us][:, None] + np.arange(d)]  # (N, d)
            du = dist[us][:, None, :]  # (N, 1, G)
            dv = dist[self.link_v[outs]]  # (N, d, G)
            mask = (dv == du - 1) & (du > 0)
            k = mask.sum(axis=1)  # (N, G)
            j = c % np.maximum(k, 1)
            pick = mask & (np.cumsum(mask, axis=1) - 1 == j[:, None, :])
            first = pick.argmax(axis=1)  # (N, G)
            link = np.take_along_axis(outs, first, axis=1)
            tab[us] = np.where(k > 0, link, -1)
        self._tables[c] = tab
        return tab

    def distances(self, dst: int) -> dict[int, int]:
        """Hop distance of every node that can reach GPU ``dst``: ``{node: hops}``."""
        col = self._hops(np.arange(self.fabric.nodes), np.full(self.fabric.nodes, dst))
        return {int(u): int(h) for u, h in enumerate(col) if h >= 0}

    def candidates(self, node: int, dst: int) -> list[Link]:
        """Shortest-path out-links of ``node`` toward ``dst`` in canonical order."""
        h = int(self._hops(np.array([node]), np.array([dst]))[0])
        if h <= 0:
            return []
        outs = self._order[self._start[node]:self._start[node + 1]]
        dv = self._hops(self.link_v[outs], np.full(outs.size, dst))
        return [self.links[i] for i, d in zip(outs, dv) if d == h - 1]

    def next_hop(self, node: int, dst: int, channel: int) -> Link | None:
        """Out-link of ``node`` for (``dst``, ``channel``); None at ``dst`` or if unreachable."""
        i = self.table(channel)[node, dst]
        return self.links[i] if i >= 0 else None

    # ---- paths -------------------------------------------------------------------------------
    def paths(self, src: np.ndarray, dst: np.ndarray, channel: int) -> tuple[np.ndarray, np.ndarray]:
        """Paths of T (src, dst) GPU pairs on ``channel``.

        :param src: (T,) source GPUs. :param dst: (T,) destination GPUs.
        :returns: ``(P, hops)``: P is (T, H) link indices padded with -1, H the longest path;
            hops is (T,).
        :raises RoutingError: some ``dst`` is unreachable from its ``src``.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        self._check_reachable(src, dst)
        hops = self._hops(src, dst)
        bad = np.flatnonzero(hops < 0)
        if bad.size:
            i = bad[0]
            raise RoutingError(f"no path from GPU {src[i]} to GPU {dst[i]} in this configuration")
        width = int(hops.max()) if hops.size else 0
        out = np.full((src.size, width), -1, dtype=np.int64)
        c = channel % self.channels
        live = np.flatnonzero(hops > 0)
        cur = src[live]
        for h in range(width):
            if h:
                keep = hops[live] > h
                live, cur = live[keep], cur[keep]
            link = self._next_links(cur, dst[live], hops[live] - h, c)
            out[live, h] = link
            cur = self.link_v[link]
        return out, hops

    def _check_reachable(self, src: np.ndarray, dst: np.ndarray) -> None:
        """:raises RoutingError: some ``dst[i]`` is in another component than ``src[i]``."""
        if not src.size:
            return
        comp = self.component()
        bad = np.flatnonzero(comp[src] != comp[dst])
        if bad.size:
            i = bad[0]
            raise RoutingError(f"no path from GPU {src[i]} to GPU {dst[i]} in this configuration")

    def subflow_arrays(self, src: np.ndarray, dst: np.ndarray) -> SubflowArrays:
        """Spread T transfers over their distinct channel paths (see :meth:`subflows`). On a
        ring of links (:meth:`ring`) the paths are given as :class:`LinkRuns`, computed from
        the positions around the ring: the same paths as the tables give, in O(T) whatever
        their length.

        :raises RoutingError: unreachable.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if self.ring() is not None:
            return self._ring_subflows(src, dst)
        if self.star() is not None and self.channels == 1:
            self._check_reachable(src, dst)
            up, down = self._star
            t = np.arange(src.size, dtype=np.int64)
            hops = np.where(src == dst, 0, 2)
            moves = np.flatnonzero(hops)
            pf = np.repeat(moves, 2)
            pl = np.stack([up[src[moves]], down[dst[moves]]], 1).ravel()
            return SubflowArrays(t, np.zeros(src.size, dtype=np.int64), np.ones(src.size), hops, pf, pl)
        t = src.size
        per = [self.paths(src, dst, c) for c in range(self.channels)]
        hops = per[0][1]
        rep = []  # rep[c][i]: lowest channel whose path equals channel c's for transfer i
        for c in range(self.channels):
            r = np.full(t, c, dtype=np.int64)
            for c2 in range(c):
                same = (r == c) & (rep[c2] == c2) & np.all(per[c2][0] == per[c][0], axis=1)
                r[same] = c2
            rep.append(r)
        reps = np.stack(rep)  # (C, T)
        tr, ch, frac = [], [], []
        for c in range(self.channels):
            own = np.flatnonzero(reps[c] == c)
            tr.append(own)
            ch.append(np.full(own.size, c, dtype=np.int64))
            frac.append((reps[:, own] == c).sum(axis=0) / self.channels)
        transfer = np.concatenate(tr)
        channel = np.concatenate(ch)
        fraction = np.concatenate(frac)
        order = np.lexsort((channel, transfer))
        transfer, channel, fraction = transfer[order], channel[order], fraction[order]
        fhops = hops[transfer]
        width = per[0][0].shape[1]
        if width:
            stacked = np.stack([p for p, _ in per])  # (C, T, H)
            rows = stacked[channel, transfer]  # (F, H)
            pf, col = np.nonzero(rows >= 0)
            pl = rows[pf, col]
        else:
            pf = pl = np.zeros(0, dtype=np.int64)
        return SubflowArrays(transfer, channel, fraction, fhops, pf, pl)

    def _ring_subflows(self, src: np.ndarray, dst: np.ndarray) -> SubflowArrays:
        """:meth:`subflow_arrays` on a ring: a pair f positions ahead (and n - f behind) takes
        the shorter way round; at f = n - f (one tie, at the source only) channel c takes the
        ``c mod 2``-th of the two first links in canonical order (the lower neighbour id first),
        as the tables do."""
        order, position, lane = self._ring
        n = order.size
        ps, pd = position[src], position[dst]
        ahead = (pd - ps) % n
        behind = n - ahead
        tie = (ahead == behind) if self.channels > 1 else np.zeros(src.size, dtype=bool)
        lower_ahead = order[(ps + 1) % n] < order[(ps - 1) % n]  # channel 0's way at a tie
        fwd0 = np.where(ahead == behind, lower_ahead, ahead < behind)
        hop0 = np.minimum(ahead, behind)
        # subflows: (transfer, channel 0 way) for all, (transfer, channel 1 way) for ties
        tr = np.concatenate([np.arange(src.size), np.flatnonzero(tie)])
        ch = np.concatenate([np.zeros(src.size, dtype=np.int64), np.ones(int(tie.sum()), dtype=np.int64)])
        fwd = np.concatenate([fwd0, ~fwd0[tie]])
        even, odd = (self.channels + 1) // 2 / self.channels, self.channels // 2 / self.channels
        frac = np.concatenate([np.where(tie, even, 1.0), np.full(int(tie.sum()), odd)])
        srt = np.lexsort((ch, tr))
        tr, ch, fwd, frac = tr[srt], ch[srt], fwd[srt], frac[srt]
        hops = hop0[tr]
        first = np.where(fwd, ps[tr], (n - ps[tr]) % n)  # lane offset within its direction's block
        base = np.where(fwd, 0, n)
        cut = np.minimum(hops, n - first)  # the part before the lanes wrap round
        rest = hops - cut
        flow = np.arange(tr.size)
        two = np.flatnonzero(rest > 0)
        rflow = np.concatenate([flow, two])
        rstart = np.concatenate([base + first, base[two]])
        rlen = np.concatenate([cut, rest[two]])
        keep = rlen > 0
        rflow, rstart, rlen = rflow[keep], rstart[keep], rlen[keep]
        o = np.argsort(rflow, kind="stable")
        return SubflowArrays(tr, ch, frac, hops, runs=LinkRuns(rflow[o], rstart[o], rlen[o], lane))

    def path(self, src: int, dst: int, channel: int = 0) -> list[Link]:
        """Directed links from GPU ``src`` to GPU ``dst`` on ``channel``.

        :raises RoutingError: ``dst`` is unreachable from ``src``.
        """
        p, _ = self.paths(np.array([src]), np.array([dst]), channel)
        return [self.links[i] for i in p[0] if i >= 0]

    def subflows(self, src: int, dst: int) -> list[tuple[int, float, list[Link]]]:
        """How a transfer from ``src`` to ``dst`` is spread: one subflow per *distinct* channel
        path, as ``(lowest channel on it, fraction of the bytes, path)``; the fraction is the
        share of channels that take that path. Both backends split transfers this way.

        :raises RoutingError: unreachable.
        """
        s = self.subflow_arrays(np.array([src]), np.array([dst]))
        out = []
        for f in range(s.transfer.size):
            links = [self.links[i] for i in s.pair_link[s.pair_flow == f]]
            out.append((int(s.channel[f]), float(s.fraction[f]), links))
        return out


def link_loads(routes: Routes, transfers) -> dict[Link, float]:
    """Bytes each directed link carries for ``transfers`` (objects with ``src``, ``dst``,
    ``bytes``), each spread over its :meth:`Routes.subflows`."""
    transfers = list(transfers)
    if not transfers:
        return {}
    s = routes.subflow_arrays([t.src for t in transfers], [t.dst for t in transfers])
    loads = s.link_loads(s.flow_bytes([t.bytes for t in transfers]), len(routes.links))
    return {routes.links[i]: float(loads[i]) for i in np.flatnonzero(loads)}
