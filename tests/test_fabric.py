import pytest

from emulation.fabric import Circuit, Configuration, Fabric, FabricError, PortRef, assign_ports
from topologies import eps_star, ocs_star, static_ring


def _peers(fabric: Fabric, config: Configuration) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {g: [] for g in range(fabric.gpus)}
    for _, c in config.all_circuits():
        out[c.a.gpu].append(c.b.gpu)
        out[c.b.gpu].append(c.a.gpu)
    return out


@pytest.mark.parametrize("n", [3, 4, 8, 17])
def test_ocs_star_ring_configuration_joins_neighbours(n):
    f = ocs_star(n, 2, 400, 1e-5, "ring")
    peers = _peers(f, f.initial)
    for g in range(n):
        assert sorted(peers[g]) == sorted([(g - 1) % n, (g + 1) % n])
    assert len(f.ocs[0].ports) == 2 * n
    assert len(f.links()) == 2 * n  # n circuits, two directions each


def test_ring_needs_two_ports_and_empty_is_empty():
    with pytest.raises(FabricError, match="ports_per_gpu"):
        ocs_star(4, 1, 400, 0, "ring")
    assert len(ocs_star(4, 1, 400, 0, "empty").initial) == 0


def test_assign_ports_parallel_circuits_and_degree_limit():
    f = ocs_star(4, 4, 100, 0, "empty")
    c = assign_ports(f, "ocs0", [(0, 1), (2, 3)], fill=True)
    assert len(c["ocs0"]) == 8  # every pair gets all 4 ports
    with pytest.raises(FabricError, match="degree exceeds ports"):
        assign_ports(ocs_star(4, 1, 100, 0, "empty"), "ocs0", [(0, 1), (0, 2)])


def test_configuration_is_a_matching():
    f = ocs_star(4, 2, 100, 0, "empty")
    a = Circuit.of(PortRef(0, 0), PortRef(1, 0))
    b = Circuit.of(PortRef(0, 0), PortRef(2, 0))
    with pytest.raises(FabricError, match="used by two circuits"):
        f.check_configuration(Configuration({"ocs0": [a, b]}))
    with pytest.raises(FabricError, match="not cabled"):
        f.check_configuration(Configuration({"ocs0": [Circuit.of(PortRef(0, 0), PortRef(9, 0))]}))


def test_json_round_trip():
    for f in (ocs_star(6, 2, 400, 3.7e-6, "ring"), static_ring(5), eps_star(4)):
        g = Fabric.from_json(f.to_json())
        assert g.links() == f.links()
        assert g.initial == f.initial
        assert g.ocs == f.ocs


def test_static_ring_and_eps_links():
    r = static_ring(5)
    assert {(l.u, l.v) for l in r.links()} == {(i, (i + 1) % 5) for i in range(5)} | {((i + 1) % 5, i) for i in range(5)}
    e = eps_star(3)
    assert {(l.u, l.v) for l in e.links()} == {(g, 3) for g in range(3)} | {(3, g) for g in range(3)}


def test_a_rail_fabric_joins_gpu_r_of_every_server_on_rail_r():
    """Opus's rail-optimised fabric: 2 servers x 8 GPUs, photonic rails starting in a ring of
    servers, a scale-up switch per server; and the electrical baseline."""
    from topologies import rails

    f = rails(2, 8, rail_ports=2)
    assert (f.gpus, f.ports_per_gpu, len(f.ocs)) == (16, 3, 8)
    for r, o in enumerate(f.ocs):
        assert o.name == f"rail{r}" and {p.gpu for p in o.ports} == {r, 8 + r}
        # the ring of 2 servers: both rail ports of GPU r joined to GPU 8 + r
        assert {(c.a.gpu, c.b.gpu) for c in f.initial[o.name]} == {(r, 8 + r)} and len(f.initial[o.name]) == 2
    nvl = [e for e in f.eps if e.name.startswith("nvl")]
    assert [sorted(p.gpu for p in e.ports) for e in nvl] == [list(range(8)), list(range(8, 16))]
    assert all(p.port == 2 for e in nvl for p in e.ports) and nvl[0].port_gbps == 3600.0
    big = rails(128, 8)
    assert big.gpus == 1024 and all(len(big.initial[o.name]) == 128 for o in big.ocs)  # a ring of 128 servers
    e = rails(4, 4, rail="eps", scaleup_gbps=None)
    assert (e.ports_per_gpu, len(e.ocs), [x.name for x in e.eps]) == (1, 0, ["rail0", "rail1", "rail2", "rail3"])
    for bad in ({"servers": 1}, {"rail": "copper"}, {"rail_ports": 1}, {"initial": "torus"}):
        with pytest.raises(FabricError):
            rails(**{"servers": 2, "gpus_per_server": 4, **bad})
