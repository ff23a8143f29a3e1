"""One point of a parameter sweep on the flow backend: plan a collective, simulate the plan.

Used by ``scripts/reproduce_shortcircuit.py`` and ``scripts/reproduce_pccl.py``
(``specs/collectives.md``). Round-synchronous semantics, as the planners' cost model assumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulation.fabric import Fabric
from emulation.flowsim import simulate
from emulation.planners import CostModel, Plan, make_plan, plan_cost
from emulation.workloads.model import Workload

#: Above this many transfers in one step, a run is timed with the cost model instead of the
#: fluid engine (direct AllReduce on a 128-GPU torus base: 16,256 transfers x 4 paths per step
#: take ~3 minutes to simulate; the cost model gives 1.812 ms there against the engine's
#: 1.807 ms at 16 MiB, and 10.803 vs 10.802 ms on the ring base).
MAX_FLOW_TRANSFERS = 4096


@dataclass(frozen=True)
class Point:
    """Result of one sweep point.

    :ivar time_s: completion time, seconds (flow backend, or cost model: see ``method``).
    :ivar predicted_s: the cost-model time of the plan, seconds.
    :ivar reconfigurations: steps marked reconfigure.
    :ivar steps: steps executed (sub-steps of matchings counted).
    :ivar method: ``"flow"`` or ``"model"``.
    """

    time_s: float
    predicted_s: float
    reconfigurations: int
    steps: int
    method: str


def evaluate(fabric: Fabric, workload: Workload, planner: str, model: CostModel,
             max_flow_transfers: int = MAX_FLOW_TRANSFERS) -> Point:
    """Plan ``workload`` with ``planner`` on ``fabric`` and time the plan (:func:`time_plan`).

    :raises emulation.planners.PlanError: the planner cannot plan it.
    :raises emulation.flowsim.SimulationError: the plan cannot be simulated.
    """
    return time_plan(fabric, make_plan(planner, fabric, workload, model), model, max_flow_transfers)


def time_plan(fabric: Fabric, plan: Plan, model: CostModel, max_flow_transfers: int = MAX_FLOW_TRANSFERS) -> Point:
    """Time ``plan`` on the flow backend (round-synchronous), or with the cost model when a step
    has more than ``max_flow_transfers`` transfers.

    :raises emulation.flowsim.SimulationError: the plan cannot be simulated.
    """
    predicted = plan.predicted_s if plan.predicted_s is not None else plan_cost(fabric, plan, model)
    widest = max(len(s.transfers) for s in plan.workload.steps)
    if widest > max_flow_transfers:
        return Point(predicted, predicted, plan.reconfigurations, len(plan.steps), "model")
    res = simulate(fabric, plan.workload, plan, alpha_s=model.alpha_s, delta_s=model.delta_s,
                   record_transfers=False)
    return Point(res.time_s, predicted, plan.reconfigurations, len(plan.steps), "flow")
