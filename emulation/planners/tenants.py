"""Tenants placed on one shared fabric with their circuits (Morphlux, arXiv 2508.03674): what both
backends run when several tenants' collectives share an emulated OCS
(:mod:`emulation.flowsim.tenants`, :mod:`emulation.emulator.tenants`).

The photonic allocator (:class:`emulation.planners.allocators.Photonic`) places the tenants in
order on the rack; tenant k's GPUs are its slice's accelerators, its servers in ring order. Its
circuits: a ring over its GPUs on the emulated OCS (every GPU's ports split between its two ring
neighbours; Morphlux's bandwidth redirection), all tenants' together forming the configuration
the controller sets at allocation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from emulation.fabric import Configuration, Fabric, assign_ports
from emulation.planners.allocators import ClusterState, Photonic
from emulation.sections import StrictModel
from emulation.units import parse_bytes
from emulation.workloads.allreduce import rhd_allreduce, ring_allreduce
from emulation.workloads.model import Tenant
from topologies.builders import ocs_star
from topologies.torus_rack import TorusRack


class TenantSpec(StrictModel):
    """One tenant of a packet run: ``gpus`` accelerators (a legal slice size), an AllReduce
    (``algorithm`` ring or rhd) of ``size`` bytes, started ``start_s`` real seconds after the
    first."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_0-9.-]+$")
    """The tenant's name, unique in the scenario; it labels the tenant's results."""
    gpus: int = Field(ge=2)
    """Accelerators of the tenant's slice (a legal slice size of the rack)."""
    algorithm: Literal["ring", "rhd"] = "ring"
    """Its AllReduce's algorithm: ``ring``, or ``rhd`` (a power-of-two ``gpus``)."""
    size: int = Field(ge=1)
    """Its AllReduce's buffer, bytes (or a string such as ``16MiB``)."""
    start_s: float = Field(default=0.0, ge=0)
    """When it starts after the first tenant, real seconds."""

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v):
        return parse_bytes(v) if isinstance(v, str) else v

    def tenant(self, gpus: tuple[int, ...]) -> Tenant:
        """The :class:`~emulation.workloads.model.Tenant` of this section on ``gpus`` (rank r on
        ``gpus[r]``)."""
        allreduce = ring_allreduce if self.algorithm == "ring" else rhd_allreduce
        return Tenant(self.name, allreduce(self.gpus, self.size), gpus, self.start_s)


class TenantFabricSpec(StrictModel):
    """``fabric:`` the emulated fabric of a packet run: every GPU's ``ports_per_gpu`` ports on one
    OCS at ``port_gbps`` (real Gbit/s), its reconfiguration delay R (real s), the per-message
    latency ``alpha_s`` (real s). (The emulated link rate and byte scale are ``emulation:``.)"""

    port_gbps: float = Field(default=400.0, gt=0)
    """Rate of every port, real Gbit/s."""
    ports_per_gpu: int = Field(default=2, ge=1, le=8)
    """Ports of every GPU on the OCS."""
    alpha_s: float = Field(default=5e-6, ge=0)
    """Per-message latency, real seconds."""
    reconfiguration_delay_s: float = Field(default=3.7e-6, ge=0)
    """The OCS's reconfiguration delay R, real seconds."""


class PlacementError(ValueError):
    """Tenant ``index`` (of ``accelerators`` GPUs) cannot be placed after the tenants before it."""

    def __init__(self, index: int, accelerators: int):
        super().__init__(f"tenant {index} ({accelerators} GPUs) cannot be placed after the tenants before it")
        self.index = index
        self.accelerators = accelerators


def place_tenants(rack: TorusRack, spares: int, sizes: list[int], ports_per_gpu: int, port_gbps: float,
                  reconfiguration_delay_s: float) -> tuple[Fabric, Configuration, list[tuple[int, ...]]]:
    """Place tenants of ``sizes`` accelerators, in order, on ``rack`` (``spares`` servers held
    back) with their ring circuits (module doc), on an OCS star of every accelerator of the rack
    with ``ports_per_gpu`` ports of ``port_gbps`` Gbit/s each (:func:`topologies.builders.ocs_star`,
    dark window ``reconfiguration_delay_s`` s); a tenant's ring gets ``ports_per_gpu // 2``
    circuits per neighbour pair (at least one; a tenant of two GPUs: its one pair).

    :returns: ``(fabric, configuration, gpus)``: the fabric, whose initial configuration is every
        tenant's circuits, that configuration, and each tenant's GPUs (rank r on ``gpus[k][r]``).
    :raises PlacementError: the allocator finds no slice for a tenant.
    """
    state = ClusterState(rack, spares)
    alloc = Photonic(rack)
    placed, pairs = [], []
    for k, n in enumerate(sizes):
        a = alloc.allocate(state, n)
        if a is None:
            raise PlacementError(k, n)
        state.take(a)
        gpus = tuple(g for s in a.servers for g in rack.server_members[s])
        placed.append(gpus)
        ring = [(gpus[i], gpus[(i + 1) % len(gpus)]) for i in range(len(gpus))] if len(gpus) > 2 else [gpus]
        pairs += ring * max(1, ports_per_gpu // 2)
    bare = ocs_star(rack.accelerators, ports_per_gpu, port_gbps, reconfiguration_delay_s, "empty")
    config = assign_ports(bare, "ocs0", pairs, fill=True)
    fabric = Fabric(bare.name, bare.gpus, bare.ports_per_gpu, bare.port_gbps, ocs=bare.ocs, eps=bare.eps,
                    initial=config)
    return fabric, config, placed
