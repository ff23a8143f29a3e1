"""Runs a Workload on a time-slotted OCS (rotor mode) with real packets.

The OS-Ken controller cycles the OCS through a :class:`~emulation.schedule.SlotSchedule`
on its own clock (``POST /rotor``; a dark window before every slot) and never waits for traffic;
the agents send a transfer only while a circuit to its destination is up, inside the slot minus a
guard band at each end (:class:`emulation.emulator.agent.Gate`). Steps are round-synchronous, released by
the orchestrator as in :mod:`emulation.emulator.orchestrator`; the rotor keeps turning across
them. The same schedule on the flow backend is :func:`emulation.flowsim.slotted.simulate_slotted`.

Packets lost are counted for the run and per step (:mod:`emulation.drops`); a step's count is
read just after the next step is released (the rotor does not wait), so it may include that
step's first milliseconds.

Per run: every agent connects to each of its peers under a configuration that joins them (the
rotor's configurations applied one by one, untimed); the rotor starts; after one warm-up turn
(the controller's ack-latency estimates settle) the first step is released exactly at the start
of a turn, which is the run's time origin, as t = 0 is in the flow model. Measured times are
divided by the TDF.

Only duplex circuits can be emulated (a circuit joins two ports both ways, and TCP needs its
ACKs back): a schedule with a one-way circuit is refused; plan with
:func:`emulation.planners.bvn.duplex_plan`. See ``docs/mechanisms.md`` (PipSwitch, arXiv 2501.18136 time-slotted
OCS).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path

import numpy as np

from emulation import dataplane as dpn
from emulation.emulator.agent_schedule import AgentSchedules
from emulation.emulator.controller_client import ControllerError
from emulation.emulator.net import FAST_RTO_MIN_MS, EmulatedFabric, EmulationError
from emulation.emulator.orchestrator import (AGENT_TIMEOUT_MARGIN_S, RunLedger, agents, measured_run, open_under,
                                             raise_if_switch_failed)
from emulation.fabric import Configuration, assign_ports
from emulation.results import Percentiles, RunResult, Slots, StepResult, TransferResult
from emulation.scale import Scale
from emulation.schedule import OcsSequence, RelayPlan, SlotSchedule, transfer_parts
from emulation.workloads.model import Workload

#: Fraction of the emulated link rate a gated sender plans to drain (HTB and TCP jitter).
RATE_MARGIN = 0.97


def duplex_matchings(schedule: SlotSchedule | OcsSequence, gpus: int) -> list[list[tuple[int, int]]]:
    """Each configuration of ``schedule`` (a rotor's, or one OCS's of a parallel schedule) as
    undirected GPU pairs.

    :raises EmulationError: a circuit is one-way, or a GPU has two circuits in one slot.
    """
    out = []
    for k, pairs in enumerate(schedule.configs):
        directed = set(pairs)
        one_way = [p for p in directed if (p[1], p[0]) not in directed]
        if one_way:
            a, b = one_way[0]
            raise EmulationError(f"slot {k}: circuit {a}->{b} is one-way; the packet backend emulates duplex "
                                 f"circuits only (plan with emulation.planners.bvn.duplex_plan)")
        und = sorted({(min(a, b), max(a, b)) for a, b in directed})
        used = [g for p in und for g in p]
        if len(used) != len(set(used)) or max(used, default=0) >= gpus:
            raise EmulationError(f"slot {k}: not a matching of {gpus} GPUs: {und}")
        out.append(und)
    return out


def ack_margin_s(link_mbps: float, guard_s: float = 0.0, mtu: int = dpn.MTU) -> float:
    """Emulated seconds a gated sender stops writing before its window closes, beyond the guard
    band ``guard_s`` (emulated), so that its last segment and the peer's ACKs for it cross before
    the circuit goes dark.

    At the emulated rate a full frame takes milliseconds on each of the three shaped links of a
    circuit (host, GPU -> OCS, the peer's host link), and an ACK can queue behind one of the
    peer's own frames in a duplex slot. An ACK lost in the dark leaves delivered data
    unacknowledged; the sender's retransmission timer then backs off through dark slots and the
    connection can stall for turns (a 400 Gbit/s port crosses a frame in 30 ns: the flow model
    has no such term). The last write needs four frame times plus 1 ms of switching before the
    dark; the guard band counts toward it and the rest comes out of the slot's headroom.
    """
    return max(0.0, 4 * dpn.frame_bytes(mtu) * 8 / (link_mbps * 1e6) + 1e-3 - guard_s)


def gate_windows(schedule: SlotSchedule, gpus: int, tdf: float, margin_s: float = 0.0) -> list[dict[int, list[list[float]]]]:
    """For every GPU, ``{dst: [[on, off], ...]}``: emulated offsets within one rotor turn when a
    circuit to ``dst`` may take new data: guard bands applied (the layout of
    :meth:`SlotSchedule.windows`), and each window closed ``margin_s`` earlier
    (:func:`ack_margin_s`)."""
    out: list[dict[int, list[list[float]]]] = [{} for _ in range(gpus)]
    for t_on, t_off, k in schedule.windows(schedule.cycle_s * (1 - 1e-12)):
        on, off = (t_on + schedule.guard_s) * tdf, (t_off - schedule.guard_s) * tdf
        off = max(on, off - margin_s)
        for a, b in set(schedule.configs[k]):
            out[a].setdefault(b, []).append([on, off])
    return out


@contextlib.contextmanager
def clocked_agents(emu: EmulatedFabric, ranks: list, run_dir: Path, rto_min_ms: float, shortest_s: float):
    """The agents of a run on the switch's clock (a rotor, parallel OCSes' sequences): the
    circuits emptied, TCP's ``rto_min`` raised to ``rto_min_ms`` (a segment lost in the dark is
    resumed at its pair's next window, before the timer fires and backs off), the agents started
    (:func:`~emulation.emulator.orchestrator.agents`; ``shortest_s``: the shortest window, wall s);
    yields ``(coord, alive)``. On leaving, what the switch still runs is stopped and ``rto_min``
    restored."""
    emu.client.apply(Configuration({}), 0.0)
    emu.set_rto_min(rto_min_ms)
    try:
        with agents(emu, ranks, run_dir, shortest_s) as (coord, alive):
            yield coord, alive
    except BaseException:
        with contextlib.suppress(ControllerError):  # a dead controller: the error in flight says so
            emu.client.stop_rotor()
        emu.set_rto_min(None)
        raise
    emu.client.stop_rotor()
    emu.set_rto_min(None)


def connect_under(emu: EmulatedFabric, coord, alive, joins, conns) -> None:
    """Open every connection ``(a, b, key)`` of ``conns`` untimed, each under the first entry
    ``(configuration, joined pairs, key)`` of ``joins`` whose configuration joins its pair (as
    ``(min, max)``) for its key (:func:`~emulation.emulator.orchestrator.open_under`); then empty
    the circuits again."""
    todo = set(conns)
    for config, joined, key in joins:
        here = {c for c in todo if c[2] == key and (min(c[0], c[1]), max(c[0], c[1])) in joined}
        if not here:
            continue
        opens: dict[int, list] = {}
        for a, b, k in here:
            opens.setdefault(a, []).append([b, k])
        open_under(emu, coord, alive, config, opens)
        todo -= here
    emu.client.apply(Configuration({}), 0.0)


def slot_timing(events: list[dict], tdf: float) -> tuple[Percentiles, float]:
    """The controller's ``|measured - planned|`` slot starts (median, p99, max; emulated s) and
    the median dark window (real s) of slot ``events`` (``rotor-slot`` or ``ocs-slot``)."""
    err = np.abs([e["start_error_s"] for e in events]) if events else np.zeros(1)
    dark = [(e["t_live"] - e["t_dark"]) / tdf for e in events]
    return (Percentiles(median=float(np.median(err)), p99=float(np.percentile(err, 99)), max=float(err.max())),
            float(np.median(dark)) if dark else 0.0)


def run_slotted(emu: EmulatedFabric, name: str, workload: Workload, schedule: SlotSchedule, scale: Scale,
                alpha_s: float, run_dir: Path, planner: str = "slotted", relay: RelayPlan | None = None) -> RunResult:
    """Execute ``workload`` on the rotor ``schedule`` (module doc); the measured result.

    :param schedule: real-time slots, dark window and guard band (multiplied by the TDF here).
    :param relay: two-hop forwarding (:class:`~emulation.schedule.RelayPlan`): a relayed part goes to
        its intermediate GPU's agent, which forwards it, gated like its own sends, once all of
        it has arrived; a transfer ends when its last part reaches the destination.
    :returns: a :class:`RunResult` whose ``slots`` holds ``slot_utilisation`` (delivered bytes /
        bytes the up circuits could carry until the end), ``cycles``, ``slots_run``,
        ``start_error_s`` (median, p99, max of the controller's ``|measured - planned|`` slot
        start over the run's slots, emulated s) and ``dark_window_measured_s`` (median, real).
    :raises EmulationError: the fabric is not a one-port OCS, the schedule cannot be emulated,
        an agent died or a step did not finish in time.
    """
    fabric, n, tdf = emu.fabric, workload.ranks, scale.tdf
    if n != fabric.gpus or len(fabric.ocs) != 1 or fabric.ports_per_gpu != 1:
        raise EmulationError("a rotor run needs an ocs-star fabric with one port per GPU and the workload's ranks")
    matchings = duplex_matchings(schedule, n)
    ocs = fabric.ocs[0].name
    configs = [assign_ports(fabric, ocs, m) for m in matchings]
    windows = gate_windows(schedule, n, tdf, ack_margin_s(scale.link_mbps, schedule.guard_s * tdf, emu.mtu))
    run_dir.mkdir(parents=True, exist_ok=True)
    cycle = schedule.cycle_s * tdf
    rate = scale.link_mbps * 1e6 / 8 * RATE_MARGIN
    schedules = AgentSchedules(n, alpha_s * tdf, rotor=(cycle, rate, windows))
    tids: list[tuple[int, object]] = []  # (step, transfer) of every transfer with bytes
    finals: dict[int, int] = {}  # hop id -> transfer id, for hops that reach the destination
    hop_pairs: set[tuple[int, int]] = set()
    load = np.zeros((len(workload.steps), n))  # emulated bytes each GPU sends per step
    hop = 0
    for si, step in enumerate(workload.steps):
        schedules.add_step()
        for j, t in enumerate(step.transfers):
            if t.bytes <= 0:
                continue
            tid = len(tids)
            tids.append((si, t))
            for via, b in transfer_parts(relay, si, j, t.bytes):
                if b <= 0:
                    continue
                eb = scale.emulated_bytes(b)
                first = t.dst if via is None else via
                schedules.transfer(si, hop, t.src, first, [[0, eb]])
                hop_pairs.add((t.src, first))
                load[si, t.src] += eb
                if via is not None:  # stored at via, then forwarded as hop + 1
                    schedules.relay(si, hop, hop + 1, via, t.dst, eb)
                    hop_pairs.add((via, t.dst))
                    load[si, via] += eb
                    hop += 1
                finals[hop] = tid
                hop += 1
    pairs = sorted(hop_pairs)
    for a, b in pairs:
        if b not in windows[a]:
            raise EmulationError(f"GPUs {a} and {b} are never connected by the schedule")
    schedules.later((r, d, 0) for r, d in pairs)
    # Bound: every step within (its busiest GPU's bytes / the bytes one turn gives a pair) turns.
    shortest = min(off - on for w in windows for ws in w.values() for on, off in ws)  # emulated s (wall)
    per_turn = shortest * rate
    worst = float(load.max()) if load.size else 0.0
    turns = len(workload.steps) * (math.ceil(worst / per_turn) + 2) * 3 + 4
    step_timeout = turns * cycle + 30
    schedules.timeout(step_timeout + AGENT_TIMEOUT_MARGIN_S)

    with clocked_agents(emu, schedules.ranks, run_dir, max(FAST_RTO_MIN_MS, 2e3 * cycle), shortest) as (coord, alive):
        connect_under(emu, coord, alive, [(c, set(m), 0) for c, m in zip(configs, matchings)],
                      [(a, b, 0) for a, b in pairs])
        ledger = RunLedger(emu)
        since = len(emu.client.events())
        # The rotor keeps turning as long as a step may wait (it is stopped when the last step
        # is done): a connection whose lost segment sits in TCP's retransmission backoff
        # still finds a window, and the step is slow instead of never finishing.
        count = (turns + math.ceil(30 / cycle)) * len(configs)
        t0 = emu.client.start_rotor(configs, [s * tdf for s in schedule.slots_s], schedule.reconfiguration_delay_s * tdf,
                                    count, start_delay_s=0.05)["t0"]
        origin = t0 + cycle  # one warm-up turn
        time.sleep(max(0.0, origin - time.monotonic()))
        steps: list[StepResult] = []
        t_go = time.monotonic()
        coord.broadcast({"go": 0, "t0": t0})
        for si in range(len(workload.steps)):
            try:
                reports = ledger.gather(coord, alive, step_timeout)
            except EmulationError as e:
                raise_if_switch_failed(emu.client.events(since), e)
                raise
            ends = [t for m in reports for t in m["recv"].values()]
            end = max(ends) if ends else time.monotonic()
            rec = StepResult.of(si, workload.steps[si].phase, (max(t_go, origin) - origin) / tdf,
                                (end - origin) / tdf, "slotted")
            if si + 1 < len(workload.steps):  # the rotor's clock does not wait: release first, count after
                t_go = time.monotonic()
                coord.broadcast({"go": si + 1, "t0": t0})
            rec.drops, rec.retransmissions, rec.stalls = ledger.step(reports)
            steps.append(rec)
        emu.client.stop_rotor()
        run_drops = ledger.close(run_dir)
        events = [e for e in emu.client.events(since) if e["kind"] == "rotor-slot"]
        (run_dir / "rotor-events.json").write_text(json.dumps({"t0": t0, "origin": origin, "tdf": tdf,
                                                               "events": events}))

    arrived = {int(h): v for m in ledger.reports for h, v in m["recv"].items()}
    ends: dict[int, float] = {}
    for h, tid in finals.items():
        ends[tid] = max(ends.get(tid, 0.0), arrived.get(h, math.inf))
    transfers = [TransferResult.of(si, t.src, t.dst, t.bytes, steps[si].start_s, (ends[tid] - origin) / tdf)
                 for tid, (si, t) in enumerate(tids)]
    end_s = steps[-1].end_s if steps else 0.0
    capacity = schedule.circuit_bytes(end_s, fabric.port_gbps)
    used = [e for e in events if e["planned_start"] >= origin - 1e-9 and e["planned_start"] <= origin + end_s * tdf]
    start_error, dark = slot_timing(used, tdf)
    delivered = sum(t.bytes for tid, (_si, t) in enumerate(tids) if ends[tid] < math.inf)
    return measured_run(name, workload, planner, steps, transfers, run_drops, slots=Slots(
        slot_utilisation=delivered / capacity if capacity else 0.0, cycles=end_s / schedule.cycle_s,
        slots_run=len(used), start_error_s=start_error, dark_window_measured_s=dark,
        guard_emulated_s=schedule.guard_s * tdf, relayed_bytes=relay.relayed_bytes if relay else 0))
