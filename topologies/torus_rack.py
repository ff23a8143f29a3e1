"""A multi-tenant accelerator rack: a 3-D torus built from servers, and its slice shapes.

A fabric model, pure data (importing this module builds nothing and does not import Mininet).

The rack of Lumorph (arXiv 2501.18169) and Morphlux (arXiv 2508.03674): ``dims`` accelerators per
axis (default 4 x 4 x 4 = 64) in a torus, every accelerator with 6 torus ports (``+x -x +y -y +z
-z``), grouped into servers of ``server`` accelerators per axis (default 2 x 2 x 1 = 4). Inside a
server its accelerators' x and y ports to each other are on the package; every other port is a
*fibre* across a *server boundary* to the neighbouring server on that axis.

Accelerator ``a`` has coordinates ``(x, y, z)`` with ``a = x + X (y + Y z)``; server ``s`` has
server coordinates ``(sx, sy, sz)`` (its accelerators ``x // 2 == sx`` ...), numbered the same way.

A tenant's slice on the electrical torus must be a contiguous block of a legal shape
(:data:`LEGAL_SHAPES`, any orientation that keeps whole servers, wrapping around the torus); its
collective can only use the ports whose far end is in the slice: the rest is *stranded*
(:meth:`TorusRack.usable_ports`). The slice allocators over this rack are
:mod:`emulation.planners.allocators`; :meth:`TorusRack.fabric` is the electrical torus as a
:class:`~emulation.fabric.Fabric` of cables (``--topo torusrack`` of
:mod:`topologies.mininet_topos`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
from pydantic import Field

from emulation.fabric import Circuit, Configuration, Fabric, PortRef
from emulation.sections import StrictModel

#: The slice shapes a TPU-like torus rack allocates (accelerators per axis), smallest first.
LEGAL_SHAPES: tuple[tuple[int, int, int], ...] = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4))
#: Torus ports per accelerator (``+x -x +y -y +z -z``).
PORTS = 6


class RackSpec(StrictModel):
    """``rack:`` accelerators per axis of the torus, per axis of a server, spare servers; the
    :class:`TorusRack` they make (:meth:`build`)."""

    dims: tuple[int, int, int] = (4, 4, 4)
    """Accelerators per axis of the rack's 3-D torus (multiples of ``server``'s)."""
    server: tuple[int, int, int] = (2, 2, 1)
    """Accelerators per axis of one server; servers tile the torus."""
    spares: int = Field(default=0, ge=0)
    """Spare servers, held back from the tenants."""

    def build(self) -> TorusRack:
        """The :class:`TorusRack`. :raises RackError: dims not a multiple of the server's, or no
        server left beside the spares."""
        rack = TorusRack(tuple(self.dims), tuple(self.server))
        if self.spares >= rack.servers:
            raise RackError(f"rack.spares: {self.spares} spare servers of a {rack.servers}-server rack")
        return rack


class RackError(ValueError):
    """A rack or shape that cannot exist; the message starts with the field (``rack.dims``,
    ``shape``, ``accelerators``)."""


@dataclass(frozen=True)
class Block:
    """A contiguous block of the torus: ``origin`` (accelerator coordinates, 3 ints) and
    ``extent`` (accelerators per axis, 3 ints), wrapping around."""

    origin: tuple[int, int, int]
    extent: tuple[int, int, int]


@dataclass(frozen=True)
class TorusRack:
    """The rack of Lumorph (arXiv 2501.18169) and Morphlux (arXiv 2508.03674) (module doc):
    ``dims`` accelerators per axis (x, y, z), servers of ``server`` accelerators per axis.

    :raises RackError: a server axis below 1, or an axis with fewer accelerators than the
        server's or not a multiple of it.
    """

    dims: tuple[int, int, int] = (4, 4, 4)
    server: tuple[int, int, int] = (2, 2, 1)

    def __post_init__(self):
        for axis, (d, s) in enumerate(zip(self.dims, self.server)):
            if s < 1 or d < s or d % s:
                raise RackError(f"rack.dims: axis {'xyz'[axis]} has {d} accelerators, not a multiple of the "
                                f"server's {s}")

    # ---- accelerators ---------------------------------------------------------------------------
    @property
    def accelerators(self) -> int:
        """Accelerators in the rack."""
        X, Y, Z = self.dims
        return X * Y * Z

    def coord(self, a: int) -> tuple[int, int, int]:
        """Coordinates ``(x, y, z)`` of accelerator ``a`` (``0 <= a < accelerators``)."""
        X, Y, _ = self.dims
        return a % X, (a // X) % Y, a // (X * Y)

    def index(self, c: tuple[int, int, int]) -> int:
        """Accelerator at coordinates ``c`` (taken modulo the torus)."""
        X, Y, Z = self.dims
        return c[0] % X + X * (c[1] % Y + Y * (c[2] % Z))

    @cached_property
    def torus_links(self) -> tuple[tuple[int, int], ...]:
        """Directed torus links ``(a, b)``, ``accelerators x 6`` of them: every accelerator's 6
        ports in the order ``+x -x +y -y +z -z`` (one link per port; on an axis of 2 both ports of
        an accelerator lead to the same neighbour; on an axis of 1, to itself)."""
        out = []
        for a in range(self.accelerators):
            c = self.coord(a)
            for axis in range(3):
                for step in (1, -1):
                    n = list(c)
                    n[axis] += step
                    out.append((a, self.index(tuple(n))))
        return tuple(out)

    # ---- servers --------------------------------------------------------------------------------
    @property
    def server_grid(self) -> tuple[int, int, int]:
        """Servers per axis ``(X/sx, Y/sy, Z/sz)``."""
        return tuple(d // s for d, s in zip(self.dims, self.server))

    @property
    def servers(self) -> int:
        """Servers in the rack."""
        a, b, c = self.server_grid
        return a * b * c

    @property
    def per_server(self) -> int:
        """Accelerators per server."""
        a, b, c = self.server
        return a * b * c

    def server_of(self, a: int) -> int:
        """The server (``0 <= s < servers``) holding accelerator ``a``."""
        x, y, z = self.coord(a)
        sx, sy, sz = self.server
        GX, GY, _ = self.server_grid
        return x // sx + GX * (y // sy + GY * (z // sz))

    @cached_property
    def server_members(self) -> tuple[tuple[int, ...], ...]:
        """Accelerators of every server: ``servers`` tuples of ``per_server``, ascending."""
        members: list[list[int]] = [[] for _ in range(self.servers)]
        for a in range(self.accelerators):
            members[self.server_of(a)].append(a)
        return tuple(tuple(m) for m in members)

    @cached_property
    def boundaries(self) -> nx.Graph:
        """The servers and the boundaries between them: an undirected graph whose edge ``(s, t)``
        has ``fibres``, the torus links from server s to server t (each a bidirectional cable)."""
        g = nx.Graph()
        g.add_nodes_from(range(self.servers))
        for a, b in self.torus_links:
            s, t = self.server_of(a), self.server_of(b)
            if s < t:  # each cable once: from the lower server's side
                if g.has_edge(s, t):
                    g[s][t]["fibres"] += 1
                else:
                    g.add_edge(s, t, fibres=1)
        return g

    # ---- slices on the torus --------------------------------------------------------------------
    def orientations(self, shape: tuple[int, int, int]) -> list[tuple[int, int, int]]:
        """The distinct axis orders of ``shape`` that fit the rack and cover whole servers.

        :raises RackError: ``shape`` is not one of :data:`LEGAL_SHAPES`."""
        if tuple(shape) not in LEGAL_SHAPES:
            raise RackError(f"shape: {'x'.join(map(str, shape))} is not a legal slice shape "
                            f"({', '.join('x'.join(map(str, s)) for s in LEGAL_SHAPES)})")
        out = []
        for e in sorted(set(itertools.permutations(shape))):
            if all(k <= d and k % s == 0 for k, d, s in zip(e, self.dims, self.server)):
                out.append(e)
        return out

    def blocks(self, shape: tuple[int, int, int]) -> list[Block]:
        """Every placement of ``shape`` on the torus: each orientation at every server-aligned
        origin (wrapping around), without repeats of the same accelerator set.

        :raises RackError: ``shape`` is not one of :data:`LEGAL_SHAPES`."""
        seen, out = set(), []
        for e in self.orientations(shape):
            ranges = [range(0, d, s) for d, s in zip(self.dims, self.server)]
            for origin in itertools.product(*ranges):
                b = Block(origin, e)
                key = frozenset(self.members(b))
                if key not in seen:
                    seen.add(key)
                    out.append(b)
        return out

    def members(self, b: Block) -> tuple[int, ...]:
        """Accelerators of block ``b``, ascending."""
        ox, oy, oz = b.origin
        ex, ey, ez = b.extent
        return tuple(sorted(self.index((ox + i, oy + j, oz + k)) for i in range(ex) for j in range(ey) for k in range(ez)))

    def usable_ports(self, accelerators: tuple[int, ...] | frozenset[int]) -> float:
        """Torus ports per accelerator whose far end is in the set (the slice's collective can
        drive them), averaged over the set: 0 to :data:`PORTS`; ``PORTS`` minus this is stranded.

        :raises ZeroDivisionError: an empty set."""
        inside = set(accelerators)
        return sum(1 for a, b in self.torus_links if a in inside and b in inside) / len(inside)

    def stranded_share(self, shape: tuple[int, int, int]) -> float:
        """Share of a contiguous ``shape`` slice's torus bandwidth that is stranded (ports
        leading out of the slice): 2x2x1 67%, 2x2x2 50%, 2x2x4 33%, 2x4x4 17%, 4x4x4 0% on
        the 4x4x4 rack. A share in [0, 1].

        :raises RackError: ``shape`` is not one of :data:`LEGAL_SHAPES`."""
        return 1.0 - self.usable_ports(self.members(self.blocks(shape)[0])) / PORTS

    def shape_for(self, accelerators: int) -> tuple[int, int, int]:
        """The legal shape (accelerators per axis, smallest first in :data:`LEGAL_SHAPES`) of
        ``accelerators`` accelerators that fits this rack.

        :raises RackError: no legal shape has that many, or none that does fits the rack."""
        for s in LEGAL_SHAPES:
            if s[0] * s[1] * s[2] == accelerators and self.orientations(s):
                return s
        legal = ", ".join(str(a * b * c) for a, b, c in LEGAL_SHAPES if self.orientations((a, b, c)))
        raise RackError(f"accelerators: no legal slice shape has {accelerators} accelerators (legal: {legal})")

    # ---- the electrical torus as a fabric -------------------------------------------------------
    def fabric(self, port_gbps: float = 400.0) -> Fabric:
        """The electrical torus as a :class:`~emulation.fabric.Fabric` of static cables, no switch
        (the packet emulator can run it; no planner can reconfigure it): GPU ``a`` is accelerator
        ``a`` with :data:`PORTS` ports; port ``2 * axis`` (``+x``, ``+y``, ``+z``) is cabled to port
        ``2 * axis + 1`` (``-x``, ...) of the next accelerator on that axis, wrapping around: 3
        cables per accelerator, on an axis of 2 two parallel ones to the same neighbour; an axis of
        1 has none (those ports stay unattached). The package links inside a server are cables
        like the fibres between servers.

        :param port_gbps: every port's rate, Gbit/s.
        :returns: a fabric named ``torus-rack-XxYxZ`` whose initial configuration is empty.
        :raises FabricError: ``port_gbps`` not positive, or a rack of one accelerator.
        """
        cables = []
        for a in range(self.accelerators):
            c = self.coord(a)
            for axis in range(3):
                if self.dims[axis] == 1:
                    continue
                n = list(c)
                n[axis] += 1
                cables.append(Circuit.of(PortRef(a, 2 * axis), PortRef(self.index(tuple(n)), 2 * axis + 1)))
        X, Y, Z = self.dims
        return Fabric(f"torus-rack-{X}x{Y}x{Z}", self.accelerators, PORTS, port_gbps, cables=tuple(cables),
                      initial=Configuration())
