"""Fabric builders: plain :class:`~emulation.fabric.Fabric` data, no Mininet, stdlib only.

Each builder takes real-equivalent parameters (port rate in Gbit/s, reconfiguration delay in
seconds) and returns a fabric whose ``initial`` configuration is the base topology.

Spec: ``shared/DESIGN.md`` (layout: ``topologies/``), ``specs/collectives.md`` (base topologies).
"""

from __future__ import annotations

from emulation.fabric import (
    EPS,
    OCS,
    Circuit,
    Configuration,
    Fabric,
    FabricError,
    PortRef,
    assign_ports,
)

#: Named initial configurations of an OCS star.
OCS_INITIAL = ("ring", "empty")


def ring_pairs(gpus: int) -> list[tuple[int, int]]:
    """GPU pairs of the ring ``0-1-...-(n-1)-0`` (undirected, n pairs; 2 parallel pairs for n=2)."""
    return [(i, (i + 1) % gpus) for i in range(gpus)]


def ocs_star(
    gpus: int,
    ports_per_gpu: int = 2,
    port_gbps: float = 400.0,
    reconfiguration_delay_s: float = 0.0,
    initial: str = "ring",
) -> Fabric:
    """Every port of every GPU on one OCS named ``ocs0`` (OCS port ``1 + gpu*p + port``).

    :param initial: ``"ring"`` (circuits i <-> i+1 mod n, needs p >= 2) or ``"empty"``.
    :raises FabricError: bad sizes, or a ring asked with fewer than 2 ports per GPU.
    """
    ports = tuple(PortRef(g, j) for g in range(gpus) for j in range(ports_per_gpu))
    ocs = OCS("ocs0", ports, reconfiguration_delay_s)
    bare = Fabric(f"ocs-star-{gpus}x{ports_per_gpu}", gpus, ports_per_gpu, port_gbps, ocs=(ocs,))
    if initial == "empty":
        return bare
    if initial == "ring":
        if ports_per_gpu < 2:
            raise FabricError("initial: a ring configuration needs ports_per_gpu >= 2")
        config = assign_ports(bare, "ocs0", ring_pairs(gpus))
        return Fabric(bare.name, gpus, ports_per_gpu, port_gbps, ocs=(ocs,), initial=config)
    raise FabricError(f"initial: unknown configuration {initial!r} (known: {', '.join(OCS_INITIAL)})")


def static_ring(gpus: int, port_gbps: float = 400.0, **_ignored: object) -> Fabric:
    """A static bidirectional ring of cables: GPU i port 1 <-> GPU i+1 port 0 (2 ports per GPU).

    No OCS: planners cannot reconfigure it (the ``none`` baseline of ``specs/collectives.md``).
    """
    if gpus < 3:
        raise FabricError(f"gpus: a static ring needs at least 3 GPUs, got {gpus}")
    cables = tuple(Circuit.of(PortRef(i, 1), PortRef((i + 1) % gpus, 0)) for i in range(gpus))
    return Fabric(f"ring-{gpus}", gpus, 2, port_gbps, cables=cables, initial=Configuration())


def eps_star(gpus: int, port_gbps: float = 400.0, **_ignored: object) -> Fabric:
    """Every GPU's single port on one non-blocking electrical packet switch ``eps0``."""
    eps = EPS("eps0", tuple(PortRef(g, 0) for g in range(gpus)))
    return Fabric(f"eps-{gpus}", gpus, 1, port_gbps, eps=(eps,))


#: Builders by the name used in scenario files (``fabric.topology``).
BUILDERS = {
    "ocs-star": ocs_star,
    "ring": static_ring,
    "eps": eps_star,
}
