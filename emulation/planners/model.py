"""The Plan form: what the fabric does over a workload's steps.

A plan gives, for every step, the configuration the step runs on and whether the fabric must be
reconfigured to reach it (``reconfigure``: the changed circuits go dark for R first) or not
(``keep``). Both backends execute plans; planners never import Mininet.

A plan carries the workload it is for (:attr:`Plan.workload`): a planner may split a step whose
GPUs talk to more peers than they have ports into sub-steps, one per group of matchings (each
sub-step runs on its own circuits), so backends execute ``plan.workload``.

Spec: ``docs/architecture.md`` (plan), ``docs/mechanisms.md`` (PCCL, arXiv 2509.15450: keep / reconfigure per step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from emulation.fabric import Configuration, Fabric
from emulation.workloads.model import Workload

Action = Literal["keep", "reconfigure"]


class PlanError(ValueError):
    """A plan cannot be made for this fabric and workload (e.g. a step's degree exceeds ports)."""


@dataclass(frozen=True)
class StepPlan:
    """The configuration step ``i`` runs on, and whether reaching it needs a reconfiguration."""

    action: Action
    configuration: Configuration


@dataclass(frozen=True)
class Plan:
    """Per-step configurations of one run, starting from ``initial``.

    :param planner: name of the planner that made it.
    :param reconfiguration_delay_s: R (real seconds) of each reconfiguration.
    :param workload: the workload whose steps ``steps`` follow (module doc).
    :param predicted_s: the planner's cost-model time of the plan (seconds), if it computed one.
    """

    planner: str
    initial: Configuration
    steps: tuple[StepPlan, ...]
    reconfiguration_delay_s: float
    workload: Workload
    predicted_s: float | None = None

    @property
    def reconfigurations(self) -> int:
        """Number of steps marked ``reconfigure``."""
        return sum(s.action == "reconfigure" for s in self.steps)

    def to_json(self) -> dict:
        """``{"planner", "reconfiguration_delay_s", "predicted_s", "initial", "steps": [{"action",
        "configuration"}]}``."""
        return {
            "planner": self.planner,
            "reconfiguration_delay_s": self.reconfiguration_delay_s,
            "predicted_s": self.predicted_s,
            "initial": self.initial.to_json(),
            "steps": [{"action": s.action, "configuration": s.configuration.to_json()} for s in self.steps],
        }


def plan_from_configurations(
    planner: str, initial: Configuration, configs: list[Configuration], r_s: float,
    workload: Workload, predicted_s: float | None = None,
) -> Plan:
    """Mark each step ``reconfigure`` exactly when its configuration differs from the previous.

    :raises PlanError: ``configs`` and ``workload.steps`` differ in length.
    """
    if len(configs) != len(workload.steps):
        raise PlanError(f"{len(configs)} configurations for {len(workload.steps)} steps")
    steps, current = [], initial
    for c in configs:
        steps.append(StepPlan("keep" if c == current else "reconfigure", c))
        current = c
    return Plan(planner, initial, tuple(steps), r_s, workload, predicted_s)


def reconfiguration_delay(fabric: Fabric) -> float:
    """R of the fabric: the largest OCS reconfiguration delay, seconds (0 without an OCS)."""
    return max((o.reconfiguration_delay_s for o in fabric.ocs), default=0.0)
