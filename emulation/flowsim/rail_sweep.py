"""Sweep a training iteration on photonic rails over the control mode and the reconfiguration
delay R (Opus, arXiv 2507.08119), on the flow backend: the phase trace of one iteration
(:func:`rail_trace`, from :func:`emulation.workloads.iteration.build_trace`) replayed under every
mode and every R (:func:`emulation.flowsim.iteration.simulate_iteration`).

The *overhead* of a replay is its iteration time over the electrical rails' (``eps``: the same
job, no controller, no reconfiguration) minus one. :func:`sweep_fabric` sweeps one fabric into a
:class:`FabricRun`; :func:`steady_timelines` keeps what every rank did in one steady iteration
per mode. Times are seconds of virtual time, except ``wall_s`` and ``replay_s`` (this machine's).

A scenario's sweep is its :class:`RailSweepSpec` (the ``rails:`` section: the model, its
parallelism, the fabric, the controller's round trip, the delays and modes swept, larger fabrics
and a published table to compare with); :func:`sweep_rails` runs it into a :class:`RailsResult`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from emulation.flowsim.iteration import MODES, simulate_iteration
from emulation.flowsim.rail_times import tp_allreduce_s
from emulation.output import Progress
from emulation.sections import SectionError, StrictModel
from emulation.workloads.iteration import (ComputeSpec, IterationTrace, ModelRef, ParallelSpec, TransformerSpec,
                                           build_trace, transformer_of)
from topologies.rail_network import RailFabric, RailNetwork

log = logging.getLogger(__name__)


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
    iteration times per mode at the scenario's ``reconfiguration_delay_s`` (``null`` where it has none);
    ``source`` cites it."""

    source: str = ""
    """Where the table is published."""
    baseline_s: float | None = Field(default=None, gt=0)
    """The published iteration time without a controller, seconds; none: not published."""
    times_s: dict[str, list[float | None]] = Field(default_factory=dict)
    """Published iteration times per control mode, seconds, one per ``reconfiguration_delay_s`` entry (null
    where the table has none)."""


def _check_shape(servers: int, gpus: int, par: ParallelSpec, where: str) -> None:
    if par.tp != gpus:
        raise ValueError(f"{where}parallel.tp: TP fills a server, so it must equal gpus_per_server ({gpus}), "
                         f"got {par.tp}")
    if par.pp * par.dp != servers:
        raise ValueError(f"{where}parallel: pp x dp = {par.pp * par.dp} servers, the fabric has {servers}")
    if par.dp % par.ep:
        raise ValueError(f"{where}parallel.ep: must divide dp ({par.dp}), got {par.ep}")


class RailSweepSpec(StrictModel):
    """``rails:`` the job, the fabric, the control plane and the sweep. ``fabric.servers`` must
    be ``pp x dp`` and ``gpus_per_server`` the TP degree (TP fills a server; every other group
    then lies on one rail)."""

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
    reconfiguration_delay_s: list[float] = Field(min_length=1)
    """Reconfiguration delays R swept, seconds, distinct and ascending (``reconfiguration_delay_s``, the old
    spelling, loads as this with a warning)."""
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

    @model_validator(mode="before")
    @classmethod
    def _old_spelling(cls, data):
        if isinstance(data, dict) and "sweep_s" in data:
            if "reconfiguration_delay_s" in data:
                raise ValueError("sweep_s: give the delays once, as reconfiguration_delay_s")
            log.warning("rails.sweep_s is deprecated: it is read as rails.reconfiguration_delay_s (write it there)")
            data = {("reconfiguration_delay_s" if k == "sweep_s" else k): v for k, v in data.items()}
        return data

    @field_validator("reconfiguration_delay_s")
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
                if mode not in MODES or len(row) != len(self.reconfiguration_delay_s):
                    raise ValueError(f"paper.times_s.{mode}: needs a mode's {len(self.reconfiguration_delay_s)} times, one per "
                                     f"reconfiguration_delay_s entry")
        return self

    def transformer(self) -> TransformerSpec:
        """The model as a :class:`TransformerSpec`. :raises ValueError: inconsistent fields."""
        return transformer_of(self.model)

    def trace(self) -> IterationTrace:
        """The phase trace of one iteration of the model on the fabric (:func:`rail_trace`).
        :raises ValueError: as there."""
        return rail_trace(self.transformer(), self.parallel, self.compute, self.fabric.network(),
                          self.fabric.gpus_per_server)

    def check(self) -> None:
        """That every fabric's model builds and its parallelism fits it (stages no more than
        layers, EP only on a model with experts). :raises SectionError: ``rails.FIELD: problem``."""
        try:
            model = self.transformer()
        except ValueError as e:
            raise SectionError(f"rails.model: {e}") from None
        todo = [("rails.parallel", self.parallel, model)]
        for i, big in enumerate(self.larger):
            try:
                todo.append((f"rails.larger.{i}.parallel", big.parallel, big.transformer(model)))
            except ValueError as e:
                raise SectionError(f"rails.larger.{i}.model: {e}") from None
        for where, par, m in todo:
            if par.pp > m.layers:
                raise SectionError(f"{where}.pp: {par.pp} stages for {m.layers} layers")
            if par.ep > 1 and not m.moe:
                raise SectionError(f"{where}.ep: {m.name} has no experts, ep must be 1")


class SweepPoint(BaseModel):
    """One replay: ``mode`` at delay ``reconfiguration_delay_s``; ``iteration_s`` its steady
    iteration time, ``overhead`` against the electrical rails, reconfigurations per iteration
    (``speculative_reconfigurations``: caused by a speculative request), ``control_wait_s`` the
    most any rank waited on the controller per iteration."""

    model_config = ConfigDict(extra="forbid")

    mode: str
    reconfiguration_delay_s: float
    iteration_s: float
    overhead: float
    reconfigurations: float
    speculative_reconfigurations: float
    control_wait_s: float


class FabricRun(BaseModel):
    """The sweep of ``model`` on one fabric: ``gpus`` = servers x gpus_per_server; ``baseline_s`` the
    electrical rails' iteration time; ``phases`` the phase count per rank (min, max) and
    ``wall_s`` the seconds the replays took (``replay_s``: the slowest single replay)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gpus: int
    servers: int
    gpus_per_server: int
    parallel: dict[str, Any]
    baseline_s: float
    compute_s: float
    phases: tuple[int, int]
    bytes_by_dimension: dict[str, Any]
    points: list[SweepPoint]
    wall_s: float
    replay_s: float


def rail_trace(model: TransformerSpec, parallel: ParallelSpec, compute: ComputeSpec, net: RailNetwork,
               gpus_per_server: int) -> IterationTrace:
    """The phase trace of one iteration of ``model`` under ``parallel`` and ``compute``, its TP
    all-reduces timed on the scale-up switch of ``gpus_per_server`` GPUs of ``net``.

    :raises ValueError: as :func:`~emulation.workloads.iteration.build_trace` (more stages than
        layers, EP on a dense model).
    """
    return build_trace(model, parallel, compute, lambda nbytes: tp_allreduce_s(net, gpus_per_server, nbytes))


def sweep(trace: IterationTrace, net: RailNetwork, modes: list[str], delays: list[float], rtt_s: float,
          iterations: int, progress: Progress | None = None, label: str = "") -> tuple[float, list[SweepPoint], float]:
    """``(baseline_s, points, slowest replay s)`` of ``trace`` under each mode and delay (``eps``
    once: it has no delay); ``rtt_s`` is the controller's round trip, ``iterations`` the
    iterations each replay runs (the first warms up)."""
    base = simulate_iteration(trace, net, "eps", 0.0, 0.0, iterations).iteration_s
    points, slowest = [], 0.0
    jobs = [(m, R) for m in modes for R in ([0.0] if m == "eps" else delays)]
    for i, (mode, R) in enumerate(jobs):
        t0 = time.perf_counter()
        res = simulate_iteration(trace, net, mode, R, 0.0 if mode == "eps" else rtt_s, iterations)
        slowest = max(slowest, time.perf_counter() - t0)
        points.append(SweepPoint(mode=mode, reconfiguration_delay_s=R, iteration_s=res.iteration_s,
                                 overhead=res.iteration_s / base - 1.0,
                                 reconfigurations=res.reconfigurations_per_iteration,
                                 speculative_reconfigurations=res.speculative_reconfigurations_per_iteration,
                                 control_wait_s=res.control_wait_s))
        if progress:
            progress(f"{label}{mode} R={R * 1e3:g} ms", i + 1, len(jobs))
    return base, points, slowest


def sweep_fabric(trace: IterationTrace, net: RailNetwork, servers: int, gpus_per_server: int, modes: list[str],
                 delays: list[float], rtt_s: float, iterations: int, progress: Progress | None = None,
                 label: str = "") -> FabricRun:
    """The :func:`sweep` of ``trace`` on a fabric of ``servers`` x ``gpus_per_server`` GPUs, with
    the trace's shape (phases per rank, bytes per dimension) and the wall time it took."""
    t0 = time.perf_counter()
    base, points, slowest = sweep(trace, net, modes, delays, rtt_s, iterations, progress, label)
    counts = [len(trace.phases(k)) for k in range(trace.ranks)]
    return FabricRun(model=trace.model.name, gpus=servers * gpus_per_server, servers=servers,
                     gpus_per_server=gpus_per_server, parallel=dataclasses.asdict(trace.parallel),
                     baseline_s=base, compute_s=trace.compute_s, phases=(min(counts), max(counts)),
                     bytes_by_dimension=trace.bytes_by_dimension(), points=points,
                     wall_s=time.perf_counter() - t0, replay_s=slowest)


def steady_timelines(trace: IterationTrace, net: RailNetwork, modes: list[str], delay_s: float, rtt_s: float,
                     iterations: int) -> dict[str, dict[str, Any]]:
    """What every rank did in the second (steady) iteration of ``trace`` under each mode at R =
    ``delay_s`` (``eps``: no delay, no controller): ``{mode: {"t0", "t1", "intervals": [[rank,
    t0, t1, kind, dim, phase]]}}``, seconds of virtual time from the replay's start (intervals
    overlapping ``[t0, t1]``, unclipped)."""
    timeline = {}
    for mode in modes:
        res = simulate_iteration(trace, net, mode, 0.0 if mode == "eps" else delay_s, 0.0 if mode == "eps" else rtt_s,
                                 iterations, record=True)
        start, end = res.iterations_end_s[0], res.iterations_end_s[1]
        timeline[mode] = {"t0": start, "t1": end, "intervals": [
            [iv.rank, iv.t0, iv.t1, iv.kind, iv.dim, iv.phase] for iv in res.intervals
            if iv.t1 > start and iv.t0 < end]}
    return timeline


class RailsResult(BaseModel):
    """A rail sweep (inside the envelope, :mod:`emulation.envelope`): ``model`` with ``params``
    parameters, the controller's round trip, ``main`` (the scenario's fabric), ``larger``
    fabrics, ``timeline`` intervals ``[rank, t0, t1, kind, dim, phase]`` of one steady iteration
    per mode at ``timeline_delay_s`` (``{mode: {"t0", "t1", "intervals"}}``, seconds), the
    ``paper`` table if the scenario has one."""

    model_config = ConfigDict(extra="forbid")

    model: str
    params: int
    control_rtt_s: float
    main: FabricRun
    larger: list[FabricRun] = Field(default_factory=list)
    timeline_delay_s: float = 0.0
    timeline: dict[str, dict[str, Any]] = Field(default_factory=dict)
    paper: Optional[dict[str, Any]] = None


def sweep_rails(spec: RailSweepSpec, progress: Progress | None = None) -> RailsResult:
    """``spec``'s sweep: the phase trace of one iteration swept over every control mode and
    every delay of ``reconfiguration_delay_s`` (:func:`sweep_fabric`) on its fabric and on each ``larger`` one,
    and a timeline of one steady iteration per mode at the swept delay closest to 100 ms
    (:func:`steady_timelines`)."""
    r = spec
    net, tr = r.fabric.network(), r.trace()
    main = sweep_fabric(tr, net, r.fabric.servers, r.fabric.gpus_per_server, r.modes, r.reconfiguration_delay_s, r.control.rtt_s,
                        r.iterations, progress, "")
    larger = [sweep_fabric(rail_trace(b.transformer(tr.model), b.parallel, r.compute, net, b.gpus_per_server), net,
                           b.servers, b.gpus_per_server, r.modes, r.reconfiguration_delay_s, r.control.rtt_s, r.iterations, progress,
                           f"{b.servers * b.gpus_per_server} GPUs: ") for b in r.larger]
    R = min(r.reconfiguration_delay_s, key=lambda x: abs(x - 0.1))
    model = r.transformer()
    return RailsResult(model=model.name, params=model.params, control_rtt_s=r.control.rtt_s, main=main,
                       larger=larger, timeline_delay_s=R,
                       timeline=steady_timelines(tr, net, r.modes, R, r.control.rtt_s, r.iterations),
                       paper=r.paper.model_dump() if r.paper else None)
