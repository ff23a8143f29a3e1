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
        self._seen: dict[tuple, tuple[np.ndarray, tuple]] = {}  # place -> (root, key)
        self._roots: dict[int, tuple[np.ndarray, object]] = {}  # id -> (root, constant value or None)

    def __call__(self, col: np.ndarray, remember: bool = True) -> tuple:
        """The key of ``col`` (any 1-D array). ``remember``: ``col`` is a workload column
        (immutable while the run lasts); False for a temporary array."""
        if not remember:
            return self._key(col)
        root = col
        while isinstance(root.base, np.ndarray):
            root = root.base
        place = (id(root), col.__array_interface__["data"][0] - root.__array_interface__["data"][0], col.shape,
                 col.strides, col.dtype.str)
        got = self._seen.get(place)
        if got is not None and got[0] is root:
            return got[1]
        value = self._root_constant(root) if root is not col and col.size else None
        key = ("const", col.size, value) if value is not None else self._key(col)
        self._seen[place] = (root, key)
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


class StepSimulator:
    """Simulates steps alone on the links of ``space`` (module doc).

    :param alpha: per-transfer latency alpha, s. :param delta: per-hop delay delta, s.
    :param reuse: take an earlier step's result for a step of equal content (exact); False:
        run the fluid engine for every step.
    """

    def __init__(self, space: LinkSpace, alpha: float, delta: float, reuse: bool = True):
        self.space, self.alpha, self.delta, self.reuse = space, alpha, delta, reuse
        self.fingerprint = Fingerprints()
        self._routed: dict[tuple, tuple[SubflowArrays, np.ndarray]] = {}
        self._done: dict[tuple, StepOutcome] = {}
        self.simulated = 0  # steps that ran the fluid engine

    def route(self, config: Configuration, src: np.ndarray, dst: np.ndarray) -> tuple[SubflowArrays, np.ndarray]:
        """``(subflows, global link ids of the configuration's links)`` of transfers ``src`` ->
        ``dst`` (workload columns) over ``config``, computed once per distinct content.

        :raises SimulationError: a transfer is unroutable.
        """
        key = (config, self.fingerprint(src), self.fingerprint(dst))
        got = self._routed.get(key)
        if got is None:
            routes, gid = self.space.routes(config)
            try:
                got = self._routed[key] = (routes.subflow_arrays(src, dst), gid)
            except RoutingError as e:
                raise SimulationError(str(e)) from None
        return got

    def run(self, config: Configuration, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
            offsets: np.ndarray | None = None, dark: tuple[np.ndarray, float, float] | None = None) -> StepOutcome:
        """Simulate transfers ``src`` -> ``dst`` of ``nbytes`` bytes (workload columns, (T,))
        over ``config``, released at ``offsets`` (s after the first release; None: all at 0).

        :param dark: ``(global link ids, until, capacity)``: those links carry nothing until
            ``until`` (s, relative) and ``capacity`` bytes/s from then (a dark window that is
            still open when the step starts). A step with one is not reused.
        :raises SimulationError: a transfer is unroutable, or a flow never finishes.
        """
        sf, gid = self.route(config, src, dst)
        key = None
        if self.reuse and dark is None:
            okey = ("const", 0) if offsets is None else self.fingerprint(offsets, remember=False)
            key = (config, self.fingerprint(src), self.fingerprint(dst), self.fingerprint(nbytes), okey)
            got = self._done.get(key)
            if got is not None:
                return got
        out = self._simulate(sf, gid, np.asarray(nbytes, dtype=float), offsets, dark)
        if key is not None:
            self._done[key] = out
        return out

    def _simulate(self, sf: SubflowArrays, gid: np.ndarray, nb: np.ndarray, offsets: np.ndarray | None,
                  dark: tuple[np.ndarray, float, float] | None) -> StepOutcome:
        self.simulated += 1
        fbytes = sf.flow_bytes(nb)
        fin = (np.zeros(sf.transfer.size) if offsets is None else offsets[sf.transfer]) + self.alpha
        moving = np.flatnonzero(fbytes > 0)
        fluid_end = -np.inf
        if moving.size:
            cap = self.space.capacity(gid)
            eng = FluidEngine(cap)
            if dark is not None:
                links, until, restore = dark
                local = np.flatnonzero(np.isin(gid, links))
                if local.size:
                    eng.capacity[local] = 0.0
                    eng.set_capacity(local, restore, until)
            sel = np.isin(sf.pair_flow, moving) if moving.size < fbytes.size else slice(None)
            local = np.full(fbytes.size, -1, dtype=np.int64)
            local[moving] = np.arange(moving.size)
            try:
                ids = eng.add(fbytes[moving], fin[moving], local[sf.pair_flow[sel]], sf.pair_link[sel])
                while (ev := eng.step()) is not None:
                    t, finished = ev
                    fin[moving[finished - ids[0]]] = t
            except DeadlockError as e:
                raise SimulationError(str(e)) from None
            fluid_end = float(fin[moving].max())
        deliver = fin + sf.hops * self.delta
        first = np.flatnonzero(np.r_[True, sf.transfer[1:] != sf.transfer[:-1]])
        deliver = np.maximum.reduceat(deliver, first) if deliver.size else deliver
        if sf.pair_link.size:
            loads = np.bincount(sf.pair_link, weights=fbytes[sf.pair_flow], minlength=gid.size)
            nz = np.flatnonzero(loads)
            link_ids, link_bytes = gid[nz], loads[nz]
        else:
            link_ids, link_bytes = np.zeros(0, dtype=np.int64), np.zeros(0)
        return StepOutcome(deliver=deliver, end=float(deliver.max()) if deliver.size else 0.0, fluid_end=fluid_end,
                           link_ids=link_ids, link_bytes=link_bytes,
                           max_link_bytes=float(link_bytes.max()) if link_bytes.size else 0.0, bytes=float(nb.sum()))
