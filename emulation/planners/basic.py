"""The two basic planners: ``none`` (stay on the base topology) and ``always`` (give every
step its ideal topology: circuits to exactly the peers it talks to, a step whose GPUs have more
peers than ports split into sub-steps of matchings).

Spec: ``docs/mechanisms.md`` (PCCL, arXiv 2509.15450: ideal topology G_t*; ``always`` is the R -> 0 limit of the
dynamic program, ``none`` its R -> infinity limit).
"""

from __future__ import annotations

from emulation.fabric import Fabric
from emulation.planners.cost import CostModel
from emulation.schedule import Plan, plan_from_configurations, reconfiguration_delay
from emulation.planners.pccl import Choice, PlanContext
from emulation.workloads.model import Workload


def plan_none(fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """Every step runs on ``fabric.initial``; nothing is reconfigured."""
    return plan_from_configurations("none", fabric.initial, [fabric.initial] * len(workload.steps),
                                    reconfiguration_delay(fabric), workload)


def plan_always(fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """Reconfigure to every step's ideal topology (sub-steps of matchings when a GPU has more
    peers than ports); consecutive steps with the same ideal share it.

    :raises PlanError: the fabric has no single OCS.
    """
    ctx = PlanContext(fabric, workload, model or CostModel())
    choices: list[Choice] = list(ctx.ideals)
    return ctx.realise("always", choices)

