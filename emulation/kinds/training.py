"""The ``training`` kind: a real data-parallel job on a rack with spares, a GPU failure, and the
recoveries to compare (LUMION, arXiv 2505.23105; ``experiments/lumion.yaml``).

Example::

    name: lumion
    fabric: {topology: rack, gpus: 4, spares: 4, ports_per_gpu: 2, port_gbps: 100,
             electrical_gbps: 50, reconfiguration_delay_s: 20.0e-6}
    emulation: {link_mbps: 20}
    job: {hidden: 512, layers: 2, batch: 64, steps: 50, checkpoint_every: 5}
    failure: {gpu: 2, at_step: 17}
    recovery: [optical, electrical, migration]

The job's ring of ranks starts on the working GPUs ``0..gpus-1`` (rank r on GPU r) in a ring of
circuits. ``failure.gpu`` fails once the job has completed step ``failure.at_step``. Each entry
of ``recovery`` is one run of the whole scenario on a fresh emulation
(:data:`emulation.planners.failover.RECOVERIES`). Times of the job are emulated seconds: a real
program sends real bytes (byte scale 1), so the time dilation factor is
``TDF = port_gbps x 1000 / link_mbps`` and the dark window is ``reconfiguration_delay_s x TDF``.
Runs on the packet backend only (``ocslab run`` or ``ocslab train``, which also takes
``--recovery``): the scenario becomes a :class:`~emulation.torchjob.recoveries.RecoverySetup`
and :func:`emulation.torchjob.recoveries.run_recoveries` runs every recovery; result:
:class:`emulation.training.results.TrainingResult`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from emulation.envelope import envelope
from emulation.fabric import FabricError
from emulation.kinds import Kind, RunRequest, command_job, validated
from emulation.output import Refused
from emulation.planners.failover import failover_table
from emulation.scale import Scale
from emulation.scenario.schema import EmulationSpec, FabricSpec, NamedScenario, ScenarioError
from emulation.torchjob.recoveries import FailureSpec, JobSpec, RecoverySetup
from emulation.training import report
from emulation.training.results import TrainingResult

Recovery = Literal["optical", "electrical", "migration"]


class TrainingScenario(NamedScenario):
    """A whole training scenario file (module doc)."""

    fabric: FabricSpec
    """The rack (``topology: rack``): working and spare GPUs, their optical ports, R and the
    electrical path's rate."""
    emulation: EmulationSpec = EmulationSpec(link_mbps=20.0)
    """The packet backend's settings; ``link_mbps`` must be a rate, not ``auto``: the job sends
    real bytes, so its time dilation is ``port_gbps x 1000 / link_mbps``."""
    job: JobSpec = JobSpec()
    """The training job: the model, its data, SGD and checkpoints."""
    failure: FailureSpec
    """Which working GPU fails, and when."""
    recovery: list[Recovery] = Field(min_length=1)
    """The recoveries compared, each a run on a fresh emulation: ``optical`` (a spare takes the
    failed GPU's place in the ring of circuits), ``electrical`` (the spare is reached over the
    rack's electrical path) or ``migration`` (the job restarts on fresh GPUs)."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock bound of every launch of the job, seconds."""

    @model_validator(mode="after")
    def _checks(self) -> TrainingScenario:
        f = self.fabric
        if f.topology != "rack":
            raise ValueError(f"fabric.topology: a training scenario runs on a rack, not {f.topology}")
        if self.emulation.servers:
            raise ValueError("emulation.servers: a fabric spread over servers runs collective scenarios only")
        if self.emulation.link_mbps == "auto":
            raise ValueError("emulation.link_mbps: a training scenario needs a rate in Mbit/s (the headroom probe "
                             "measures links, not the torch job's computation, so auto is not offered here)")
        if f.spares < 1:
            raise ValueError("fabric.spares: the rack needs at least one spare GPU")
        if len(set(self.recovery)) != len(self.recovery):
            raise ValueError("recovery: a recovery is listed twice")
        if "electrical" in self.recovery and f.electrical_gbps is None:
            raise ValueError("fabric.electrical_gbps: the electrical recovery reaches the spare over the rack's "
                             "electrical path; give its rate")
        if "migration" in self.recovery and f.spares < f.gpus:
            raise ValueError(f"fabric.spares: migration restarts the job on {f.gpus} fresh GPUs, the rack has "
                             f"{f.spares} spares")
        if self.failure.gpu >= f.gpus:
            raise ValueError(f"failure.gpu: {self.failure.gpu} is not a working GPU (0..{f.gpus - 1})")
        at, k = self.failure.at_step, self.job.checkpoint_every
        if at >= self.job.steps - 1:
            raise ValueError(f"failure.at_step: {at} leaves no step of the job's {self.job.steps} to fail in")
        if (at + 1) % k == 0:
            raise ValueError(f"failure.at_step: step {at} ends with a checkpoint (every {k} steps), so no completed "
                             f"step would be lost and run again; fail the GPU between two checkpoints")
        if self.job.batch < f.gpus:
            raise ValueError(f"job.batch: {self.job.batch} samples cannot be split over {f.gpus} GPUs")
        return self

    @property
    def tdf(self) -> float:
        """Time dilation factor (:class:`emulation.scale.Scale`) with byte scale 1: a real
        program sends real bytes, so it is the real port rate over the emulated one."""
        return Scale(self.emulation.link_mbps, 1.0, self.fabric.port_gbps).tdf

    @property
    def placement(self) -> tuple[int, ...]:
        """GPU of every rank at launch: rank r on GPU r."""
        return tuple(range(self.fabric.gpus))

    @property
    def spares(self) -> tuple[int, ...]:
        """The spare GPUs, in order of preference."""
        return tuple(range(self.fabric.gpus, self.fabric.gpus + self.fabric.spares))

    def recovery_setup(self) -> RecoverySetup:
        """What every recovery run starts from
        (:class:`~emulation.torchjob.recoveries.RecoverySetup`): the rack built
        (:meth:`FabricSpec.build`), the job as JSON, the placement, the spares, the failure and
        the emulation's rate and TDF.

        :raises ScenarioError: the builder rejects the rack.
        """
        return RecoverySetup(fabric=self.fabric.build(), job=self.job, placement=self.placement, spares=self.spares,
                             failure=self.failure, link_mbps=self.emulation.link_mbps, tdf=self.tdf,
                             reconfiguration_delay_s=self.fabric.reconfiguration_delay_s, timeout_s=self.timeout_s)


def _check_recoveries(sc: TrainingScenario) -> None:
    fabric = sc.fabric.build()
    try:
        for mode in sc.recovery:
            failover_table(fabric, mode, sc.placement, sc.spares)
    except FabricError as e:
        raise ScenarioError(f"fabric: {e}") from None


def _load(path: Path, data: dict) -> TrainingScenario:
    """Validate a training scenario and check that the rack builds and every recovery has its
    precomputed configurations. :raises ScenarioError: one line naming the field."""
    return validated(TrainingScenario, data, path, _check_recoveries)


def _run(req: RunRequest):
    """Every recovery of the scenario with real packets, a fresh emulation each, its raw record
    in ``out/MODE/raw.json`` (:func:`emulation.torchjob.recoveries.run_recoveries`), and their
    comparison, in a :class:`TrainingResult`.

    :raises Refused: PyTorch is not installed.
    :raises emulation.emulator.net.EmulationError: the emulation or the job failed.
    """
    from emulation.torchjob.launch import torch_available
    from emulation.torchjob.recoveries import compare_recoveries, run_recoveries

    if not torch_available():
        raise Refused("torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh, "
                      f"or {sys.executable} -m pip install torch==2.13.0)")
    sc = req.scenario
    runs, capabilities = run_recoveries(sc.recovery_setup(), sc.recovery, req.out, req.progress)
    result = TrainingResult(tdf=sc.tdf, parameters=sc.job.parameters, gradient_bytes=sc.job.gradient_bytes,
                            capabilities=capabilities, runs=runs, comparison=compare_recoveries(runs))
    return envelope("training", sc.name, "mininet", result)


def _write(env, out: Path) -> list[str]:
    """``timeline.png`` (:func:`emulation.training.report.timeline_plot`)."""
    report.timeline_plot(env.result, out / "timeline.png")
    return ["timeline.png"]


def _train(sc: TrainingScenario, args, path: Path) -> int:
    """``ocslab train``: ``ocslab run`` of the scenario, with ``--recovery`` choosing a subset."""
    if args.recovery is not None:
        wanted = [x.strip() for x in args.recovery.split(",") if x.strip()]
        bad = [x for x in wanted if x not in sc.recovery]
        if not wanted or bad:
            raise Refused(f"--recovery: {bad[0] if bad else args.recovery!r} is not a recovery of the scenario "
                          f"(it has: {', '.join(sc.recovery)})")
        sc = sc.model_copy(update={"recovery": wanted})
    return command_job(KIND, sc, args.out, "train", len(sc.recovery),
                       lambda out, progress: _run(RunRequest(sc, "mininet", out, progress)))


KIND = Kind(name="training", scenario=TrainingScenario, result=TrainingResult, backends=("mininet",), load=_load,
            run=_run, show=lambda env: report.print_summary(env.result), write=_write, commands={"train": _train},
            backend_of=lambda sc: "mininet")
