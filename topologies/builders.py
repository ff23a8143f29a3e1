"""Fabric builders: plain :class:`~emulation.fabric.Fabric` data, no Mininet, stdlib only.

Each builder takes real-equivalent parameters (port rate in Gbit/s, reconfiguration delay in
seconds) and returns a fabric whose ``initial`` configuration is the base topology.

Spec: ``docs/architecture.md`` (layout: ``topologies/``), ``docs/mechanisms.md`` (base topologies).
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

#: Named initial configurations (base topologies) of an OCS star.
OCS_INITIAL = ("ring", "torus", "empty")


def ring_pairs(gpus: int) -> list[tuple[int, int]]:
    """GPU pairs of the ring ``0-1-...-(n-1)-0`` (undirected, n pairs; 2 parallel pairs for n=2)."""
    return [(i, (i + 1) % gpus) for i in range(gpus)]


def torus_dims(gpus: int) -> tuple[int, int]:
    """``(rows, cols)`` of the most nearly square 2-D torus of ``gpus`` GPUs (rows <= cols):
    8 -> (2, 4), 16 -> (4, 4), 128 -> (8, 16); a prime count gives (1, n), a ring."""
    rows = max(d for d in range(1, int(gpus**0.5) + 1) if gpus % d == 0)
    return rows, gpus // rows


def torus_pairs(gpus: int) -> list[tuple[int, int]]:
    """GPU pairs of the 2-D torus :func:`torus_dims` (GPU ``row * cols + col``): each GPU to its
    east and south neighbours with wrap-around. A dimension of size 2 gives 2 parallel pairs
    (east and west are the same GPU); a dimension of size 1 gives none."""
    return [(g, e) for g, e, _ in _torus_links(gpus) if e is not None] + [
        (g, s) for g, _, s in _torus_links(gpus) if s is not None]


def _torus_links(gpus: int) -> list[tuple[int, int | None, int | None]]:
    """``(gpu, east neighbour, south neighbour)`` of every GPU of the :func:`torus_dims` torus
    (None along a dimension of size 1)."""
    rows, cols = torus_dims(gpus)
    return [(r * cols + c, r * cols + (c + 1) % cols if cols > 1 else None,
             ((r + 1) % rows) * cols + c if rows > 1 else None)
            for r in range(rows) for c in range(cols)]


def ocs_star(
    gpus: int,
    ports_per_gpu: int = 2,
    port_gbps: float = 400.0,
    reconfiguration_delay_s: float = 0.0,
    initial: str = "ring",
) -> Fabric:
    """Every port of every GPU on one OCS named ``ocs0`` (OCS port ``1 + gpu*p + port``).

    :param initial: the base topology: ``"ring"`` (circuits i <-> i+1 mod n, needs p >= 2),
        ``"torus"`` (:func:`torus_pairs`, needs p >= 4) or ``"empty"``.
    :raises FabricError: bad sizes, or a base topology needing more ports than p.
    """
    ports = tuple(PortRef(g, j) for g in range(gpus) for j in range(ports_per_gpu))
    ocs = OCS("ocs0", ports, reconfiguration_delay_s)
    bare = Fabric(f"ocs-star-{gpus}x{ports_per_gpu}", gpus, ports_per_gpu, port_gbps, ocs=(ocs,))
    if initial == "empty":
        return bare
    if initial in ("ring", "torus"):
        need = 2 if initial == "ring" else 4
        if ports_per_gpu < need:
            raise FabricError(f"initial: a {initial} configuration needs ports_per_gpu >= {need}")
        config = assign_ports(bare, "ocs0", ring_pairs(gpus) if initial == "ring" else torus_pairs(gpus))
        return Fabric(bare.name, gpus, ports_per_gpu, port_gbps, ocs=(ocs,), initial=config)
    raise FabricError(f"initial: unknown configuration {initial!r} (known: {', '.join(OCS_INITIAL)})")


def parallel_ocs(
    gpus: int,
    switches: int = 2,
    port_gbps: float = 400.0,
    reconfiguration_delay_s: float = 0.0,
) -> Fabric:
    """``switches`` (s) optical circuit switches in parallel, ``ocs0 .. ocs<s-1>``: every GPU has
    s fabric ports, port ``k`` on OCS ``k`` (its OCS port ``1 + gpu``). Each OCS holds its own
    configuration and reconfigures on its own clock (Spectra, arXiv 2603.07373). No circuits at
    the start (the first configuration of every OCS costs a reconfiguration delay).

    :param gpus: GPUs n (>= 2). :param switches: OCSes s (>= 1), the ports of every GPU.
    :param port_gbps: rate B of every port, Gbit/s. :param reconfiguration_delay_s: delta, the
        dark window of every OCS's reconfiguration, seconds (>= 0).
    :returns: a fabric of ``gpus`` GPUs with ``switches`` ports each, ``switches`` OCSes of
        ``gpus`` ports each, an empty initial configuration.
    :raises FabricError: fewer than 2 GPUs or 1 switch, a rate not positive, a negative delay.
    """
    if switches < 1:
        raise FabricError(f"switches: a parallel-OCS fabric needs at least 1 switch, got {switches}")
    if reconfiguration_delay_s < 0:
        raise FabricError(f"reconfiguration_delay_s: must be >= 0, got {reconfiguration_delay_s}")
    ocs = tuple(OCS(f"ocs{k}", tuple(PortRef(g, k) for g in range(gpus)), reconfiguration_delay_s)
                for k in range(switches))
    return Fabric(f"parallel-ocs-{gpus}x{switches}", gpus, switches, port_gbps, ocs=ocs)


def redirection_fabrics(port_gbps: float) -> tuple[Fabric, dict[str, Configuration]]:
    """Morphlux's bandwidth redirection (arXiv 2508.03674): a 2x2x1 slice's 4 accelerators with 6
    ports each (``port_gbps`` each) on one OCS, and its two configurations: ``torus`` (a ring on
    2 of the 6 ports, one circuit per neighbour pair, as a contiguous torus slice gets) and
    ``photonic`` (all 6 steered into the ring: three parallel circuits per neighbour pair). The
    fabric's initial configuration is ``photonic``."""
    bare = ocs_star(4, 6, port_gbps, 0.0, "empty")
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    configs = {"torus": assign_ports(bare, "ocs0", ring), "photonic": assign_ports(bare, "ocs0", ring * 3)}
    fabric = Fabric(bare.name, bare.gpus, bare.ports_per_gpu, bare.port_gbps, ocs=bare.ocs, eps=bare.eps,
                    initial=configs["photonic"])
    return fabric, configs


def static_ring(gpus: int, port_gbps: float = 400.0) -> Fabric:
    """A static bidirectional ring of cables: GPU i port 1 <-> GPU i+1 port 0 (2 ports per GPU).

    No OCS: planners cannot reconfigure it (the ``none`` baseline of ``docs/mechanisms.md``).
    """
    if gpus < 3:
        raise FabricError(f"gpus: a static ring needs at least 3 GPUs, got {gpus}")
    cables = tuple(Circuit.of(PortRef(i, 1), PortRef((i + 1) % gpus, 0)) for i in range(gpus))
    return Fabric(f"ring-{gpus}", gpus, 2, port_gbps, cables=cables, initial=Configuration())


def static_torus(gpus: int, port_gbps: float = 400.0) -> Fabric:
    """A static 2-D torus of cables (:func:`torus_dims`), 4 ports per GPU: port 1 to the east
    neighbour's port 0, port 3 to the south neighbour's port 2. No OCS.

    :raises FabricError: fewer than 4 GPUs.
    """
    if gpus < 4:
        raise FabricError(f"gpus: a static torus needs at least 4 GPUs, got {gpus}")
    cables = [Circuit.of(PortRef(g, 1), PortRef(e, 0)) for g, e, _ in _torus_links(gpus) if e is not None]
    cables += [Circuit.of(PortRef(g, 3), PortRef(s, 2)) for g, _, s in _torus_links(gpus) if s is not None]
    rows, cols = torus_dims(gpus)
    return Fabric(f"torus-{rows}x{cols}", gpus, 4, port_gbps, cables=tuple(cables), initial=Configuration())


def eps_star(gpus: int, port_gbps: float = 400.0) -> Fabric:
    """Every GPU's single port on one non-blocking electrical packet switch ``eps0``."""
    eps = EPS("eps0", tuple(PortRef(g, 0) for g in range(gpus)))
    return Fabric(f"eps-{gpus}", gpus, 1, port_gbps, eps=(eps,))


def rack(
    gpus: int,
    spares: int = 2,
    ports_per_gpu: int = 2,
    port_gbps: float = 400.0,
    reconfiguration_delay_s: float = 0.0,
    initial: str = "ring",
    electrical_gbps: float | None = None,
) -> Fabric:
    """A rack of ``gpus`` working GPUs and ``spares`` spare GPUs whose fabric ports are all on
    one OCS ``ocs0`` (LUMION, ``docs/mechanisms.md``): GPUs ``0..gpus-1`` work, GPUs
    ``gpus..gpus+spares-1`` are the spares. The job's logical topology is realised by circuits:
    ``initial: ring`` joins the working GPUs in the ring ``0-1-...-(gpus-1)-0`` (the spares have
    none); ``empty`` has no circuit.

    :param ports_per_gpu: optical ports per GPU (>= 2 for the ring).
    :param electrical_gbps: if set, every GPU also has one more port (index ``ports_per_gpu``)
        on a packet switch ``eps0`` of this rate: the rack's slower electrical path (a shared
        uplink; the electrical baseline reaches a spare over it). Routes prefer circuits: a
        pair uses ``eps0`` only where no circuit path is as short.
    :raises FabricError: bad sizes, or a ring without 2 ports per GPU or 3 working GPUs.
    """
    if spares < 0:
        raise FabricError(f"spares: must be >= 0, got {spares}")
    if initial not in ("ring", "empty"):
        raise FabricError(f"initial: a rack starts in a ring or empty, not {initial!r}")
    if initial == "ring" and (ports_per_gpu < 2 or gpus < 3):
        raise FabricError(f"initial: the ring needs 3 working GPUs with 2 ports each, got {gpus} with {ports_per_gpu}")
    total = gpus + spares
    ports = tuple(PortRef(g, j) for g in range(total) for j in range(ports_per_gpu))
    ocs = OCS("ocs0", ports, reconfiguration_delay_s)
    eps: tuple[EPS, ...] = ()
    p = ports_per_gpu
    if electrical_gbps is not None:
        eps = (EPS("eps0", tuple(PortRef(g, ports_per_gpu) for g in range(total)), electrical_gbps),)
        p += 1
    name = f"rack-{gpus}+{spares}"
    bare = Fabric(name, total, p, port_gbps, ocs=(ocs,), eps=eps)
    if initial == "empty":
        return bare
    config = assign_ports(bare, "ocs0", ring_pairs(gpus))
    return Fabric(name, total, p, port_gbps, ocs=(ocs,), eps=eps, initial=config)


#: Scale-up bandwidth of one GPU inside its server, Gbit/s per direction (NVLink 4: 900 GB/s
#: both directions, 450 GB/s = 3,600 Gbit/s each way).
SCALEUP_GBPS = 3600.0


def rails(
    servers: int,
    gpus_per_server: int = 8,
    rail_ports: int = 2,
    port_gbps: float = 400.0,
    reconfiguration_delay_s: float = 0.0,
    rail: str = "ocs",
    initial: str = "ring",
    scaleup_gbps: float | None = SCALEUP_GBPS,
) -> Fabric:
    """A rail-optimised GPU fabric (Opus, arXiv 2507.08119): ``servers`` servers of
    ``gpus_per_server`` GPUs; GPU ``s * gpus_per_server + r`` is GPU ``r`` of server ``s``.
    Rail ``r`` joins GPU ``r`` of every server: its ports ``0..rail_ports-1`` are on the rail
    switch ``rail<r>``, an optical circuit switch (``rail="ocs"``, photonic rails) or an electrical
    packet switch (``rail="eps"``, the electrical baseline, which has one port per GPU). Each
    server's GPUs also share a scale-up domain, a packet switch ``nvl<s>`` on port
    ``rail_ports`` (``1`` for EPS rails) at ``scaleup_gbps`` (None: no scale-up domain).

    :param initial: photonic rails start with every rail's servers in a ring (``"ring"``: server
        ``s`` to ``s + 1`` on each rail, needs ``rail_ports >= 2``) or without circuits
        (``"empty"``).
    :raises FabricError: fewer than 2 servers or 1 GPU per server, an unknown rail kind or
        initial configuration, or a ring without 2 rail ports.
    """
    if servers < 2 or gpus_per_server < 1:
        raise FabricError(f"servers, gpus_per_server: a rail fabric needs >= 2 servers of >= 1 GPU, "
                          f"got {servers} x {gpus_per_server}")
    if rail not in ("ocs", "eps"):
        raise FabricError(f"rail: 'ocs' (photonic rails) or 'eps' (electrical rails), not {rail!r}")
    if rail == "ocs" and initial not in ("ring", "empty"):
        raise FabricError(f"initial: photonic rails start in a ring or empty, not {initial!r}")
    if rail == "ocs" and initial == "ring" and rail_ports < 2:
        raise FabricError(f"initial: a ring of servers needs rail_ports >= 2, got {rail_ports}")
    if rail_ports < 1:
        raise FabricError(f"rail_ports: must be >= 1, got {rail_ports}")
    n = servers * gpus_per_server
    on_rail = rail_ports if rail == "ocs" else 1
    members = [[s * gpus_per_server + r for s in range(servers)] for r in range(gpus_per_server)]
    ocs: tuple[OCS, ...] = ()
    eps: list[EPS] = []
    if rail == "ocs":
        ocs = tuple(OCS(f"rail{r}", tuple(PortRef(g, j) for g in gs for j in range(on_rail)), reconfiguration_delay_s)
                    for r, gs in enumerate(members))
    else:
        eps += [EPS(f"rail{r}", tuple(PortRef(g, 0) for g in gs)) for r, gs in enumerate(members)]
    p = on_rail
    if scaleup_gbps is not None and gpus_per_server > 1:
        eps += [EPS(f"nvl{s}", tuple(PortRef(s * gpus_per_server + r, on_rail) for r in range(gpus_per_server)),
                    scaleup_gbps) for s in range(servers)]
        p += 1
    name = f"rails-{servers}x{gpus_per_server}-{rail}"
    bare = Fabric(name, n, p, port_gbps, ocs=ocs, eps=tuple(eps))
    if rail == "eps" or initial == "empty":
        return bare
    circuits = {}
    for r, gs in enumerate(members):
        ring = [(gs[a], gs[b]) for a, b in ring_pairs(servers)]
        circuits.update(assign_ports(bare, f"rail{r}", ring).to_json())
    return Fabric(name, n, p, port_gbps, ocs=ocs, eps=tuple(eps), initial=Configuration.from_json(circuits))


#: Builders by the name used in scenario files (``fabric.topology``).
BUILDERS = {
    "ocs-star": ocs_star,
    "ring": static_ring,
    "torus": static_torus,
    "eps": eps_star,
    "rack": rack,
    "parallel-ocs": parallel_ocs,
}
