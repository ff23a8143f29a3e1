"""Run a tenancy scenario on the flow backend: every allocator with every scheduler (and static
partitioning), each a replay of the same seeded trace (:mod:`emulation.tenancy.replay`)."""

from __future__ import annotations

from pydantic import BaseModel

from emulation.output import Progress
from emulation.planners.allocators import ALLOCATORS, Photonic
from emulation.tenancy.jobs import make_trace
from emulation.tenancy.metrics import metrics, utilisation_series
from emulation.tenancy.replay import simulate_job_manager


class TenancyRun(BaseModel):
    """One replay: ``allocator``, ``scheduler`` (``static`` for static partitioning), its
    :func:`~emulation.tenancy.metrics.metrics` and its utilisation over time (``t_s``,
    ``utilisation``)."""

    allocator: str
    scheduler: str
    metrics: dict
    t_s: list[float]
    utilisation: list[float]


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


def run_tenancy(sc, progress: Progress | None = None) -> TenancyResult:
    """Every replay of ``sc`` (a :class:`emulation.kinds.tenancy.TenancyScenario`; module doc)."""
    t = sc.tenancy
    rack = t.rack.build()
    tr = t.trace
    jobs = make_trace(tr.jobs, tr.seed, tr.interarrival_s, tr.sizes, tr.rounds, tr.round_s, tr.comm_share, tr.tenants)
    todo = [(a, s) for a in t.allocators for s in t.schedulers]
    if t.static_partitions:
        todo += [(a, "static") for a in t.allocators]
    runs = []
    for i, (a, s) in enumerate(todo):
        if progress:
            progress(f"{a} / {s}", i, len(todo))
        alloc = Photonic(rack, t.photonic.k_routes) if a == "photonic" else ALLOCATORS[a](rack)
        r = simulate_job_manager(rack, jobs, alloc, "fifo" if s == "static" else s, spares=t.rack.spares,
                   partitions=t.static_partitions if s == "static" else None, seed=tr.seed,
                   reconfiguration_delay_s=t.photonic.reconfiguration_delay_s if a == "photonic" else 0.0)
        ts, u = utilisation_series(r)
        runs.append(TenancyRun(allocator=a, scheduler=s, metrics=metrics(r), t_s=ts.tolist(), utilisation=u.tolist()))
    if progress:
        progress("done", len(todo), len(todo))
    return TenancyResult(rack=t.rack.model_dump(mode="json"), trace=tr.model_dump(mode="json"), runs=runs)
