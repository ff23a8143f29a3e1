"""Dependency-driven execution, columnar.

Semantics: a transfer is released as soon as the chunks it sends have arrived at its source and
the previous transfer between the same two ranks is delivered
(:func:`~emulation.workloads.dependencies.transfer_dependencies`), and not before its source
rank arrives; it moves from ``release + alpha``. The fabric changes as a whole: the plan's
steps form *epochs* (maximal runs of steps on one configuration); epoch e opens once every
transfer of the earlier epochs is delivered (and the previous dark window has ended), and if it
reconfigures, only the circuits that change are dark for R from then, so transfers over
unchanged circuits move during the dark window. A transfer of an epoch not yet open waits.

Two engines give these times:

- **waves** (:func:`run_waves`): the steps are taken in order, each simulated alone
  (:class:`~emulation.flowsim.steps.StepSimulator`), its transfers released at the times their
  dependencies give. That is exact when no flow of a step moves before every flow of the earlier
  steps has finished, which the engine checks at every step (the first flow of a step starts no
  earlier than the last flow of the steps before it ends; a step holds no two transfers on one
  connection). Equal steps then cost one simulation (a Ring AllReduce: 2 of 2(n-1)), and the
  state is one delivery time per (rank, chunk) and per connection, not per transfer, so a
  16,384-GPU Ring's 537 M transfers are never held at once. If the check fails (a straggler,
  chunks of unequal size with alpha = 0, steps that overlap by design), the run is redone by:
- **event-driven** (:func:`run_events`): every transfer at once, dependencies as arrays
  (compressed sparse rows), one fluid engine for the whole run advanced event to event; at
  every event the delivered transfers release their dependents with array operations.

Both give the engine-before-columnar's times to 1e-9 (``tests/test_dependency_driven.py``).

Spec: ``docs/flow-backend.md``, ``docs/mechanisms.md`` (execution semantics).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulation.arrays import unique
from emulation.fabric import Configuration
from emulation.flowsim.account import RunAccount
from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.flowsim.links import SimulationError
from emulation.flowsim.steps import StepSimulator
from emulation.routing import RoutingError
from emulation.workloads.dependencies import transfer_columns, transfer_dependencies


@dataclass
class Epochs:
    """The plan's epochs (module doc): ``configs[e]``, whether epoch e ``reconfigures``, its
    ``first_step``, every step's epoch (``of_step``, (S,)) and the global ids of the links that
    are dark while it reconfigures (``dark[e]``: links of its configuration absent from the
    previous one)."""

    configs: list[Configuration]
    reconfigures: list[bool]
    first_step: list[int]
    of_step: np.ndarray
    dark: list[np.ndarray]

    @staticmethod
    def of(plan, space) -> Epochs:
        """The epochs of ``plan`` (a :class:`~emulation.schedule.Plan`), links numbered in
        ``space`` (a :class:`~emulation.flowsim.links.LinkSpace`)."""
        of_step = np.empty(len(plan.steps), dtype=np.int64)
        configs, reconf, first = [], [], []
        for i, sp in enumerate(plan.steps):
            if i == 0 or sp.action == "reconfigure":
                configs.append(sp.configuration)
                reconf.append(sp.action == "reconfigure")
                first.append(i)
            of_step[i] = len(configs) - 1
        for c in configs:  # number the links of every configuration before any engine is sized
            space.routes(c)
        before = [plan.initial] + configs[:-1]
        dark = [np.setdiff1d(space.routes(c)[1], space.routes(b)[1]) for c, b in zip(configs, before)]
        return Epochs(configs, reconf, first, of_step, dark)

    def start(self, e: int, latest: float, previous_start: float, delay: float) -> float:
        """When epoch ``e`` opens, given the latest delivery of the earlier epochs and when
        epoch e-1 opened (s): after both that delivery and e-1's dark window."""
        if e == 0:
            return 0.0
        return max(latest, previous_start + (delay if self.reconfigures[e - 1] else 0.0))


class WavesOverlap(Exception):
    """The steps are not isolated in time: the waves engine cannot give the run exactly."""


class _Connections:
    """The last delivery on every (source, destination) connection, in slots numbered in order
    of first use; a step's slots are found once per distinct pair of columns."""

    def __init__(self, ranks: int, fingerprint):
        self.ranks, self.fingerprint = ranks, fingerprint
        self._keys = np.zeros(0, dtype=np.int64)  # sorted pair keys
        self._slot_of = np.zeros(0, dtype=np.int64)  # slot of each sorted key
        self.last = np.zeros(0)  # 0: nothing delivered yet (every time compared with it is >= 0)
        self._cache: dict[tuple, np.ndarray | None] = {}

    def slots(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
        """Slots of the step's pairs, or None if the step has two transfers on one pair."""
        ck = (self.fingerprint(src), self.fingerprint(dst))
        if ck in self._cache:
            return self._cache[ck]
        key = src * self.ranks + dst
        uk = unique(key)
        got = None
        if uk.size == key.size:
            new = np.setdiff1d(uk, self._keys, assume_unique=True)
            if new.size:
                keys = np.concatenate([self._keys, new])
                slot = np.concatenate([self._slot_of, self.last.size + np.arange(new.size)])
                order = np.argsort(keys, kind="stable")
                self._keys, self._slot_of = keys[order], slot[order]
                self.last = np.concatenate([self.last, np.zeros(new.size)])
            got = self._slot_of[np.searchsorted(self._keys, key)]
        self._cache[ck] = got
        return got


def run_waves(account: RunAccount, sim: StepSimulator, arrivals: np.ndarray, memory: int) -> None:
    """The waves engine (module doc), recording into ``account``.

    :param memory: bytes the engine may use for its (rank, chunk) table.
    :raises WavesOverlap: the steps overlap in time, or the table would exceed ``memory``.
    :raises SimulationError: a transfer is unroutable or a flow never finishes.
    """
    w, plan = account.workload, account.plan
    if _ChunkTable.memory(w) > memory:
        raise WavesOverlap(f"the (rank, chunk) table needs {_ChunkTable.memory(w) / 2**30:.1f} GiB")
    delay = plan.reconfiguration_delay_s
    ep = Epochs.of(plan, sim.space)
    arrived = _ChunkTable(w)
    conn = _Connections(w.ranks, sim.fingerprint)
    finished = -np.inf  # the latest fluid end of the steps so far
    latest = 0.0  # the latest delivery so far
    starts: list[float] = []
    one_each: dict[tuple, bool] = {}  # whether a destination column names every rank at most once
    late = bool(arrivals.size and arrivals.max() > 0)
    cap = sim.space.fabric.port_bytes_per_s
    for i, (step, sp) in enumerate(zip(w.steps, plan.steps)):
        e = int(ep.of_step[i])
        if e == len(starts):  # the epoch opens: every earlier transfer is delivered
            starts.append(ep.start(e, latest, starts[-1] if starts else 0.0, delay))
        t0 = starts[e]
        opens = ep.first_step[e] == i and ep.reconfigures[e]
        if not len(step):
            account.add_step(i, t0, t0, 0.0, opens)
            continue
        src, dst = step.src, step.dst
        slots = conn.slots(src, dst)
        if slots is None:
            raise WavesOverlap(f"step {i} has two transfers on one connection")
        lo, k = step.chunk, step.nchunks
        ready = arrived.read(src, lo, k)
        np.maximum(ready, conn.last[slots], out=ready)
        if late:
            np.maximum(ready, arrivals[src], out=ready)
        np.maximum(ready, t0, out=ready)  # the release
        base = float(ready.min())
        if base + sim.alpha < finished:
            raise WavesOverlap(f"step {i} starts before step {i - 1}'s flows end")
        dark = None
        if ep.reconfigures[e] and delay > 0 and ep.dark[e].size and base < t0 + delay:
            dark = (ep.dark[e], t0 + delay - base, cap)
        offsets = None if float(ready.max()) == base else ready - base
        out = sim.run(ep.configs[e], src, dst, step.bytes, offsets, dark)
        deliver = out.deliver + base
        dkey = sim.fingerprint(dst)
        distinct = one_each.get(dkey)
        if distinct is None:
            distinct = one_each[dkey] = unique(dst).size == dst.size
        arrived.write(dst, lo, k, deliver, distinct)
        conn.last[slots] = deliver
        finished = max(finished, base + out.fluid_end)
        latest = max(latest, base + out.end)
        account.add_outcome_loads(out)
        account.delivered += out.bytes
        account.add_step(i, t0 if opens else base, base + out.end, out.max_link_bytes, opens)
        account.add_transfers(i, ready, deliver)


class _ChunkTable:
    """The latest delivery of every (rank, chunk) so far (0: none yet; every time compared with
    it is >= 0), in one of three layouts:

    - *pieces*, when the workload has fewer transfers than (rank, chunk) cells (RHD, direct):
      every rank's chunks are cut at the boundaries of the ranges it sends or receives, and a
      cell holds one piece (RHD's halving ranges: O(log n) pieces per rank);
    - *skewed*, for single-chunk transfers: ``[(chunk - rank) mod C, rank]``, so a Ring step
      (rank r sends chunk r - t) reads and writes one contiguous row;
    - *dense*, ``[rank, chunk]``, otherwise.
    """

    def __init__(self, workload):
        self.ranks, self.chunks = workload.ranks, workload.chunks
        self.bounds = None
        if 4 * workload.transfer_count < self.ranks * self.chunks:
            c = transfer_columns(workload)
            self.span = int((c["chunk"] + c["nchunks"]).max()) + 1 if c["chunk"].size else 1
            hi = c["chunk"] + c["nchunks"]
            self.bounds = unique(np.concatenate([c["src"] * self.span + c["chunk"], c["src"] * self.span + hi,
                                                 c["dst"] * self.span + c["chunk"], c["dst"] * self.span + hi]))
            self.table = np.zeros(max(self.bounds.size, 1))
            self.skewed = False
            return
        self.skewed = all(s.nchunks.strides == (0,) and (not len(s) or int(s.nchunks[0]) == 1) or (s.nchunks == 1).all()
                          for s in workload.steps)
        self.table = np.zeros(self.ranks * self.chunks)  # untouched pages cost nothing until written

    @staticmethod
    def memory(workload) -> float:
        """Bytes the table of ``workload`` takes (:func:`waves_memory`)."""
        return waves_memory(workload.ranks, workload.chunks, workload.transfer_count)

    def _cells(self, rank: np.ndarray, lo: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Cells of the ranges, and the cells of each range (None: one cell each)."""
        if self.bounds is not None:
            a = np.searchsorted(self.bounds, rank * self.span + lo)
            b = np.searchsorted(self.bounds, rank * self.span + lo + k)
            n = b - a
            return (a, None) if (n == 1).all() else (_expand(a, b), n)
        if self.skewed:
            d = lo - rank  # in (-ranks, chunks)
            if self.ranks <= self.chunks:
                d += self.chunks * (d < 0)
            else:
                d %= self.chunks
            d *= self.ranks
            d += rank
            return d, None
        first = rank * self.chunks + lo
        if k.strides == (0,) or (k == k[0]).all():
            k0 = int(k[0])
            if k0 == 1:
                return first, None
            return (first[:, None] + np.arange(k0)).ravel(), np.full(rank.size, k0)
        n = k.astype(np.int64)
        return _expand(first, first + n), n

    def read(self, rank: np.ndarray, lo: np.ndarray, k: np.ndarray) -> np.ndarray:
        """(T,) the latest delivery of any chunk of the ranges ``[lo[i], lo[i] + k[i])`` at ``rank[i]``."""
        cells, n = self._cells(rank, lo, k)
        got = self.table[cells]
        return got if n is None else np.maximum.reduceat(got, np.cumsum(n) - n)

    def write(self, rank: np.ndarray, lo: np.ndarray, k: np.ndarray, when: np.ndarray, distinct: bool) -> None:
        """Deliveries ``when`` ((T,) s) of the ranges at ``rank``; ``distinct``: no two ranges
        share a cell (then one vectorised assignment, else an unbuffered maximum)."""
        cells, n = self._cells(rank, lo, k)
        vals = when if n is None else np.repeat(when, n)
        if distinct:
            self.table[cells] = np.maximum(self.table[cells], vals)
        else:
            np.maximum.at(self.table, cells, vals)


def waves_memory(ranks: float, chunks: float, transfers: float) -> float:
    """Bytes of the waves engine's (rank, chunk) table for a workload of ``transfers`` transfers
    of ``chunks`` chunks on ``ranks`` ranks: cut pieces (8 words per transfer) when transfers are
    fewer than cells, else one float per cell."""
    return 64.0 * transfers if 4 * transfers < ranks * chunks else 8.0 * ranks * chunks


def event_memory(transfers: int, pairs_per_transfer: float) -> float:
    """Bytes the event-driven engine needs for ``transfers`` transfers whose subflows cross
    ``pairs_per_transfer`` links on average (measured: :data:`EVENT_BYTES_PER_TRANSFER` per
    transfer and :data:`EVENT_BYTES_PER_PAIR` per (subflow, link) pair)."""
    return transfers * EVENT_BYTES_PER_TRANSFER + transfers * pairs_per_transfer * EVENT_BYTES_PER_PAIR


#: Memory of the event-driven engine per transfer (bytes): its columns, dependencies and state
#: (measured with the pair term below: 321 bytes per transfer for Ring at 1,024 GPUs on a ring of
#: cables, 466 for the grouped AllToAll at 4,096 on a switch, both 2 pairs per transfer).
EVENT_BYTES_PER_TRANSFER = 450
#: Memory per (subflow, link) pair of the transfers, routed once per epoch (bytes).
EVENT_BYTES_PER_PAIR = 32


def _expand(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every integer of every range ``[lo[i], hi[i])``, ranges in order."""
    n = hi - lo
    if not n.size:
        return np.zeros(0, dtype=np.int64)
    return np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n - lo, n)


class _Routed:
    """Every transfer's subflows and their links, routed once per epoch on its configuration:
    transfer t's subflows are ``sub_ptr[t]:sub_ptr[t + 1]``, subflow s's links (global ids)
    ``link[pair_ptr[s]:pair_ptr[s + 1]]``."""

    def __init__(self, space, ep: Epochs, epoch: np.ndarray, src: np.ndarray, dst: np.ndarray, nb: np.ndarray):
        tr, frac, hops, nlinks, links = [], [], [], [], []
        for e, config in enumerate(ep.configs):
            tids = np.flatnonzero(epoch == e)
            if not tids.size:
                continue
            routes, gid = space.routes(config)
            try:
                sf = routes.subflow_arrays(src[tids], dst[tids])
            except RoutingError as err:
                raise SimulationError(str(err)) from None
            tr.append(tids[sf.transfer])
            frac.append(sf.fraction)
            hops.append(sf.hops)
            nlinks.append(np.bincount(sf.pair_flow, minlength=sf.transfer.size))
            links.append(gid[sf.pair_link])
        cat = lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt)  # noqa: E731
        self.transfer = cat(tr, np.int64)  # (S,) sorted: epochs are runs of steps
        self.hops = cat(hops, np.int64)
        self.bytes = nb[self.transfer] * cat(frac, float)
        self.link = cat(links, np.int64)
        self.pair_ptr = np.concatenate([[0], np.cumsum(cat(nlinks, np.int64))])
        self.sub_ptr = np.searchsorted(self.transfer, np.arange(src.size + 1))

    def pair_sub(self) -> np.ndarray:
        """(P,) the subflow of every (subflow, link) pair."""
        return np.repeat(np.arange(self.transfer.size), np.diff(self.pair_ptr))


def run_events(account: RunAccount, sim: StepSimulator, arrivals: np.ndarray) -> None:
    """The event-driven engine (module doc), recording into ``account``.

    :raises SimulationError: a transfer is unroutable, the flows deadlock, or some transfer is
        never released (a dependency cycle).
    """
    w, plan = account.workload, account.plan
    space, alpha, delta = sim.space, sim.alpha, sim.delta
    delay = plan.reconfiguration_delay_s
    cols = transfer_columns(w)
    src, dst, nb, step_of = cols["src"], cols["dst"], cols["bytes"], cols["step"]
    total = src.size
    deps = transfer_dependencies(w, cols)
    dependents = deps.transposed()
    ep = Epochs.of(plan, space)
    n_ep = len(ep.configs)
    epoch = ep.of_step[step_of] if total else np.zeros(0, dtype=np.int64)
    rt = _Routed(space, ep, epoch, src, dst, nb)
    eng = FluidEngine(space.capacity(np.arange(space.count)))
    cap = space.fabric.port_bytes_per_s
    n_links = space.count
    # Bytes per link, and per (step, link) for every step's busiest link: known before any time.
    pair_sub = rt.pair_sub()
    pair_bytes = rt.bytes[pair_sub]
    loads = np.bincount(rt.link, weights=pair_bytes, minlength=n_links)
    nz = np.flatnonzero(loads)
    account.add_loads(nz, loads[nz])
    step_loads = np.zeros(len(w.steps))
    if rt.link.size:
        ukey, inv = unique(step_of[rt.transfer[pair_sub]] * n_links + rt.link, return_inverse=True)
        np.maximum.at(step_loads, ukey // n_links, np.bincount(inv, weights=pair_bytes))
    del pair_sub, pair_bytes

    ndeps = deps.counts().copy()
    ready = arrivals[src].astype(float)
    t_release = np.full(total, np.nan)
    t_deliver = np.full(total, -np.inf)
    pieces_left = np.zeros(total, dtype=np.int64)
    left_in_epoch = np.bincount(epoch, minlength=n_ep)
    ep_start = np.full(n_ep, np.nan)
    held: list[list[np.ndarray]] = [[] for _ in range(n_ep)]
    todo: list[np.ndarray] = []
    flow_sub = np.empty(max(rt.transfer.size, 1), dtype=np.int64)  # engine flow id -> subflow
    latest = 0.0
    cur = -1

    def queue(tids: np.ndarray) -> None:
        """Transfers whose dependencies are all delivered: to release now, or when their epoch opens."""
        if not tids.size:
            return
        now = epoch[tids] <= cur
        todo.append(tids[now])
        later = tids[~now]
        for e in np.unique(epoch[later]):
            held[e].append(later[epoch[later] == e])

    def deliver(tids: np.ndarray) -> None:
        nonlocal latest
        if not tids.size:
            return
        when = t_deliver[tids]
        latest = max(latest, float(when.max()))
        left_in_epoch[:] -= np.bincount(epoch[tids], minlength=n_ep)
        a, b = dependents.indptr[tids], dependents.indptr[tids + 1]
        if not (b - a).any():
            return
        x = dependents.indices[_expand(a, b)]
        np.maximum.at(ready, x, np.repeat(when, b - a))
        ux, cnt = unique(x, return_counts=True)
        ndeps[ux] -= cnt
        queue(ux[ndeps[ux] == 0])

    def open_epochs() -> None:
        nonlocal cur
        while cur + 1 < n_ep and (cur < 0 or left_in_epoch[:cur + 1].sum() == 0):
            cur += 1
            e = cur
            ep_start[e] = ep.start(e, latest, ep_start[e - 1] if e else 0.0, delay)
            if ep.reconfigures[e] and delay > 0 and ep.dark[e].size:
                eng.set_capacity(ep.dark[e], 0.0, ep_start[e])
                eng.set_capacity(ep.dark[e], cap, ep_start[e] + delay)
            if held[e]:
                todo.extend(held[e])
                held[e] = []

    def release() -> None:
        while todo:
            tids = unique(np.concatenate(todo))
            todo.clear()
            t_rel = np.maximum(ready[tids], ep_start[epoch[tids]])
            t_release[tids] = t_rel
            subs = _expand(rt.sub_ptr[tids], rt.sub_ptr[tids + 1])
            t_act = np.repeat(t_rel, rt.sub_ptr[tids + 1] - rt.sub_ptr[tids]) + alpha
            fbytes = rt.bytes[subs]
            zero = fbytes <= 0
            owner = rt.transfer[subs]
            np.add.at(pieces_left, owner[~zero], 1)
            if zero.any():
                np.maximum.at(t_deliver, owner[zero], t_act[zero] + rt.hops[subs[zero]] * delta)
            mv = subs[~zero]
            if mv.size:
                a, b = rt.pair_ptr[mv], rt.pair_ptr[mv + 1]
                pl = rt.link[_expand(a, b)]
                pf = np.repeat(np.arange(mv.size), b - a)
                ids = eng.add(fbytes[~zero], t_act[~zero], pf, pl)
                flow_sub[ids] = mv
            deliver(tids[pieces_left[tids] == 0])
            open_epochs()

    queue(np.flatnonzero(ndeps == 0))
    open_epochs()
    release()
    try:
        while (ev := eng.step()) is not None:
            t, done = ev
            if not done.size:
                continue
            subs = flow_sub[done]
            owner = rt.transfer[subs]
            np.maximum.at(t_deliver, owner, t + rt.hops[subs] * delta)
            np.subtract.at(pieces_left, owner, 1)
            u = unique(owner)
            deliver(u[pieces_left[u] == 0])
            open_epochs()
            release()
    except DeadlockError as e:
        raise SimulationError(str(e)) from None
    if np.isnan(t_release).any() or (t_deliver == -np.inf).any():
        raise SimulationError(f"{int(np.isnan(t_release).sum())} transfers were never released (dependency cycle?)")

    account.delivered = float(nb.sum())
    bounds = np.searchsorted(step_of, np.arange(len(w.steps) + 1))
    for i in range(len(w.steps)):
        a, b = bounds[i], bounds[i + 1]
        e = int(ep.of_step[i])
        opens = ep.first_step[e] == i and ep.reconfigures[e]
        if a == b:
            account.add_step(i, float(ep_start[e]), float(ep_start[e]), float(step_loads[i]), opens)
            continue
        start = float(ep_start[e]) if opens else float(t_release[a:b].min())
        account.add_step(i, start, float(t_deliver[a:b].max()), float(step_loads[i]), opens)
        account.add_transfers(i, t_release[a:b], t_deliver[a:b])
