"""Every allocator with every job-manager policy on one multi-tenant rack (Morphlux arXiv
2508.03674, Propius arXiv 2510.19617): each a replay of the same request trace
(:func:`emulation.flowsim.job_manager.simulate_job_manager`), measured by
:mod:`emulation.flowsim.job_metrics`, plus Propius' static partitioning baseline per allocator.
Times in s of virtual time."""

from __future__ import annotations

from pydantic import BaseModel

from emulation.flowsim.job_manager import simulate_job_manager
from emulation.flowsim.job_metrics import metrics, utilisation_series
from emulation.output import Progress
from emulation.planners.allocators import ALLOCATORS, K_ROUTES, Photonic
from emulation.workloads.tenant_jobs import Job
from topologies.torus_rack import TorusRack


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
