"""The Plan form: what the fabric does over a workload's steps.

A plan gives, for every step, the configuration the step runs on and whether the fabric must be
reconfigured to reach it (``reconfigure``: the changed circuits go dark for R first) or not
(``keep``). Both backends execute plans; planners never import Mininet.

Spec: ``shared/DESIGN.md`` (plan), ``specs/collectives.md`` (PCCL: keep / reconfigure per step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from emulation.fabric import Configuration

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
    """

    planner: str
    initial: Configuration
    steps: tuple[StepPlan, ...]
    reconfiguration_delay_s: float = 0.0

    @property
    def reconfigurations(self) -> int:
        """Number of steps marked ``reconfigure``."""
        return sum(s.action == "reconfigure" for s in self.steps)

    def to_json(self) -> dict:
        """``{"planner", "reconfiguration_delay_s", "initial", "steps": [{"action", "configuration"}]}``."""
        return {
            "planner": self.planner,
            "reconfiguration_delay_s": self.reconfiguration_delay_s,
            "initial": self.initial.to_json(),
            "steps": [{"action": s.action, "configuration": s.configuration.to_json()} for s in self.steps],
        }


def plan_from_configurations(
    planner: str, initial: Configuration, configs: list[Configuration], r_s: float
) -> Plan:
    """Mark each step ``reconfigure`` exactly when its configuration differs from the previous."""
    steps, current = [], initial
    for c in configs:
        steps.append(StepPlan("keep" if c == current else "reconfigure", c))
        current = c
    return Plan(planner, initial, tuple(steps), r_s)
