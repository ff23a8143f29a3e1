"""One rail of a rail-optimised GPU fabric as the flow replay of a training iteration sees it
(Opus, arXiv 2507.08119): GPU ``r`` of every server on one switch, an optical circuit switch
(photonic rails) or an electrical packet switch (the baseline), and each server's scale-up domain.

A process group's circuits form a *segment* of the rail: ``ring`` (a pair of GPUs joined by every
rail port, or a ring of more with half the ports to each neighbour), ``link`` (one pipeline link
of a longer pipeline: half the ports of each end), ``eps`` (the electrical rail: one port of the
whole NIC bandwidth per GPU) or ``scaleup`` (a server's scale-up switch). :meth:`RailNetwork.seconds`
is the time the flow engine (:func:`emulation.flowsim.simulate.simulate`) gives one collective
alone on a fabric of just its segment.

The fabric a packet emulation runs is :func:`topologies.builders.rails`. This module imports the
flow engine (numpy), so the package does not re-export it: ``mn --custom`` loads
:mod:`topologies.builders` with the system Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from emulation.fabric import EPS, OCS, Configuration, Fabric, PortRef, assign_ports
from emulation.flowsim.simulate import simulate
from emulation.schedule import plan_from_configurations
from emulation.workloads import build
from emulation.workloads.model import Step, Transfer, Workload

#: Segment kinds (module doc).
SEGMENTS = ("ring", "link", "eps", "scaleup")


@dataclass(frozen=True)
class RailNetwork:
    """One rail (Opus, arXiv 2507.08119): ``rail_ports`` ports per GPU at ``port_gbps`` (Gbit/s);
    an electrical rail gives each GPU one port of ``rail_ports x port_gbps`` (the same NIC
    bandwidth); ``alpha_s`` seconds per message; ``scaleup_gbps`` the scale-up domain's port rate
    (TP all-reduces), Gbit/s.

    :raises ValueError: a non-positive rate, no rail port or an odd number above 1, a negative alpha.
    """

    port_gbps: float = 200.0
    rail_ports: int = 2
    alpha_s: float = 10e-6
    scaleup_gbps: float = 2400.0

    def __post_init__(self) -> None:
        if not self.port_gbps > 0 or not self.scaleup_gbps > 0:
            raise ValueError(f"port_gbps, scaleup_gbps: must be > 0, got {self.port_gbps}, {self.scaleup_gbps}")
        if self.rail_ports < 1 or (self.rail_ports > 1 and self.rail_ports % 2):
            raise ValueError(f"rail_ports: 1, or an even number (a ring of circuits takes half to each "
                             f"neighbour), got {self.rail_ports}")
        if not self.alpha_s >= 0:
            raise ValueError(f"alpha_s: must be >= 0, got {self.alpha_s}")

    def segment(self, n: int, segment: str) -> tuple[Fabric, Configuration]:
        """The fabric of one segment of ``n`` GPUs (module doc) and its circuits (GPUs ``0..n-1``,
        ring neighbours ``i, i + 1``).

        :raises ValueError: an unknown segment kind.
        """
        if segment not in SEGMENTS:
            raise ValueError(f"segment: one of {', '.join(SEGMENTS)}, got {segment!r}")
        ports = self.rail_ports
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

    def seconds(self, kind: str, n: int, nbytes: int, segment: str) -> float:
        """Seconds one op takes alone on its segment: ``kind`` ``allreduce`` (ring), ``alltoall``
        (pairwise) or ``send`` (one message from GPU 0 to 1) of ``nbytes`` bytes among ``n`` GPUs.
        Memoised.

        :raises ValueError: as :meth:`segment`.
        """
        return _op_seconds(self, kind, n, int(nbytes), segment)

    def tp_allreduce_s(self, gpus: int, nbytes: int) -> float:
        """Seconds of a ring all-reduce of ``nbytes`` bytes over the ``gpus`` GPUs of a server's
        scale-up switch (0 for one GPU)."""
        return _op_seconds(self, "allreduce", gpus, int(nbytes), "scaleup") if gpus > 1 else 0.0


@lru_cache(maxsize=4096)
def _op_seconds(net: RailNetwork, kind: str, n: int, nbytes: int, segment: str) -> float:
    fab, config = net.segment(n, segment)
    if kind == "send":
        w = Workload("broadcast", "p2p", n, nbytes, 1, (Step("p2p", (Transfer(0, 1, nbytes, 0, 1, "copy"),)),), (0,))
    else:
        w = build("pairwise" if kind == "alltoall" else "ring", n, max(nbytes, n), kind)
    plan = plan_from_configurations("opus", config, [config] * len(w.steps), 0.0, w)
    return simulate(fab, w, plan, alpha_s=net.alpha_s, record_transfers=False).time_s
