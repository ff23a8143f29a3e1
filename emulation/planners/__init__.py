"""Reconfiguration planners: ``(Fabric, Workload) -> Plan``. Pure Python, no Mininet."""

from __future__ import annotations

from collections.abc import Callable

from emulation.fabric import Fabric
from emulation.planners.basic import ideal_configuration, plan_always, plan_none
from emulation.planners.model import Plan, PlanError, StepPlan
from emulation.workloads.model import Workload

PLANNERS: dict[str, Callable[[Fabric, Workload], Plan]] = {
    "none": plan_none,
    "always": plan_always,
}


def make_plan(planner: str, fabric: Fabric, workload: Workload) -> Plan:
    """Run planner ``planner``. :raises KeyError: unknown name. :raises PlanError: infeasible."""
    try:
        fn = PLANNERS[planner]
    except KeyError:
        raise KeyError(f"unknown planner {planner!r} (known: {', '.join(PLANNERS)})") from None
    return fn(fabric, workload)


__all__ = ["PLANNERS", "Plan", "PlanError", "StepPlan", "ideal_configuration", "make_plan"]
