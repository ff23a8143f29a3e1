"""Run a rail scenario on the flow backend: the phase trace of one iteration
(:func:`emulation.workloads.iteration.build_trace`) replayed under every control mode and every
reconfiguration delay R of the sweep (:func:`emulation.flowsim.iteration.simulate_iteration`).

The *overhead* of a run is its iteration time over the electrical rails' (``eps``: the same job,
no controller, no reconfiguration) minus one. A timeline of one steady iteration is kept for
the on-demand and speculative modes at the sweep's delay closest to 100 ms.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from emulation.flowsim.iteration import simulate_iteration
from emulation.output import Progress
from emulation.workloads.iteration import IterationTrace, ParallelSpec, TransformerSpec, build_trace
from topologies.rail_network import RailNetwork


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SweepPoint(_Record):
    """One replay: ``mode`` at delay ``reconfiguration_delay_s``; ``iteration_s`` its steady
    iteration time, ``overhead`` against the electrical rails, reconfigurations per iteration
    (``speculative_reconfigurations``: caused by a speculative request), ``control_wait_s`` the
    most any rank waited on the controller per iteration."""

    mode: str
    reconfiguration_delay_s: float
    iteration_s: float
    overhead: float
    reconfigurations: float
    speculative_reconfigurations: float
    control_wait_s: float


class FabricRun(_Record):
    """The sweep of ``model`` on one fabric: ``gpus`` = servers x gpus_per_server; ``baseline_s`` the
    electrical rails' iteration time; ``phases`` the phase count per rank (min, max) and
    ``wall_s`` the seconds the replays took (``replay_s``: the slowest single replay)."""

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


class RailsResult(_Record):
    """A rail scenario's sweep (inside the envelope, :mod:`emulation.envelope`): ``model`` with
    ``params`` parameters, the controller's round trip, ``main`` (the scenario's fabric),
    ``larger`` fabrics, ``timeline`` intervals ``[rank, t0, t1, kind, dim, phase]`` of one steady
    iteration per mode at ``timeline_delay_s`` (``{mode: {"t0", "t1", "intervals"}}``, seconds),
    the ``paper`` table if the scenario has one."""

    model: str
    params: int
    control_rtt_s: float
    main: FabricRun
    larger: list[FabricRun] = Field(default_factory=list)
    timeline_delay_s: float = 0.0
    timeline: dict[str, dict[str, Any]] = Field(default_factory=dict)
    paper: Optional[dict[str, Any]] = None


def trace_for(sc, parallel: ParallelSpec, gpus_per_server: int,
              model: TransformerSpec | None = None) -> IterationTrace:
    """The phase trace of ``model`` (default: the scenario's) under ``parallel`` (TP all-reduces
    timed on the scale-up switch)."""
    net = sc.rails.fabric.network()
    return build_trace(model or sc.rails.transformer(), parallel, sc.rails.compute,
                       lambda nbytes: net.tp_allreduce_s(gpus_per_server, nbytes))


def sweep(trace: IterationTrace, net: RailNetwork, modes: list[str], delays: list[float], rtt_s: float,
          iterations: int, progress: Progress | None = None, label: str = "") -> tuple[float, list[SweepPoint], float]:
    """``(baseline_s, points, slowest replay s)`` of ``trace`` under each mode and delay (``eps``
    once: it has no delay)."""
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


def _fabric_run(sc, servers: int, gps: int, tr: IterationTrace, progress: Progress | None,
                label: str) -> FabricRun:
    r = sc.rails
    t0 = time.perf_counter()
    base, points, slowest = sweep(tr, r.fabric.network(), r.modes, r.sweep_s, r.control.rtt_s, r.iterations,
                                  progress, label)
    counts = [len(tr.phases(k)) for k in range(tr.ranks)]
    return FabricRun(model=tr.model.name, gpus=servers * gps, servers=servers, gpus_per_server=gps,
                     parallel=dataclasses.asdict(tr.parallel), baseline_s=base, compute_s=tr.compute_s,
                     phases=(min(counts), max(counts)), bytes_by_dimension=tr.bytes_by_dimension(), points=points,
                     wall_s=time.perf_counter() - t0, replay_s=slowest)


def run_rails(sc, progress: Progress | None = None) -> RailsResult:
    """Every fabric's sweep of ``sc`` (a :class:`emulation.kinds.rails.RailsScenario`) and the
    timelines (module doc)."""
    r = sc.rails
    tr = trace_for(sc, r.parallel, r.fabric.gpus_per_server)
    main = _fabric_run(sc, r.fabric.servers, r.fabric.gpus_per_server, tr, progress, "")
    larger = [_fabric_run(sc, b.servers, b.gpus_per_server,
                          trace_for(sc, b.parallel, b.gpus_per_server, b.transformer(tr.model)), progress,
                          f"{b.servers * b.gpus_per_server} GPUs: ") for b in r.larger]
    R = min(r.sweep_s, key=lambda x: abs(x - 0.1))
    timeline = {}
    for mode in r.modes:
        res = simulate_iteration(tr, r.fabric.network(), mode, 0.0 if mode == "eps" else R, 0.0 if mode == "eps" else r.control.rtt_s,
                     r.iterations, record=True)
        start, end = res.iterations_end_s[0], res.iterations_end_s[1]
        timeline[mode] = {"t0": start, "t1": end, "intervals": [
            [iv.rank, iv.t0, iv.t1, iv.kind, iv.dim, iv.phase] for iv in res.intervals
            if iv.t1 > start and iv.t0 < end]}
    model = r.transformer()
    return RailsResult(model=model.name, params=model.params, control_rtt_s=r.control.rtt_s, main=main,
                       larger=larger, timeline_delay_s=R, timeline=timeline,
                       paper=r.paper.model_dump() if r.paper else None)
