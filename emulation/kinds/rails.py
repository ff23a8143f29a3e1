"""The ``rails`` kind: a training job on a rail-optimised fabric whose rails are optical circuit
switches reconfigured at parallelism-phase boundaries (Opus, arXiv 2507.08119), swept over the
reconfiguration delay R and the control mode (``experiments/rails_*.yaml``).

Example (``experiments/rails_llama.yaml``)::

    name: rails_llama
    rails:
      model: llama3-8b
      parallel: {tp: 4, pp: 2, dp: 2, micro_batches: 24}
      compute: {gpu_tflops: 312, mfu: 0.53}
      fabric: {servers: 4, gpus_per_server: 4, port_gbps: 100, ports_per_gpu: 2}
      control: {rtt_s: 0.002}
      sweep_s: [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3]
      modes: [eps, on-demand, speculative]
      larger:
        - {servers: 128, gpus_per_server: 8, parallel: {tp: 8, pp: 8, dp: 16, micro_batches: 32}}

``model`` names a published configuration (:data:`emulation.workloads.iteration.MODELS`) or
gives one field by field (:class:`~emulation.workloads.iteration.TransformerSpec`); ``parallel``
and ``compute`` are :class:`~emulation.workloads.iteration.ParallelSpec` and
:class:`~emulation.workloads.iteration.ComputeSpec`. ``fabric.servers`` must be ``pp x dp`` and
``gpus_per_server`` the TP degree (TP fills a server; every other group then lies on one rail).
``paper`` may hold a published table to print beside the results. ``larger`` runs the same model
and sweep on bigger rail fabrics. ``ocslab run`` sweeps on the flow backend
(:class:`emulation.rails.results.RailsResult`); ``ocslab train`` runs ``torch_job``
(:class:`emulation.torchjob.rails_job.TorchJobSpec`) on the packet backend
(:class:`emulation.torchjob.rails_job.TorchJobResult`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, Field, field_validator, model_validator

from emulation.envelope import envelope
from emulation.flowsim.iteration import MODES
from emulation.flowsim.rail_sweep import rail_trace
from emulation.kinds import Kind, RunRequest, command_job, validated
from emulation.output import Refused
from emulation.rails import report
from emulation.rails.results import RailsResult
from emulation.scenario.schema import NamedScenario, ScenarioError, StrictModel
from emulation.torchjob.rails_job import TorchJobResult, TorchJobSpec
from emulation.workloads.iteration import MODELS, ComputeSpec, IterationTrace, ParallelSpec, TransformerSpec
from topologies.rail_network import RailFabric


def _known_model(v):
    if isinstance(v, str) and v not in MODELS:
        raise ValueError(f"unknown model {v!r} (known: {', '.join(MODELS)}; or give its fields)")
    return v


#: A model named (:data:`~emulation.workloads.iteration.MODELS`) or given field by field.
ModelRef = Annotated[Union[str, TransformerSpec], AfterValidator(_known_model)]


def transformer_of(ref: str | TransformerSpec) -> TransformerSpec:
    """The :class:`TransformerSpec` of a :data:`ModelRef`."""
    return MODELS[ref] if isinstance(ref, str) else ref


class ControlSection(StrictModel):
    """``control:`` the round trip of one request to the Opus controller, seconds."""

    rtt_s: float = Field(default=0.002, ge=0, le=10)
    """Round trip of one request to the Opus controller, seconds."""


class LargerFabric(StrictModel):
    """One ``larger:`` entry: a bigger rail fabric, the parallelism that fills it and optionally
    another ``model`` (default: the scenario's)."""

    servers: int = Field(ge=2)
    """Servers: ``pp x dp`` of this entry's ``parallel``."""
    gpus_per_server: int = Field(ge=1)
    """GPUs per server: this entry's TP degree."""
    parallel: ParallelSpec
    """The parallelism that fills this fabric."""
    model: ModelRef | None = None
    """Another model for this fabric (a name or its fields); none: the scenario's."""

    def transformer(self, default: TransformerSpec) -> TransformerSpec:
        """This entry's model, or ``default``."""
        return default if self.model is None else transformer_of(self.model)


class PaperTable(StrictModel):
    """``paper:`` a published table to print beside ours: ``baseline_s`` (no controller) and the
    iteration times per mode at the scenario's ``sweep_s`` (``null`` where it has none);
    ``source`` cites it."""

    source: str = ""
    """Where the table is published."""
    baseline_s: float | None = Field(default=None, gt=0)
    """The published iteration time without a controller, seconds; none: not published."""
    times_s: dict[str, list[float | None]] = Field(default_factory=dict)
    """Published iteration times per control mode, seconds, one per ``sweep_s`` entry (null
    where the table has none)."""


class RailsSection(StrictModel):
    """``rails:`` the job, the fabric, the control plane and the sweep."""

    model: ModelRef
    """The model: a published configuration's name (``llama3-8b``, ``llama3-70b``,
    ``deepseek-moe-16b``) or its fields."""
    parallel: ParallelSpec
    """Parallelism degrees and the batch."""
    compute: ComputeSpec = ComputeSpec()
    """The GPUs' achieved compute rate and element sizes."""
    fabric: RailFabric
    """The rail fabric: servers, GPUs per server, ports and rates."""
    control: ControlSection = ControlSection()
    """The control plane: the round trip to the Opus controller."""
    sweep_s: list[float] = Field(min_length=1)
    """Reconfiguration delays R swept, seconds, distinct and ascending."""
    modes: list[str] = Field(default_factory=lambda: ["eps", "on-demand", "speculative"], min_length=1)
    """Control modes compared, each once: ``eps`` (electrical rails, no controller; the
    baseline), ``on-demand`` (a phase waits for its circuits), ``speculative`` (the next phase's
    circuits are asked for early, preempting) or ``speculative-deferred`` (asked early, granted by
    the on-demand rule)."""
    iterations: int = Field(default=3, ge=2, le=20)
    """Iterations every replay runs (the first warms up)."""
    larger: list[LargerFabric] = Field(default_factory=list)
    """Bigger rail fabrics the same model and sweep also run on."""
    paper: PaperTable | None = None
    """A published table printed beside the results; none: no table."""
    torch_job: TorchJobSpec | None = None
    """The torch job ``ocslab train`` runs on the packet backend; none: the scenario has no torch job."""

    @field_validator("sweep_s")
    @classmethod
    def _sweep(cls, v: list[float]) -> list[float]:
        if any(x < 0 for x in v) or v != sorted(set(v)):
            raise ValueError(f"need distinct delays >= 0 in ascending order, got {v}")
        return v

    @field_validator("modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if m not in MODES]
        if bad or len(set(v)) != len(v):
            raise ValueError(f"{bad[0] if bad else 'a repeated mode'!r}: modes are {', '.join(MODES)}")
        return v

    @model_validator(mode="after")
    def _shape(self):
        _check_shape(self.fabric.servers, self.fabric.gpus_per_server, self.parallel, "")
        for i, big in enumerate(self.larger):
            _check_shape(big.servers, big.gpus_per_server, big.parallel, f"larger.{i}.")
        for where, p in [("parallel", self.parallel)] + [(f"larger.{i}.parallel", b.parallel)
                                                         for i, b in enumerate(self.larger)]:
            if self.fabric.ports_per_gpu < 2 and max(p.dp, p.pp, p.ep, p.dp // p.ep) > 2:
                raise ValueError(f"{where}: groups of more than 2 servers need rings of circuits, 2 rail ports "
                                 f"per GPU (fabric.ports_per_gpu is 1)")
        if self.paper is not None:
            for mode, row in self.paper.times_s.items():
                if mode not in MODES or len(row) != len(self.sweep_s):
                    raise ValueError(f"paper.times_s.{mode}: needs a mode's {len(self.sweep_s)} times, one per "
                                     f"sweep_s entry")
        return self

    def transformer(self) -> TransformerSpec:
        """The model as a :class:`TransformerSpec`. :raises ValueError: inconsistent fields."""
        return transformer_of(self.model)

    def trace(self) -> IterationTrace:
        """The phase trace of one iteration of the model on the scenario's fabric
        (:func:`emulation.flowsim.rail_sweep.rail_trace`). :raises ValueError: as there."""
        return rail_trace(self.transformer(), self.parallel, self.compute, self.fabric.network(),
                          self.fabric.gpus_per_server)


def _check_shape(servers: int, gpus: int, par: ParallelSpec, where: str) -> None:
    if par.tp != gpus:
        raise ValueError(f"{where}parallel.tp: TP fills a server, so it must equal gpus_per_server ({gpus}), "
                         f"got {par.tp}")
    if par.pp * par.dp != servers:
        raise ValueError(f"{where}parallel: pp x dp = {par.pp * par.dp} servers, the fabric has {servers}")
    if par.dp % par.ep:
        raise ValueError(f"{where}parallel.ep: must divide dp ({par.dp}), got {par.ep}")


class RailsScenario(NamedScenario):
    """A whole rail scenario file (module doc); ``ocslab run`` sweeps it on the flow backend,
    ``ocslab train`` runs its torch job on the packet backend (it needs ``rails.torch_job``)."""

    rails: RailsSection
    """The job, the rail fabric, the control plane and the sweep."""
    backend: Literal["flow"] = "flow"
    """Where ``ocslab run`` sweeps it: ``flow`` (the only backend of the sweep; ``ocslab
    train`` runs the torch job with packets)."""

    @model_validator(mode="after")
    def _torch_job(self):
        if self.rails.torch_job is None:
            return self
        f, c = self.rails.fabric, self.rails.compute
        if f.port_gbps > 1.0 or f.scaleup_gbps != f.port_gbps:
            raise ValueError(f"rails.torch_job: the emulated links all run at one rate of at most 1 Gbit/s: rails.fabric."
                             f"port_gbps ({f.port_gbps:g}) must be <= 1 and equal scaleup_gbps ({f.scaleup_gbps:g})")
        asked = self.rails.torch_job.link_mbps
        if isinstance(asked, float) and asked > f.port_gbps * 1000:
            raise ValueError(f"rails.torch_job.link_mbps: {asked:g} Mbit/s is above the fabric's port rate "
                             f"({f.port_gbps * 1000:g} Mbit/s): time dilation only slows the job down")
        if c.bytes_per_element != 4 or c.grad_bytes != 4:
            raise ValueError("rails.torch_job: the torch job trains in float32: rails.compute.bytes_per_element and "
                             "grad_bytes must be 4")
        p = self.rails.parallel
        if p.optimizer != "ddp" or p.ep != 1:
            raise ValueError("rails.torch_job: the torch job runs optimizer: ddp (gloo has no reduce-scatter) and no "
                             "expert parallelism (ep: 1)")
        if isinstance(self.rails.model, str):
            raise ValueError("rails.torch_job: the torch job's model is given field by field (rails.model), small enough "
                             "to run on the emulated GPUs")
        if self.rails.fabric.gpus_per_server < 2:
            raise ValueError("rails.torch_job: rails.fabric.gpus_per_server must be >= 2 (the rails start in different "
                             "configurations so that every server reaches every other)")
        return self


def _deep(sc: RailsScenario) -> None:
    r = sc.rails
    try:
        model = r.transformer()
    except ValueError as e:
        raise ScenarioError(f"rails.model: {e}") from None
    todo = [("rails.parallel", r.parallel, model)]
    for i, big in enumerate(r.larger):
        try:
            todo.append((f"rails.larger.{i}.parallel", big.parallel, big.transformer(model)))
        except ValueError as e:
            raise ScenarioError(f"rails.larger.{i}.model: {e}") from None
    for where, par, model in todo:
        if par.pp > model.layers:
            raise ScenarioError(f"{where}.pp: {par.pp} stages for {model.layers} layers")
        if par.ep > 1 and not model.moe:
            raise ScenarioError(f"{where}.ep: {model.name} has no experts, ep must be 1")


def _load(path: Path, data: dict) -> RailsScenario:
    """Validate a rail scenario; build its model and phase trace once to check them.
    :raises ScenarioError: one line naming the field."""
    return validated(RailsScenario, data, path, _deep)


def _run(req: RunRequest):
    """Every fabric's sweep on the flow backend (:func:`emulation.rails.run.run_rails`)."""
    from emulation.rails.run import run_rails

    return envelope("rails", req.scenario.name, "flow", run_rails(req.scenario, req.progress))


def _train(sc: RailsScenario, args, path: Path) -> int:
    """``ocslab train``: the scenario's torch job on emulated rails under each control mode
    (:func:`emulation.torchjob.rails_job.run_rail_job`), beside the flow backend's replay."""
    from emulation.torchjob.launch import torch_available
    from emulation.torchjob.rails_job import run_rail_job

    r = sc.rails
    if args.recovery is not None:
        raise Refused("--recovery: applies to training scenarios (LUMION), not rails ones")
    if sc.rails.torch_job is None:
        raise Refused(f"{path}: rails.torch_job: missing (the torch job's section); ocslab run sweeps the "
                      f"scenario on the flow backend")
    if not torch_available():
        raise Refused("torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
    return command_job(KIND, sc, args.out, "train", len(sc.rails.torch_job.modes),
                       lambda out, progress: envelope("rails", sc.name, "both", run_rail_job(
                           r.trace(), r.fabric.network(), r.fabric.gpus_per_server, r.torch_job, out, progress)))


#: A rail scenario's result: its sweep (``ocslab run``) or its torch job (``ocslab train``).
RailsOutcome = Union[RailsResult, TorchJobResult]

KIND = Kind(name="rails", scenario=RailsScenario, result=RailsOutcome, backends=("flow",), load=_load, run=_run,
            show=report.show, write=report.write, commands={"train": _train})
