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
