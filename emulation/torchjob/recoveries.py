"""A data-parallel torch job loses a GPU and recovers, once per recovery, on the packet backend;
what each recovery measured, beside the flow backend's prediction (LUMION, arXiv 2505.23105).

For every recovery (``optical``, ``electrical``, ``migration``: :data:`emulation.planners.failover.RECOVERIES`)
:func:`run_recoveries` calls the supervisor :func:`emulation.torchjob.recovery.run_recovery` on a
fresh emulation and :func:`summarise_recovery` turns its raw record (events, the ranks' launch
records, the job's step log, the switches' evidence) into the figures LUMION reports, one
:class:`RecoveryRun` each:

- the **timeline**, seconds after the failure: ``detected`` (the controller's port-status
  event), ``decided`` (spare and configuration looked up), ``dark`` (the changed circuits'
  removal acknowledged), ``rewritten`` (new circuits acknowledged: they carry traffic),
  ``restarted`` (the relaunch), ``group_reformed`` (the last rank through its first barrier
  after rendezvous), ``first_step`` (the first completed step after the restart);
- failure -> rewritten in emulated seconds and **real-equivalent** seconds: the control-plane
  part (detection, decision, OpenFlow round trips) is real software on a real clock and is kept
  as measured; the dark window, dilated by the TDF for the emulation, is divided by it;
- **steady state** before the failure and after the recovery: the median step time (s, from a
  step's start to its update applied) over the steps past ``warmup_steps`` of each launch,
  the throughput (samples/s), the median AllReduce time, and the flow backend's AllReduce
  prediction for that configuration (alpha fitted before the failure,
  :mod:`emulation.torchjob.predict`);
- **loss**: first and last of each launch and its least-squares slope per step (negative: the
  job trains), the checkpoint step resumed from, and the steps run twice (after the
  checkpoint, before the failure): the same data and weights must give the same loss, so
  their largest difference shows the restart really resumed from the checkpoint;
- the **evidence** that no packet reached the failed GPU after the rewrite.

:func:`compare_recoveries` sets the recoveries' steady states side by side. Times in the
timeline are emulated seconds after the failure; ``failure_to_rewritten_s`` also gives the
real-equivalent time. The records are typed (pydantic, unknown fields refused); the training
kind's result, :class:`TrainingResult`, holds them.

This module sits beside :mod:`emulation.torchjob.perf` for the same reason: it measures on the
packet backend and predicts with the flow backend, which the packet backend itself never
imports. The emulator is imported only when :func:`run_recoveries` runs.

Spec: ``docs/mechanisms.md`` (LUMION, arXiv 2505.23105).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from emulation.envelope import FailedCheck
from emulation.fabric import Configuration, Fabric, FabricError
from emulation.output import Progress
from emulation.planners.failover import failover_table
from emulation.scale import Scale
from emulation.sections import SectionError, StrictModel
from emulation.torchjob.predict import fit_alpha, predict_allreduce

if TYPE_CHECKING:
    from emulation.scenario.schema import EmulationSpec, FabricSpec


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


class JobSpec(StrictModel):
    """``job:`` section: the model (an MLP ``features -> hidden x layers -> classes``), the
    generated dataset (``samples`` points), the global ``batch`` (split over the ranks), SGD
    learning rate ``lr``, ``steps`` in all, a checkpoint every ``checkpoint_every`` steps,
    ``seed``; ``warmup_steps`` after each (re)launch are left out of the steady-state figures.
    ``restart``: ``warm`` (default: the relaunch assigns ranks to standby processes that have
    imported torch on every GPU, as a production job keeps warm workers) or ``cold`` (new
    processes: Python and torch start inside the recovery time)."""

    model: Literal["mlp"] = "mlp"
    """The model: ``mlp``, an MLP ``features -> hidden x layers -> classes``."""
    features: int = Field(default=32, ge=1, le=4096)
    """Input features of every sample (the MLP's input width)."""
    hidden: int = Field(default=512, ge=1, le=8192)
    """Width of every hidden layer."""
    layers: int = Field(default=2, ge=1, le=8)
    """Hidden layers."""
    classes: int = Field(default=10, ge=2, le=1000)
    """Output classes."""
    samples: int = Field(default=8192, ge=1)
    """Points of the generated dataset (labelled by a seeded random teacher network)."""
    batch: int = Field(default=64, ge=1)
    """Global batch, samples per step, split over the ranks."""
    lr: float = Field(default=0.05, gt=0)
    """SGD learning rate."""
    steps: int = Field(default=50, ge=2, le=100_000)
    """Training steps in all."""
    checkpoint_every: int = Field(default=5, ge=1)
    """Steps between two checkpoints."""
    seed: int = 0
    """Seed of the dataset, its order and the model's initial weights."""
    warmup_steps: int = Field(default=2, ge=0)
    """Steps after each (re)launch left out of the steady-state figures."""
    restart: Literal["warm", "cold"] = "warm"
    """How a recovery relaunches the job: ``warm`` (ranks go to standby processes that have
    imported torch on every GPU, as a production job keeps warm workers) or ``cold`` (new
    processes: Python and torch start inside the recovery time)."""

    @model_validator(mode="after")
    def _sizes(self) -> JobSpec:
        if self.batch > self.samples:
            raise ValueError(f"batch: {self.batch} exceeds the dataset's {self.samples} samples")
        return self

    @property
    def parameters(self) -> int:
        """Number of model parameters."""
        dims = [self.features] + [self.hidden] * self.layers + [self.classes]
        return sum(a * b + b for a, b in zip(dims, dims[1:]))

    @property
    def gradient_bytes(self) -> int:
        """Bytes every rank AllReduces per step: float32 gradients plus the loss."""
        return 4 * (self.parameters + 1)


class FailureSpec(StrictModel):
    """``failure:`` section: working GPU ``gpu`` fails as soon as the job has completed step
    ``at_step`` (0-based, as rank 0 logs it): its fabric ports go down and its processes are
    killed. A step count, not a time, so that where the failure lands relative to the last
    checkpoint (and so which steps are lost and run again) is the same on every machine."""

    gpu: int = Field(ge=0)
    """The working GPU that fails: its fabric ports go down and its processes are killed."""
    at_step: int = Field(ge=0)
    """The step after which the GPU fails (0-based, as rank 0 logs it): one between two
    checkpoints, so that completed steps are lost and run again."""


@dataclass(frozen=True)
class RecoverySetup:
    """The job, the rack and the GPU failure that every recovery of :func:`run_recoveries`
    starts from (:meth:`of` builds it from a scenario's sections).

    :param fabric: the rack (:func:`topologies.builders.rack`) at its real rates, holding the
        job's ring of circuits.
    :param job: the job (:class:`JobSpec`; the training program reads it as JSON).
    :param placement: GPU of every rank at launch; ``spares``: the spare GPUs, preferred first.
    :param failure: which working GPU fails, after which step (:class:`FailureSpec`).
    :param emulation: the scenario's ``emulation:`` section (each recovery's packet session,
        :class:`~emulation.emulator.session.PacketSession`); its ``link_mbps``: emulated port
        rate, Mbit/s.
    :param tdf: the time dilation factor of the emulation (:class:`emulation.scale.Scale` with
        byte scale 1: a real program sends real bytes, so it is the real port rate over
        ``link_mbps``).
    :param reconfiguration_delay_s: R, real seconds (emulated: R x ``tdf``).
    :param timeout_s: wall-clock bound of each launch, seconds.
    """

    fabric: Fabric
    job: JobSpec
    placement: tuple[int, ...]
    spares: tuple[int, ...]
    failure: FailureSpec
    emulation: EmulationSpec
    tdf: float
    reconfiguration_delay_s: float
    timeout_s: float

    @property
    def link_mbps(self) -> float:
        """The emulated port rate, Mbit/s (a training scenario refuses ``auto``)."""
        return float(self.emulation.link_mbps)

    @classmethod
    def of(cls, rack: FabricSpec, job: JobSpec, failure: FailureSpec, emulation: EmulationSpec,
           timeout_s: float) -> RecoverySetup:
        """The setup of a training scenario's sections: ``rack`` built (:meth:`FabricSpec.build`),
        rank r on GPU r, the spares after the working GPUs, TDF the real port rate over
        ``emulation.link_mbps`` (:class:`emulation.scale.Scale` with byte scale 1: a real program
        sends real bytes). :raises ScenarioError: the builder rejects the rack."""
        n = rack.gpus
        return cls(fabric=rack.build(), job=job, placement=tuple(range(n)), spares=tuple(range(n, n + rack.spares)),
                   failure=failure, emulation=emulation, tdf=Scale(float(emulation.link_mbps), 1.0, rack.port_gbps).tdf,
                   reconfiguration_delay_s=rack.reconfiguration_delay_s, timeout_s=timeout_s)

    def check(self, modes: list[str]) -> None:
        """That every recovery of ``modes`` has its precomputed configurations
        (:func:`emulation.planners.failover.failover_table`). :raises SectionError: ``fabric: ...``."""
        try:
            for mode in modes:
                failover_table(self.fabric, mode, self.placement, self.spares)
        except FabricError as e:
            raise SectionError(f"fabric: {e}") from None


def _steady(steps: list[dict], warmup: int, batch: int) -> dict:
    """Median step time / AllReduce time and throughput of ``steps`` past the first ``warmup``."""
    use = steps[warmup:] if len(steps) > warmup else steps
    if not use:
        return {"steps": 0, "step_s": None, "allreduce_s": None, "samples_per_s": None}
    step_s = statistics.median(r["t_end"] - r["t_start"] for r in use)
    return {"steps": len(use), "step_s": step_s, "allreduce_s": statistics.median(r["allreduce_s"] for r in use),
            "samples_per_s": batch / step_s}


def _slope(rows: list[dict]) -> float | None:
    """Least-squares slope of the loss over the steps of ``rows`` (loss per step)."""
    if len(rows) < 2:
        return None
    return float(np.polyfit([r["step"] for r in rows], [r["loss"] for r in rows], 1)[0])


def summarise_recovery(raw: dict, setup: RecoverySetup) -> RecoveryRun:
    """The figures of one recovery run (module doc) from the record of
    :func:`emulation.torchjob.recovery.run_recovery` (CLOCK_MONOTONIC times) for ``setup``.

    :raises ValueError: the record lacks a phase (e.g. no step after the restart).
    """
    ev = raw["events"]
    t_fail = ev["failure"]["t"]
    fo = ev["failover"]
    rows = [r for r in raw["steps"] if "step" in r]
    before = [r for r in rows if r["launch"] == 0 and r["t_end"] <= t_fail]
    after = [r for r in rows if r["launch"] == 1]
    if not before or not after:
        raise ValueError(f"{raw['mode']}: no completed step {'before the failure' if not before else 'after the restart'}")
    relaunch = raw["launches"][1]
    resumed = relaunch[0]["resumed_from"] if relaunch else -1
    timeline = {
        "detected": ev["gpu-failed"]["t_detected"] - t_fail,
        "decided": fo["t_decided"] - t_fail,
        "dark": fo.get("t_dark", fo["t_request"]) - t_fail,
        "rewritten": fo["t_live"] - t_fail,
        "restarted": ev["restart"]["t"] - t_fail,
        "group_reformed": max(r["t_group"] for r in relaunch) - t_fail,
        "first_step": after[0]["t_end"] - t_fail,
    }
    dark = fo.get("dark_window_measured_s", 0.0)
    rewritten = timeline["rewritten"]
    job, fabric = setup.job, setup.fabric
    st_before = _steady(before, job.warmup_steps, job.batch)
    st_after = _steady(after, job.warmup_steps, job.batch)
    nbytes = job.gradient_bytes
    old, new = raw["placement"]
    after_config = Configuration.from_json(fo["configuration"])  # what the controller installed
    emu_fabric = _emulated(fabric, setup.link_mbps)
    alpha = fit_alpha(emu_fabric, fabric.initial, old, nbytes, st_before["allreduce_s"])
    st_before["predicted_allreduce_s"] = predict_allreduce(emu_fabric, fabric.initial, old, nbytes, alpha)
    st_after["predicted_allreduce_s"] = predict_allreduce(emu_fabric, after_config, new, nbytes, alpha)
    loss_at = {r["step"]: r["loss"] for r in before}
    last_before = before[-1]["step"]
    replayed = [r for r in after if r["step"] in loss_at]
    return RecoveryRun.model_validate({
        "mode": raw["mode"],
        "failed_gpu": raw["failed_gpu"],
        "placement_before": old,
        "placement_after": new,
        "moved_ranks": fo["moved"],
        "detection": ev["gpu-failed"].get("detection", "port-status"),
        "restart": ev["restart"].get("restart", "cold"),
        "timeline_s": timeline,
        "failure_to_rewritten_s": {"emulated": rewritten, "real_equivalent": rewritten - dark + dark / setup.tdf,
                                   "dark_window_measured_s": dark,
                                   "reconfiguration_delay_s": fo.get("reconfiguration_delay_s", 0.0)},
        "steady": {"before": st_before, "after": st_after,
                   "after_over_before": st_after["step_s"] / st_before["step_s"]},
        "alpha_s": alpha,
        "loss": {"launch0_first": before[0]["loss"], "launch0_last": before[-1]["loss"],
                 "launch1_first": after[0]["loss"], "launch1_last": after[-1]["loss"],
                 "resumed_from": resumed, "loss_at_checkpoint": loss_at.get(resumed),
                 "last_step_before_failure": last_before, "steps_redone": last_before - resumed,
                 "launch0_slope_per_step": _slope(before), "launch1_slope_per_step": _slope(after),
                 "replayed_steps": len(replayed),
                 "replay_max_abs_diff": max((abs(r["loss"] - loss_at[r["step"]]) for r in replayed), default=None)},
        "evidence": raw["evidence"],
        "steps": [{"launch": r["launch"], "step": r["step"], "t_s": r["t_end"] - t_fail,
                   "step_s": r["t_end"] - r["t_start"], "allreduce_s": r["allreduce_s"], "loss": r["loss"]}
                  for r in rows],
    })


def _emulated(fabric: Fabric, link_mbps: float) -> Fabric:
    """``fabric`` at the emulated rates (the job sends real bytes: byte scale 1)."""
    f = link_mbps / 1000 / fabric.port_gbps
    eps = tuple(dataclasses.replace(e, port_gbps=e.port_gbps * f if e.port_gbps else None) for e in fabric.eps)
    return dataclasses.replace(fabric, port_gbps=link_mbps / 1000, eps=eps)


#: The largest difference between a replayed step's loss and its first run's: float32 training
#: with one data order and one reduction order gives the same sums again.
REPLAY_TOLERANCE = 1e-3


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

    def failed_checks(self) -> list[FailedCheck]:
        """The checks every recovery holds, those that failed: ``isolation`` (no packet reached
        the failed GPU's switch ports after the rewrite, and no OCS rule outputs to them) and
        ``resume`` (the steps run again from the checkpoint reproduce their first losses within
        :data:`REPLAY_TOLERANCE`)."""
        out = []
        for r in self.runs:
            after = r.evidence["packets_to_failed_gpu"]["after_rewrite"]
            rules = r.evidence["ocs_rules_to_failed_gpu"]
            if after or rules:
                out.append(FailedCheck(check="isolation", where=r.mode,
                                       detail=f"{after} packets reached GPU {r.failed_gpu}'s switch ports after the "
                                              f"rewrite, {len(rules)} OCS rules output to them"))
            diff = r.loss.replay_max_abs_diff
            if diff is None or diff > REPLAY_TOLERANCE:
                out.append(FailedCheck(check="resume", where=r.mode, detail=(
                    f"the {r.loss.replayed_steps} steps run again from the checkpoint of step {r.loss.resumed_from} "
                    + ("were not found" if diff is None else f"differ from their first losses by up to {diff:.1e} "
                       f"(at most {REPLAY_TOLERANCE:g})"))))
        return out


def run_recoveries(setup: RecoverySetup, modes: list[str], out: Path,
                   progress: Progress | None = None) -> TrainingResult:
    """Run the job of ``setup`` once per recovery of ``modes`` with real packets, a fresh
    emulation each (:func:`emulation.torchjob.recovery.run_recovery`, its files in ``out/MODE``
    and its raw record in ``out/MODE/raw.json``), summarise each (:func:`summarise_recovery`) and
    compare them (:func:`compare_recoveries`).

    :returns: one :class:`RecoveryRun` per mode, in order, and the machine's capabilities
        (:func:`emulation.emulator.capabilities.detect`), in a :class:`TrainingResult`.
    :raises emulation.emulator.net.EmulationError: the emulation or the job failed.
    :raises ValueError: a run's record lacks a phase (:func:`summarise_recovery`).
    """
    from emulation.emulator.capabilities import detect
    from emulation.torchjob.recovery import run_recovery

    caps = detect()
    runs = []
    for i, mode in enumerate(modes):
        if progress:
            progress(mode, i, len(modes))
        raw = run_recovery(setup.fabric, setup.job.model_dump(), list(setup.placement), list(setup.spares), mode,
                           setup.failure.gpu, setup.failure.at_step, setup.emulation,
                           setup.reconfiguration_delay_s * setup.tdf, out / mode, setup.timeout_s,
                           restart=setup.job.restart)
        (out / mode / "raw.json").write_text(json.dumps(raw, indent=1))
        runs.append(summarise_recovery(raw, setup))
    if progress:
        progress("done", len(modes), len(modes))
    return TrainingResult(tdf=setup.tdf, parameters=setup.job.parameters, gradient_bytes=setup.job.gradient_bytes,
                          capabilities=caps.to_json(), runs=runs, comparison=compare_recoveries(runs))


def compare_recoveries(runs: list[RecoveryRun]) -> RecoveryComparison:
    """Steady-state step time after each recovery over the optical one's (and over the step
    time before the failure), when an optical run is present. Samples/s is batch / step time,
    so ``after_over_optical`` is also the optical recovery's throughput over each one's."""
    by = {r.mode: r for r in runs}
    optical = {}
    if "optical" in by:
        ref = by["optical"].steady.after.step_s
        optical = {m: r.steady.after.step_s / ref for m, r in by.items()}
    return RecoveryComparison(after_over_optical=optical,
                              after_over_before={m: r.steady.after_over_before for m, r in by.items()})
