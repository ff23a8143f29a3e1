"""Several tenants at once on the packet backend, beside the flow backend (Morphlux arXiv
2508.03674, Lumorph arXiv 2501.18169): the tenants placed by the photonic allocator with a ring of
circuits each (:func:`emulation.planners.tenants.place_tenants`), each alone and all together on
the flow backend (:func:`emulation.flowsim.tenants.simulate_tenants`) and with packets
(:func:`emulation.emulator.tenants.measure_tenants`: the link rate calibrated, each alone, then all
at once with the isolation capture), in one :class:`TenantsResult`. Times are real-equivalent
seconds (the scale model). It sits above both backends, which never import each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict

from emulation.envelope import FailedCheck
from emulation.flowsim.tenants import simulate_tenants
from emulation.output import Progress, Refused
from emulation.planners.tenants import PlacementError, TenantFabricSpec, TenantSpec, place_tenants
from emulation.scenario.schema import EmulationSpec
from topologies.torus_rack import RackSpec


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
    envelope): the scale model, the headroom probe (null: not probed, `headroom: skip`), one
    :class:`TenantComparison` per tenant, the
    circuits set (per OCS) and how many were left after every tenant ended (0)."""

    model_config = ConfigDict(extra="forbid")

    scale: dict[str, float]
    headroom: Optional[dict] = None
    tenants: list[TenantComparison]
    circuits: dict[str, list[str]]
    circuits_left: int

    def failed_checks(self) -> list[FailedCheck]:
        """The checks of tenants sharing a fabric, failed: ``isolation`` (no frame of a tenant
        reached another tenant's OCS ports) and ``circuits left`` (every tenant's circuits were
        removed when it ended)."""
        out = [FailedCheck(check="isolation", where=t.name,
                           detail=f"{t.foreign_packets} frames on another tenant's OCS ports")
               for t in self.tenants if t.foreign_packets]
        if self.circuits_left:
            out.append(FailedCheck(check="circuits left", detail=f"{self.circuits_left} circuits still set after every "
                                                                  "tenant ended"))
        return out


def compare_tenants(rack: RackSpec, specs: list[TenantSpec], fabric: TenantFabricSpec, emulation: EmulationSpec,
                out: Path, progress: Progress | None = None, refuse: bool = True) -> TenantsResult:
    """The tenants of ``specs`` on ``rack`` (its fabric ``fabric``), each alone and all together,
    on both backends (module doc), logs in ``out``. The link rate is ``emulation.link_mbps``
    (``auto``: calibrated); a rate whose headroom probe misses ``emulation.headroom_target`` is
    refused (``emulation.headroom: refuse`` and ``refuse``) or run with the probe recorded
    (``warn``); ``skip`` runs it unprobed (``headroom`` null).

    :raises EmulationError: the emulation failed. :raises CalibrationError: no link rate is
        faithful on this machine. :raises Refused: a tenant cannot be placed.
    :raises emulation.emulator.session.HeadroomError: the rate is refused.
    """
    from emulation.emulator.tenants import measure_tenants

    em = emulation
    try:
        net, config, gpus = place_tenants(rack.build(), rack.spares, [x.gpus for x in specs], fabric.ports_per_gpu,
                                          fabric.port_gbps, fabric.reconfiguration_delay_s)
    except PlacementError as e:
        x = specs[e.index]
        raise Refused(f"tenancy.tenants: {x.name} ({x.gpus} GPUs) cannot be placed after the tenants before it") from None
    tenants = [x.tenant(g) for x, g in zip(specs, gpus)]
    alpha = fabric.alpha_s
    flow_alone = [simulate_tenants(net, config, [x], alpha_s=alpha)[0].time_s for x in tenants]
    flow_together = [r.time_s for r in simulate_tenants(net, config, tenants, alpha_s=alpha)]
    out.mkdir(parents=True, exist_ok=True)
    got = measure_tenants(net, config, tenants, alpha, out, em, force=not refuse, progress=progress)
    rows = [TenantComparison(
        name=x.name, gpus=list(x.gpus), algorithm=x.workload.algorithm, bytes=x.workload.bytes, start_s=x.start_s,
        packet_alone_s=alone.time_s, packet_together_s=together.time_s, flow_alone_s=f_alone, flow_together_s=f_together,
        alone_error=alone.time_s / f_alone - 1, together_error=together.time_s / f_together - 1,
        retransmissions=together.retransmissions, foreign_packets=got.foreign[x.name])
        for x, alone, together, f_alone, f_together in zip(tenants, got.alone, got.together, flow_alone, flow_together)]
    return TenantsResult(scale=got.scale.to_json(), headroom=got.headroom, tenants=rows,
                         circuits={o: sorted(str(c) for c in cs) for o, cs in config.items()},
                         circuits_left=got.circuits_left)
