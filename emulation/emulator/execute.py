"""The packet backend's executor: one resolved run (:class:`~emulation.schedule.RunDescription`)
with real packets on a running :class:`~emulation.emulator.net.EmulatedFabric`, its result
filled in completely."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from emulation import dataplane as dpn
from emulation.checks import complete
from emulation.emulator.dependency import run_dependency_driven
from emulation.emulator.net import EmulatedFabric, EmulationError
from emulation.emulator.orchestrator import collective_events, run_workload
from emulation.emulator.slotted import run_slotted
from emulation.planners.cost import CostModel
from emulation.results import RunResult, sequenced
from emulation.scale import Scale
from emulation.schedule import ParallelPlan, Plan, RunDescription, SlottedPlan, executor
from emulation.workloads import Workload


def step_scale(workload: Workload, scale: Scale, mtu: int, ports: int = 1) -> Scale:
    """``scale`` with its byte scale raised for a workload whose steps would be few frames of
    ``mtu`` bytes on the wire, or last little wall-clock time over the GPU's ``ports``
    (:meth:`emulation.scale.Scale.for_steps`)."""
    return scale.for_steps(workload.smallest_step_bytes, dpn.mss(mtu), ports)


def run_scale(run: RunDescription, scale: Scale, mtu: int, ports: int = 1) -> Scale:
    """The scale ``run`` is emulated at on a fabric of ``ports`` ports per GPU: :func:`step_scale`
    of its workload; a time-slotted run or one on parallel OCSes keeps ``scale`` (its slots are
    sized at it)."""
    if run.schedule.slotted:
        return scale
    return step_scale(run.workload, scale, mtu, ports)


def execute(emu: EmulatedFabric, run: RunDescription, scale: Scale, cost: CostModel, run_dir: Path, *,
            arrivals_s: Sequence[float] | None = None, iteration: int = 0,
            semantics: str = "round-synchronous") -> RunResult:
    """Run ``run`` on ``emu``: a per-step plan with :func:`~emulation.emulator.orchestrator.run_workload`
    (``semantics`` round-synchronous) or
    :func:`~emulation.emulator.dependency.run_dependency_driven` (dependency-driven), a
    time-slotted one with :func:`~emulation.emulator.slotted.run_slotted`; logs under ``run_dir``.
    ``scale`` is the scenario's; the run is emulated at :func:`run_scale` of it, recorded as the
    result's ``byte_scale``.

    A run on parallel OCSes (:class:`~emulation.schedule.ParallelPlan`) runs its steps one after
    the other, each on its own schedule (:func:`_run_parallel`).

    Who owns the circuits meanwhile (user apps loaded, ``docs/controllers.md``): the user's apps
    when the run's planner is ``none``, otherwise the planner; in a time-slotted run, or one on
    parallel OCSes, the planner's sequences (the collective is announced, its steps are not: the
    slots run on the controller's clock).

    :param arrivals_s: real time each rank arrives (default: all at 0; time-slotted runs take none).
    :raises emulation.emulator.net.EmulationError: see the runners; a time-slotted run, or a run
        with user apps, asked to run dependency-driven.
    """
    scale = run_scale(run, scale, emu.mtu, emu.fabric.ports_per_gpu)
    arrivals = list(arrivals_s) if arrivals_s is not None else [0.0] * run.workload.ranks
    res = executor(EXECUTORS, run.schedule)(emu, run, scale, cost, run_dir, arrivals, semantics)
    res.byte_scale = scale.byte_scale
    return complete(res, run, emu.fabric, iteration, arrivals)


def _per_step(emu, run: RunDescription, scale: Scale, cost: CostModel, run_dir: Path, arrivals: list[float],
              semantics: str) -> RunResult:
    """A per-step plan: round-synchronous (:func:`~emulation.emulator.orchestrator.run_workload`)
    or dependency-driven (:func:`~emulation.emulator.dependency.run_dependency_driven`)."""
    w, sched = run.workload, run.schedule
    if semantics == "dependency-driven":
        if emu.user_apps:
            raise EmulationError("semantics: dependency-driven runs raise no step events; run them without --app")
        return run_dependency_driven(emu, run.name, w, sched, scale, cost.alpha_s, run_dir, arrivals_s=arrivals)
    return run_workload(emu, run.name, w, sched, scale, cost.alpha_s, run_dir, arrivals_s=arrivals,
                        owner="app" if sched.planner == "none" else "planner")


def _slotted(emu, run: RunDescription, scale: Scale, cost: CostModel, run_dir: Path, arrivals: list[float],
             semantics: str) -> RunResult:
    """A time-slotted plan (:func:`~emulation.emulator.slotted.run_slotted`), announced as one
    collective the planner's rotor owns."""
    w, sched = run.workload, run.schedule
    with collective_events(emu, run.name, w, planner=sched.planner, owner="planner", steps=0,
                           reconfiguration_delay_s=sched.schedule.reconfiguration_delay_s * scale.tdf) as end:
        res = run_slotted(emu, run.name, w, sched.schedule, scale, cost.alpha_s, run_dir, sched.planner,
                          relay=sched.relay)
        end["time_s"] = res.time_s
    return res


def _parallel(emu, run: RunDescription, scale: Scale, cost: CostModel, run_dir: Path, arrivals: list[float],
              semantics: str) -> RunResult:
    """A plan on parallel OCSes (:func:`_run_parallel`), announced as one collective the
    planner's sequences own."""
    sched = run.schedule
    with collective_events(emu, run.name, run.workload, planner=sched.planner, owner="planner", steps=0,
                           reconfiguration_delay_s=sched.planned[0].reconfiguration_delay_s * scale.tdf) as end:
        res = _run_parallel(emu, run, sched, scale, cost, run_dir)
        end["time_s"] = res.time_s
    return res


#: The packet executor of each plan type (:func:`emulation.schedule.executor`): ``(emu, run,
#: scale, cost, run_dir, arrivals, semantics) -> RunResult``.
EXECUTORS = {Plan: _per_step, SlottedPlan: _slotted, ParallelPlan: _parallel}


def parallel_guard_need_s(plan: ParallelPlan, scale: Scale, mtu: int) -> float:
    """Seconds (real) every slot of ``plan`` must be lengthened by for the packet backend at
    ``scale``: :func:`~emulation.emulator.parallel_ocs.packet_guard_s` of its longest need over
    the steps' planned schedules (a sender starts a window late, drains a little under the line
    rate and stops before the window closes)."""
    from emulation.emulator.parallel_ocs import packet_guard_s

    return max(packet_guard_s(p, scale, mtu) for p in plan.planned)


def parallel_guard_refusal(plan: ParallelPlan, scale: Scale, mtu: int) -> str | None:
    """Why the packet backend cannot run ``plan`` at ``scale``, or None: ``plan.guard_s`` is
    shorter than :func:`parallel_guard_need_s`. The line names the length to set, rounded up to
    0.01 us (that length is accepted)."""
    need = parallel_guard_need_s(plan, scale, mtu)
    if plan.guard_s >= need:
        return None
    return (f"guard_s: {plan.guard_s * 1e6:.4g} us lengthens every slot less than the "
            f"{math.ceil(need * 1e8) / 100:g} us its senders need on packets at {scale.link_mbps:g} Mbit/s "
            f"(TDF {scale.tdf:.0f}): set the run's guard_s to at least that, or emulate at a lower "
            f"emulation.link_mbps")


def parallel_rate_cap(plan: ParallelPlan, byte_scale: float, port_gbps: float, mtu: int) -> float | None:
    """The highest emulated link rate (Mbit/s, to 0.1%) at which ``plan.guard_s`` covers
    :func:`parallel_guard_need_s`, or None if it covers it at no rate (the need falls with the
    rate, towards the share of the longest slot a sender leaves undrained)."""
    def fits(mbps: float) -> bool:
        return parallel_guard_need_s(plan, Scale(mbps, byte_scale, port_gbps), mtu) <= plan.guard_s

    lo, hi = 1e-3, 1e4
    if not fits(lo):
        return None
    if fits(hi):
        return hi
    while hi / lo > 1.001:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _run_parallel(emu: EmulatedFabric, run: RunDescription, plan: ParallelPlan, scale: Scale, cost: CostModel,
                  run_dir: Path) -> RunResult:
    """Every step of ``run`` on its own parallel-OCS schedule
    (:func:`~emulation.emulator.parallel_ocs.run_parallel_ocs`, logs in ``run_dir/step-i``), one
    after the other; the steps' results as one run. ``ocslab run`` checks the guard before the
    fabric starts and caps the calibration at :func:`parallel_rate_cap`."""
    from emulation.emulator.parallel_ocs import run_parallel_ocs

    return sequenced([run_parallel_ocs(emu, run.name, step, seq, scale, cost.alpha_s, run_dir / f"step-{i}")
                      for i, (step, seq) in enumerate(plan.parts())], plan.workload, plan.planner)
