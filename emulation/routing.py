"""Destination-based ECMP routing over the current circuit graph.

One routing function for both backends: the controller's routing app installs exactly these
next hops as OpenFlow rules, and the flow simulator moves fluid along exactly these paths.

Rule: every node forwards a packet for GPU ``dst`` on channel ``c`` over its shortest-path
out-links toward ``dst`` (hop count), sorted by ``(next node, out port, in port)``, taking
entry ``c mod k`` of the ``k`` candidates. Channels therefore spread over parallel circuits and
over equal-cost directions (a ring's two halves), and every (dst, channel) forms a tree, so
forwarding on (destination, channel) alone is loop-free.

Spec: ``shared/DESIGN.md`` (packet-level backend: multi-hop through intermediate GPUs).
"""

from __future__ import annotations

from collections import deque

from emulation.fabric import Configuration, Fabric, Link


class RoutingError(RuntimeError):
    """No path between two GPUs under the current configuration."""


class Routes:
    """Next hops and paths over ``fabric`` in ``config``, with ``channels`` channels per flow.

    Distances are computed lazily per destination (one BFS each), so routing a workload that
    touches few destinations of a large fabric stays cheap.
    """

    def __init__(self, fabric: Fabric, config: Configuration | None = None, channels: int = 1):
        if channels < 1:
            raise ValueError("channels must be >= 1")
        self.fabric = fabric
        self.channels = channels
        self.links = fabric.links(config)
        self._out: dict[int, list[Link]] = {}
        self._in: dict[int, list[int]] = {}
        for l in self.links:
            self._out.setdefault(l.u, []).append(l)
            self._in.setdefault(l.v, []).append(l.u)
        for ls in self._out.values():
            ls.sort(key=lambda l: (l.v, l.up, l.vp))
        self._dist: dict[int, dict[int, int]] = {}

    def distances(self, dst: int) -> dict[int, int]:
        """Hop distance of every node that can reach ``dst``."""
        d = self._dist.get(dst)
        if d is None:
            d = {dst: 0}
            q = deque([dst])
            while q:
                v = q.popleft()
                for u in self._in.get(v, ()):
                    if u not in d:
                        d[u] = d[v] + 1
                        q.append(u)
            self._dist[dst] = d
        return d

    def candidates(self, node: int, dst: int) -> list[Link]:
        """Shortest-path out-links of ``node`` toward ``dst`` in canonical order."""
        d = self.distances(dst)
        if node not in d or node == dst:
            return []
        want = d[node] - 1
        return [l for l in self._out.get(node, ()) if d.get(l.v) == want]

    def next_hop(self, node: int, dst: int, channel: int) -> Link | None:
        """Out-link of ``node`` for (``dst``, ``channel``); None at ``dst`` or if unreachable."""
        c = self.candidates(node, dst)
        return c[channel % len(c)] if c else None

    def path(self, src: int, dst: int, channel: int = 0) -> list[Link]:
        """Directed links from GPU ``src`` to GPU ``dst`` on ``channel``.

        :raises RoutingError: ``dst`` is unreachable from ``src``.
        """
        if src == dst:
            return []
        if src not in self.distances(dst):
            raise RoutingError(f"no path from GPU {src} to GPU {dst} in this configuration")
        out, node = [], src
        while node != dst:
            hop = self.next_hop(node, dst, channel)
            assert hop is not None
            out.append(hop)
            node = hop.v
        return out

    def subflows(self, src: int, dst: int) -> list[tuple[int, float, list[Link]]]:
        """How a transfer from ``src`` to ``dst`` is spread: one subflow per *distinct* channel
        path, as ``(lowest channel on it, fraction of the bytes, path)``; the fraction is the
        share of channels that take that path. Both backends split transfers this way.

        :raises RoutingError: unreachable.
        """
        out: dict[tuple[Link, ...], list] = {}
        for ch in range(self.channels):
            path = tuple(self.path(src, dst, ch))
            if path in out:
                out[path][1] += 1 / self.channels
            else:
                out[path] = [ch, 1 / self.channels, list(path)]
        return [tuple(v) for v in out.values()]

    def tables(self) -> dict[int, dict[tuple[int, int], Link]]:
        """``{node: {(dst gpu, channel): out link}}`` for every node and GPU destination."""
        out: dict[int, dict[tuple[int, int], Link]] = {}
        for dst in range(self.fabric.gpus):
            for node in self.distances(dst):
                for ch in range(self.channels):
                    hop = self.next_hop(node, dst, ch)
                    if hop is not None:
                        out.setdefault(node, {})[(dst, ch)] = hop
        return out


def link_loads(routes: Routes, transfers) -> dict[Link, float]:
    """Bytes each directed link carries for ``transfers`` (objects with ``src``, ``dst``,
    ``bytes``), each spread over its :meth:`Routes.subflows`."""
    loads: dict[Link, float] = {}
    for t in transfers:
        for _ch, frac, path in routes.subflows(t.src, t.dst):
            for link in path:
                loads[link] = loads.get(link, 0.0) + t.bytes * frac
    return loads
