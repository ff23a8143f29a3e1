"""Reconfiguration planners: ``(Fabric, Workload, CostModel) -> Plan`` (:class:`emulation.schedule.Plan`). Pure Python, no Mininet.

``none`` stays on the base topology, ``always`` gives every step its ideal topology, ``greedy``
and ``dp`` decide when reconfiguring pays (:mod:`emulation.planners.pccl`), ``overlap`` wires
the next step's peers while the current step runs (:mod:`emulation.planners.overlap`, SWOT).

Beside them, :mod:`emulation.planners.allocators`: slice allocators for a multi-tenant torus rack
(contiguous blocks, and Morphlux's photonic circuits routed by an integer program, arXiv
2508.03674), and :mod:`emulation.planners.tenants`: tenants placed by the photonic allocator
with a ring of circuits each on one emulated OCS. Importing this package does not import them.

WAN traffic engineering plans routes rather than circuits: :mod:`emulation.planners.tunnels`
(k-shortest tunnels) and :mod:`emulation.planners.te` (the TE formulations and the select-group
bucket weights of their splits; Symphony, arXiv 2510.11937). Neither is imported here.
"""

from __future__ import annotations

from collections.abc import Callable

from emulation.bulk import gc_paused
from emulation.fabric import Fabric
from emulation.planners.basic import plan_always, plan_none
from emulation.planners.cost import CostModel, StepCoster, plan_cost, topology_key
from emulation.planners.ideal import ideal_configuration, ideal_substeps, matching_groups
from emulation.planners.overlap import plan_overlap
from emulation.planners.pccl import plan_dp, plan_greedy, plan_sweep
from emulation.schedule import Plan, PlanError
from emulation.workloads.model import Workload

PLANNERS: dict[str, Callable[[Fabric, Workload, CostModel | None], Plan]] = {
    "none": plan_none,
    "always": plan_always,
    "greedy": plan_greedy,
    "dp": plan_dp,
    "overlap": plan_overlap,
}


def make_plan(planner: str, fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """Run planner ``planner`` with cost model ``model`` (default alpha = delta = 0).

    Backends execute ``plan.workload`` (steps may be split into sub-steps of matchings).

    :raises KeyError: unknown name. :raises PlanError: infeasible.
    """
    try:
        fn = PLANNERS[planner]
    except KeyError:
        raise KeyError(f"unknown planner {planner!r} (known: {', '.join(PLANNERS)})") from None
    with gc_paused():  # a plan of 131,072 GPUs makes millions of circuits (emulation.bulk)
        return fn(fabric, workload, model)


__all__ = ["PLANNERS", "CostModel", "StepCoster", "ideal_configuration", "ideal_substeps", "make_plan",
           "matching_groups", "plan_cost", "plan_sweep", "topology_key"]
