"""The dependency-driven flow engine as it was before it became columnar: a reference that the
columnar engine (:mod:`emulation.flowsim.dependency`) is tested against (same times to 1e-9).

It walks Python objects (one list of dependencies per transfer, one call per delivery) and runs
the fluid engine and the max-min allocation of that time (copied below); it is kept here,
outside the package, only for that comparison. Semantics: ``docs/flow-backend.md``.
"""

from __future__ import annotations

import heapq

import numpy as np

from emulation.fabric import Configuration
from emulation.flowsim.engine import DeadlockError
from emulation.flowsim.simulate import LinkSpace, SimulationError
from emulation.results import RunResult, StepResult, TransferResult
from emulation.routing import RoutingError


def reference_chunk_dependencies(workload) -> list[list[int]]:
    """For every transfer (step-major ids), the sorted ids of the earlier-step transfers that
    delivered any of its chunks to its source (read after write)."""
    writers: dict[tuple[int, int], list[int]] = {}
    deps: list[list[int]] = []
    tid = 0
    for step in workload.steps:
        first = tid
        for t in step.transfers:
            found: set[int] = set()
            for c in range(t.chunk, t.chunk + t.nchunks):
                w = writers.get((t.src, c))
                if w:
                    found.update(w)
            deps.append(sorted(found))
            tid += 1
        for k, t in enumerate(step.transfers):
            for c in range(t.chunk, t.chunk + t.nchunks):
                writers.setdefault((t.dst, c), []).append(first + k)
    return deps


def reference_dependency_driven(fabric, workload, plan, *, alpha_s=0.0, delta_s=0.0, arrivals_s=None,
                                record_transfers=True, name=None) -> RunResult:
    """Simulate ``workload`` under ``plan`` with dependency-driven semantics, as the engine did
    before it became columnar. :raises SimulationError: as :func:`emulation.flowsim.simulate`."""
    n = workload.ranks
    arr = np.zeros(n) if arrivals_s is None else np.asarray(arrivals_s, dtype=float)
    sim = _Reference(fabric, workload, plan, alpha_s, delta_s, arr, record_transfers)
    try:
        sim.run()
    except DeadlockError as e:
        raise SimulationError(str(e)) from None
    return sim.result(name or workload.algorithm)


class _Reference:
    def __init__(self, fabric, workload, plan, alpha, delta, arrivals, record):
        self.fabric, self.workload, self.plan = fabric, workload, plan
        self.alpha, self.delta, self.arrivals, self.record = alpha, delta, arrivals, record
        self.cap = fabric.port_bytes_per_s
        self.space = LinkSpace(fabric)
        self.steps: list[StepResult] = []
        self.transfers: list[TransferResult] = []
        self.delivered = 0.0
        self.link_bytes = np.zeros(0)

    def _account(self, gid, sf, fbytes) -> None:
        if not sf.pair_link.size:
            return
        loads = sf.link_loads(fbytes, len(self.space.links), gid)
        if loads.size > self.link_bytes.size:
            self.link_bytes = np.concatenate([self.link_bytes, np.zeros(loads.size - self.link_bytes.size)])
        self.link_bytes[:loads.size] += loads

    def _route(self, config: Configuration, src, dst):
        routes, gid = self.space.routes(config)
        try:
            return routes.subflow_arrays(src, dst), gid
        except RoutingError as e:
            raise SimulationError(str(e)) from None

    def run(self) -> None:
        w, plan = self.workload, self.plan
        reconfiguration_delay_s = plan.reconfiguration_delay_s
        deps = reference_chunk_dependencies(w)
        total = w.transfer_count
        last: dict[tuple[int, int], int] = {}
        tid = 0
        for st in w.steps:
            for t in st.transfers:
                prev = last.get((t.src, t.dst))
                if prev is not None and (not deps[tid] or deps[tid][-1] != prev):
                    deps[tid] = sorted(set(deps[tid]) | {prev})
                last[(t.src, t.dst)] = tid
                tid += 1
        src = np.empty(total, dtype=np.int64)
        dst = np.empty(total, dtype=np.int64)
        nb = np.empty(total)
        step_of = np.empty(total, dtype=np.int64)
        k = 0
        for i, st in enumerate(w.steps):
            if len(st):
                s, d, b = st.src, st.dst, st.bytes.astype(float)
                src[k:k + s.size], dst[k:k + s.size], nb[k:k + s.size] = s, d, b
                step_of[k:k + s.size] = i
                k += s.size
        epoch_of_step = np.empty(len(w.steps), dtype=np.int64)
        configs: list[Configuration] = []
        reconf: list[bool] = []
        first_step: list[int] = []
        for i, sp in enumerate(plan.steps):
            if i == 0 or sp.action == "reconfigure":
                configs.append(sp.configuration)
                reconf.append(sp.action == "reconfigure")
                first_step.append(i)
            epoch_of_step[i] = len(configs) - 1
        epoch = epoch_of_step[step_of] if total else np.zeros(0, dtype=np.int64)
        n_ep = len(configs)
        for c in configs:
            self.space.routes(c)
        prev_links = [set(self.space.routes(plan.initial)[1].tolist())] + [
            set(self.space.routes(c)[1].tolist()) for c in configs[:-1]]
        eng = ReferenceFluidEngine(self.space.capacity(np.arange(len(self.space.links))))

        ndeps = np.array([len(d) for d in deps], dtype=np.int64)
        dependents: list[list[int]] = [[] for _ in range(total)]
        for t, ds in enumerate(deps):
            for d in ds:
                dependents[d].append(t)
        ready = self.arrivals[src].copy()
        t_release = np.full(total, np.nan)
        t_deliver = np.full(total, -np.inf)
        pieces_left = np.zeros(total, dtype=np.int64)
        left_in_epoch = np.bincount(epoch, minlength=n_ep)
        ep_start = np.full(n_ep, np.nan)
        held: list[list[int]] = [[] for _ in range(n_ep)]
        todo: list[int] = []
        cap_flows = total * self.fabric.ports_per_gpu
        flow_tid = np.empty(cap_flows, dtype=np.int64)
        flow_hops = np.empty(cap_flows, dtype=np.int64)
        latest = [0.0]
        cur = [-1]
        n_links = len(self.space.links)
        step_keys: list[np.ndarray] = []
        step_vals: list[np.ndarray] = []

        def deliver(tids, when) -> None:
            for t, d in zip(tids, when):
                t_deliver[t] = d
                latest[0] = max(latest[0], d)
                left_in_epoch[epoch[t]] -= 1
                for x in dependents[t]:
                    ndeps[x] -= 1
                    if d > ready[x]:
                        ready[x] = d
                    if ndeps[x] == 0:
                        (todo if epoch[x] <= cur[0] else held[epoch[x]]).append(x)

        def open_epochs() -> None:
            while cur[0] + 1 < n_ep and (cur[0] < 0 or left_in_epoch[:cur[0] + 1].sum() == 0):
                e = cur[0] = cur[0] + 1
                t0 = max(latest[0], ep_start[e - 1] + (reconfiguration_delay_s if reconf[e - 1] else 0.0)) if e else 0.0
                ep_start[e] = t0
                if reconf[e] and reconfiguration_delay_s > 0:
                    _, gid = self.space.routes(configs[e])
                    dark = np.array(sorted(set(gid.tolist()) - prev_links[e]), dtype=np.int64)
                    if dark.size:
                        eng.set_capacity(dark, 0.0, t0)
                        eng.set_capacity(dark, self.cap, t0 + reconfiguration_delay_s)
                todo.extend(held[e])
                held[e] = []

        def release() -> None:
            while todo:
                batch = np.array(sorted(set(todo)), dtype=np.int64)
                todo.clear()
                for e in np.unique(epoch[batch]):
                    tids = batch[epoch[batch] == e]
                    t_rel = np.maximum(ready[tids], ep_start[e])
                    t_release[tids] = t_rel
                    sf, gid = self._route(configs[e], src[tids], dst[tids])
                    fbytes = sf.flow_bytes(nb[tids])
                    self._account(gid, sf, fbytes)
                    if sf.pair_link.size:
                        key = step_of[tids][sf.transfer][sf.pair_flow] * n_links + gid[sf.pair_link]
                        ukey, inv = np.unique(key, return_inverse=True)
                        step_keys.append(ukey)
                        step_vals.append(np.bincount(inv, weights=fbytes[sf.pair_flow]))
                    t_act = t_rel[sf.transfer] + self.alpha
                    zero = fbytes <= 0
                    pieces_left[tids] = np.bincount(sf.transfer[~zero], minlength=tids.size)
                    if zero.any():
                        np.maximum.at(t_deliver, tids[sf.transfer[zero]], t_act[zero] + sf.hops[zero] * self.delta)
                    mv = np.flatnonzero(~zero)
                    if mv.size:
                        local = np.full(fbytes.size, -1, dtype=np.int64)
                        local[mv] = np.arange(mv.size)
                        sel = ~zero[sf.pair_flow]
                        ids = eng.add(fbytes[mv], t_act[mv], local[sf.pair_flow[sel]], gid[sf.pair_link[sel]])
                        flow_tid[ids] = tids[sf.transfer[mv]]
                        flow_hops[ids] = sf.hops[mv]
                    instant = [int(t) for t in tids if pieces_left[t] == 0]
                    if instant:
                        deliver(instant, t_deliver[instant])
                open_epochs()

        for t in range(total):
            if ndeps[t] == 0:
                held[epoch[t]].append(t)
        open_epochs()
        release()
        while (ev := eng.step()) is not None:
            t, done = ev
            if not done.size:
                continue
            tids = flow_tid[done]
            np.maximum.at(t_deliver, tids, t + flow_hops[done] * self.delta)
            np.subtract.at(pieces_left, tids, 1)
            finished = [int(x) for x in np.unique(tids) if pieces_left[x] == 0]
            deliver(finished, t_deliver[finished])
            open_epochs()
            release()
        if np.isnan(t_release).any() or (t_deliver == -np.inf).any():
            stuck = int(np.isnan(t_release).sum())
            raise SimulationError(f"{stuck} transfers were never released (dependency cycle?)")

        self.delivered = float(nb.sum())
        step_loads = np.zeros(len(w.steps))
        if step_keys:
            keys = np.concatenate(step_keys)
            ukey, inv = np.unique(keys, return_inverse=True)
            per = np.bincount(inv, weights=np.concatenate(step_vals))
            np.maximum.at(step_loads, ukey // n_links, per)
        for i, st in enumerate(w.steps):
            sel = step_of == i
            e = epoch_of_step[i]
            opens = first_step[e] == i and reconf[e]
            start = float(ep_start[e]) if opens else float(t_release[sel].min()) if sel.any() else float(ep_start[e])
            end = float(t_deliver[sel].max()) if sel.any() else start
            rec = StepResult.of(i, st.phase, start, end, plan.steps[i].action, max_link_bytes=float(step_loads[i]))
            if opens:
                rec.reconfiguration_delay_s = rec.dark_window_measured_s = reconfiguration_delay_s
            self.steps.append(rec)
        if self.record:
            tid = 0
            for i, st in enumerate(w.steps):
                for t in st.transfers:
                    self.transfers.append(TransferResult.of(i, t.src, t.dst, t.bytes, float(t_release[tid]),
                                                         float(t_deliver[tid])))
                    tid += 1

    def result(self, name: str) -> RunResult:
        w = self.workload
        links = [[l.u, l.up, l.v, l.vp, float(b)] for l, b in zip(self.space.links, self.link_bytes) if b > 0]
        return RunResult(
            name=name, collective=w.collective, algorithm=w.algorithm, planner=self.plan.planner,
            ranks=w.ranks, bytes=w.bytes, backend="flow",
            time_s=max((s.end_s for s in self.steps), default=0.0), steps=self.steps,
            transfers=self.transfers, bytes_sent=w.bytes_sent, bytes_delivered=round(self.delivered),
            semantics="dependency-driven", transfers_omitted=0 if self.record else w.transfer_count,
            link_bytes=links,
        )


# ---- the fluid engine and its max-min allocation, as they were ----------------------------------
#: Relative tolerance under which a link counts as full.
FULL = 1e-12


def reference_max_min_rates(pair_flow: np.ndarray, pair_link: np.ndarray, capacity: np.ndarray,
                  flows: int) -> np.ndarray:
    """Max-min fair rate of every flow.

    :param pair_flow: (N,) flow index (0..flows-1) of each (flow, link) pair.
    :param pair_link: (N,) link index of each pair (into ``capacity``).
    :param capacity: (L,) link capacities (any unit, e.g. bytes/s); 0 for a dark link.
    :param flows: number of flows F; every flow must cross at least one link.
    :returns: (F,) rates in the unit of ``capacity``. A flow crossing a dark link gets 0.
    :raises ValueError: a flow crosses no link (its rate would be unbounded).
    """
    rate = np.zeros(flows)
    if flows == 0:
        return rate
    if np.bincount(pair_flow, minlength=flows).min() == 0:
        raise ValueError("every flow must cross at least one link")
    links = capacity.size
    left = capacity.astype(float).copy()
    frozen = np.zeros(flows, dtype=bool)
    pf, pl = pair_flow, pair_link
    while pf.size:
        count = np.bincount(pl, minlength=links)
        used = count > 0
        share = np.full(links, np.inf)
        share[used] = left[used] / count[used]
        s = share.min()
        rate[~frozen] += s
        left[used] -= s * count[used]
        full = used & (left <= FULL * capacity + 1e-300)
        full |= used & (share <= s * (1 + FULL))
        newly = np.zeros(flows, dtype=bool)
        newly[pf[full[pl]]] = True
        frozen |= newly
        keep = ~frozen[pf]
        pf, pl = pf[keep], pl[keep]
    return rate


#: Relative tolerance under which flows finishing together are finished in one event.
SAME_TIME = 1e-12
#: Bytes below which a flow counts as delivered: rounding residue when a capacity change (a
#: slot's end) stops a flow that its slot carried exactly.
RESIDUE_BYTES = 1e-6


class ReferenceFluidEngine:
    """Flows over directed links; times in seconds, sizes in bytes, capacities in bytes/s.

    :param capacity: (L,) capacity of every link, bytes/s.
    :param now: start time, seconds.
    """

    def __init__(self, capacity: np.ndarray, now: float = 0.0):
        self.capacity = np.asarray(capacity, dtype=float).copy()
        self.now = float(now)
        self._next_id = 0
        self._ids = np.zeros(0, dtype=np.int64)  # global id of each live flow
        self._left = np.zeros(0)  # bytes left
        self._t_act = np.zeros(0)  # activation time
        self._pf = np.zeros(0, dtype=np.int64)  # pairs: live-flow position
        self._pl = np.zeros(0, dtype=np.int64)  # pairs: link
        self._rate = np.zeros(0)
        self._dirty = True
        self._changes: list[tuple[float, int, np.ndarray, float]] = []  # heap (t, seq, links, cap)
        self._seq = 0

    def add(self, nbytes: np.ndarray, t_active: np.ndarray, pair_flow: np.ndarray,
            pair_link: np.ndarray) -> np.ndarray:
        """Add F flows.

        :param nbytes: (F,) bytes of each flow (> 0).
        :param t_active: (F,) when each starts moving (>= now), seconds.
        :param pair_flow: (N,) flow (0..F-1) of each (flow, link) pair; every flow has >= 1.
        :param pair_link: (N,) link of each pair.
        :returns: (F,) flow ids, increasing, unique over the engine's life.
        :raises ValueError: a flow starts in the past or has no bytes.
        """
        nbytes = np.asarray(nbytes, dtype=float)
        t_active = np.asarray(t_active, dtype=float)
        if nbytes.size and (nbytes.min() <= 0 or t_active.min() < self.now):
            raise ValueError("flows need positive bytes and an activation time not in the past")
        ids = np.arange(self._next_id, self._next_id + nbytes.size)
        self._next_id += nbytes.size
        base = self._ids.size
        self._ids = np.concatenate([self._ids, ids])
        self._left = np.concatenate([self._left, nbytes])
        self._t_act = np.concatenate([self._t_act, t_active])
        self._pf = np.concatenate([self._pf, np.asarray(pair_flow, dtype=np.int64) + base])
        self._pl = np.concatenate([self._pl, np.asarray(pair_link, dtype=np.int64)])
        self._rate = np.concatenate([self._rate, np.zeros(nbytes.size)])
        self._dirty = True
        return ids

    def set_capacity(self, links: np.ndarray, capacity: float, at: float) -> None:
        """Set the capacity of ``links`` to ``capacity`` bytes/s at time ``at`` (>= now)."""
        if at < self.now:
            raise ValueError(f"capacity change at {at} s is in the past (now {self.now} s)")
        heapq.heappush(self._changes, (float(at), self._seq, np.asarray(links, dtype=np.int64), float(capacity)))
        self._seq += 1

    def _apply_changes(self) -> None:
        while self._changes and self._changes[0][0] <= self.now:
            _, _, links, cap = heapq.heappop(self._changes)
            self.capacity[links] = cap
            self._dirty = True

    def _rates(self, active: np.ndarray) -> None:
        pos = np.flatnonzero(active)
        local = np.full(self._ids.size, -1, dtype=np.int64)
        local[pos] = np.arange(pos.size)
        sel = active[self._pf]
        self._rate = np.zeros(self._ids.size)
        self._rate[pos] = reference_max_min_rates(local[self._pf[sel]], self._pl[sel], self.capacity, pos.size)
        self._dirty = False

    def step(self) -> tuple[float, np.ndarray] | None:
        """Advance to the next event.

        :returns: ``(time, ids of the flows that finished then)`` (possibly none, for an
            activation or a capacity change), or None when no flow is live.
        :raises DeadlockError: flows are live but can never finish.
        """
        self._apply_changes()
        if not self._ids.size:
            return None
        active = self._t_act <= self.now
        if self._dirty:
            self._rates(active)
        moving = active & (self._rate > 0)
        t_done = t_next = np.inf
        ttf = None
        if moving.any():
            ttf = np.full(self._ids.size, np.inf)
            ttf[moving] = self._left[moving] / self._rate[moving]
            ttf_min = float(ttf.min())
            t_done = t_next = self.now + ttf_min
        waiting = ~active
        if waiting.any():
            t_next = min(t_next, float(self._t_act[waiting].min()))
        if self._changes:
            t_next = min(t_next, self._changes[0][0])
        if not np.isfinite(t_next):
            raise DeadlockError(f"{self._ids.size} flows are stuck at t = {self.now} s (a dark link for ever?)")
        dt = t_next - self.now
        done = np.zeros(self._ids.size, dtype=bool)
        if ttf is not None:
            # Decide completions from the times to finish, not from dt: at large t, now + ttf
            # can round back to now, and a residue of bytes must not stall the clock.
            done = ttf <= (ttf_min if t_next == t_done else dt) * (1 + SAME_TIME)
            self._left -= self._rate * dt
            done |= moving & (self._left <= RESIDUE_BYTES)
            self._left[done] = 0.0
        if (waiting & (self._t_act <= t_next)).any():
            self._dirty = True
        self.now = t_next
        finished = self._ids[done]
        if done.any():
            self._remove(done)
        self._apply_changes()
        return self.now, finished

    def _remove(self, done: np.ndarray) -> None:
        keep = ~done
        newpos = np.cumsum(keep) - 1
        pkeep = keep[self._pf]
        self._pf = newpos[self._pf[pkeep]]
        self._pl = self._pl[pkeep]
        self._ids, self._left, self._t_act = self._ids[keep], self._left[keep], self._t_act[keep]
        self._rate = self._rate[keep]
        self._dirty = True


# ---- the recorded times ----------------------------------------------------------------------
#: Where :func:`write_recorded` keeps the reference's times of the benchmark's cases.
RECORDED = __import__("pathlib").Path(__file__).resolve().parent / "data" / "dependency_driven_reference.npz"


def recorded_case(case: str, gpus: int, nbytes: int = 1 << 30) -> dict[str, np.ndarray]:
    """The reference's result of one benchmark case (:mod:`emulation.flowsim.cases`),
    dependency-driven: ``{"time", "start", "end", "max_link_bytes"}`` (seconds, bytes; one entry
    per step) and ``"link_bytes"`` (bytes of every directed link, in the fabric's link order)."""
    from emulation.flowsim.cases import ALPHA_S, case_arrivals, case_inputs, case_plan

    f, w = case_inputs(case, gpus, nbytes)
    p = case_plan(case, f, w)
    r = reference_dependency_driven(f, p.workload, p, alpha_s=ALPHA_S, arrivals_s=case_arrivals(case, gpus),
                                    record_transfers=False)
    return {"time": np.array([r.time_s]), "start": np.array([s.start_s for s in r.steps]),
            "end": np.array([s.end_s for s in r.steps]), "max_link_bytes": np.array([s.max_link_bytes for s in r.steps]),
            "link_bytes": np.array([l[4] for l in r.link_bytes])}


def write_recorded(cases: list[str], sizes: list[int]) -> None:
    """Run the reference on ``cases`` x ``sizes`` and add their results to :data:`RECORDED`
    (keys ``case/gpus/field``), keeping what it holds for other cases."""
    import time

    old = dict(np.load(RECORDED)) if RECORDED.exists() else {}
    for n in sizes:
        for c in cases:
            t0 = time.perf_counter()
            for k, v in recorded_case(c, n).items():
                old[f"{c}/{n}/{k}"] = v
            print(f"{c} at {n} GPUs: {time.perf_counter() - t0:.1f} s", flush=True)
            RECORDED.parent.mkdir(exist_ok=True)
            np.savez_compressed(RECORDED, **old)


def compare(sizes: list[int]) -> None:
    """Print the old-versus-new table of the benchmark's cases at ``sizes`` GPUs: the recorded
    reference's time against the columnar engine's, the largest difference of a step's start or
    end (relative to the run's time), whether every step's busiest link and every link's bytes
    are equal, the engine the run took and its wall time here."""
    import time

    from emulation.flowsim import simulate
    from emulation.flowsim.account import RunAccount
    from emulation.flowsim.cases import ALPHA_S, CASES, case_arrivals, case_inputs, case_plan
    from emulation.flowsim.dependency import WavesOverlap, run_waves
    from emulation.flowsim.links import LinkSpace
    from emulation.flowsim.steps import StepSimulator

    rec = dict(np.load(RECORDED)) if RECORDED.exists() else {}
    print("| case | GPUs | transfers | old time (s) | new time (s) | max rel. diff (step starts, ends) | "
          "busiest links equal | link bytes equal | engine | new wall (s) |")
    print("|---|--:|--:|--:|--:|--:|:-:|:-:|---|--:|")
    for n in sizes:
        for c in CASES:
            f, w = case_inputs(c, n, 1 << 30)
            p = case_plan(c, f, w)
            arr = case_arrivals(c, n)
            t0 = time.perf_counter()
            r = simulate(f, p.workload, p, alpha_s=ALPHA_S, semantics="dependency-driven", arrivals_s=arr,
                         record_transfers=False)
            wall = time.perf_counter() - t0
            space = LinkSpace(f)
            try:
                run_waves(RunAccount(space, p.workload, p, False), StepSimulator(space, ALPHA_S, 0.0),
                          np.zeros(n) if arr is None else arr, 1 << 34)
                engine = "waves"
            except WavesOverlap as e:
                engine = f"event-driven ({e})"
            key = f"{c}/{n}/"
            head = f"| {c} | {n:,} | {p.workload.transfer_count:,} |"
            if key + "time" not in rec:
                print(f"{head} not recorded | {r.time_s:.9f} | | | | {engine} | {wall:.2f} |", flush=True)
                continue
            start = np.array([s.start_s for s in r.steps])
            end = np.array([s.end_s for s in r.steps])
            busiest = np.array([s.max_link_bytes for s in r.steps])
            links = np.array([l[4] for l in r.link_bytes])
            old = rec[key + "time"][0]
            diff = max(np.abs(start - rec[key + "start"]).max(), np.abs(end - rec[key + "end"]).max()) / old
            same_links = links.shape == rec[key + "link_bytes"].shape and (links == rec[key + "link_bytes"]).all()
            print(f"{head} {old:.9f} | {r.time_s:.9f} | {diff:.1e} | "
                  f"{'yes' if (busiest == rec[key + 'max_link_bytes']).all() else 'NO'} | "
                  f"{'yes' if same_links else 'NO'} | {engine} | {wall:.2f} |", flush=True)


if __name__ == "__main__":  # python tests/flowsim_reference.py [CASE...] [--gpus N...] [--compare]
    import argparse
    import sys

    sys.path.insert(0, str(RECORDED.parents[2]))
    ap = argparse.ArgumentParser(description="record the reference engine's times of the benchmark's cases, "
                                             "or compare the columnar engine with them")
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--gpus", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--compare", action="store_true", help="print the old-versus-new table instead")
    a = ap.parse_args()
    if a.compare:
        compare(a.gpus)
    else:
        write_recorded(a.cases, a.gpus)
