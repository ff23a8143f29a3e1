"""Runs (Workload, Plan) *dependency-driven* with real packets: reconfiguration overlapped with
traffic (SWOT, arXiv 2510.19322).

The semantics are the flow backend's (:mod:`emulation.flowsim.dependency`; two departures at the
end):

- the plan's steps form *epochs*, maximal runs of steps on one configuration;
- epoch e opens once every transfer of the earlier epochs has arrived (and the previous dark
  window has ended); the orchestrator releases all of its steps at once;
- a transfer starts once the chunks it sends have arrived at its source (the agents know: they
  received them) and not before its source rank arrives; it moves from then plus alpha;
- an epoch that reconfigures rewires only the circuits that change: the controller removes
  them, keeps their ports dark for R and installs the new ones (``POST /configuration``, as in
  round-synchronous runs), while every other circuit carries traffic. A transfer part whose path
  uses a new circuit waits until that circuit is live (the orchestrator tells the agents when);
  a part on a kept circuit goes at once, through the dark window.

The removal is sent as the epoch's release is broadcast, a few milliseconds (``lead``) before
the release instant ``at``: every circuit the epoch removes has carried its last byte (the
agents drained their ACKs before reporting the previous epoch), so the early removal changes
nothing a transfer sees. The new circuits are installed half a lead before ``at + R``
(``live_at``; the controller still keeps every port dark at least R after its removal), so that
the switch's commit and the datapath's flush are done by ``at + R``; the agents are then told the
circuits are live at ``t_live = max(at + R, the flush)`` and start their parts on them at that
instant, not when the word reaches them. The dark window as the transfers see it is
``t_live - at``: R when the emulator kept up, more (and counted in the run's time) when it did
not. Each reconfiguring step records it, ``t_live - max(at, t_dark)`` (round-synchronous runs
record ``t_live - t_dark``: their removal starts the window); ``timing`` adds how long before
``at + R`` the switch was live (``live_before_window_end_s``, negative when late). An agent that
hears of a release after it, a removal that ends after it, or word of the new circuits sent
after ``at + R`` would put the emulator's own delay in the run's time: the lead is then doubled
for the next epochs (up to 0.2 s), as the round-synchronous orchestrator does, and each
reconfiguring step's ``timing`` says how late the last agent heard (``heard_lag_s``).

Two departures from the flow model, both conservative: a part's connection counts as changed
when its ACKs cross a new circuit too (the peer may route a channel's ACKs on another port; the
flow model has no ACKs), and a later transfer on a connection is queued behind the previous one
when its own dependencies are met, not alpha after the previous one's delivery (within alpha of
the flow model for Ring, RHD and RD).

The run's clock leaves out the time between epochs, as the round-synchronous orchestrator does
between steps (:mod:`emulation.emulator.orchestrator`): epoch e opens on the run's clock at
``max(last arrival of the earlier epochs, the previous epoch's open + its dark window)``.
Measured times are divided by the TDF. A step's start is the epoch's open for the step that
reconfigures, else its first transfer's release; its end is its last arrival.
"""

from __future__ import annotations

import time
from pathlib import Path

from emulation.emulator.net import EmulatedFabric, EmulationError
from emulation.emulator.orchestrator import (AGENT_TIMEOUT_MARGIN_S, MAX_RELEASE_LEAD_S, RunLedger, compile_run,
                                             control_timing, measured_run, planned_agents)
from emulation.results import RunResult, StepResult, TransferResult
from emulation.routing import Routes
from emulation.scale import Scale
from emulation.schedule import Plan
from emulation.workloads.dependencies import chunk_dependencies
from emulation.workloads.model import Workload

#: Emulated seconds between broadcasting an epoch's release and the release itself: every agent
#: hears of it, and the controller removes the changed circuits, before it.
EPOCH_LEAD_S = 0.02


def epochs_of(plan: Plan) -> list[tuple[int, int]]:
    """The plan's epochs as step ranges ``(first, end)``: a new one at step 0 and at every
    step marked ``reconfigure``."""
    starts = [i for i, sp in enumerate(plan.steps) if i == 0 or sp.action == "reconfigure"]
    return list(zip(starts, starts[1:] + [len(plan.steps)]))


def dependency_inputs(fabric, workload: Workload, plan: Plan, routed: list | None = None
                      ) -> tuple[list[tuple[int, int]], list[bool], dict[int, list[int]], dict[int, list[int]]]:
    """What the agents need to run ``plan`` dependency-driven: the epochs (:func:`epochs_of`),
    whether each reconfigures, every transfer's dependencies inside its epoch (``{tid: [tid,
    ...]}``, transfer ids step-major; those of earlier epochs have arrived when it opens) and the
    channels of every transfer that wait for the epoch's new circuits (``{tid: [channel, ...]}``):
    a part whose connection crosses a circuit the epoch adds, its data one way or its ACKs the
    other, waits; a part on kept circuits both ways goes at once, through the dark window.

    :param routed: every step's ``(routes, subflows)`` on its configuration (default: routed here).
    """
    epochs = epochs_of(plan)
    reconfigures = [plan.steps[a].action == "reconfigure" for a, _ in epochs]
    epoch_of = [e for e, (a, b) in enumerate(epochs) for _ in range(a, b)]
    first_tid, tid_epoch = [], []
    for si, step in enumerate(workload.steps):
        first_tid.append(len(tid_epoch))
        tid_epoch += [epoch_of[si]] * len(step)
    deps = {tid: [d for d in ds if tid_epoch[d] == tid_epoch[tid]]
            for tid, ds in enumerate(chunk_dependencies(workload))}
    live: dict[int, list[int]] = {}
    before = [plan.initial] + [plan.steps[a].configuration for a, _ in epochs[:-1]]
    kept = [set(Routes(fabric, c, fabric.ports_per_gpu).links) for c in before]
    for si, step in enumerate(workload.steps):
        e = epoch_of[si]
        if not reconfigures[e] or not len(step):
            continue
        if routed is not None:
            routes, sf = routed[si]
        else:
            routes = Routes(fabric, plan.steps[si].configuration, fabric.ports_per_gpu)
            sf = routes.subflow_arrays(step.src, step.dst)
        for f in range(sf.transfer.size):
            k, c = int(sf.transfer[f]), int(sf.channel[f])
            a, b = int(step.src[k]), int(step.dst[k])
            if any(link not in kept[e] for link in routes.path(a, b, c) + routes.path(b, a, c)):
                live.setdefault(first_tid[si] + k, []).append(c)
    return epochs, reconfigures, deps, live


def run_dependency_driven(emu: EmulatedFabric, name: str, workload: Workload, plan: Plan, scale: Scale,
                          alpha_s: float, run_dir: Path, arrivals_s: list[float] | None = None,
                          step_timeout_s: float | None = None) -> RunResult:
    """Execute ``workload`` under ``plan`` dependency-driven with real packets (module doc); the
    measured result (``semantics`` dependency-driven).

    :param alpha_s: real per-message latency; agents wait ``alpha_s x TDF`` after a transfer's
        release.
    :param arrivals_s: real time each rank arrives (stragglers).
    :raises EmulationError: the workload does not fit the fabric, an agent, the controller or the
        switch daemon was lost, or an epoch did not finish in time.
    """
    fabric, n, tdf = emu.fabric, workload.ranks, scale.tdf
    if n != fabric.gpus:
        raise EmulationError(f"workload has {n} ranks, fabric {fabric.gpus} GPUs")
    emu.client.apply(plan.initial, 0.0)
    run_dir.mkdir(parents=True, exist_ok=True)
    job = compile_run(fabric, workload, plan, scale, alpha_s, arrivals_s, step_timeout_s)
    epochs, reconfigures, deps, live = dependency_inputs(fabric, workload, plan, job.routed)
    first_tid = [0] * len(workload.steps)
    for si in range(1, len(workload.steps)):
        first_tid[si] = first_tid[si - 1] + len(workload.steps[si - 1])
    job.schedules.dependency_driven(epochs, reconfigures, deps, live)
    # An epoch may hold every step of the run: its timeout is the sum of its steps' bounds.
    per_step = [20 * load * scale.byte_scale * 8 / (scale.link_mbps * 1e6) for load in job.step_loads]
    slack = 30 + plan.reconfiguration_delay_s * tdf + max(arrivals_s or [0.0]) * tdf
    epoch_timeout = [step_timeout_s or sum(per_step[a:b]) + slack for a, b in epochs]
    job.schedules.timeout(max(epoch_timeout, default=slack) + AGENT_TIMEOUT_MARGIN_S)

    R = plan.reconfiguration_delay_s * tdf
    arrive = [(arrivals_s[r] if arrivals_s else 0.0) * tdf for r in range(n)]
    steps: list[StepResult] = []
    transfers: dict[int, TransferResult] = {}
    reconfigured = [plan.steps[a].configuration for (a, _b), r in zip(epochs, reconfigures) if r]
    with planned_agents(emu, plan, job, run_dir, reconfigured) as (coord, alive):
        ledger = RunLedger(emu)
        clock = 0.0  # the run's clock (emulated s) when the next epoch opens
        lead = EPOCH_LEAD_S
        for e, (a, b) in enumerate(epochs):
            at = time.monotonic() + lead
            origin = at - clock
            coord.broadcast({"go": e, "at": at, "origin": origin})
            opened_until = clock  # when its dark window ends, on the run's clock
            res = None
            late_live = 0.0
            if reconfigures[e]:
                res = emu.client.apply(plan.steps[a].configuration, R, live_at=at + R - lead / 2)
                t_live = max(at + R, res.get("t_live_flushed", res["t_live"]))
                coord.broadcast({"live": e, "t_live": t_live})
                late_live = time.monotonic() - (at + R)
                opened_until = t_live - origin
            reports = ledger.gather(coord, alive, epoch_timeout[e], f"epoch {e} (steps {a}-{b - 1})")
            # An agent that heard of the release after it, a removal that ended after it, or
            # word that the new circuits are live sent after release + R (the new circuits then
            # carry traffic later than R after the release) is in the run's time: give the next
            # epochs more lead.
            late = max([max(m["t_heard"] for m in reports) - at, late_live]
                       + ([res.get("t_dark_flushed", res["t_dark"]) - at] if res and res.get("changed") else []))
            if late > 0:
                lead = min(MAX_RELEASE_LEAD_S, 2 * (lead + late))
            drops, retrans, _ = ledger.step(reports)
            ends = {int(tid): t for m in reports for tid, t in m["recv"].items()}
            ready = {int(tid): t for m in reports for tid, t in m["ready"].items()}
            for si in range(a, b):
                its = range(first_tid[si], first_tid[si] + len(workload.steps[si]))
                opens = si == a and reconfigures[e]
                t0 = clock if opens or not its else min(ready[t] for t in its) - origin
                t1 = max((ends[t] - origin for t in its), default=t0)
                rec = StepResult.of(si, workload.steps[si].phase, t0 / tdf, t1 / tdf, plan.steps[si].action,
                                    max_link_bytes=job.step_loads[si])
                if si == a:
                    rec.drops, rec.retransmissions = drops, retrans
                if opens and res is not None and res.get("changed"):
                    # The changed circuits went dark before the release (module doc): the dark
                    # window the run sees starts at the release.
                    # t_live - max(at, t_dark), taken apart so that a window of exactly R (the
                    # switch live before at + R) is R, not R less the rounding of two clock readings
                    # some 10^4 s large (a fifth of such windows came out under R: a CI run failed on one)
                    late = max(0.0, res["t_dark"] - at)
                    past = res.get("t_live_flushed", res["t_live"]) - max(at, res["t_dark"])
                    rec.reconfiguration_delay_s = plan.reconfiguration_delay_s
                    rec.dark_window_measured_s = max(plan.reconfiguration_delay_s - late / tdf, past / tdf)
                    rec.timing = {**control_timing(res, tdf),
                                  "removed_before_release_s": (at - res["t_dark"]) / tdf,
                                  "live_before_window_end_s": (at + R - res.get("t_live_flushed", res["t_live"])) / tdf,
                                  "rerouted_after_release_s": max(0.0, res["t_routed"] - at) / tdf,
                                  "heard_lag_s": (max(m["t_heard"] for m in reports) - at) / tdf}
                steps.append(rec)
                for t in its:
                    _si, tr = job.tids[t]
                    start = max(ready[t], origin + arrive[tr.src]) if t in ready else at
                    transfers[t] = TransferResult.of(si, tr.src, tr.dst, tr.bytes, (start - origin) / tdf,
                                                     (ends[t] - origin) / tdf)
            latest = max(ends.values(), default=at) - origin
            clock = max(latest, opened_until)
        run_drops = ledger.close(run_dir)
    return measured_run(name, workload, plan.planner, steps, [transfers[k] for k in sorted(transfers)], run_drops,
                        job.totals, semantics="dependency-driven")
