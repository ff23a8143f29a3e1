"""The two basic planners: ``none`` (stay on the base topology) and ``always`` (give every
step its ideal topology: circuits to exactly the peers it talks to).

Spec: ``specs/collectives.md`` (PCCL: ideal topology G_t* of a step = its demand graph, spare
ports as parallel circuits; the R -> 0 limit of the dynamic program).
"""

from __future__ import annotations

from emulation.fabric import Configuration, Fabric, FabricError, assign_ports
from emulation.planners.model import Plan, PlanError, plan_from_configurations
from emulation.workloads.model import Step, Workload


def plan_none(fabric: Fabric, workload: Workload) -> Plan:
    """Every step runs on ``fabric.initial``; nothing is reconfigured."""
    r = _r(fabric)
    return plan_from_configurations("none", fabric.initial, [fabric.initial] * len(workload.steps), r)


def ideal_configuration(fabric: Fabric, step: Step, current: Configuration | None = None) -> Configuration:
    """The step's demand graph as circuits on the fabric's single OCS, spare ports filled with
    parallel circuits (PCCL's G_t*), reusing the circuits of ``current`` that fit.

    :raises PlanError: the fabric has no OCS or several, or a GPU talks to more peers than it
        has ports (decomposition into matchings is the ``dp``/``greedy`` planners' job).
    """
    if len(fabric.ocs) != 1:
        raise PlanError(f"planner needs exactly one OCS, fabric {fabric.name} has {len(fabric.ocs)}")
    pairs = sorted({(min(t.src, t.dst), max(t.src, t.dst)) for t in step.transfers})
    try:
        name = fabric.ocs[0].name
        keep = current[name] if current is not None else ()
        return assign_ports(fabric, name, pairs, fill=True, keep=keep)
    except FabricError as e:
        raise PlanError(f"step {step.phase}: {e}") from None


def plan_always(fabric: Fabric, workload: Workload) -> Plan:
    """Reconfigure before every step whose ideal configuration differs from the current one."""
    configs, current = [], fabric.initial
    for s in workload.steps:
        current = ideal_configuration(fabric, s, current)
        configs.append(current)
    return plan_from_configurations("always", fabric.initial, configs, _r(fabric))


def _r(fabric: Fabric) -> float:
    return max((o.reconfiguration_delay_s for o in fabric.ocs), default=0.0)
