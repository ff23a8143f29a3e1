"""The results of a tenancy scenario (``result.json``, inside the envelope), typed: a trace's
replays on the flow backend (:class:`TenancyResult`, of the flow layer's
:class:`~emulation.flowsim.rack_sweep.TenancyRun` records) or tenants on the packet backend
beside the flow backend (:class:`TenantsResult`). Morphlux arXiv 2508.03674, Propius arXiv
2510.19617."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from emulation.flowsim.rack_sweep import TenancyRun


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
