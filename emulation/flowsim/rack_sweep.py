"""Every allocator with every job-manager policy on one multi-tenant rack (Morphlux arXiv
2508.03674, Propius arXiv 2510.19617): each a replay of the same request trace
(:func:`emulation.flowsim.job_manager.simulate_job_manager`), measured by
:mod:`emulation.flowsim.job_metrics`, plus Propius' static partitioning baseline per allocator.
Times in s of virtual time.

A scenario's sweep is its :class:`RackSweepSpec` (the ``tenancy:`` section's rack, trace and
what is compared); :func:`sweep_tenancy` runs it into a :class:`TenancyResult`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from emulation.flowsim.job_manager import POLICIES, simulate_job_manager, static_partitions
from emulation.flowsim.job_metrics import metrics, utilisation_series
from emulation.output import Progress
from emulation.planners.allocators import ALLOCATORS, K_ROUTES, Photonic, PhotonicSpec
from emulation.sections import SectionError, StrictModel
from emulation.workloads.tenant_jobs import Job, TraceSpec
from topologies.torus_rack import RackError, RackSpec, TorusRack


class RackSweepSpec(StrictModel):
    """``tenancy:`` the rack, the request trace replayed on it, and the allocators, job-manager
    policies and static partitioning compared."""

    rack: RackSpec = RackSpec()
    """The rack: its torus, servers and spares."""
    trace: TraceSpec | None = None
    """The request trace replayed on the flow backend; none: nothing to sweep (a scenario of
    tenants on packets has none)."""
    allocators: list[Literal["torus-contiguous", "photonic"]] = Field(
        default_factory=lambda: ["torus-contiguous", "photonic"], min_length=1)
    """Slice allocators compared: ``torus-contiguous`` (contiguous blocks of the torus) or
    ``photonic`` (Morphlux: a slice's servers joined by circuits routed through the interposer)."""
    schedulers: list[str] = Field(default_factory=lambda: ["fifo"], min_length=1)
    """Job-manager policies compared, each with every allocator: ``fifo``, ``random``, ``srtf``
    (shortest remaining time), ``srdf`` (smallest remaining demand), ``las`` (least attained
    service) or ``irs`` (scarcest placements first)."""
    static_partitions: int | None = Field(default=None, ge=1)
    """Partitions of Propius' static partitioning baseline, added per allocator; none: no such
    baseline."""
    photonic: PhotonicSpec = PhotonicSpec()
    """The photonic allocator's candidate routes and reconfiguration delay."""

    @field_validator("schedulers")
    @classmethod
    def _schedulers(cls, v):
        for s in v:
            if s not in POLICIES:
                raise ValueError(f"{s!r} is not one of {', '.join(POLICIES)}")
        return v

    def check(self) -> TorusRack:
        """That the rack builds, and that the trace's every size has a slice shape and the
        static partitions tile the rack; the rack. :raises SectionError: ``tenancy.FIELD: problem``."""
        try:
            rack = self.rack.build()
        except RackError as e:
            raise SectionError(f"tenancy.{e}") from None
        for n in self.trace.sizes if self.trace is not None else ():
            try:
                rack.shape_for(n)
            except RackError as e:
                raise SectionError(f"tenancy.trace.sizes: {str(e).removeprefix('accelerators: ')}") from None
        if self.trace is not None and self.static_partitions is not None:
            if self.rack.spares:
                raise SectionError("tenancy.static_partitions: static partitioning covers the whole rack; set "
                                   "tenancy.rack.spares to 0")
            try:
                static_partitions(rack, self.static_partitions)
            except ValueError as e:
                raise SectionError(f"tenancy.{e}") from None
        return rack


class TenancyRun(BaseModel):
    """One replay: ``allocator``, ``scheduler`` (``static`` for static partitioning), its
    :func:`~emulation.flowsim.job_metrics.metrics` and its utilisation over time (``t_s``,
    ``utilisation``)."""

    allocator: str
    scheduler: str
    metrics: dict
    t_s: list[float]
    utilisation: list[float]


def sweep_rack(rack: TorusRack, jobs: list[Job], allocators: list[str], schedulers: list[str], *, spares: int = 0,
               partitions: int | None = None, seed: int = 0, k_routes: int = K_ROUTES,
               reconfiguration_delay_s: float = 0.0, progress: Progress | None = None) -> list[TenancyRun]:
    """The replay of ``jobs`` on ``rack`` under every allocator of ``allocators`` (names of
    :data:`~emulation.planners.allocators.ALLOCATORS`) with every policy of ``schedulers``, in that
    order, then, with ``partitions``, each allocator on that many static partitions (scheduler
    ``static``).

    :param spares: servers held back from tenants.
    :param seed: the ``random`` policy's seed.
    :param k_routes: the photonic allocator's candidate routes per server pair.
    :param reconfiguration_delay_s: R of the photonic allocator's circuits (s; the torus sets none).
    :raises ValueError: as :func:`~emulation.flowsim.job_manager.simulate_job_manager`, or nothing
        was allocated (:func:`~emulation.flowsim.job_metrics.metrics`).
    """
    todo = [(a, s) for a in allocators for s in schedulers]
    if partitions:
        todo += [(a, "static") for a in allocators]
    runs = []
    for i, (a, s) in enumerate(todo):
        if progress:
            progress(f"{a} / {s}", i, len(todo))
        alloc = Photonic(rack, k_routes) if a == "photonic" else ALLOCATORS[a](rack)
        r = simulate_job_manager(rack, jobs, alloc, "fifo" if s == "static" else s, spares=spares,
                                 partitions=partitions if s == "static" else None, seed=seed,
                                 reconfiguration_delay_s=reconfiguration_delay_s if a == "photonic" else 0.0)
        ts, u = utilisation_series(r)
        runs.append(TenancyRun(allocator=a, scheduler=s, metrics=metrics(r), t_s=ts.tolist(), utilisation=u.tolist()))
    if progress:
        progress("done", len(todo), len(todo))
    return runs


class TenancyResult(BaseModel):
    """A tenancy trace's replays (inside the envelope, :mod:`emulation.envelope`): the rack and
    trace as run, every replay."""

    rack: dict
    trace: dict
    runs: list[TenancyRun]

    def run(self, allocator: str, scheduler: str) -> TenancyRun:
        """The replay of that allocator and scheduler. :raises KeyError: none."""
        for r in self.runs:
            if r.allocator == allocator and r.scheduler == scheduler:
                return r
        raise KeyError(f"{allocator}/{scheduler}")


def sweep_tenancy(spec: RackSweepSpec, progress: Progress | None = None) -> TenancyResult:
    """``spec``'s seeded trace (:meth:`~emulation.workloads.tenant_jobs.TraceSpec.draw`) replayed
    under every allocator with every scheduler, and static partitioning (:func:`sweep_rack`).

    :raises ValueError: ``spec`` has no trace, or as :func:`sweep_rack`."""
    if spec.trace is None:
        raise ValueError("tenancy.trace: a rack sweep needs a trace")
    tr, ph = spec.trace, spec.photonic
    runs = sweep_rack(spec.rack.build(), tr.draw(), spec.allocators, spec.schedulers, spares=spec.rack.spares,
                      partitions=spec.static_partitions, seed=tr.seed, k_routes=ph.k_routes,
                      reconfiguration_delay_s=ph.reconfiguration_delay_s, progress=progress)
    return TenancyResult(rack=spec.rack.model_dump(mode="json"), trace=tr.model_dump(mode="json"), runs=runs)
