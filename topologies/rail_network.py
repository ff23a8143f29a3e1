"""One rail of a rail-optimised GPU fabric as the flow replay of a training iteration sees it
(Opus, arXiv 2507.08119): GPU ``r`` of every server on one switch, an optical circuit switch
(photonic rails) or an electrical packet switch (the baseline), and each server's scale-up domain.

A process group's circuits form a *segment* of the rail: ``ring`` (a pair of GPUs joined by every
rail port, or a ring of more with half the ports to each neighbour), ``link`` (one pipeline link
of a longer pipeline: half the ports of each end), ``eps`` (the electrical rail: one port of the
whole NIC bandwidth per GPU) or ``scaleup`` (a server's scale-up switch). :meth:`RailNetwork.segment`
is a segment as data: a fabric of just its GPUs and its circuits; how long an op takes on it is
the flow backend's (:mod:`emulation.flowsim.rail_times`).

The fabric a packet emulation runs is :func:`topologies.builders.rails`. The package does not
re-export this module (it needs pydantic): ``mn --custom`` loads :mod:`topologies.builders` with
the system Python.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from emulation.fabric import EPS, OCS, Configuration, Fabric, PortRef, assign_ports
from emulation.sections import StrictModel

#: Segment kinds (module doc).
SEGMENTS = ("ring", "link", "eps", "scaleup")


class RailNetwork(StrictModel):
    """One rail (Opus, arXiv 2507.08119): ``ports_per_gpu`` ports per GPU at ``port_gbps``
    (Gbit/s); an electrical rail gives each GPU one port of ``ports_per_gpu x port_gbps`` (the
    same NIC bandwidth); ``alpha_s`` seconds per message; ``scaleup_gbps`` the scale-up domain's
    port rate (TP all-reduces), Gbit/s.

    :raises pydantic.ValidationError: a non-positive rate, no rail port or an odd number above 1,
        a negative alpha.
    """

    port_gbps: float = Field(default=200.0, gt=0)
    """Rate of every rail (OCS) port, Gbit/s."""
    ports_per_gpu: int = Field(default=2, ge=1)
    """OCS ports every GPU has on its rail: 1, or an even number (a ring of circuits takes half to each neighbour)."""
    alpha_s: float = Field(default=10e-6, ge=0)
    """Per-message latency, seconds."""
    scaleup_gbps: float = Field(default=2400.0, gt=0)
    """Port rate of a server's scale-up domain (TP's all-reduces), Gbit/s."""

    @field_validator("ports_per_gpu")
    @classmethod
    def _even(cls, v: int) -> int:
        if v > 1 and v % 2:
            raise ValueError(f"1, or an even number (a ring of circuits takes half to each neighbour), got {v}")
        return v

    def segment(self, n: int, segment: str) -> tuple[Fabric, Configuration]:
        """The fabric of one segment of ``n`` GPUs (module doc) and its circuits (GPUs ``0..n-1``,
        ring neighbours ``i, i + 1``).

        :raises ValueError: an unknown segment kind.
        """
        if segment not in SEGMENTS:
            raise ValueError(f"segment: one of {', '.join(SEGMENTS)}, got {segment!r}")
        ports = self.ports_per_gpu
        if segment in ("eps", "scaleup"):
            gbps = self.scaleup_gbps if segment == "scaleup" else self.port_gbps * ports
            fab = Fabric(f"{segment}{n}", n, 1, gbps, eps=(EPS("sw", tuple(PortRef(g, 0) for g in range(n))),))
            return fab, Configuration()
        circuits = ports if segment == "ring" and n == 2 else ports // 2
        per = circuits if segment == "link" else ports
        ocs = OCS("rail", tuple(PortRef(g, p) for g in range(n) for p in range(per)))
        fab = Fabric(f"{segment}{n}", n, per, self.port_gbps, ocs=(ocs,))
        pairs = [(0, 1)] * circuits if n == 2 else [(i, (i + 1) % n) for i in range(n) for _ in range(circuits)]
        return fab, assign_ports(fab, "rail", pairs)


class RailFabric(RailNetwork):
    """``fabric:`` of a rail scenario: ``servers`` x ``gpus_per_server`` GPUs, GPU i of every
    server on rail i, each rail a :class:`RailNetwork` (its port rate 100 Gbit/s unless given);
    :meth:`network` is the rail alone."""

    servers: int = Field(ge=2)
    """Servers: ``pp x dp`` of them (a rank of the trace each)."""
    gpus_per_server: int = Field(ge=1)
    """GPUs per server: the TP degree; GPU i of every server is on rail i."""
    port_gbps: float = Field(default=100.0, gt=0)
    """Rate of every rail (OCS) port, Gbit/s."""

    def network(self) -> RailNetwork:
        """The rail, without the fabric's size (what the flow replay's segments are built from)."""
        return RailNetwork(**self.model_dump(include=set(RailNetwork.model_fields)))
