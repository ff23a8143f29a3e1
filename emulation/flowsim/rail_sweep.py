"""Sweep a training iteration on photonic rails over the control mode and the reconfiguration
delay R (Opus, arXiv 2507.08119), on the flow backend: the phase trace of one iteration
(:func:`rail_trace`, from :func:`emulation.workloads.iteration.build_trace`) replayed under every
mode and every R (:func:`emulation.flowsim.iteration.simulate_iteration`).

The *overhead* of a replay is its iteration time over the electrical rails' (``eps``: the same
job, no controller, no reconfiguration) minus one. :func:`sweep_fabric` sweeps one fabric into a
:class:`FabricRun`; :func:`steady_timelines` keeps what every rank did in one steady iteration
per mode. Times are seconds of virtual time, except ``wall_s`` and ``replay_s`` (this machine's).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from emulation.flowsim.iteration import simulate_iteration
from emulation.output import Progress
from emulation.workloads.iteration import ComputeSpec, IterationTrace, ParallelSpec, TransformerSpec, build_trace
from topologies.rail_network import RailNetwork


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
    return build_trace(model, parallel, compute, lambda nbytes: net.tp_allreduce_s(gpus_per_server, nbytes))


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
