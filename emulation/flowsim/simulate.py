"""Simulate one (Workload, Plan) on a fabric with the fluid model; returns a RunResult.

Cost model (``docs/mechanisms.md``, common cost model):

- every directed link (circuit, parallel circuit, cable, EPS port) has the fabric's port rate B
  (an EPS may set a rate of its own: :meth:`emulation.fabric.Fabric.link_gbps`);
- a transfer is split over its distinct channel paths exactly as the emulator splits it
  (:meth:`emulation.routing.Routes.subflow_arrays`); each piece is a flow that gets its
  max-min fair share of every link on its path, recomputed at every start and finish;
- a transfer released at t starts moving at ``t + alpha``; a piece that finishes its fluid at
  t_f is delivered at ``t_f + hops x delta``; the transfer is delivered with its last piece;
- a rank that arrives late (``arrivals_s[r]``, a straggler) releases no transfer before then.

Step semantics:

- ``round-synchronous`` (what the packet emulator executes): step i is released when step i-1
  is delivered; a step marked ``reconfigure`` first waits R (the fabric is dark while the
  circuits change) and its transfers then run on the new configuration.
- ``dependency-driven``: a transfer is released as soon as the chunks it sends have arrived
  (:func:`~emulation.workloads.dependencies.chunk_dependencies`) and the previous transfer
  between the same two ranks is delivered (one in-order connection per pair, as NCCL's), so
  steps overlap. The fabric
  changes as a whole: the reconfiguration before step i starts once every transfer of the
  earlier steps is delivered; only the circuits that change are dark for R, so transfers over
  unchanged circuits move during the dark window.

Deterministic: no randomness here (arrivals are drawn, seeded, by the caller).

Spec: ``docs/architecture.md`` (flow-level backend), ``docs/mechanisms.md``.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import numpy as np

from emulation.fabric import Configuration, Fabric, Link
from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.schedule import Plan
from emulation.results import RunResult, StepResult, TransferResult
from emulation.routing import Routes, RoutingError
from emulation.workloads.dependencies import chunk_dependencies
from emulation.workloads.model import Step, Workload

Semantics = Literal["round-synchronous", "dependency-driven"]
SEMANTICS = ("round-synchronous", "dependency-driven")


class SimulationError(RuntimeError):
    """The workload cannot be simulated (unroutable transfer, deadlock, bad inputs)."""


class LinkSpace:
    """The directed links of one fabric across every configuration a run uses, numbered once
    (a *global link id*, 0, 1, ... in order of first use), and the routes of each configuration.

    The fluid engine (:class:`~emulation.flowsim.engine.FluidEngine`) takes capacities per
    global id, so flows routed over different configurations (or different tenants' flows over
    one) share a link exactly when they cross the same physical link. Used by :func:`simulate`
    and :func:`emulation.flowsim.tenants.simulate_tenants`.

    Attributes: ``fabric``; ``ids`` (``{Link: global id}``); ``links`` (global id -> Link).
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.ids: dict[Link, int] = {}
        self.links: list[Link] = []
        self._cap: list[float] = []  # bytes/s of each global link
        self._routes: dict[Configuration, tuple[Routes, np.ndarray]] = {}

    def routes(self, config: Configuration) -> tuple[Routes, np.ndarray]:
        """``(routes, gid)``: the :class:`~emulation.routing.Routes` over ``config`` (computed
        once per configuration) and ``gid``, an int64 array of shape ``(len(routes.links),)``:
        the global id of each of its links. ``config`` is not checked against the fabric
        (:meth:`~emulation.fabric.Fabric.check_configuration` does that)."""
        got = self._routes.get(config)
        if got is None:
            r = Routes(self.fabric, config, self.fabric.ports_per_gpu)
            gid = np.array([self._id(l) for l in r.links], dtype=np.int64)
            got = self._routes[config] = (r, gid)
        return got

    def _id(self, link: Link) -> int:
        i = self.ids.get(link)
        if i is None:
            i = self.ids[link] = len(self.links)
            self.links.append(link)
            self._cap.append(self.fabric.link_gbps(link) * 1e9 / 8)
        return i

    def capacity(self, gid: np.ndarray) -> np.ndarray:
        """Capacity of the global links ``gid`` (an int array of any shape): a float array of
        the same shape, bytes/s (each link's Gbit/s x 1e9 / 8).

        :raises IndexError: an id not yet given out by :meth:`routes`."""
        return np.asarray(self._cap, dtype=float)[gid]


def _arrays(step: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return step.src, step.dst, step.bytes.astype(float)


class _Fingerprints:
    """Content keys of a run's step columns, for reusing a step's simulation. A column seen
    before as the same array (same buffer, strides and shape: steps share columns, and the
    workload keeps them alive during the run) reuses its key; a constant column is keyed by its
    value; any other by a digest of its contents."""

    def __init__(self):
        self._seen: dict[tuple, tuple] = {}

    def __call__(self, col: np.ndarray) -> tuple:
        where = (col.__array_interface__["data"][0], col.strides, col.shape, col.dtype.str)
        key = self._seen.get(where)
        if key is None:
            if col.size and col.min() == col.max():
                key = ("const", col.size, col.flat[0].item())
            else:
                key = ("digest", col.size, hashlib.blake2b(np.ascontiguousarray(col).data, digest_size=16).digest())
            self._seen[where] = key
        return key


def simulate(fabric: Fabric, workload: Workload, plan: Plan, *, alpha_s: float = 0.0,
             delta_s: float = 0.0, semantics: Semantics = "round-synchronous",
             arrivals_s: np.ndarray | list[float] | None = None, name: str | None = None,
             record_transfers: bool = True, reuse_steps: bool = True) -> RunResult:
    """Run ``workload`` under ``plan`` on ``fabric`` in virtual time.

    :param alpha_s: per-transfer latency alpha, seconds.
    :param delta_s: per-hop propagation delay delta, seconds.
    :param semantics: ``"round-synchronous"`` or ``"dependency-driven"`` (module doc).
    :param arrivals_s: (ranks,) time each rank arrives at the collective, seconds (default 0).
    :param record_transfers: keep one :class:`TransferResult` per transfer (large runs may not).
    :param reuse_steps: round-synchronous only: a step whose transfers (sources, destinations,
        bytes) and configuration equal an earlier step's, released when every rank has arrived,
        takes the earlier step's simulation shifted in time, instead of running the fluid engine
        again (exact: the fluid model is invariant under a shift of time). A Ring AllReduce of
        an evenly divided buffer simulates 2 of its 2(n-1) steps. False: every step is run.
    :returns: a :class:`RunResult` with ``backend="flow"``; times in seconds, bytes real.
    :raises SimulationError: ranks differ from the fabric's GPUs, the plan does not match the
        workload, a transfer is unroutable, or the flows deadlock.
    """
    n = workload.ranks
    if n != fabric.gpus:
        raise SimulationError(f"workload has {n} ranks, fabric {fabric.gpus} GPUs")
    if len(plan.steps) != len(workload.steps):
        raise SimulationError(f"plan has {len(plan.steps)} steps, workload {len(workload.steps)}")
    if semantics not in SEMANTICS:
        raise SimulationError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    arr = np.zeros(n) if arrivals_s is None else np.asarray(arrivals_s, dtype=float)
    if arr.shape != (n,) or (arr < 0).any():
        raise SimulationError(f"arrivals_s must be {n} non-negative times")
    sim = _Sim(fabric, workload, plan, alpha_s, delta_s, arr, record_transfers, reuse_steps)
    try:
        if semantics == "round-synchronous":
            sim.round_synchronous()
        else:
            sim.dependency_driven()
    except DeadlockError as e:
        raise SimulationError(str(e)) from None
    return sim.result(name or workload.algorithm, semantics)


class _Sim:
    def __init__(self, fabric, workload, plan, alpha, delta, arrivals, record, reuse=True):
        self.fabric, self.workload, self.plan = fabric, workload, plan
        self.alpha, self.delta, self.arrivals, self.record = alpha, delta, arrivals, record
        self.reuse = reuse
        self.cap = fabric.port_bytes_per_s
        self.space = LinkSpace(fabric)
        self.steps: list[StepResult] = []
        self.transfers: list[TransferResult] = []
        self.delivered = 0.0
        self.link_bytes = np.zeros(0)

    # ---- shared ----------------------------------------------------------------------------
    def _account(self, gid: np.ndarray, sf, fbytes: np.ndarray) -> float:
        """Add a step's bytes to the per-link counters; the busiest link's bytes."""
        if not sf.pair_link.size:
            return 0.0
        return self._add_loads(sf.link_loads(fbytes, len(self.space.links), gid))

    def _route(self, config: Configuration, src: np.ndarray, dst: np.ndarray):
        routes, gid = self.space.routes(config)
        try:
            return routes.subflow_arrays(src, dst), gid
        except RoutingError as e:
            raise SimulationError(str(e)) from None

    # ---- round-synchronous -----------------------------------------------------------------
    def round_synchronous(self) -> None:
        reconfiguration_delay_s = self.plan.reconfiguration_delay_s
        last_arrival = float(self.arrivals.max()) if self.arrivals.size else 0.0
        fingerprint = _Fingerprints()
        routed: dict[tuple, tuple] = {}  # (config, src key, dst key) -> (subflows, global link ids)
        done: dict[tuple, tuple] = {}  # + bytes key -> (delivery - release per transfer, link loads)
        prev_end = 0.0
        for i, (step, sp) in enumerate(zip(self.workload.steps, self.plan.steps)):
            start = prev_end
            reconf = sp.action == "reconfigure"
            release = start + (reconfiguration_delay_s if reconf else 0.0)
            rec = StepResult.of(i, step.phase, start, release, sp.action)
            if reconf:
                rec.reconfiguration_delay_s = rec.dark_window_measured_s = reconfiguration_delay_s
            if len(step):
                src, dst, nb = step.src, step.dst, step.bytes
                rkey = (sp.configuration, fingerprint(src), fingerprint(dst))
                if rkey not in routed:
                    routed[rkey] = self._route(sp.configuration, src, dst)
                sf, gid = routed[rkey]
                key = rkey + (fingerprint(nb),)
                shift = self.reuse and release >= last_arrival
                if shift and key in done:
                    offset, loads = done[key]
                    t_rel = np.full(src.size, release)
                    t_end = release + offset
                else:
                    t_rel = np.maximum(release, self.arrivals[src])
                    # a shiftable step is simulated from time 0 and shifted to its release
                    t_end, loads = self._run_step(sf, gid, t_rel - release if shift else t_rel,
                                                  0.0 if shift else release, nb.astype(float))
                    if shift:
                        done[key] = (t_end, loads)
                        t_end = release + t_end
                rec.end_s = float(t_end.max())
                rec.max_link_bytes = self._add_loads(loads)
                self.delivered += float(nb.sum())
                if self.record:
                    self.transfers.extend(
                        TransferResult.of(i, t.src, t.dst, t.bytes, float(a), float(b))
                        for t, a, b in zip(step.transfers, t_rel, t_end))
            self.steps.append(rec)
            prev_end = rec.end_s

    def _run_step(self, sf, gid: np.ndarray, t_rel: np.ndarray, now: float,
                  nb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step's transfers (released at ``t_rel``, s) through the fluid engine started at
        ``now``: (delivery time of every transfer, bytes of every global link)."""
        fbytes = sf.flow_bytes(nb)
        fin = t_rel[sf.transfer] + self.alpha  # zero-byte pieces finish when they start
        moving = np.flatnonzero(fbytes > 0)
        if moving.size:
            eng = FluidEngine(self.space.capacity(gid), now=now)
            sel = np.isin(sf.pair_flow, moving) if moving.size < fbytes.size else slice(None)
            local = np.full(fbytes.size, -1, dtype=np.int64)
            local[moving] = np.arange(moving.size)
            ids = eng.add(fbytes[moving], fin[moving], local[sf.pair_flow[sel]], sf.pair_link[sel])
            while (ev := eng.step()) is not None:
                t, finished = ev
                fin[moving[finished - ids[0]]] = t
        deliver = fin + sf.hops * self.delta
        first = np.flatnonzero(np.r_[True, sf.transfer[1:] != sf.transfer[:-1]])
        loads = sf.link_loads(fbytes, len(self.space.links), gid) if sf.pair_link.size else np.zeros(0)
        return np.maximum.reduceat(deliver, first), loads

    def _add_loads(self, loads: np.ndarray) -> float:
        """Add a step's bytes per global link to the run's counters; the busiest link's bytes."""
        if not loads.size:
            return 0.0
        if loads.size > self.link_bytes.size:
            self.link_bytes = np.concatenate([self.link_bytes, np.zeros(loads.size - self.link_bytes.size)])
        self.link_bytes[:loads.size] += loads
        return float(loads.max())

    # ---- dependency-driven -----------------------------------------------------------------
    def dependency_driven(self) -> None:
        w, plan = self.workload, self.plan
        reconfiguration_delay_s = plan.reconfiguration_delay_s
        deps = chunk_dependencies(w)
        total = w.transfer_count
        # One connection per (src, dst) pair, in order: a transfer also waits for the previous
        # transfer on its connection (else a late rank would start all its ready sends at once
        # and share its port among them, delaying the one on the critical path).
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
                s, d, b = _arrays(st)
                src[k:k + s.size], dst[k:k + s.size], nb[k:k + s.size] = s, d, b
                step_of[k:k + s.size] = i
                k += s.size
        # Epochs: maximal runs of steps on one configuration, each opened by a reconfiguration.
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
        for c in configs:  # fix the global link ids before the engine is sized
            self.space.routes(c)
        prev_links = [set(self.space.routes(plan.initial)[1].tolist())] + [
            set(self.space.routes(c)[1].tolist()) for c in configs[:-1]]
        eng = FluidEngine(self.space.capacity(np.arange(len(self.space.links))))

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
        latest = [0.0]  # latest delivery so far
        cur = [-1]
        n_links = len(self.space.links)
        step_keys: list[np.ndarray] = []
        step_vals: list[np.ndarray] = []

        def deliver(tids: list[int], when: np.ndarray) -> None:
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
                # After the earlier transfers, and after the previous dark window has ended.
                t0 = max(latest[0], ep_start[e - 1] + (reconfiguration_delay_s if reconf[e - 1] else 0.0)) if e else 0.0
                ep_start[e] = t0
                if reconf[e] and reconfiguration_delay_s > 0:
                    _, gid = self.space.routes(configs[e])
                    dark = np.array(sorted(set(gid.tolist()) - prev_links[e]), dtype=np.int64)
                    if dark.size:
                        eng.set_capacity(dark, 0.0, t0)
                        eng.set_capacity(dark, self.cap, t0 + reconfiguration_delay_s)  # circuits: the port rate
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
                    if sf.pair_link.size:  # bytes per (step, link), reduced at the end
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

    # ---- result ----------------------------------------------------------------------------
    def result(self, name: str, semantics: str) -> RunResult:
        w = self.workload
        links = [[l.u, l.up, l.v, l.vp, float(b)] for l, b in zip(self.space.links, self.link_bytes) if b > 0]
        return RunResult(
            name=name, collective=w.collective, algorithm=w.algorithm, planner=self.plan.planner,
            ranks=w.ranks, bytes=w.bytes, backend="flow",
            time_s=max((s.end_s for s in self.steps), default=0.0), steps=self.steps,
            transfers=self.transfers, bytes_sent=w.bytes_sent, bytes_delivered=round(self.delivered),
            semantics=semantics, transfers_omitted=0 if self.record else w.transfer_count,
            link_bytes=links,
        )
