"""A tenancy scenario's tenants on the packet backend, beside the flow backend's run of the same.

1. **Placement.** The photonic allocator (:class:`emulation.planners.allocators.Photonic`) places
   the tenants in order on the rack; tenant k's GPUs are its slice's accelerators, its servers
   in ring order. Its circuits: a ring over its GPUs on the emulated OCS (every GPU's ports
   split between its two ring neighbours; Morphlux's bandwidth redirection), all tenants'
   together forming the configuration the controller sets at allocation.
2. **Packets** (:func:`emulation.emulator.tenants.run_tenants`): the link rate is calibrated by
   the headroom probe with every GPU sending; each tenant runs alone (the others' GPUs idle), then
   all of them at once; each tenant's circuits are taken away when it ends. During the shared run
   a kernel packet filter on every OCS input port keeps the frames foreign to the port's tenant
   (:func:`emulation.emulator.tenants.isolation_capture`): their count is the isolation measure.
3. **Flow** (:func:`emulation.flowsim.tenants.simulate_tenants`): the same tenants alone and
   together on the same configuration.

Times are real-equivalent seconds (the scale model).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from emulation.fabric import Configuration, Fabric, assign_ports
from emulation.flowsim.tenants import simulate_tenants
from emulation.output import Progress, Refused
from emulation.planners.allocators import ClusterState, Photonic
from emulation.scale import Scale
from emulation.workloads.allreduce import rhd_allreduce, ring_allreduce
from emulation.workloads.model import Tenant


class TenantComparison(BaseModel):
    """One tenant of a packet run: its GPUs, AllReduce algorithm and bytes, start (real s), its
    completion time alone and shared on both backends (real-equivalent s) and the packet/flow
    errors (fractions), its TCP retransmissions when shared, and ``foreign_packets``: frames of
    another tenant seen on its OCS ports (the isolation measure)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    gpus: list[int]
    algorithm: str
    bytes: int
    start_s: float
    packet_alone_s: float
    packet_together_s: float
    flow_alone_s: float
    flow_together_s: float
    alone_error: float
    together_error: float
    retransmissions: int
    foreign_packets: int


class TenantsResult(BaseModel):
    """A tenancy scenario's tenants on the packet backend beside the flow backend (inside the
    envelope): the scale model, the headroom probe, one :class:`TenantComparison` per tenant, the
    circuits set (per OCS) and how many were left after every tenant ended (0)."""

    model_config = ConfigDict(extra="forbid")

    scale: dict[str, float]
    headroom: dict
    tenants: list[TenantComparison]
    circuits: dict[str, list[str]]
    circuits_left: int


def place(sc) -> tuple[Fabric, Configuration, list[Tenant]]:
    """The emulated fabric, the tenants' circuits and the tenants (module doc, step 1).

    :raises Refused: the allocator cannot place a tenant.
    """
    from topologies import ocs_star

    t, pk = sc.tenancy, sc.tenancy.fabric
    rack = t.rack.build()
    state = ClusterState(rack, t.rack.spares)
    alloc = Photonic(rack)
    tenants, pairs = [], []
    for x in t.tenants:
        a = alloc.allocate(state, x.gpus)
        if a is None:
            raise Refused(f"tenancy.tenants: {x.name} ({x.gpus} GPUs) cannot be placed after the tenants before it")
        state.take(a)
        gpus = tuple(g for s in a.servers for g in rack.server_members[s])
        work = (ring_allreduce if x.algorithm == "ring" else rhd_allreduce)(x.gpus, x.size)
        tenants.append(Tenant(x.name, work, gpus, x.start_s))
        ring = [(gpus[i], gpus[(i + 1) % len(gpus)]) for i in range(len(gpus))] if len(gpus) > 2 else [gpus]
        pairs += ring * max(1, pk.ports_per_gpu // 2)
    bare = ocs_star(rack.accelerators, pk.ports_per_gpu, pk.port_gbps, pk.reconfiguration_delay_s, "empty")
    config = assign_ports(bare, "ocs0", pairs, fill=True)
    fabric = Fabric(bare.name, bare.gpus, bare.ports_per_gpu, bare.port_gbps, ocs=bare.ocs, eps=bare.eps,
                    initial=config)
    return fabric, config, tenants


def redirection_fabrics(port_gbps: float) -> tuple[Fabric, dict[str, Configuration]]:
    """Morphlux's bandwidth redirection: a 2x2x1 slice's 4 accelerators with 6 ports each
    (``port_gbps`` each) on one OCS, and its two configurations: ``torus`` (a ring on 2 of the 6
    ports, one circuit per neighbour pair, as a contiguous torus slice gets) and ``photonic`` (all
    6 steered into the ring: three parallel circuits per neighbour pair)."""
    from topologies import ocs_star

    bare = ocs_star(4, 6, port_gbps, 0.0, "empty")
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    configs = {"torus": assign_ports(bare, "ocs0", ring), "photonic": assign_ports(bare, "ocs0", ring * 3)}
    fabric = Fabric(bare.name, bare.gpus, bare.ports_per_gpu, bare.port_gbps, ocs=bare.ocs, eps=bare.eps,
                    initial=configs["photonic"])
    return fabric, configs


def run_packet(sc, out: Path, progress: Progress | None = None, force: bool = False) -> TenantsResult:
    """Every tenant of ``sc`` (a :class:`emulation.kinds.tenancy.TenancyScenario`) alone and all
    together, on both backends (module doc). The link rate is ``emulation.link_mbps`` (``auto``:
    calibrated); a rate whose headroom probe misses ``emulation.headroom_target`` is refused
    (``emulation.headroom: refuse``, unless ``force``) or run with the probe recorded (``warn``).

    :raises EmulationError: the emulation failed. :raises CalibrationError: no link rate is
        faithful on this machine. :raises Refused: a tenant cannot be placed, or the rate is
        refused.
    """
    from emulation.emulator.calibration import calibrate
    from emulation.emulator.net import EmulatedFabric
    from emulation.emulator.tenants import foreign_packets, isolation_capture, run_tenants

    pk, em = sc.tenancy.fabric, sc.emulation
    fabric, config, tenants = place(sc)
    alpha = pk.alpha_s
    flow_alone = [simulate_tenants(fabric, config, [t], alpha_s=alpha)[0].time_s for t in tenants]
    flow_together = [r.time_s for r in simulate_tenants(fabric, config, tenants, alpha_s=alpha)]
    out.mkdir(parents=True, exist_ok=True)
    steps = len(tenants) + 1
    auto = em.link_mbps == "auto"
    with EmulatedFabric(fabric, out / "emulation", link_mbps=100.0 if auto else em.link_mbps, mtu=em.mtu,
                        controller=em.controller) as emu:
        if progress:
            progress("calibrating the link rate", 0, steps + 1)
        cal = calibrate(emu, None if auto else float(em.link_mbps), em.byte_scale,
                        out / "emulation" / "calibration", em.headroom_target)
        if not cal.requested_ok and (em.headroom == "refuse" and not force):
            raise Refused(cal.refusal())
        rate = cal.link_mbps if cal.requested_ok else float(em.link_mbps)
        emu.set_link_mbps(rate)
        scale = Scale(rate, em.byte_scale, fabric.port_gbps)
        alone = []
        for k, t in enumerate(tenants):
            if progress:
                progress(f"{t.name} alone", k + 1, steps + 1)
            alone.append(run_tenants(emu, [Tenant(t.name, t.workload, t.gpus, 0.0)], config, scale, alpha,
                                     out / "emulation" / f"alone-{t.name}")[0])
        if progress:
            progress("together", steps, steps + 1)
        watch = isolation_capture(emu, tenants, out / "emulation" / "isolation")
        watch.start()
        try:
            together = run_tenants(emu, tenants, config, scale, alpha, out / "emulation" / "together")
        finally:
            watch.stop()
        transit = foreign_packets(emu, tenants, out / "emulation" / "isolation")
        left = emu.client.circuits()
    rows = []
    for k, t in enumerate(tenants):
        a_alone = alone[k].time_s
        a_together = together[k].time_s
        rows.append({
            "name": t.name, "gpus": list(t.gpus), "algorithm": t.workload.algorithm, "bytes": t.workload.bytes,
            "start_s": t.start_s, "packet_alone_s": a_alone, "packet_together_s": a_together,
            "flow_alone_s": flow_alone[k], "flow_together_s": flow_together[k],
            "alone_error": a_alone / flow_alone[k] - 1, "together_error": a_together / flow_together[k] - 1,
            "retransmissions": together[k].retransmissions, "foreign_packets": transit[t.name]})
    if progress:
        progress("done", steps + 1, steps + 1)
    return TenantsResult(scale=scale.to_json(), headroom=cal.chosen, tenants=rows,
                         circuits={o: sorted(str(c) for c in cs) for o, cs in config.items()},
                         circuits_left=sum(len(cs) for cs in left.values()))
