"""Time-slotted circuit schedules (rotor, Birkhoff-von Neumann) in the flow backend.

Spec: ``docs/mechanisms.md`` (PipSwitch, arXiv 2501.18136: "a time-slotted OCS that cycles through the matchings
(slot length and R per slot)").

The OCS cycles autonomously through :class:`~emulation.schedule.SlotSchedule`'s configurations: a dark window of
R (``reconfiguration_delay_s``), then slot 0 for ``slots_s[0]``, a dark window, slot 1, ... and again from slot 0;
the clock starts at t = 0 and never waits for traffic. A transfer moves only while a circuit
joins its two GPUs, or, with two-hop forwarding (:class:`~emulation.schedule.RelayPlan`), as parts
relayed through an intermediate GPU that stores each part and forwards it in its own window to
the destination. Each directed GPU pair is a
link of capacity m x B while m parallel circuits lead from src to dst, 0 otherwise; a pair sends
its transfers (and relayed parts) one after another, as the agents' one connection per pair does,
and concurrent pairs share the engine's links max-min fairly (:class:`~emulation.flowsim.engine.FluidEngine`). Steps run
round-synchronously (step i+1 is released when step i is delivered; the rotor keeps turning);
a transfer starts moving ``alpha`` after its release. Hosts keep a guard band ``guard_s`` at
both ends of every slot (they start sending ``guard_s`` after the slot's planned start and stop
``guard_s`` before its end), as the packet backend's agents do to absorb the controller's timing
error (:mod:`emulation.emulator.slotted`).
"""

from __future__ import annotations

from collections import deque
import numpy as np

from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.flowsim.links import SimulationError, pair_counts
from emulation.results import RunResult, Slots, StepResult, TransferResult
from emulation.schedule import RelayPlan, SlotSchedule, transfer_parts
from emulation.units import bytes_per_s
from emulation.workloads.model import Workload

def simulate_slotted(workload: Workload, schedule: SlotSchedule, port_gbps: float, *, alpha_s: float = 0.0,
                     arrivals_s: list[float] | None = None, name: str | None = None,
                     relay: RelayPlan | None = None) -> RunResult:
    """Run ``workload`` on the rotor ``schedule`` (module doc).

    :param port_gbps: B per circuit, Gbit/s.
    :param relay: two-hop forwarding (:func:`emulation.planners.relay.two_hop`): a part relayed
        via GPU m crosses the src-m circuit, then, ``alpha_s`` after all of it reached m, the
        m-dst circuit; a transfer ends when its last part arrives. None: every byte goes direct.
    :returns: the :class:`RunResult` (``planner`` = ``"slotted"``) whose ``slots`` holds
        ``slot_utilisation`` (delivered bytes / bytes the up circuits could have carried until
        the end), ``cycles`` (rotor turns until the end) and ``relayed_bytes``.
    :raises SimulationError: a transfer's (or a hop's) GPU pair is never connected, or ranks are bad.
    """
    n = workload.ranks
    rate = bytes_per_s(port_gbps)
    mult = []
    connected = np.zeros((n, n), dtype=bool)
    for k, pairs in enumerate(schedule.configs):
        m = pair_counts(pairs, n, f"schedule slot {k}")
        mult.append(m)
        connected |= m > 0
    if relay is not None and len(relay.parts) != len(workload.steps):
        raise SimulationError("relay: the plan is for another workload (step count differs)")
    for i, st in enumerate(workload.steps):
        for j, t in enumerate(st.transfers):
            for via, b in transfer_parts(relay, i, j, t.bytes):
                hops = [(t.src, t.dst)] if via is None else [(t.src, via), (via, t.dst)]
                for a, c in hops:
                    if b > 0 and not connected[a, c]:
                        raise SimulationError(f"GPUs {a} and {c} are never connected by the schedule")
    arr = np.zeros(n) if arrivals_s is None else np.asarray(arrivals_s, dtype=float)
    eng = FluidEngine(np.zeros(n * n))
    horizon = [0.0]

    def schedule_until(t_end: float) -> None:
        for t_on, t_off, k in schedule.windows(t_end):
            if t_on < horizon[0]:
                continue
            on, off = t_on + schedule.guard_s, t_off - schedule.guard_s
            for value in np.unique(mult[k][mult[k] > 0]):
                links = np.flatnonzero(mult[k].ravel() == value)
                eng.set_capacity(links, value * rate, max(on, eng.now))
                eng.set_capacity(links, 0.0, max(off, eng.now))
        horizon[0] = t_end

    steps: list[StepResult] = []
    transfers: list[TransferResult] = []
    start = 0.0
    for i, st in enumerate(workload.steps):
        rel = np.array([max(start, arr[t.src]) for t in st.transfers])
        end_t = rel + alpha_s
        # Each directed pair sends its hops one after another, as an agent's connection does:
        # the direct parts and first hops in transfer order, a second hop once its first arrived.
        queues: dict[int, deque] = {}
        pending: dict[int, tuple[int, int, int, int]] = {}

        def send(link: int, item: tuple[int, int, int, float]) -> None:
            q = queues.setdefault(link, deque())
            q.append(item)
            if len(q) == 1:
                start_head(link)

        def start_head(link: int) -> None:
            j, b, onward, t_ready = queues[link][0]
            (f,) = eng.add(np.array([float(b)]), np.array([max(t_ready, eng.now)]), np.zeros(1, dtype=int),
                           np.array([link]))
            pending[int(f)] = (j, link, b, onward)

        for j, t in enumerate(st.transfers):
            for via, b in transfer_parts(relay, i, j, t.bytes):
                if b > 0:  # onward: the GPU a relayed part goes to next, or -1
                    send(t.src * n + (t.dst if via is None else via), (j, b, -1 if via is None else t.dst,
                                                                        rel[j] + alpha_s))
        while pending:
            if eng.now + schedule.cycle_s >= horizon[0]:
                schedule_until(max(horizon[0], eng.now) + 4 * schedule.cycle_s)
            try:
                ev = eng.step()
            except DeadlockError as e:  # cannot happen while the rotor turns; kept honest
                raise SimulationError(str(e)) from None
            if ev is None:
                break
            t, done = ev
            for f in done:
                j, link, b, onward = pending.pop(int(f))
                queues[link].popleft()
                if queues[link]:
                    start_head(link)
                if onward < 0:
                    end_t[j] = max(end_t[j], t)
                else:  # stored at the intermediate GPU, then forwarded
                    send((link % n) * n + onward, (j, b, -1, t + alpha_s))
        end = float(end_t.max()) if len(end_t) else start
        steps.append(StepResult.of(i, st.phase, start, end, "slotted"))
        transfers += [TransferResult.of(i, t.src, t.dst, t.bytes, float(a), float(b))
                      for t, a, b in zip(st.transfers, rel, end_t)]
        start = end
    capacity_bytes = schedule.circuit_bytes(start, port_gbps)
    res = RunResult(name=name or workload.algorithm, collective=workload.collective, algorithm=workload.algorithm,
                    planner="slotted", ranks=n, bytes=workload.bytes, backend="flow", time_s=start, steps=steps,
                    transfers=transfers, bytes_sent=workload.bytes_sent, bytes_delivered=workload.bytes_sent)
    res.slots = Slots(slot_utilisation=float(workload.bytes_sent / capacity_bytes) if capacity_bytes else 0.0,
                      cycles=float(start / schedule.cycle_s), relayed_bytes=relay.relayed_bytes if relay else 0)
    return res
