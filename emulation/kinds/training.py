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
:class:`emulation.torchjob.recoveries.TrainingResult`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from emulation.kinds import Kind, RunRequest, command_job
from emulation.output import Refused
from emulation.scenario.schema import EmulationSpec, FabricSpec, NamedScenario
from emulation.torchjob.recoveries import FailureSpec, JobSpec, RecoverySetup, TrainingResult
from emulation.training import report

Recovery = Literal["optical", "electrical", "migration"]


#: The ``emulation:`` keys a training scenario honours: its recoveries' packet sessions take the
#: rate, MTU, controller framework, user apps and headroom policy; the job's bytes are real (no
#: ``byte_scale``) and its rack is on one machine (no ``servers``).
EMULATION_KEYS = {"link_mbps", "mtu", "controller", "apps", "headroom", "headroom_target"}


class TrainingScenario(NamedScenario):
    """A whole training scenario file (module doc)."""

    fabric: FabricSpec
    """The rack (``topology: rack``): working and spare GPUs, their optical ports, R and the
    electrical path's rate."""
    emulation: EmulationSpec = EmulationSpec(link_mbps=20.0, headroom="skip")
    """The packet backend's settings: ``link_mbps``, ``mtu``, ``controller``, ``apps``, ``headroom``
    and ``headroom_target`` (any other key is refused); ``link_mbps`` must be a rate, not
    ``auto``: the job sends real bytes (so ``byte_scale`` does not apply), and its time dilation
    is ``port_gbps x 1000 / link_mbps``. ``headroom`` is ``skip`` unless given: ``refuse`` or
    ``warn`` probe the rate first."""
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

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        data = EmulationSpec.defaulted(data, EMULATION_KEYS, "training", link_mbps=20.0, headroom="skip")
        if isinstance(data, dict) and isinstance(data.get("emulation"), dict) and data["emulation"]["link_mbps"] == "auto":
            raise ValueError("emulation.link_mbps: a training scenario needs a rate in Mbit/s (the headroom probe "
                             "measures links, not the torch job's computation, so auto is not offered here)")
        return data

    @model_validator(mode="after")
    def _checks(self) -> TrainingScenario:
        f = self.fabric
        if f.topology != "rack":
            raise ValueError(f"fabric.topology: a training scenario runs on a rack, not {f.topology}")
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

    def recovery_setup(self) -> RecoverySetup:
        """What every recovery run starts from (:meth:`RecoverySetup.of`: the rack built, rank r
        on GPU r, the spares, the failure, the emulation's rate and TDF).

        :raises ScenarioError: the builder rejects the rack.
        """
        return RecoverySetup.of(self.fabric, self.job, self.failure, self.emulation, self.timeout_s)


def _run(req: RunRequest) -> TrainingResult:
    """Every recovery of the scenario with real packets, a fresh emulation each, its raw record
    in ``out/MODE/raw.json``, and their comparison
    (:func:`emulation.torchjob.recoveries.run_recoveries`).

    :raises Refused: PyTorch is not installed.
    :raises emulation.emulator.net.EmulationError: the emulation or the job failed.
    """
    from emulation.torchjob.launch import torch_missing
    from emulation.torchjob.recoveries import run_recoveries

    if why := torch_missing():
        raise Refused(why)
    return run_recoveries(req.scenario.recovery_setup(), req.scenario.recovery, req.out, req.progress)


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
                       lambda out, progress: KIND.run_envelope(RunRequest(sc, "packet", out, progress)))


KIND = Kind(name="training", scenario=TrainingScenario, result=TrainingResult, backends=("packet",), run=_run,
            show=report.print_summary, write=report.write, deep=lambda sc: sc.recovery_setup().check(sc.recovery),
            commands={"train": _train}, backend_of=lambda sc: "packet", checks=lambda r: r.failed_checks())
