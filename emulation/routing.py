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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from emulation.fabric import Configuration, Fabric, Link


class RoutingError(RuntimeError):
    """No path between two GPUs under the current configuration."""


@dataclass(frozen=True)
class SubflowArrays:
    """How a batch of T transfers is spread over the fabric, as flat arrays.

    One *subflow* per (transfer, distinct channel path); F subflows, N (subflow, link) pairs.

    :ivar transfer: (F,) index of the transfer (0..T-1) each subflow belongs to.
    :ivar channel: (F,) lowest channel taking that path.
    :ivar fraction: (F,) share of the transfer's bytes on it (channels on the path / channels).
    :ivar hops: (F,) links on the path.
    :ivar pair_flow: (N,) subflow of each (subflow, link) pair.
    :ivar pair_link: (N,) link index (into :attr:`Routes.links`) of each pair.
    """

    transfer: np.ndarray
    channel: np.ndarray
    fraction: np.ndarray
    hops: np.ndarray
    pair_flow: np.ndarray
    pair_link: np.ndarray

    def flow_bytes(self, nbytes: np.ndarray) -> np.ndarray:
        """(F,) bytes of every subflow, given the transfers' bytes ``nbytes`` (T,)."""
        return np.asarray(nbytes, dtype=float)[self.transfer] * self.fraction

    def link_loads(self, flow_bytes: np.ndarray, links: int, link_ids: np.ndarray | None = None) -> np.ndarray:
        """(links,) bytes every directed link carries, given every subflow's bytes (F,)
        (:meth:`flow_bytes`); ``link_ids`` maps this batch's link indices to another index
        space of ``links`` links (the flow simulator's links of all configurations)."""
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
        self.links: list[Link] = fabric.links(config)
        self.index: dict[Link, int] = {l: i for i, l in enumerate(self.links)}
        nodes, gpus = fabric.nodes, fabric.gpus
        self.link_u = np.array([l.u for l in self.links], dtype=np.int64)
        self.link_v = np.array([l.v for l in self.links], dtype=np.int64)
        # Out-links of each node, contiguous, in canonical order (v, up, vp).
        order = sorted(range(len(self.links)),
                       key=lambda i: (self.links[i].u, self.links[i].v, self.links[i].up, self.links[i].vp))
        self._order = np.array(order, dtype=np.int64)
        self._start = np.searchsorted(self.link_u[self._order], np.arange(nodes + 1))
        if self.links:
            # Reversed graph: a BFS from dst over it gives every node's hop count to dst.
            rev = csr_matrix((np.ones(len(self.links)), (self.link_v, self.link_u)), shape=(nodes, nodes))
            d = shortest_path(rev, unweighted=True, indices=np.arange(gpus))
            self.dist = np.where(np.isinf(d), -1, d).astype(np.int64).T.copy()
        else:
            self.dist = np.full((nodes, gpus), -1, dtype=np.int64)
            self.dist[np.arange(gpus), np.arange(gpus)] = 0
        self._tables: dict[int, np.ndarray] = {}

    # ---- tables ------------------------------------------------------------------------------
    def table(self, channel: int) -> np.ndarray:
        """(nodes, gpus) int array: out-link index of each node toward each GPU on ``channel``
        (-1 at the destination itself or where unreachable)."""
        c = channel % self.channels
        tab = self._tables.get(c)
        if tab is not None:
            return tab
        nodes, gpus = self.fabric.nodes, self.fabric.gpus
        tab = np.full((nodes, gpus), -1, dtype=np.int64)
        deg = np.diff(self._start)
        for d in np.unique(deg[deg > 0]):
            us = np.flatnonzero(deg == d)
            outs = self._order[self._start[us][:, None] + np.arange(d)]  # (N, d)
            du = self.dist[us][:, None, :]  # (N, 1, G)
            dv = self.dist[self.link_v[outs]]  # (N, d, G)
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
        col = self.dist[:, dst]
        return {int(u): int(h) for u, h in enumerate(col) if h >= 0}

    def candidates(self, node: int, dst: int) -> list[Link]:
        """Shortest-path out-links of ``node`` toward ``dst`` in canonical order."""
        h = self.dist[node, dst]
        if h <= 0:
            return []
        outs = self._order[self._start[node]:self._start[node + 1]]
        return [self.links[i] for i in outs if self.dist[self.link_v[i], dst] == h - 1]

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
        hops = self.dist[src, dst]
        bad = np.flatnonzero(hops < 0)
        if bad.size:
            i = bad[0]
            raise RoutingError(f"no path from GPU {src[i]} to GPU {dst[i]} in this configuration")
        width = int(hops.max()) if hops.size else 0
        out = np.full((src.size, width), -1, dtype=np.int64)
        tab = self.table(channel)
        live = np.flatnonzero(hops > 0)
        cur = src[live]
        for h in range(width):
            if h:
                keep = hops[live] > h
                live, cur = live[keep], cur[keep]
            link = tab[cur, dst[live]]
            out[live, h] = link
            cur = self.link_v[link]
        return out, hops

    def subflow_arrays(self, src: np.ndarray, dst: np.ndarray) -> SubflowArrays:
        """Spread T transfers over their distinct channel paths (see :meth:`subflows`).

        :raises RoutingError: unreachable.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
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

    def tables(self) -> dict[int, dict[tuple[int, int], Link]]:
        """``{node: {(dst gpu, channel): out link}}`` for every node and GPU destination."""
        out: dict[int, dict[tuple[int, int], Link]] = {}
        for ch in range(self.channels):
            tab = self.table(ch)
            for node, dst in zip(*np.nonzero(tab >= 0)):
                out.setdefault(int(node), {})[(int(dst), ch)] = self.links[tab[node, dst]]
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
