"""Run a tenancy scenario: its sections become the layers' parameters, their records its results.

- :func:`run_tenancy` (flow backend): the seeded trace
  (:meth:`emulation.workloads.tenant_jobs.TraceSpec.draw`) replayed under every allocator with every
  scheduler, and static partitioning (:func:`emulation.flowsim.rack_sweep.sweep_rack`).
- :func:`run_packet` (packet backend, beside the flow backend): the tenants placed by the
  photonic allocator with a ring of circuits each (:func:`emulation.planners.tenants.place_tenants`),
  each alone and all together on the flow backend (:func:`emulation.flowsim.tenants.simulate_tenants`)
  and with packets (:func:`emulation.emulator.tenants.measure_tenants`: the link rate calibrated,
  each alone, then all at once with the isolation capture). Times are real-equivalent seconds
  (the scale model).
"""

from __future__ import annotations

from pathlib import Path

from emulation.flowsim.rack_sweep import sweep_rack
from emulation.flowsim.tenants import simulate_tenants
from emulation.output import Progress, Refused
from emulation.planners.tenants import PlacementError, place_tenants
from emulation.tenancy.results import TenancyResult, TenantComparison, TenantsResult


def run_tenancy(sc, progress: Progress | None = None) -> TenancyResult:
    """Every replay of ``sc`` (a :class:`emulation.kinds.tenancy.TenancyScenario`; module doc)."""
    t = sc.tenancy
    tr = t.trace
    jobs = tr.draw()
    runs = sweep_rack(t.rack.build(), jobs, t.allocators, t.schedulers, spares=t.rack.spares,
                      partitions=t.static_partitions, seed=tr.seed, k_routes=t.photonic.k_routes,
                      reconfiguration_delay_s=t.photonic.reconfiguration_delay_s, progress=progress)
    return TenancyResult(rack=t.rack.model_dump(mode="json"), trace=tr.model_dump(mode="json"), runs=runs)


def run_packet(sc, out: Path, progress: Progress | None = None, force: bool = False) -> TenantsResult:
    """Every tenant of ``sc`` (a :class:`emulation.kinds.tenancy.TenancyScenario`) alone and all
    together, on both backends (module doc). The link rate is ``emulation.link_mbps`` (``auto``:
    calibrated); a rate whose headroom probe misses ``emulation.headroom_target`` is refused
    (``emulation.headroom: refuse``, unless ``force``) or run with the probe recorded (``warn``).

    :raises EmulationError: the emulation failed. :raises CalibrationError: no link rate is
        faithful on this machine. :raises Refused: a tenant cannot be placed, or the rate is
        refused.
    """
    from emulation.emulator.tenants import measure_tenants

    t, pk, em = sc.tenancy, sc.tenancy.fabric, sc.emulation
    try:
        fabric, config, gpus = place_tenants(t.rack.build(), t.rack.spares, [x.gpus for x in t.tenants],
                                             pk.ports_per_gpu, pk.port_gbps, pk.reconfiguration_delay_s)
    except PlacementError as e:
        x = t.tenants[e.index]
        raise Refused(f"tenancy.tenants: {x.name} ({x.gpus} GPUs) cannot be placed after the tenants before it") from None
    tenants = [x.tenant(g) for x, g in zip(t.tenants, gpus)]
    alpha = pk.alpha_s
    flow_alone = [simulate_tenants(fabric, config, [x], alpha_s=alpha)[0].time_s for x in tenants]
    flow_together = [r.time_s for r in simulate_tenants(fabric, config, tenants, alpha_s=alpha)]
    out.mkdir(parents=True, exist_ok=True)
    got = measure_tenants(fabric, config, tenants, alpha, out, link_mbps=None if em.link_mbps == "auto" else em.link_mbps,
                          byte_scale=em.byte_scale, mtu=em.mtu, controller=em.controller,
                          headroom_target=em.headroom_target, refuse=em.headroom == "refuse" and not force,
                          progress=progress)
    rows = [TenantComparison(
        name=x.name, gpus=list(x.gpus), algorithm=x.workload.algorithm, bytes=x.workload.bytes, start_s=x.start_s,
        packet_alone_s=alone.time_s, packet_together_s=together.time_s, flow_alone_s=f_alone, flow_together_s=f_together,
        alone_error=alone.time_s / f_alone - 1, together_error=together.time_s / f_together - 1,
        retransmissions=together.retransmissions, foreign_packets=got.foreign[x.name])
        for x, alone, together, f_alone, f_together in zip(tenants, got.alone, got.together, flow_alone, flow_together)]
    return TenantsResult(scale=got.scale.to_json(), headroom=got.headroom, tenants=rows,
                         circuits={o: sorted(str(c) for c in cs) for o, cs in config.items()},
                         circuits_left=got.circuits_left)
