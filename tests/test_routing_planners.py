import numpy as np
import pytest

from emulation.planners import make_plan
from emulation.schedule import PlanError
from emulation.routing import Routes, RoutingError, link_loads
from emulation.workloads import build
from topologies import eps_star, ocs_star, rack, rails, static_torus


def test_ring_paths_are_shortest_and_ecmp_splits_ties():
    f = ocs_star(8, 2, 400, 0, "ring")
    r = Routes(f, f.initial, 2)
    assert len(r.path(0, 1)) == 1 and len(r.path(0, 3)) == 3 and len(r.path(0, 6)) == 2
    a, b = r.path(0, 4, 0), r.path(0, 4, 1)
    assert len(a) == len(b) == 4 and a[0].v != b[0].v  # both directions of the ring
    assert [frac for _, frac, _ in r.subflows(0, 4)] == [0.5, 0.5]
    assert [frac for _, frac, _ in r.subflows(0, 1)] == [1.0]


def test_rhd_on_a_ring_congests_links_by_two_to_the_k():
    """docs/mechanisms.md: recursive doubling on a ring suffers 2^k congestion (1 channel)."""
    n, s = 16, 1 << 20
    f = ocs_star(n, 2, 400, 0, "ring")
    r = Routes(f, f.initial, 1)
    w = build("rhd", n, s)
    for k in range(4):
        loads = link_loads(r, w.steps[k].transfers)
        per_transfer = s >> (k + 1)
        assert max(loads.values()) == pytest.approx(per_transfer * (1 << k))


def test_unreachable_raises():
    f = ocs_star(4, 2, 400, 0, "empty")
    with pytest.raises(RoutingError):
        Routes(f, f.initial, 1).path(0, 1)


def test_eps_paths_go_through_the_switch():
    f = eps_star(4)
    assert [(l.u, l.v) for l in Routes(f).path(0, 3)] == [(0, 4), (4, 3)]


def test_planner_none_and_always():
    f = ocs_star(8, 2, 400, 1e-5, "ring")
    w = build("rhd", 8, 1 << 20)
    none = make_plan("none", f, w)
    assert none.reconfigurations == 0 and all(s.configuration == f.initial for s in none.steps)
    always = make_plan("always", f, w)
    # RS k=0,1,2 then AG k=2,1,0: the middle pair shares its partner, so 5 reconfigurations
    assert [s.action for s in always.steps] == ["reconfigure"] * 3 + ["keep"] + ["reconfigure"] * 2
    for st, sp in zip(w.steps, always.steps):
        pairs = {(min(t.src, t.dst), max(t.src, t.dst)) for t in st.transfers}
        circuits = [(min(c.a.gpu, c.b.gpu), max(c.a.gpu, c.b.gpu)) for _, c in sp.configuration.all_circuits()]
        assert set(circuits) == pairs and len(circuits) == 2 * len(pairs)  # both ports to the partner
    ring = make_plan("always", f, build("ring", 8, 1 << 20))
    assert ring.reconfigurations == 0  # Ring on a ring never reconfigures


def test_always_splits_a_step_with_more_peers_than_ports_into_matchings():
    f = ocs_star(8, 1, 400, 0, "empty")
    w = build("ring", 8, 1 << 20)  # every GPU talks to 2 peers per step, has 1 port
    plan = make_plan("always", f, w)
    assert len(plan.workload.steps) == 2 * len(w.steps) == len(plan.steps)
    for st, sp in zip(plan.workload.steps, plan.steps):
        gpus = [g for _, c in sp.configuration.all_circuits() for g in (c.a.gpu, c.b.gpu)]
        assert len(gpus) == len(set(gpus))  # a matching
        for t in st.transfers:
            assert any({c.a.gpu, c.b.gpu} == {t.src, t.dst} for _, c in sp.configuration.all_circuits())
    from collections import Counter

    assert Counter(t for st in plan.workload.steps for t in st.transfers) == Counter(
        t for st in w.steps for t in st.transfers)


def test_planners_need_one_ocs():
    from topologies.builders import static_ring

    f = static_ring(8)
    for planner in ("always", "greedy", "dp"):
        with pytest.raises(PlanError, match="exactly one OCS"):
            make_plan(planner, f, build("rhd", 8, 1 << 20))


def test_always_reuses_circuits_so_only_changes_go_dark():
    f = ocs_star(8, 2, 400, 1e-5, "ring")
    plan = make_plan("always", f, build("rhd", 8, 1 << 20))
    first = plan.steps[0].configuration["ocs0"]
    kept = first & f.initial["ocs0"]
    # partners 0-1, 2-3, 4-5, 6-7 each already had one ring circuit: it stays up
    assert len(kept) == 4


@pytest.mark.parametrize("fabric", [
    static_torus(16), ocs_star(12, 4, initial="torus"), eps_star(9), rack(8, spares=2),
    rails(4, 4, rail="eps"), rails(2, 4, rail="ocs"),
], ids=["torus16", "ocs-star-torus", "eps9", "rack8", "rails-eps", "rails-ocs"])
def test_paths_walked_per_pair_equal_the_all_pairs_next_hop_tables(fabric):
    """Paths computed for just the pairs asked (lazy hop counts, O(pairs) memory) take the same
    links, on every channel, as walking the all-pairs next-hop tables the controller installs."""
    r = Routes(fabric, fabric.initial, fabric.ports_per_gpu)
    n = fabric.gpus
    src, dst = np.divmod(np.arange(n * n), n)
    keep = (src != dst) & (r.dist[src, dst] > 0)  # a rack's spares are not cabled in yet
    src, dst = src[keep], dst[keep]
    assert src.size >= n * (n - 1) // 2
    for ch in range(fabric.ports_per_gpu):
        got, hops = r.paths(src, dst, ch)
        tab = r.table(ch)
        for i in range(src.size):
            node, want = src[i], []
            while node != dst[i]:
                want.append(tab[node, dst[i]])
                node = r.link_v[want[-1]]
            assert list(got[i, :hops[i]]) == want, (ch, src[i], dst[i])
    assert (r.dist[np.arange(n), np.arange(n)] == 0).all()
