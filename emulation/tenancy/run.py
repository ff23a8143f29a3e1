"""Run a tenancy scenario: its sections become the layers' parameters, their records its results.

- :func:`run_tenancy` (flow backend): the seeded trace
  (:func:`emulation.workloads.tenant_jobs.make_trace`) replayed under every allocator with every
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
from emulation.tenancy.results import TenancyResult, TenantsResult
from emulation.workloads.allreduce import rhd_allreduce, ring_allreduce
from emulation.workloads.model import Tenant
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
    tenants = [Tenant(x.name, (ring_allreduce if x.algorithm == "ring" else rhd_allreduce)(x.gpus, x.size), g, x.start_s)
               for x, g in zip(t.tenants, gpus)]
    alpha = pk.alpha_s
    flow_alone = [simulate_tenants(fabric, config, [x], alpha_s=alpha)[0].time_s for x in tenants]
    flow_together = [r.time_s for r in simulate_tenants(fabric, config, tenants, alpha_s=alpha)]
    out.mkdir(parents=True, exist_ok=True)
    got = measure_tenants(fabric, config, tenants, alpha, out, link_mbps=None if em.link_mbps == "auto" else em.link_mbps,
                          byte_scale=em.byte_scale, mtu=em.mtu, controller=em.controller,
                          headroom_target=em.headroom_target, refuse=em.headroom == "refuse" and not force,
                          progress=progress)
    rows = []
    for k, x in enumerate(tenants):
        a_alone, a_together = got.alone[k].time_s, got.together[k].time_s
        rows.append({
            "name": x.name, "gpus": list(x.gpus), "algorithm": x.workload.algorithm, "bytes": x.workload.bytes,
            "start_s": x.start_s, "packet_alone_s": a_alone, "packet_together_s": a_together,
            "flow_alone_s": flow_alone[k], "flow_together_s": flow_together[k],
            "alone_error": a_alone / flow_alone[k] - 1, "together_error": a_together / flow_together[k] - 1,
            "retransmissions": got.together[k].retransmissions, "foreign_packets": got.foreign[x.name]})
    return TenantsResult(scale=got.scale.to_json(), headroom=got.headroom, tenants=rows,
                         circuits={o: sorted(str(c) for c in cs) for o, cs in config.items()},
                         circuits_left=got.circuits_left)
