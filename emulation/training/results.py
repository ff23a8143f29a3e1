"""The result of a training scenario (``ocslab run``/``train``, ``result.json``'s ``result``): one record per recovery
of the failed GPU, typed (:func:`emulation.training.run.summarise` fills them).

Times in the timeline are emulated seconds after the failure; ``failure_to_rewritten_s`` also
gives the real-equivalent time (control plane as measured, dark window divided by the TDF).
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Timeline(_Record):
    """Emulated seconds after the failure at which each recovery phase ended."""

    detected: float
    decided: float
    dark: float
    rewritten: float
    restarted: float
    group_reformed: float
    first_step: float


class FailureToRewritten(_Record):
    """Failure -> new circuits carrying traffic: ``emulated`` and ``real_equivalent`` seconds,
    the dark window measured and R requested (emulated s)."""

    emulated: float
    real_equivalent: float
    dark_window_measured_s: float
    reconfiguration_delay_s: float


class Steady(_Record):
    """Median step and AllReduce time (emulated s) and samples/s over ``steps`` steps past the
    warm-up, and the flow backend's AllReduce prediction on the configuration of the time."""

    steps: int
    step_s: Optional[float]
    allreduce_s: Optional[float]
    samples_per_s: Optional[float]
    predicted_allreduce_s: Optional[float] = None


class SteadyState(_Record):
    """Steady state before the failure and after the recovery, and their step-time ratio."""

    before: Steady
    after: Steady
    after_over_before: float


class Loss(_Record):
    """The loss before and after the restart: first and last of each launch, their slopes per
    step, the checkpoint resumed from, the steps redone and how closely the replayed steps
    reproduce their first losses."""

    launch0_first: float
    launch0_last: float
    launch1_first: float
    launch1_last: float
    resumed_from: int
    loss_at_checkpoint: Optional[float]
    last_step_before_failure: int
    steps_redone: int
    launch0_slope_per_step: Optional[float]
    launch1_slope_per_step: Optional[float]
    replayed_steps: int
    replay_max_abs_diff: Optional[float]


class TrainingStep(_Record):
    """One training step of a launch: its end (emulated s after the failure), its duration, its
    AllReduce time and the loss."""

    launch: int
    step: int
    t_s: float
    step_s: float
    allreduce_s: float
    loss: float


class RecoveryRun(_Record):
    """One recovery (``optical``, ``electrical``, ``migration``) of GPU ``failed_gpu``: placements
    before and after, the ranks moved, how the failure was detected and the job restarted, the
    timeline, steady state, fitted alpha (s), loss, the switches' evidence (packets toward the
    failed GPU, OCS rules to it) and every step."""

    mode: str
    failed_gpu: int
    placement_before: list[int]
    placement_after: list[int]
    moved_ranks: list[int]
    detection: str
    restart: str
    timeline_s: Timeline
    failure_to_rewritten_s: FailureToRewritten
    steady: SteadyState
    alpha_s: float
    loss: Loss
    evidence: dict[str, Any]
    steps: list[TrainingStep]


class RecoveryComparison(_Record):
    """Step time after each recovery over the optical one's (when there is one) and over the
    step time before the failure."""

    after_over_optical: dict[str, float] = {}
    after_over_before: dict[str, float]


class TrainingResult(_Record):
    """A training scenario's result (inside the envelope, :mod:`emulation.envelope`): the TDF,
    the model's parameters and gradient bytes per AllReduce, the machine's capabilities, one
    record per recovery and their comparison."""

    tdf: float
    parameters: int
    gradient_bytes: int
    capabilities: dict[str, Any]
    runs: list[RecoveryRun]
    comparison: RecoveryComparison
