"""Parallel OCSes in the flow backend: each OCS follows its own slot sequence (Spectra, arXiv
2603.07373).

Spec: ``docs/papers/spectra.md``. The schedule is a :class:`~emulation.schedule.ParallelSchedule`:
OCS k runs on its own clock from t = 0, dark for R before every configuration, holding it for its
slot, and dark after its last slot; it never waits for traffic. Every directed GPU pair (i, j)
is a link whose capacity at time t is B times the number of OCSes whose current configuration
holds the circuit (i, j) (a duplex circuit holds both directions), 0 when none does: a transfer
moves at B on every OCS that joins its two GPUs. Concurrent transfers of one pair share it max-min
fairly (:class:`~emulation.flowsim.engine.FluidEngine`). Steps run round-synchronously (step i+1
is released when step i is delivered; the OCS clocks keep running); a transfer starts moving
``alpha_s`` after its release.
"""

from __future__ import annotations

import numpy as np

from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.flowsim.links import SimulationError, pair_counts
from emulation.results import RunResult, Slots, StepResult, TransferResult
from emulation.schedule import ParallelSchedule
from emulation.units import bytes_per_s
from emulation.workloads.model import Workload


def circuit_multiplicity(schedule: ParallelSchedule, n: int) -> list[tuple[float, np.ndarray]]:
    """The piecewise-constant circuit count of every directed pair: ``[(t, (n, n) counts from t
    on)]`` in time order, starting at t = 0 (all zero then unless a slot starts at 0).

    :raises SimulationError: a circuit that is not a pair of ``n`` GPUs.
    """
    deltas: dict[float, np.ndarray] = {0.0: np.zeros((n, n), dtype=np.int64)}
    for k, seq in enumerate(schedule.ocs):
        for t_on, t_off, i in schedule.windows(k):
            one = pair_counts(seq.configs[i], n, f"OCS {k} slot {i}")
            deltas.setdefault(t_on, np.zeros((n, n), dtype=np.int64))
            deltas.setdefault(t_off, np.zeros((n, n), dtype=np.int64))
            deltas[t_on] += one
            deltas[t_off] -= one
    out, now = [], np.zeros((n, n), dtype=np.int64)
    for t in sorted(deltas):
        now = now + deltas[t]
        out.append((t, now.copy()))
    return out


def simulate_parallel(workload: Workload, schedule: ParallelSchedule, port_gbps: float, *, alpha_s: float = 0.0,
                      name: str | None = None) -> RunResult:
    """Run ``workload`` on the parallel OCSes of ``schedule`` (module doc).

    :param port_gbps: B of every port, Gbit/s.
    :returns: the :class:`RunResult` (``planner`` = ``"parallel-ocs"``, ``time_s`` = when the last
        byte arrives) whose ``slots`` holds ``slot_utilisation`` (delivered bytes / bytes the up
        circuits could carry until the end), ``cycles`` (the end over the schedule's makespan),
        ``slots_per_turn`` (configurations over all OCSes) and ``reconfiguration_delay_s``.
    :raises SimulationError: a transfer's GPU pair gets too little circuit time to finish, or a
        circuit is not a pair of the workload's GPUs.
    """
    n = workload.ranks
    rate = bytes_per_s(port_gbps)
    timeline = circuit_multiplicity(schedule, n)
    connected = np.zeros((n, n), dtype=bool)
    for _, m in timeline:
        connected |= m > 0
    for st in workload.steps:
        for t in st.transfers:
            if t.bytes > 0 and not connected[t.src, t.dst]:
                raise SimulationError(f"GPUs {t.src} -> {t.dst} are never connected by the schedule")
    eng = FluidEngine(np.zeros(n * n))
    prev = np.zeros(n * n, dtype=np.int64)
    for t, m in timeline:
        flat = m.ravel()
        changed = np.flatnonzero(flat != prev)
        for value in np.unique(flat[changed]):
            eng.set_capacity(changed[flat[changed] == value], float(value) * rate, t)
        prev = flat
    steps: list[StepResult] = []
    transfers: list[TransferResult] = []
    start = 0.0
    for i, st in enumerate(workload.steps):
        ts = [t for t in st.transfers]
        live = [j for j, t in enumerate(ts) if t.bytes > 0]
        end_t = np.full(len(ts), start + alpha_s)
        pending = {}
        if live:
            ids = eng.add(np.array([float(ts[j].bytes) for j in live]), np.full(len(live), max(start + alpha_s, eng.now)),
                          np.arange(len(live)), np.array([ts[j].src * n + ts[j].dst for j in live]))
            pending = {int(f): j for f, j in zip(ids, live)}
        while pending:
            try:
                ev = eng.step()
            except DeadlockError:
                left = sorted({(ts[j].src, ts[j].dst) for j in pending.values()})
                raise SimulationError(f"the schedule ends before GPUs {left[0][0]} -> {left[0][1]} get their bytes "
                                      f"({len(left)} pair(s) short)") from None
            if ev is None:
                break
            t_now, done = ev
            for f in done:
                end_t[pending.pop(int(f))] = t_now
        end = float(end_t.max()) if len(end_t) else start
        steps.append(StepResult.of(i, st.phase, start, end, "slotted"))
        transfers += [TransferResult.of(i, t.src, t.dst, t.bytes, start, float(e)) for t, e in zip(ts, end_t)]
        start = end
    capacity = 0.0
    for (t0, m), (t1, _) in zip(timeline, timeline[1:] + [(max(start, timeline[-1][0]), None)]):
        capacity += float(m.sum()) * rate * max(0.0, min(t1, start) - t0)
    res = RunResult(name=name or workload.algorithm, collective=workload.collective, algorithm=workload.algorithm,
                    planner="parallel-ocs", ranks=n, bytes=workload.bytes, backend="flow", time_s=start, steps=steps,
                    transfers=transfers, bytes_sent=workload.bytes_sent, bytes_delivered=workload.bytes_sent)
    res.slots = Slots(slot_utilisation=float(workload.bytes_sent / capacity) if capacity else 0.0,
                      cycles=float(start / schedule.makespan_s) if schedule.makespan_s else 0.0,
                      method="parallel-ocs", slots_per_turn=schedule.reconfigurations,
                      reconfiguration_delay_s=schedule.reconfiguration_delay_s)
    return res
