"""The flow backend's executor: one resolved run (:class:`~emulation.schedule.RunDescription`)
in virtual time, its result filled in completely."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from emulation.checks import complete
from emulation.fabric import Fabric
from emulation.flowsim.simulate import simulate
from emulation.flowsim.slotted import simulate_slotted
from emulation.planners.cost import CostModel
from emulation.results import RunResult, sequenced
from emulation.schedule import ClosedFormRun, ParallelPlan, Plan, RunDescription, SlottedPlan, executor

log = logging.getLogger(__name__)

#: Runs with more transfers than this keep no per-transfer records in ``result.json``.
MAX_RECORDED_TRANSFERS = 200_000


def execute(fabric: Fabric, run: RunDescription, cost: CostModel, *, semantics: str = "round-synchronous",
            arrivals_s: Sequence[float] | None = None, iteration: int = 0) -> RunResult:
    """Simulate ``run`` on ``fabric``: a per-step plan with :func:`~emulation.flowsim.simulate.simulate`,
    a time-slotted one with :func:`~emulation.flowsim.slotted.simulate_slotted`, one on parallel
    OCSes step by step with :func:`~emulation.flowsim.parallel_ocs.simulate_parallel` (each step
    on its own schedule, from when the previous one ended).

    :param arrivals_s: real time each rank arrives (default: all at 0).
    :raises emulation.flowsim.SimulationError: the workload cannot be simulated.
    """
    w = run.workload
    log.debug("simulating %s: %d ranks, %d transfers", run.name, w.ranks, w.transfer_count)
    arrivals = list(arrivals_s) if arrivals_s is not None else [0.0] * w.ranks
    res = executor(SIMULATORS, run.schedule)(fabric, run, cost, arrivals, semantics)
    return complete(res, run, fabric, iteration, arrivals)


def _per_step(fabric: Fabric, run: RunDescription, cost: CostModel, arrivals: list[float], semantics: str) -> RunResult:
    """A per-step plan (:func:`~emulation.flowsim.simulate.simulate`, either semantics)."""
    w = run.workload
    return simulate(fabric, w, run.schedule, alpha_s=cost.alpha_s, delta_s=cost.delta_s, semantics=semantics,
                    arrivals_s=arrivals, name=run.name, record_transfers=w.transfer_count <= MAX_RECORDED_TRANSFERS)


def _slotted(fabric: Fabric, run: RunDescription, cost: CostModel, arrivals: list[float], semantics: str) -> RunResult:
    """A time-slotted plan (:func:`~emulation.flowsim.slotted.simulate_slotted`)."""
    sched = run.schedule
    res = simulate_slotted(run.workload, sched.schedule, fabric.port_gbps, alpha_s=cost.alpha_s, arrivals_s=arrivals,
                           name=run.name, relay=sched.relay)
    res.planner = sched.planner
    return res


def _parallel(fabric: Fabric, run: RunDescription, cost: CostModel, arrivals: list[float], semantics: str) -> RunResult:
    """A plan on parallel OCSes, step by step (:func:`~emulation.flowsim.parallel_ocs.simulate_parallel`)."""
    from emulation.flowsim.parallel_ocs import simulate_parallel

    sched = run.schedule
    return sequenced([simulate_parallel(step, seq, fabric.port_gbps, alpha_s=cost.alpha_s, name=run.name)
                      for step, seq in sched.parts()], run.workload, sched.planner)


#: The flow executor of each plan type (:func:`emulation.schedule.executor`): ``(fabric, run,
#: cost, arrivals, semantics) -> RunResult``.
SIMULATORS = {Plan: _per_step, SlottedPlan: _slotted, ParallelPlan: _parallel}


def execute_closed_form(fabric: Fabric, run: ClosedFormRun, cost: CostModel, *, arrivals_s: Sequence[float],
                        straggler: int | None = None, iteration: int = 0) -> RunResult:
    """``run`` in closed form (:func:`emulation.flowsim.stragglar.simulate_stragglar_switch`:
    StragglAR on a non-blocking switch, its straggler ``straggler``, default the last rank),
    filled in and checked as :func:`execute` does (:func:`emulation.checks.complete`).

    :raises emulation.flowsim.SimulationError: the closed form does not apply.
    """
    from emulation.flowsim.stragglar import simulate_stragglar_switch

    log.debug("simulating %s in closed form: %d ranks", run.name, fabric.gpus)
    res = simulate_stragglar_switch(fabric, run.size_bytes, alpha_s=cost.alpha_s, delta_s=cost.delta_s,
                                    arrivals_s=list(arrivals_s), straggler=straggler, name=run.name)
    return complete(res, run, fabric, iteration, arrivals_s)
