"""Run a tenancy scenario: its sections become the layers' parameters, their records its results.

- :func:`run_tenancy` (flow backend): the seeded trace
  (:func:`emulation.workloads.tenant_jobs.make_trace`) replayed under every allocator with every
  scheduler, and static partitioning (:func:`emulation.flowsim.rack_sweep.sweep_rack`).
"""

from __future__ import annotations

from emulation.flowsim.rack_sweep import sweep_rack
from emulation.output import Progress
from emulation.tenancy.results import TenancyResult
from emulation.workloads.tenant_jobs import make_trace


def run_tenancy(sc, progress: Progress | None = None) -> TenancyResult:
    """Every replay of ``sc`` (a :class:`emulation.kinds.tenancy.TenancyScenario`; module doc)."""
    t = sc.tenancy
    tr = t.trace
    jobs = make_trace(tr.jobs, tr.seed, tr.interarrival_s, tr.sizes, tr.rounds, tr.round_s, tr.comm_share, tr.tenants)
    runs = sweep_rack(t.rack.build(), jobs, t.allocators, t.schedulers, spares=t.rack.spares,
                      partitions=t.static_partitions, seed=tr.seed, k_routes=t.photonic.k_routes,
                      reconfiguration_delay_s=t.photonic.reconfiguration_delay_s, progress=progress)
    return TenancyResult(rack=t.rack.model_dump(mode="json"), trace=tr.model_dump(mode="json"), runs=runs)
