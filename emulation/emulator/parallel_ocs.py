"""Runs one demand step on parallel OCSes with real packets (Spectra, arXiv 2603.07373).

The fabric is :func:`topologies.builders.parallel_ocs`: every GPU's port k is cabled to OCS k,
and the NICs send channel k out of port k whatever the circuits (:mod:`controllers.routing`),
so a TCP connection on channel k travels on OCS k only. The schedule is a
:class:`~emulation.schedule.ParallelSchedule`: the controller runs each OCS's slot sequence on
that OCS's own timeline from one origin t0 (``POST /rotor`` with ``sequences``; dark for R before
every configuration, a change on one OCS leaving the others alone) and never waits for traffic.

Every transfer ``src -> dst`` is one pool of bytes that the source's connections to ``dst``
draw from, one connection per OCS that ever joins the pair: each connection is *gated* to the
windows when its OCS holds the circuit ``{src, dst}`` and writes only what the link drains
before the window closes (:class:`emulation.emulator.agent.Pool`, the rotor's gated sender;
:mod:`emulation.emulator.slotted`). So a transfer moves on every OCS that currently joins its
two GPUs, as in the flow model (:mod:`emulation.flowsim.parallel_ocs`). The step is released at
t0, the transfers start alpha later; the run's time is the last arrival after t0, divided by
the TDF.

Only duplex circuits can be emulated (a circuit joins two ports both ways; TCP needs its ACKs):
a configuration holding a one-way circuit is refused (plan with ``circuits="duplex"``). A
schedule trimmed where its last byte arrives leaves the packet backend no slack: a sender starts
:data:`START_GUARD_S` after a window's planned start (the controller installs circuits a little
late), drains slightly less than the line rate (:data:`~emulation.emulator.slotted.RATE_MARGIN`)
and stops writing before each window closes so that its last segment and the ACKs cross before
the dark (:func:`~emulation.emulator.slotted.ack_margin_s`). Run such a schedule with every slot
lengthened by :func:`packet_guard_s` (:meth:`emulation.schedule.ParallelSchedule.guarded`) on
both backends; a pair whose windows cannot carry its bytes on packets is refused before the run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from emulation.emulator.agent_schedule import AgentSchedules
from emulation.emulator.net import FAST_RTO_MIN_MS, EmulatedFabric, EmulationError
from emulation.emulator.orchestrator import AGENT_TIMEOUT_MARGIN_S, RunLedger, measured_run, raise_if_switch_failed
from emulation.emulator.slotted import (RATE_MARGIN, ack_margin_s, clocked_agents, connect_under, duplex_matchings,
                                        slot_timing)
from emulation.fabric import Circuit, Configuration, PortRef
from emulation.poll import wait_until
from emulation.results import RunResult, Slots, StepResult, TransferResult
from emulation.scale import Scale
from emulation.schedule import ParallelSchedule
from emulation.workloads.model import Workload

#: Wall seconds between asking the controller for the sequences and their origin t0.
START_DELAY_S = 0.3
#: Emulated seconds a sender waits after a window's planned start. The controller removes a
#: slot's circuits at its planned end (never early: in-flight data would die) and installs the
#: next ones R after that removal was acknowledged and the datapath flushed, so a slot starts
#: 10-50 ms late with 16 GPUs on 2 OCSes (measured); data written into a circuit that is not up
#: yet is lost and waits for a retransmission.
START_GUARD_S = 0.08


class WindowsMissed(EmulationError):
    """A parallel-OCS run whose senders ran out of windows with bytes left (the machine did not
    carry the slots faithfully) at ``link_mbps`` (Mbit/s per link); ``late_s``: how late the
    controller started its latest slot (wall seconds)."""

    def __init__(self, message: str, late_s: float, link_mbps: float):
        super().__init__(message)
        self.late_s = late_s
        self.link_mbps = link_mbps


def packet_guard_s(schedule: ParallelSchedule, scale: Scale, mtu: int, start_guard_s: float = START_GUARD_S) -> float:
    """Seconds (real) to lengthen every slot by (:meth:`ParallelSchedule.guarded`) so that the
    packet backend can carry what the flow model carries in it: the start guard
    (``start_guard_s``, emulated) and the ACK
    margin (emulated, divided by the TDF) and twice the share of the slot a gated sender leaves
    undrained (1 - :data:`~emulation.emulator.slotted.RATE_MARGIN`, of the longest slot: TCP's
    own pace varies around it)."""
    longest = max((d for seq in schedule.ocs for d in seq.slots_s), default=0.0)
    return ((start_guard_s + ack_margin_s(scale.link_mbps, 0.0, mtu)) / scale.tdf
            + 2 * (1 / RATE_MARGIN - 1) * longest)


def ocs_configurations(fabric, schedule: ParallelSchedule) -> list[list[Configuration]]:
    """Every slot of every OCS as a configuration of that OCS alone (duplex circuits on port k).

    :raises EmulationError: the fabric is not one port per OCS, has fewer OCSes than the
        schedule, or a slot holds a one-way circuit or is not a matching.
    """
    if not fabric.port_per_ocs or len(schedule.ocs) > len(fabric.ocs):
        raise EmulationError(f"a parallel-OCS schedule of {len(schedule.ocs)} OCSes needs a parallel-ocs fabric with "
                             f"as many (fabric {fabric.name})")
    out = []
    for k, seq in enumerate(schedule.ocs):
        name, configs = fabric.ocs[k].name, []
        try:
            matchings = duplex_matchings(seq, fabric.gpus)
        except EmulationError as e:
            raise EmulationError(f"OCS {k}: {e}") from None
        for und in matchings:
            configs.append(Configuration({name: [Circuit.of(PortRef(a, k), PortRef(b, k)) for a, b in und]}))
        out.append(configs)
    return out


def run_parallel_ocs(emu: EmulatedFabric, name: str, workload: Workload, schedule: ParallelSchedule, scale: Scale,
                     alpha_s: float, run_dir: Path, start_guard_s: float = START_GUARD_S) -> RunResult:
    """Execute the one step of ``workload`` on the parallel OCSes of ``schedule`` (module doc).

    :param schedule: real-time slots and dark window R (multiplied by the TDF here).
    :param start_guard_s: emulated seconds senders wait after a window's planned start.
    :returns: a :class:`RunResult` (``planner`` ``parallel-ocs``) whose ``slots`` holds the
        slot utilisation (delivered bytes / bytes the up circuits could carry until the end),
        ``cycles`` (the end over the schedule's makespan), ``slots_run``, ``start_error_s``
        (median, p99, max of ``|measured - planned|`` slot starts, emulated s) and
        ``dark_window_measured_s`` (median, real s).
    :raises EmulationError: see :func:`ocs_configurations`; the workload has more than one step
        or a pair the schedule never joins; an agent died or the step did not finish in time; the
        controller's sequence of an OCS failed (``sequences-failed``).
    :raises WindowsMissed: the senders ran out of windows with bytes left.
    """
    fabric, n, tdf = emu.fabric, workload.ranks, scale.tdf
    if n != fabric.gpus or len(workload.steps) != 1:
        raise EmulationError("a parallel-OCS run takes one step of the fabric's GPUs (a demand matrix)")
    configs = ocs_configurations(fabric, schedule)
    margin = ack_margin_s(scale.link_mbps, 0.0, emu.mtu)
    windows: list[dict[tuple[int, int], list[list[float]]]] = [{} for _ in range(n)]
    for k in range(len(schedule.ocs)):
        for t_on, t_off, i in schedule.windows(k):
            on, off = t_on * tdf + start_guard_s, t_off * tdf
            for c in configs[k][i][fabric.ocs[k].name]:
                for a, b in ((c.a.gpu, c.b.gpu), (c.b.gpu, c.a.gpu)):
                    windows[a].setdefault((b, k), []).append([on, max(on, off - margin)])
    cycle = 10 * schedule.makespan_s * tdf + 3600  # one turn: the sequences run once
    rate = scale.link_mbps * 1e6 / 8 * RATE_MARGIN
    schedules = AgentSchedules(n, alpha_s * tdf, rotor=(cycle, rate, windows), pooled=True, fan_in=len(schedule.ocs))
    schedules.add_step()
    step = workload.steps[0]
    conns: set[tuple[int, int, int]] = set()
    transfers = [t for t in step.transfers if t.bytes > 0]
    for tid, t in enumerate(transfers):
        ks = sorted(k for (d, k) in windows[t.src] if d == t.dst)
        if not ks:
            raise EmulationError(f"GPUs {t.src} -> {t.dst} are never connected by the schedule")
        eb = max(scale.emulated_bytes(t.bytes), len(ks))
        room = sum(b - a for k in ks for a, b in windows[t.src][(t.dst, k)]) * rate
        if room < eb:
            raise EmulationError(f"GPUs {t.src} -> {t.dst}: their windows carry {room / eb:.0%} of their bytes on "
                                 f"packets; lengthen every slot by packet_guard_s = "
                                 f"{packet_guard_s(schedule, scale, emu.mtu, start_guard_s) * 1e6:.2f} us "
                                 f"(ParallelSchedule.guarded)")
        # Every connection gets a part (it draws from the transfer's pool, whose size is their
        # sum); the split by window time is only where each starts.
        share = [sum(b - a for a, b in windows[t.src][(t.dst, k)]) for k in ks]
        total = sum(share) or 1.0
        parts = [[k, max(1, int(eb * s / total))] for k, s in zip(ks, share)]
        parts[int(np.argmax([b for _k, b in parts]))][1] += eb - sum(b for _k, b in parts)
        schedules.transfer(0, tid, t.src, t.dst, parts)
        conns |= {(t.src, t.dst, k) for k in ks}
    schedules.later(conns)
    timeout = 3 * schedule.makespan_s * tdf + 30
    schedules.timeout(timeout + AGENT_TIMEOUT_MARGIN_S)
    run_dir.mkdir(parents=True, exist_ok=True)

    # A segment lost inside a window (its circuit late) must be resent inside that window, which
    # may be its connection's last: TCP's retransmission timer at a quarter of the shortest
    # window. One that fires in the dark backs off, and the agents' stall nudge resumes the
    # connection at its next window.
    shortest = min((b - a for w in windows for ws in w.values() for a, b in ws), default=1.0)
    rto_min_ms = max(FAST_RTO_MIN_MS, 1e3 * shortest / 4)
    with clocked_agents(emu, schedules.ranks, run_dir, rto_min_ms, shortest) as (coord, alive):
        connect_under(emu, coord, alive, [(config, {(c.a.gpu, c.b.gpu) for c in config[fabric.ocs[k].name]}, k)
                                          for k, seq in enumerate(configs) for config in seq], conns)
        ledger = RunLedger(emu)
        since = len(emu.client.events())
        seqs = [[(c, d * tdf) for c, d in zip(configs[k], seq.slots_s)] for k, seq in enumerate(schedule.ocs)]
        t0 = emu.client.start_sequences(seqs, schedule.reconfiguration_delay_s * tdf, START_DELAY_S)["t0"]
        coord.broadcast({"go": 0, "t0": t0, "at": t0, "origin": t0})
        try:
            reports = ledger.gather(coord, alive, timeout)
        except EmulationError as e:
            events = emu.client.events(since)
            raise_if_switch_failed(events, e)
            late = max((x["start_error_s"] for x in events if x["kind"] == "ocs-slot"), default=0.0)
            raise WindowsMissed(
                f"{e}: some transfer ran out of windows: its connections drained less than the emulated link "
                f"rate inside them (the controller started slots up to {late * 1e3:.0f} ms late, "
                f"emulated; the senders waited {start_guard_s * 1e3:.0f} ms). Emulate fewer GPUs or OCSes, "
                f"with a longer start guard, or at a lower link rate", late, scale.link_mbps) from None

        def done() -> bool:
            events = emu.client.events(since)
            raise_if_switch_failed(events)
            return any(e["kind"] == "sequences-done" for e in events)

        wait_until(done, schedule.makespan_s * tdf + 30, lambda: EmulationError("the OCS sequences did not end"))
        _drops, retrans, stalls = ledger.step(reports)
        run_drops = ledger.close(run_dir)
        events = [e for e in emu.client.events(since) if e["kind"] == "ocs-slot"]
        (run_dir / "ocs-events.json").write_text(json.dumps({"t0": t0, "tdf": tdf, "events": events}))

    arrived = {int(tid): v for m in reports for tid, v in m["recv"].items()}
    ends = [arrived.get(tid, math.inf) for tid in range(len(transfers))]
    end_s = (max(ends, default=t0) - t0) / tdf
    results = [TransferResult.of(0, t.src, t.dst, t.bytes, 0.0, (e - t0) / tdf) for t, e in zip(transfers, ends)]
    steps = [StepResult.of(0, step.phase, 0.0, end_s, "slotted", retransmissions=retrans, stalls=stalls, drops=run_drops)]
    delivered = sum(t.bytes for t, e in zip(transfers, ends) if e < math.inf)
    start_error, dark = slot_timing(events, tdf)
    rate_real = fabric.port_bytes_per_s
    capacity = 0.0
    for k, seq in enumerate(schedule.ocs):
        for t_on, t_off, i in schedule.windows(k):
            capacity += len(seq.configs[i]) * rate_real * max(0.0, min(t_off, end_s) - t_on)
    return measured_run(name, workload, "parallel-ocs", steps, results, run_drops, slots=Slots(
        slot_utilisation=delivered / capacity if capacity else 0.0,
        cycles=end_s / schedule.makespan_s if schedule.makespan_s else 0.0, slots_run=len(events),
        start_error_s=start_error, dark_window_measured_s=dark, method="parallel-ocs",
        slots_per_turn=schedule.reconfigurations, reconfiguration_delay_s=schedule.reconfiguration_delay_s))
