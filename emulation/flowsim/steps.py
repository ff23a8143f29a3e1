"""One step's transfers simulated alone on an idle fabric, and the reuse of that simulation for
every later step with the same content.

The fluid model is invariant under a shift of time: a set of transfers that starts on an idle
fabric (no flow of anything else moves while they do) ends, relative to its first release, at
the same times whenever it starts. :class:`StepSimulator` therefore keys a step by its content
(configuration, sources, destinations, bytes, and each transfer's release relative to the
first) and simulates each distinct content once; later steps take the result shifted to their
release. Both executions use it: round-synchronous steps are isolated by definition, and the
dependency-driven engine uses it for steps it has shown to be isolated
(:mod:`emulation.flowsim.dependency`).

Spec: ``docs/flow-backend.md`` (at cluster scale).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from emulation.fabric import Configuration
from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.flowsim.links import LinkSpace, SimulationError
from emulation.routing import RoutingError, SubflowArrays


class Fingerprints:
    """Content keys of array columns, for recognising equal steps. A constant column is keyed by
    its value; any other by a digest of its contents. Workload columns are immutable and alive
    for the whole run, so a column is remembered by the array that holds its data (kept
    referenced here) and its place in it: steps whose columns are views of one array (a Ring
    AllReduce's steps share their rank columns) are keyed once, and a window of an array found
    constant (its byte columns are windows of one array) is constant without a scan."""

    def __init__(self):
        self._by_id: dict[int, tuple[np.ndarray, tuple]] = {}  # id -> (column, key)
        self._seen: dict[tuple, tuple[np.ndarray, tuple]] = {}  # place -> (root, key)
        self._roots: dict[int, tuple[np.ndarray, object]] = {}  # id -> (root, constant value or None)

    def __call__(self, col: np.ndarray, remember: bool = True) -> tuple:
        """The key of ``col`` (any 1-D array). ``remember``: ``col`` is a workload column
        (immutable while the run lasts); False for a temporary array."""
        if not remember:
            return self._key(col)
        got = self._by_id.get(id(col))
        if got is not None and got[0] is col:
            return got[1]
        root = col
        while isinstance(root.base, np.ndarray):
            root = root.base
        place = (id(root), col.__array_interface__["data"][0] - root.__array_interface__["data"][0], col.shape,
                 col.strides, col.dtype.str)
        got = self._seen.get(place)
        if got is not None and got[0] is root:
            key = got[1]
        else:
            value = self._root_constant(root) if root is not col and col.size else None
            key = ("const", col.size, value) if value is not None else self._key(col)
            self._seen[place] = (root, key)
        self._by_id[id(col)] = (col, key)
        return key

    @staticmethod
    def _key(col: np.ndarray) -> tuple:
        if col.size and col.min() == col.max():
            return ("const", col.size, col.flat[0].item())
        return ("digest", col.size, col.dtype.str, hashlib.blake2b(np.ascontiguousarray(col).data, digest_size=16).digest())

    def _root_constant(self, root: np.ndarray):
        got = self._roots.get(id(root))
        if got is None or got[0] is not root:
            flat = root.ravel()
            value = flat[0].item() if flat.size and flat.min() == flat.max() else None
            got = self._roots[id(root)] = (root, value)
        return got[1]


@dataclass
class StepOutcome:
    """A step simulated alone, times relative to its first release (seconds).

    :ivar deliver: (T,) when each transfer is delivered (its last piece's fluid end + hops x delta).
    :ivar end: the latest delivery (``deliver.max()``; 0 for no transfer).
    :ivar fluid_end: the latest time any of its flows moves (-inf: no flow moved).
    :ivar link_ids: (K,) global ids of the links it loaded; ``link_bytes``: (K,) their bytes.
    :ivar max_link_bytes: the busiest link's bytes (0: none). ``bytes``: the step's bytes.
    """

    deliver: np.ndarray
    end: float
    fluid_end: float
    link_ids: np.ndarray
    link_bytes: np.ndarray
    max_link_bytes: float
    bytes: float


class _Routed:
    """A step's routing, kept for its next use: the subflows, the global ids of the
    configuration's links and, once known, each subflow's path capacity if no link carries two
    subflows (``alone``; None: they share links or one is dark)."""

    __slots__ = ("sf", "gid", "alone", "single", "size")

    def __init__(self, sf: SubflowArrays, gid: np.ndarray):
        self.sf, self.gid = sf, gid
        self.alone: np.ndarray | None | bool = False  # False: not looked at yet
        self.single = bool(sf.transfer.size == 0 or (sf.transfer.size == int(sf.transfer[-1]) + 1))
        arrays = [sf.transfer, sf.channel, sf.fraction, sf.hops]
        arrays += [sf.runs.flow, sf.runs.start, sf.runs.length] if sf.runs is not None else [sf.pair_flow, sf.pair_link]
        self.size = sum(a.nbytes for a in arrays)  # bytes (the alone capacities may add one array)


class _Bounded(dict):
    """A dict that forgets its oldest entries once their sizes (bytes) add up to more than
    ``limit``."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.total = limit, 0

    def keep(self, key, value, size: int) -> None:
        self[key] = (value, size)
        self.total += size
        while self.total > self.limit and len(self) > 1:
            oldest = next(iter(self))
            self.total -= self.pop(oldest)[1]


#: Bytes the caches of a :class:`StepSimulator` may hold (routes and outcomes; a Ring AllReduce
#: reuses one of each, RHD one per level, back 2 log2 n steps: at 131,072 GPUs some of those no
#: longer fit and are simulated again, a few milliseconds each).
CACHE_BYTES = 64 << 20


class StepSimulator:
    """Simulates steps alone on the links of ``space`` (module doc).

    :param alpha: per-transfer latency alpha, s. :param delta: per-hop delay delta, s.
    :param reuse: take an earlier step's result for a step of equal content (exact); False:
        run the fluid engine for every step.
    """

    def __init__(self, space: LinkSpace, alpha: float, delta: float, reuse: bool = True):
        self.space, self.alpha, self.delta, self.reuse = space, alpha, delta, reuse
        self.fingerprint = Fingerprints()
        self._routed = _Bounded(CACHE_BYTES // 2)
        self._done = _Bounded(CACHE_BYTES // 2)
        self.simulated = 0  # steps that ran the fluid engine (or its closed form)

    def route(self, config: Configuration, src: np.ndarray, dst: np.ndarray) -> tuple[SubflowArrays, np.ndarray]:
        """``(subflows, global link ids of the configuration's links)`` of transfers ``src`` ->
        ``dst`` (workload columns) over ``config``, computed once per distinct content.

        :raises SimulationError: a transfer is unroutable.
        """
        got = self._route(config, src, dst)
        return got.sf, got.gid

    def _route(self, config: Configuration, src: np.ndarray, dst: np.ndarray) -> _Routed:
        key = (config, self.fingerprint(src), self.fingerprint(dst))
        got = self._routed.get(key)
        if got is None:
            routes, gid = self.space.routes(config)
            try:
                r = _Routed(routes.subflow_arrays(src, dst), gid)
            except RoutingError as e:
                raise SimulationError(str(e)) from None
            self._routed.keep(key, r, r.size)
            return r
        return got[0]

    def run(self, config: Configuration, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
            offsets: np.ndarray | None = None, dark: tuple[np.ndarray, float, float] | None = None) -> StepOutcome:
        """Simulate transfers ``src`` -> ``dst`` of ``nbytes`` bytes (workload columns, (T,))
        over ``config``, released at ``offsets`` (s after the first release; None: all at 0).

        :param dark: ``(global link ids, until, capacity)``: those links carry nothing until
            ``until`` (s, relative) and ``capacity`` bytes/s from then (a dark window that is
            still open when the step starts). A step with one is not reused.
        :raises SimulationError: a transfer is unroutable, or a flow never finishes.
        """
        routed = self._route(config, src, dst)
        key = None
        if self.reuse and dark is None:
            okey = ("const", 0) if offsets is None else self.fingerprint(offsets, remember=False)
            key = (config, self.fingerprint(src), self.fingerprint(dst), self.fingerprint(nbytes), okey)
            got = self._done.get(key)
            if got is not None:
                return got[0]
        out = self._simulate(routed, np.asarray(nbytes, dtype=float), offsets, dark)
        if key is not None:
            self._done.keep(key, out, out.deliver.nbytes + out.link_ids.nbytes + out.link_bytes.nbytes)
        return out

    def _alone(self, routed: _Routed, moving: np.ndarray) -> np.ndarray | None:
        """Each moving subflow's path capacity (bytes/s) if no link carries two of them and none
        is dark (every flow then moves at that rate from start to end: the max-min allocation of
        flows that share nothing), else None. Kept on the route when every subflow moves."""
        sf, gid = routed.sf, routed.gid
        every = moving.size == sf.transfer.size
        if every and routed.alone is not False:
            return routed.alone
        caps = None
        if sf.runs is None and sf.pair_flow.size <= 4 * moving.size:
            if every:
                pf, pl = sf.pair_flow, sf.pair_link
            else:
                sel = np.isin(sf.pair_flow, moving)
                pf, pl = sf.pair_flow[sel], sf.pair_link[sel]
            if not np.bincount(pl, minlength=gid.size).max(initial=0) > 1:
                cap = self.space.capacity(gid)[pl]
                k = pl.size // max(moving.size, 1)
                if cap.size and cap.min() > 0 and k * moving.size == pl.size and (sf.hops[moving] == k).all():
                    caps = cap.reshape(-1, k).min(axis=1)  # every path k links long (a switch: 2)
                elif cap.size and cap.min() > 0:
                    first = np.flatnonzero(np.concatenate([[True], pf[1:] != pf[:-1]]))
                    if first.size == moving.size:
                        caps = np.minimum.reduceat(cap, first)
        if every:
            routed.alone = caps
        return caps

    def _simulate(self, routed: _Routed, nb: np.ndarray, offsets: np.ndarray | None,
                  dark: tuple[np.ndarray, float, float] | None) -> StepOutcome:
        self.simulated += 1
        sf, gid = routed.sf, routed.gid
        fbytes = sf.flow_bytes(nb)
        fin = (np.zeros(sf.transfer.size) if offsets is None else offsets[sf.transfer]) + self.alpha
        moving = np.flatnonzero(fbytes > 0)
        fluid_end = -np.inf
        alone = self._alone(routed, moving) if dark is None and moving.size else None
        if alone is not None:  # no link carries two flows: each moves at its path's capacity
            fin[moving] += fbytes[moving] / alone
            fluid_end = float(fin[moving].max())
        elif moving.size:
            runs = sf.runs
            eng = FluidEngine(self.space.capacity(gid), lane=None if runs is None else runs.lane)
            if dark is not None:
                links, until, restore = dark
                local = np.flatnonzero(np.isin(gid, links))
                if local.size:
                    eng.capacity[local] = 0.0
                    eng.set_capacity(local, restore, until)
            local = np.full(fbytes.size, -1, dtype=np.int64)
            local[moving] = np.arange(moving.size)
            try:
                if runs is not None:
                    sel = np.isin(runs.flow, moving) if moving.size < fbytes.size else slice(None)
                    ids = eng.add_runs(fbytes[moving], fin[moving], local[runs.flow[sel]], runs.start[sel],
                                       runs.length[sel])
                else:
                    sel = np.isin(sf.pair_flow, moving) if moving.size < fbytes.size else slice(None)
                    ids = eng.add(fbytes[moving], fin[moving], local[sf.pair_flow[sel]], sf.pair_link[sel])
                while (ev := eng.step()) is not None:
                    t, finished = ev
                    fin[moving[finished - ids[0]]] = t
            except DeadlockError as e:
                raise SimulationError(str(e)) from None
            fluid_end = float(fin[moving].max())
        deliver = fin + sf.hops * self.delta if self.delta else fin
        if not routed.single and deliver.size:
            deliver = np.maximum.reduceat(deliver, np.flatnonzero(np.r_[True, sf.transfer[1:] != sf.transfer[:-1]]))
        if alone is not None and moving.size == fbytes.size:  # every link carries one subflow's bytes
            link_ids, link_bytes = gid[sf.pair_link], fbytes[sf.pair_flow]
        elif sf.pair_count:
            loads = sf.link_loads(fbytes, gid.size)
            nz = np.flatnonzero(loads)
            link_ids, link_bytes = gid[nz], loads[nz]
        else:
            link_ids, link_bytes = np.zeros(0, dtype=np.int64), np.zeros(0)
        return StepOutcome(deliver=deliver, end=float(deliver.max()) if deliver.size else 0.0, fluid_end=fluid_end,
                           link_ids=link_ids, link_bytes=link_bytes,
                           max_link_bytes=float(link_bytes.max()) if link_bytes.size else 0.0, bytes=float(nb.sum()))
