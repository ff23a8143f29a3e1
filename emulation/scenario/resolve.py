"""Resolution: a loaded :class:`~emulation.scenario.schema.Scenario` becomes what the backends run.

:func:`resolve` turns a scenario into an :class:`Experiment` (immutable: the built fabric, the
cost model, the emulation's scale parameters, every iteration's arrival times and the jobs) whose
:meth:`Experiment.runs` yields one :class:`RunDescription` per job: the workload and what the
fabric does over it (a :data:`~emulation.schedule.FabricSchedule`), planned here and nowhere
else. Backends consume these and never read the scenario's schema.

Runs are resolved one at a time, as the backends ask for them: a direct exchange on thousands of
GPUs holds millions of transfers, and a scenario's jobs are not held in memory together. Loading
(:func:`emulation.scenario.load.load_experiment`) resolves each run at its first size to refuse a
scenario that cannot be planned before anything starts, and keeps those descriptions (while they
hold little memory, :data:`KEEP_BYTES`) for the first pass of :meth:`Experiment.runs`: a job is
planned once. A large one is planned again when its turn comes (deterministically: the same
plan), so that memory holds one large job at a time.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from emulation.fabric import Fabric
from emulation.flowsim.limits import held_bytes
from emulation.planners import CostModel, make_plan
from emulation.planners.slotted import plan_slotted
from emulation.output import Progress
from emulation.scale import Scale
from emulation.scenario.schema import EmulationSpec, RunSpec, Scenario
from emulation.schedule import ClosedFormRun, FabricSchedule, PlanError, RunDescription
from emulation.units import format_bytes
from emulation.workloads import build
from emulation.workloads.model import Workload
from emulation.workloads.moe import MoELayer, moe_workload, route
from emulation.workloads.stragglar import with_straggler

#: Runs resolved while loading are kept for the backend while they hold this much memory in all
#: (their workloads' column arrays and step records, :func:`emulation.flowsim.limits.held_bytes`).
KEEP_BYTES = 256 << 20


class RunError(ValueError):
    """A run of the scenario cannot be planned or built; the text starts with ``runs.<i>:``."""


@dataclass(frozen=True)
class Experiment:
    """A scenario resolved (module doc).

    :param arrivals_s: ``(iterations, gpus)`` arrival time of every rank at the collective,
        real seconds (0 but a straggler's).
    :param topology: the builder's name (``fabric.topology``).
    :param jobs: every ``(size, run)`` to execute, in order.
    :param header: what a result records of the scenario beyond the fabric: ``straggler``, ``iterations``.
    :param run_names: the names of the scenario's runs, in order.
    """

    name: str
    topology: str
    fabric: Fabric
    cost: CostModel
    semantics: str
    emulation: EmulationSpec
    arrivals_s: tuple[tuple[float, ...], ...]
    jobs: tuple[tuple[int, RunSpec], ...]
    straggler_rank: int | None
    moe: MoELayer | None
    header: dict
    run_names: tuple[str, ...] = ()
    _kept: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)
    _closed: set = dataclasses.field(default_factory=set, repr=False, compare=False)

    @property
    def port_gbps(self) -> float:
        """B, the fabric's port rate, Gbit/s."""
        return self.fabric.port_gbps

    def scale(self, link_mbps: float) -> Scale:
        """The packet backend's scale model at emulated rate ``link_mbps`` (Mbit/s)."""
        return Scale(link_mbps, self.emulation.byte_scale, self.fabric.port_gbps)

    def resolve(self, run: RunSpec, size: int) -> RunDescription:
        """``run`` on an ``size``-byte buffer (module doc).

        :raises emulation.schedule.PlanError: the planner cannot plan it.
        :raises ValueError: bad sizes, or a slot schedule that cannot be built.
        """
        w = self.workload(run, size)
        if run.schedule == "none":
            sched: FabricSchedule = make_plan(run.planner, self.fabric, w, self.cost)
        elif run.schedule.startswith("spectra"):
            from emulation.planners.spectra import plan_parallel

            sched = plan_parallel(run.schedule, self.fabric, w, run.guard_s)
        else:
            pair = None
            if run.schedule == "rotor" and run.slot_s is None and run.collective == "moe":
                pair = self.moe.capacity * self.moe.experts_per_gpu * self.moe.token_bytes
            sched = plan_slotted(run.schedule, self.fabric, w, slot_s=run.slot_s, pair_bytes=pair,
                                 guard_s=run.guard_s, headroom=run.slot_headroom, forwarding=run.forwarding)
        return RunDescription(run.name, size, sched, self._padding(run, sched.workload))

    def closed_form_refusal(self, run: RunSpec) -> str | None:
        """Why ``run`` cannot run in closed form (:mod:`emulation.flowsim.stragglar`), or None:
        a StragglAR AllReduce, no slot schedule, on a fabric and planner the closed form takes."""
        from emulation.flowsim.stragglar import closed_form_refusal

        if run.algorithm != "stragglar" or run.collective != "allreduce" or run.schedule != "none":
            return f"{run.name}: only StragglAR without a slot schedule has a closed form"
        return closed_form_refusal(self.fabric, self.semantics, run.planner)

    def use_closed_form(self, run: RunSpec, size: int) -> None:
        """Run job ``(run, size)`` in closed form (the memory check decides: its transfers do not
        fit); :meth:`runs` then yields a :class:`ClosedFormRun` for it."""
        self._closed.add((run.name, size))

    def in_closed_form(self, run: RunSpec, size: int) -> bool:
        """True if job ``(run, size)`` runs in closed form (:meth:`use_closed_form`)."""
        return (run.name, size) in self._closed

    def check(self) -> None:
        """Resolve every run at its first size (module doc), keeping for :meth:`runs` the
        description of the first job (whatever its size: it runs next) and the small ones.

        :raises RunError: naming the run (``runs.<i>``) that cannot be planned or built.
        """
        first: dict[str, tuple[int, RunSpec]] = {}
        for size, r in self.jobs:
            first.setdefault(r.name, (size, r))
        kept = 0
        for i, name in enumerate(self.run_names):
            size, run = first[name]
            if self.in_closed_form(run, size):
                continue
            try:
                desc = self.resolve(run, size)
            except (PlanError, ValueError) as e:
                raise RunError(f"runs.{i}: {e}") from None
            held = held_bytes(desc.workload)
            if (size, run) == self.jobs[0] or kept + held <= KEEP_BYTES:
                self._kept[(run.name, size)] = desc
                kept += held

    def runs(self, progress: Progress | None = None) -> Iterator[RunDescription | ClosedFormRun]:
        """Every job resolved, one at a time (those :meth:`check` kept are handed over, once; a
        job to run in closed form as a :class:`ClosedFormRun`), reporting ``progress(label, done,
        total)`` and ``done`` at the end."""
        for i, (size, r) in enumerate(self.jobs):
            if progress:
                progress(f"{r.name} {format_bytes(size)}", i, len(self.jobs))
            if self.in_closed_form(r, size):
                yield ClosedFormRun(r.name, size)
                continue
            yield self._kept.pop((r.name, size), None) or self.resolve(r, size)
        if progress:
            progress("done", len(self.jobs), len(self.jobs))

    def workload(self, run: RunSpec, size: int, gpus: int | None = None) -> Workload:
        """``run``'s workload before planning (:meth:`resolve` plans it), on the fabric's GPUs
        or on ``gpus`` (the memory check sizes workloads at a few small counts).

        :raises ValueError: bad sizes (or a moe layer that does not fit ``gpus``).
        """
        n = gpus or self.fabric.gpus
        if run.collective == "moe":
            layer = self.moe if n == self.moe.gpus else dataclasses.replace(self.moe, gpus=n)
            return moe_workload(routed(layer), run.algorithm)
        w = build(run.algorithm, n, size, run.collective)
        if run.algorithm == "stragglar" and self.straggler_rank is not None:
            # sized at fewer GPUs, a straggler beyond them is the last (the same shape)
            w = with_straggler(w, min(self.straggler_rank, n - 1))
        return w

    def _padding(self, run: RunSpec, workload: Workload) -> int:
        if run.collective != "moe":
            return 0
        tr = routed(self.moe)
        off = ~np.eye(workload.ranks, dtype=bool)
        payload = 2 * int(tr.dispatch[off].sum())  # every kept token travels out and back
        return workload.bytes_sent - payload


def resolve(sc: Scenario, fabric: Fabric | None = None) -> Experiment:
    """The :class:`Experiment` of ``sc`` (its fabric built unless given).

    :raises emulation.scenario.schema.ScenarioError: the fabric's builder rejects it.
    """
    fabric = fabric if fabric is not None else sc.fabric.build()
    return Experiment(
        name=sc.name, topology=sc.fabric.topology, fabric=fabric, cost=sc.cost, semantics=sc.semantics, emulation=sc.emulation,
        arrivals_s=tuple(tuple(row) for row in arrivals_s(sc, sc.iterations)),
        jobs=tuple(jobs(sc)), straggler_rank=sc.straggler.rank if sc.straggler else None, moe=sc.moe,
        header={"straggler": sc.straggler.model_dump() if sc.straggler else None, "iterations": sc.iterations},
        run_names=tuple(r.name for r in sc.runs))


def jobs(sc: Scenario) -> list[tuple[int, RunSpec]]:
    """Every ``(size, run)`` of ``sc``: each run for every size, a ``moe`` run once (its size:
    the per-GPU routed bytes S k H b)."""
    out = []
    for size in sc.sizes:
        out += [(size, r) for r in sc.runs if r.collective != "moe"]
    if sc.moe is not None:
        per_gpu = sc.moe.tokens_per_gpu * sc.moe.top_k * sc.moe.token_bytes
        out += [(per_gpu, r) for r in sc.runs if r.collective == "moe"]
    return out


def arrivals_s(sc: Scenario, iterations: int) -> list[list[float]]:
    """Arrival time of every rank in iterations ``0 .. iterations-1`` (real seconds; 0 but the
    straggler's, whose delay D is drawn per iteration: :class:`~emulation.scenario.schema.StragglerSpec`)."""
    out = [[0.0] * sc.fabric.gpus for _ in range(iterations)]
    if sc.straggler is not None:
        for row, d in zip(out, sc.straggler.delays_s(iterations)):
            row[sc.straggler.rank] = d
    return out


@functools.lru_cache(maxsize=16)
def routed(layer: MoELayer):
    """:func:`emulation.workloads.moe.route`, once per layer (a run's workload and its padding
    both need it; 64 GPUs x 4096 tokens is worth not routing twice)."""
    return route(layer)
