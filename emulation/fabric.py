"""Fabric model: GPUs, their fabric ports, optical circuit switches, packet switches, cables.

Pure data, no Mininet. Both backends consume it: the flow simulator turns it into directed links
with capacities, the emulator into Open vSwitch bridges and veth links (``emulation/emulator/net.py``;
Mininet ``Topo`` adapters for ``mn --custom``: ``topologies/mininet_topos.py``).

Node ids are integers: GPUs are ``0 .. gpus-1``, electrical packet switches (EPS) follow at
``gpus + k``. A GPU port is a :class:`PortRef` ``(gpu, port)`` with ``port`` in
``0 .. ports_per_gpu-1``. An OCS is transparent for routing: a circuit joins two GPU ports
directly, so it appears as one bidirectional GPU-to-GPU link.

Spec: ``docs/architecture.md`` (vocabulary, data flow), ``docs/mechanisms.md`` (OCS).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property


class FabricError(ValueError):
    """A fabric or configuration that cannot exist (bad port, port used twice, ...)."""


@dataclass(frozen=True, order=True)
class PortRef:
    """One fabric port of one GPU: ``gpu`` in ``0..gpus-1``, ``port`` in ``0..p-1``."""

    gpu: int
    port: int

    def __str__(self) -> str:
        return f"g{self.gpu}.p{self.port}"


@dataclass(frozen=True, order=True)
class Circuit:
    """A bidirectional optical circuit between two GPU ports (stored with ``a < b``)."""

    a: PortRef
    b: PortRef

    @staticmethod
    def of(x: PortRef, y: PortRef) -> Circuit:
        """Normalised circuit between ``x`` and ``y``; raises :class:`FabricError` if x == y."""
        kx, ky = (x.gpu, x.port), (y.gpu, y.port)
        if kx == ky:
            raise FabricError(f"circuit from {x} to itself")
        return Circuit(x, y) if kx < ky else Circuit(y, x)

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"


@dataclass(frozen=True)
class Link:
    """A directed link ``u -> v`` leaving node ``u`` by its port ``up`` and entering ``v`` by ``vp``.

    For a GPU the port is its fabric port index; for an EPS it is the switch port index.
    Capacity: :meth:`Fabric.link_gbps` (the fabric's ``port_gbps``, or an EPS's own port rate).
    """

    u: int
    up: int
    v: int
    vp: int


@dataclass(frozen=True)
class OCS:
    """An optical circuit switch. ``ports[k]`` is the GPU port cabled to OCS port ``k + 1``.

    :param reconfiguration_delay_s: R, seconds the changed circuits stay dark on a change.
    """

    name: str
    ports: tuple[PortRef, ...]
    reconfiguration_delay_s: float = 0.0

    @cached_property
    def _numbers(self) -> dict[PortRef, int]:
        return {ref: k + 1 for k, ref in enumerate(self.ports)}

    def port_number(self, ref: PortRef) -> int:
        """OpenFlow port number (1-based) of GPU port ``ref``; raises :class:`FabricError`."""
        try:
            return self._numbers[ref]
        except KeyError:
            raise FabricError(f"{ref} is not cabled to OCS {self.name}") from None


@dataclass(frozen=True)
class EPS:
    """An electrical packet switch; ``ports[k]`` is the GPU port cabled to switch port ``k``.

    :param port_gbps: rate of every link to and from this switch, Gbit/s; None: the fabric's
        ``port_gbps`` (a slower electrical path, e.g. a rack's shared uplink, sets its own).
    """

    name: str
    ports: tuple[PortRef, ...]
    port_gbps: float | None = None


class Configuration(Mapping[str, frozenset[Circuit]]):
    """The circuits of every OCS at one time: ``{ocs name: frozenset of Circuit}`` (immutable).

    :meth:`circuit_rows` gives one OCS's circuits as an array (made once), which the flow
    simulator and the planners use instead of the objects at cluster scale.
    """

    def __init__(self, circuits: Mapping[str, Iterable[Circuit]] | None = None):
        self._c = {k: frozenset(v) for k, v in (circuits or {}).items() if v}
        self._rows: dict = {}

    def circuit_rows(self, name: str):
        """The circuits of OCS ``name`` as a (K, 4) int64 numpy array of ``(a.gpu, a.port,
        b.gpu, b.port)`` rows, sorted (made on first use)."""
        got = self._rows.get(name)
        if got is None:
            import numpy as np

            rows = np.array([(c.a.gpu, c.a.port, c.b.gpu, c.b.port) for c in self[name]], dtype=np.int64).reshape(-1, 4)
            got = self._rows[name] = rows[np.lexsort(rows.T[::-1])]
        return got

    def __getitem__(self, key: str) -> frozenset[Circuit]:
        return self._c.get(key, frozenset())

    def __iter__(self) -> Iterator[str]:
        return iter(self._c)

    def __len__(self) -> int:
        return len(self._c)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._c == {k: frozenset(v) for k, v in other.items() if v}

    def __hash__(self) -> int:
        return hash(frozenset(self._c.items()))

    def __repr__(self) -> str:
        return f"Configuration({ {k: sorted(map(str, v)) for k, v in self._c.items()} })"

    def all_circuits(self) -> Iterator[tuple[str, Circuit]]:
        """Yield ``(ocs name, circuit)`` for every circuit, in a stable order."""
        for name in sorted(self._c):
            for c in sorted(self._c[name]):
                yield name, c

    def to_json(self) -> dict[str, list[list[list[int]]]]:
        """``{ocs: [[[gpu, port], [gpu, port]], ...]}``."""
        return {
            name: [[[c.a.gpu, c.a.port], [c.b.gpu, c.b.port]] for c in sorted(cs)]
            for name, cs in sorted(self._c.items())
        }

    @staticmethod
    def from_json(data: Mapping[str, list]) -> Configuration:
        """Inverse of :meth:`to_json`."""
        return Configuration(
            {
                name: [Circuit.of(PortRef(*a), PortRef(*b)) for a, b in pairs]
                for name, pairs in data.items()
            }
        )


@dataclass(frozen=True)
class Fabric:
    """A fabric: ``gpus`` GPUs with ``ports_per_gpu`` ports of ``port_gbps`` Gbit/s each.

    :param ocs: optical circuit switches; their circuits come from a :class:`Configuration`.
    :param eps: electrical packet switches (store-and-forward by destination).
    :param cables: static GPU-to-GPU links (e.g. a static ring), always present.
    :param initial: the configuration the fabric starts in (the *base topology* of a planner).
    """

    name: str
    gpus: int
    ports_per_gpu: int
    port_gbps: float
    ocs: tuple[OCS, ...] = ()
    eps: tuple[EPS, ...] = ()
    cables: tuple[Circuit, ...] = ()
    initial: Configuration = field(default_factory=Configuration)

    def __post_init__(self) -> None:
        if self.gpus < 2:
            raise FabricError(f"gpus must be at least 2, got {self.gpus}")
        if self.ports_per_gpu < 1:
            raise FabricError(f"ports_per_gpu must be at least 1, got {self.ports_per_gpu}")
        if self.port_gbps <= 0:
            raise FabricError(f"port_gbps must be positive, got {self.port_gbps}")
        for e in self.eps:
            if e.port_gbps is not None and e.port_gbps <= 0:
                raise FabricError(f"{e.name}: port_gbps must be positive, got {e.port_gbps}")
        seen: dict[PortRef, str] = {}
        attached = [(o.name, o.ports) for o in self.ocs] + [(e.name, e.ports) for e in self.eps]
        attached += [("cable", (c.a, c.b)) for c in self.cables]
        for owner, ports in attached:
            for ref in ports:
                self.check_port(ref)
                if ref in seen:
                    raise FabricError(f"{ref} is cabled to both {seen[ref]} and {owner}")
                seen[ref] = owner
        self.check_configuration(self.initial)

    # ---- queries -------------------------------------------------------------------------
    @property
    def port_bytes_per_s(self) -> float:
        """Capacity of one port, bytes/s."""
        return self.port_gbps * 1e9 / 8

    @property
    def port_per_ocs(self) -> bool:
        """True if port k of every GPU, and nothing else, is cabled to OCS k, for every port k:
        an OCS star with one port per GPU, or parallel OCSes
        (:func:`topologies.builders.parallel_ocs`). Every circuit then joins two GPUs directly on
        one port index, so channel k can only ever travel on OCS k."""
        return (not self.eps and not self.cables and len(self.ocs) == self.ports_per_gpu
                and all(set(o.ports) == {PortRef(g, k) for g in range(self.gpus)} for k, o in enumerate(self.ocs)))

    @property
    def nodes(self) -> int:
        """Number of forwarding nodes (GPUs then EPSs)."""
        return self.gpus + len(self.eps)

    def eps_node(self, k: int) -> int:
        """Node id of EPS ``k``."""
        return self.gpus + k

    def link_gbps(self, link: Link) -> float:
        """Capacity of directed ``link``, Gbit/s: its EPS's ``port_gbps`` if it enters or leaves
        one that sets it, else the fabric's ``port_gbps``."""
        for node in (link.u, link.v):
            if node >= self.gpus:
                rate = self.eps[node - self.gpus].port_gbps
                if rate is not None:
                    return rate
        return self.port_gbps

    def ocs_by_name(self, name: str) -> OCS:
        """The OCS called ``name``; raises :class:`FabricError`."""
        for o in self.ocs:
            if o.name == name:
                return o
        raise FabricError(f"no OCS named {name!r}")

    def check_port(self, ref: PortRef) -> None:
        """Raise :class:`FabricError` unless ``ref`` is a port of this fabric."""
        if not (0 <= ref.gpu < self.gpus and 0 <= ref.port < self.ports_per_gpu):
            raise FabricError(
                f"{ref} does not exist ({self.gpus} GPUs with {self.ports_per_gpu} ports)"
            )

    def check_configuration(self, config: Configuration) -> None:
        """Raise :class:`FabricError` unless every circuit joins two ports of one OCS and no port
        is used twice within an OCS (a configuration is a matching on each OCS's ports)."""
        names = {o.name for o in self.ocs}
        for name in config:
            if name not in names:
                raise FabricError(f"configuration names unknown OCS {name!r}")
            ocs = self.ocs_by_name(name)
            used: set[PortRef] = set()
            for c in config[name]:
                for ref in (c.a, c.b):
                    ocs.port_number(ref)
                    if ref in used:
                        raise FabricError(f"{ref} is used by two circuits on {name}")
                    used.add(ref)

    def links(self, config: Configuration | None = None) -> list[Link]:
        """All directed links under ``config`` (default: the initial configuration), sorted.

        Each circuit and cable gives two links; each EPS port gives GPU->EPS and EPS->GPU.
        (Pure Python: ``mn --custom`` builds topologies with the system Python, without numpy.)
        """
        config = self.initial if config is None else config
        rows = [r for c in [c for name in config for c in config[name]]
                for r in ((c.a.gpu, c.a.port, c.b.gpu, c.b.port), (c.b.gpu, c.b.port, c.a.gpu, c.a.port))]
        rows += self._fixed_tuples
        rows.sort()
        return [Link(*r) for r in rows]

    def link_rows(self, config: Configuration | None = None):
        """:meth:`links` as an (L, 4) int64 numpy array of ``(u, up, v, vp)`` rows, in the same
        order, without making Link objects (a 131,072-GPU ring of circuits has 262,144 links)."""
        import numpy as np

        config = self.initial if config is None else config
        ends = np.concatenate([np.zeros((0, 4), dtype=np.int64)] + [config.circuit_rows(name) for name in config])
        fixed = np.array(self._fixed_tuples, dtype=np.int64).reshape(-1, 4)
        both = np.concatenate([ends, ends[:, [2, 3, 0, 1]], fixed])
        return both[np.lexsort((both[:, 3], both[:, 2], both[:, 1], both[:, 0]))]

    @cached_property
    def _fixed_tuples(self) -> list[tuple[int, int, int, int]]:
        """The links every configuration has: cables both ways, every EPS port both ways."""
        rows = []
        for c in self.cables:
            rows += [(c.a.gpu, c.a.port, c.b.gpu, c.b.port), (c.b.gpu, c.b.port, c.a.gpu, c.a.port)]
        for k, e in enumerate(self.eps):
            node = self.eps_node(k)
            for sp, ref in enumerate(e.ports):
                rows += [(ref.gpu, ref.port, node, sp), (node, sp, ref.gpu, ref.port)]
        return rows

    def to_json(self) -> dict:
        """Plain-JSON form, read back by :meth:`from_json` (used to hand the fabric to the
        controller process)."""
        return {
            "name": self.name,
            "gpus": self.gpus,
            "ports_per_gpu": self.ports_per_gpu,
            "port_gbps": self.port_gbps,
            "ocs": [
                {
                    "name": o.name,
                    "ports": [[p.gpu, p.port] for p in o.ports],
                    "reconfiguration_delay_s": o.reconfiguration_delay_s,
                }
                for o in self.ocs
            ],
            "eps": [{"name": e.name, "ports": [[p.gpu, p.port] for p in e.ports], "port_gbps": e.port_gbps}
                    for e in self.eps],
            "cables": [[[c.a.gpu, c.a.port], [c.b.gpu, c.b.port]] for c in self.cables],
            "initial": self.initial.to_json(),
        }

    @staticmethod
    def from_json(d: Mapping) -> Fabric:
        """Inverse of :meth:`to_json`."""
        return Fabric(
            name=d["name"],
            gpus=d["gpus"],
            ports_per_gpu=d["ports_per_gpu"],
            port_gbps=d["port_gbps"],
            ocs=tuple(
                OCS(o["name"], tuple(PortRef(*p) for p in o["ports"]), o["reconfiguration_delay_s"])
                for o in d["ocs"]
            ),
            eps=tuple(EPS(e["name"], tuple(PortRef(*p) for p in e["ports"]), e.get("port_gbps")) for e in d["eps"]),
            cables=tuple(Circuit.of(PortRef(*a), PortRef(*b)) for a, b in d["cables"]),
            initial=Configuration.from_json(d["initial"]),
        )


def assign_ports(
    fabric: Fabric,
    ocs_name: str,
    pairs: Iterable[tuple[int, int]],
    fill: bool = False,
    keep: Iterable[Circuit] = (),
) -> Configuration:
    """Realise a GPU-level demand graph as circuits on one OCS.

    :param pairs: undirected GPU pairs ``(u, v)``; a pair repeated k times asks for k parallel
        circuits.
    :param fill: after placing the asked circuits, give each pair more parallel circuits while
        both ends have free ports (spare ports give parallel circuits; PCCL spec).
    :param keep: circuits in place now; those joining a demanded pair are reused, so that a
        reconfiguration darkens only the circuits that really change.
    :returns: a :class:`Configuration` holding only ``ocs_name``.
    :raises FabricError: a GPU would need more ports than it has on that OCS.
    """
    ocs = fabric.ocs_by_name(ocs_name)
    want: dict[tuple[int, int], int] = {}
    for u, v in pairs:
        if u == v:
            raise FabricError(f"GPU {u} cannot have a circuit to itself")
        key = (u, v) if u < v else (v, u)
        want[key] = want.get(key, 0) + 1
    if want and len({g for k in want for g in k}) == 2 * len(want):
        try:
            return _assign_matching(ocs, want, fill, keep)
        except ImportError:  # no numpy (mn --custom under the system Python): the loop below
            pass
    free: dict[int, set[int]] = {}
    for ref in ocs.ports:
        free.setdefault(ref.gpu, set()).add(ref.port)
    circuits: list[Circuit] = []
    count: dict[tuple[int, int], int] = {}
    cabled = ocs._numbers
    reusable = sorted((c for c in keep if c.a in cabled and c.b in cabled),
                      key=lambda c: (c.a.gpu, c.a.port, c.b.gpu, c.b.port))  # Circuit order, compared as tuples

    def take(c: Circuit) -> bool:
        if c.a.port not in free.get(c.a.gpu, ()) or c.b.port not in free.get(c.b.gpu, ()):
            return False
        free[c.a.gpu].discard(c.a.port)
        free[c.b.gpu].discard(c.b.port)
        circuits.append(c)
        key = (c.a.gpu, c.b.gpu) if c.a.gpu < c.b.gpu else (c.b.gpu, c.a.gpu)
        count[key] = count.get(key, 0) + 1
        return True

    def place(u: int, v: int) -> bool:  # u < v: the circuit between the lowest free ports
        fu, fv = free.get(u), free.get(v)
        if not fu or not fv:
            return False
        pu, pv = min(fu), min(fv)
        fu.discard(pu)
        fv.discard(pv)
        circuits.append(Circuit(PortRef(u, pu), PortRef(v, pv)))
        count[(u, v)] = count.get((u, v), 0) + 1
        return True

    def reuse(limit: dict[tuple[int, int], int]) -> None:
        for c in reusable:
            key = (min(c.a.gpu, c.b.gpu), max(c.a.gpu, c.b.gpu))
            if count.get(key, 0) < limit.get(key, 0):
                take(c)

    reuse(want)
    for key in sorted(want):
        while count.get(key, 0) < want[key]:
            if not place(*key):
                u, v = key
                raise FabricError(
                    f"GPU {u if not free.get(u) else v} has no free port on {ocs_name} "
                    f"for a circuit {u}<->{v} (degree exceeds ports)"
                )
    if fill:
        reuse({k: len(ocs.ports) for k in want})
        progress = True
        while progress:
            progress = False
            for key in sorted(want, key=lambda k: (count[k], k)):
                if place(*key):
                    progress = True
    return Configuration({ocs_name: circuits})


def _assign_matching(ocs: OCS, want: dict[tuple[int, int], int], fill: bool, keep: Iterable[Circuit]) -> Configuration:
    """:func:`assign_ports` when no GPU is in two of the demanded pairs (a step of RHD, a
    matching), with array operations: the same circuits as its loop (the asked circuits take
    kept circuits first, then each GPU's lowest free ports; ``fill`` then reuses the other kept
    circuits whose ports are still free and adds parallel circuits on the lowest free ports).

    :raises FabricError: a GPU would need more ports than it has on that OCS (the first pair,
        in sorted order, that lacks one; the loop's message).
    :raises ImportError: numpy is not installed.
    """
    import numpy as np

    keys = sorted(want)
    u = np.array([k[0] for k in keys], dtype=np.int64)
    v = np.array([k[1] for k in keys], dtype=np.int64)
    need = np.array([want[k] for k in keys], dtype=np.int64)
    refs = ocs.ports
    pg = np.array([r.gpu for r in refs], dtype=np.int64)
    pp = np.array([r.port for r in refs], dtype=np.int64)
    span = int(pp.max()) + 1
    order = np.lexsort((pp, pg))  # OCS ports by (GPU, port)
    pkey = (pg * span + pp)[order]
    n_gpus = int(max(pg.max(), u.max(), v.max())) + 1
    first = np.searchsorted(pkey // span, np.arange(n_gpus + 1))  # each GPU's ports: first[g]:first[g + 1]
    used = np.zeros(order.size, dtype=bool)
    kept = list(keep)
    krow = np.array([(c.a.gpu, c.a.port, c.b.gpu, c.b.port) for c in kept], dtype=np.int64).reshape(-1, 4)

    def cabled(g: np.ndarray, p: np.ndarray) -> np.ndarray:
        k = g * span + p
        i = np.minimum(np.searchsorted(pkey, k), pkey.size - 1)
        return (pkey[i] == k) & (p < span)

    ok = np.flatnonzero(cabled(krow[:, 0], krow[:, 1]) & cabled(krow[:, 2], krow[:, 3]))
    ok = ok[np.lexsort(krow[ok].T[::-1])]  # circuit order
    kept, krow = [kept[i] for i in ok.tolist()], krow[ok]
    code = np.minimum(krow[:, 0], krow[:, 2]) * n_gpus + np.maximum(krow[:, 0], krow[:, 2])
    kc = u * n_gpus + v  # sorted: keys are
    at = np.minimum(np.searchsorted(kc, code), max(kc.size - 1, 0))
    mine = kc[at] == code if kc.size else np.zeros(code.size, dtype=bool)
    kpos = [np.searchsorted(pkey, krow[:, 0] * span + krow[:, 1]), np.searchsorted(pkey, krow[:, 2] * span + krow[:, 3])]
    # kept circuits, in order: rank among those of the same pair
    idx = np.flatnonzero(mine)
    rank = np.zeros(code.size, dtype=np.int64)
    if idx.size:  # kept circuits of one pair need not be adjacent in circuit order
        grp = at[idx]
        o = np.argsort(grp, kind="stable")
        rank[idx[o]] = np.arange(idx.size) - np.searchsorted(grp[o], grp[o])
    take1 = mine & (rank < need[at])
    used[kpos[0][take1]] = used[kpos[1][take1]] = True
    have = np.bincount(at[take1], minlength=len(keys))

    def free_ports(g: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The lowest ``count[i]`` unused ports of GPU ``g[i]`` (as positions in port order),
        with their pair i, and how many each GPU has free."""
        free = np.zeros(order.size, dtype=np.int64)
        free[~used] = 1
        csum = np.concatenate([[0], np.cumsum(free)])
        avail = csum[first[g + 1]] - csum[first[g]]
        take = np.minimum(count, avail)
        pair = np.repeat(np.arange(g.size), take)
        j = np.arange(pair.size) - np.repeat(np.cumsum(take) - take, take)  # j-th free port of its GPU
        target = csum[first[g]][pair] + j  # positions whose prefix count of free ports equals target
        pos = np.searchsorted(csum[1:], target + 1)
        return pair, pos, avail

    new_u: list[np.ndarray] = []
    new_v: list[np.ndarray] = []
    more = need - have
    pu, posu, au = free_ports(u, more)
    pv, posv, av = free_ports(v, more)
    short = np.flatnonzero((au < more) | (av < more))
    if short.size:
        i = int(short[0])
        placed = min(int(au[i]), int(av[i]))
        gpu = keys[i][0] if au[i] - placed == 0 else keys[i][1]
        raise FabricError(f"GPU {gpu} has no free port on {ocs.name} for a circuit {keys[i][0]}<->{keys[i][1]} "
                          f"(degree exceeds ports)")
    used[posu] = used[posv] = True
    new_u.append(posu)
    new_v.append(posv)
    take3 = np.zeros(code.size, dtype=bool)
    if fill:
        take3 = mine & ~take1 & ~used[kpos[0]] & ~used[kpos[1]]
        used[kpos[0][take3]] = used[kpos[1][take3]] = True
        pu, posu, au = free_ports(u, np.full(len(keys), n_gpus + order.size))
        pv, posv, av = free_ports(v, np.full(len(keys), n_gpus + order.size))
        extra = np.minimum(au, av)
        ku = np.concatenate([[0], np.cumsum(au)])
        kv = np.concatenate([[0], np.cumsum(av)])
        pair = np.repeat(np.arange(len(keys)), extra)
        j = np.arange(pair.size) - np.repeat(np.cumsum(extra) - extra, extra)
        new_u.append(posu[ku[pair] + j])
        new_v.append(posv[kv[pair] + j])
    a_pos, b_pos = np.concatenate(new_u), np.concatenate(new_v)
    circuits = [kept[i] for i in np.flatnonzero(take1 | take3).tolist()]
    objs = [refs[i] for i in order.tolist()]
    circuits += [Circuit(objs[a], objs[b]) for a, b in zip(a_pos.tolist(), b_pos.tolist())]
    config = Configuration({ocs.name: circuits})
    rows = np.concatenate([krow[take1 | take3], np.stack([pg[order][a_pos], pp[order][a_pos], pg[order][b_pos],
                                                            pp[order][b_pos]], 1)])
    config._rows[ocs.name] = rows[np.lexsort(rows.T[::-1])] if rows.size else rows
    return config
