"""WAN TE: the bundled B4 data, k-shortest tunnels, and the TE formulations as LPs (HiGHS) and
regularised QPs (Clarabel), checked in closed form and against each other; splits as select-group
bucket weights."""

import csv

import numpy as np
import pytest

from emulation.planners.te import GROUP_WEIGHT, OBJECTIVES, SYMPHONY_LAMBDA, TeError, bucket_weights, solve
from emulation.planners.tunnels import k_shortest
from topologies.wan import DATA, WanError, WanTopology, gravity_series, load_bundled, write_wan


@pytest.fixture(scope="module")
def b4():
    topo, tms = load_bundled("b4")
    return topo, tms, k_shortest(topo, 4), np.array(topo.capacity)


def test_b4_data_loads_as_published():
    topo, tms = load_bundled("b4")
    assert topo.routers == 12 and len(topo.links) == 38 and set(topo.capacity) == {5000.0}
    assert len(tms) == 36 and (np.diagonal(tms.matrices, axis1=1, axis2=2) == 0).all()
    with open(DATA / "b4" / "traffic_matrices.csv", newline="") as fh:
        total0 = sum(float(r["demand"]) for r in csv.DictReader(fh) if r["tm"] == "0")
    assert tms[0].sum() == pytest.approx(total0, rel=1e-12)
    with pytest.raises(WanError, match="unknown WAN 'nowhere'"):
        load_bundled("nowhere")


@pytest.mark.parametrize("name, routers, links", [("abilene", 12, 30), ("geant", 22, 72)])
def test_sndlib_wans_are_normalised_to_optimal_mlu_one(name, routers, links):
    """Abilene and GEANT (SNDlib via topohub, 10 Gbit/s links): the series is scaled so that the
    mean matrix's optimal min-MLU over 4 shortest tunnels is 1.0, as their READMEs state."""
    topo, tms = load_bundled(name)
    assert (topo.routers, len(topo.links), len(tms)) == (routers, links, 36)
    assert set(topo.capacity) == {10_000.0} and all((v, u) in topo.links for u, v in topo.links)
    mean = tms.matrices.mean(axis=0)
    mlu = solve(k_shortest(topo, 4), mean, np.array(topo.capacity), "min-mlu").value
    assert mlu == pytest.approx(1.0, rel=1e-4)  # the CSV keeps 6 significant digits


def test_gravity_series_is_seeded_and_follows_its_masses():
    src, dst = np.array([4.0, 2.0, 1.0, 1.0]), np.array([1.0, 1.0, 3.0, 3.0])
    a = gravity_series(src, dst, 400, seed=3, period=400)
    assert np.array_equal(a, gravity_series(src, dst, 400, seed=3, period=400))
    assert not np.array_equal(a, gravity_series(src, dst, 400, seed=4, period=400))
    assert (np.diagonal(a, axis1=1, axis2=2) == 0).all() and (a >= 0).all()
    totals = a.sum(axis=(1, 2))
    assert totals[100] == pytest.approx(8.0 * 1.15) and totals[300] == pytest.approx(8.0 * 0.85)
    share = a.sum(axis=2).sum(axis=0) / a.sum()  # the fluctuations average out: heaviest source first
    assert share[0] > share[1] > share[2] and abs(share[2] - share[3]) < 0.03
    with pytest.raises(WanError, match="gravity model"):
        gravity_series(np.array([1.0, -1.0]), np.array([1.0, 1.0]), 2)


def test_a_wan_directory_loads_like_a_bundled_one(tmp_path):
    topo, tms = load_bundled("abilene")
    write_wan(topo, tms, tmp_path / "mine")
    topo2, tms2 = load_bundled(str(tmp_path / "mine"))
    assert topo2.links == topo.links and topo2.names == topo.names
    assert np.allclose(tms2.matrices, tms.matrices, rtol=1e-5)


def test_tunnels_are_the_k_shortest_simple_paths(b4):
    topo, _, tunnels, _ = b4
    assert len(tunnels.demands) == 12 * 11
    for d, (s, t) in enumerate(tunnels.demands):
        paths = [tunnels.paths[j] for j in tunnels.of(d)]
        assert 1 <= len(paths) <= 4 and len(set(paths)) == len(paths)
        hops = [len(p) for p in paths]
        assert hops == sorted(hops)  # shortest first
        for p in paths:  # a simple path from s to t
            nodes = [topo.links[p[0]][0]] + [topo.links[e][1] for e in p]
            assert nodes[0] == s and nodes[-1] == t and len(set(nodes)) == len(nodes)
            assert all(topo.links[a][1] == topo.links[b][0] for a, b in zip(p, p[1:]))


def _triangle() -> WanTopology:
    links = ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))
    return WanTopology("triangle", ("a", "b", "c"), links, (10.0,) * 6)


@pytest.mark.parametrize("lam", [0.0, 1e-6])
def test_closed_form_on_a_triangle(lam):
    """One demand of 25 from a to b over two tunnels (direct, via c) of capacity 10 each:
    max-flow carries 20, the concurrent fraction is 0.8, and the min-MLU split is half and
    half, 12.5 per link, MLU 1.25."""
    topo = _triangle()
    tunnels = k_shortest(topo, 4)
    tm = np.zeros((3, 3))
    tm[0, 1] = 25.0
    cap = np.array(topo.capacity)
    assert solve(tunnels, tm, cap, "max-flow", lam).carried == pytest.approx(20.0, rel=1e-5)
    assert solve(tunnels, tm, cap, "mcf", lam).value == pytest.approx(0.8, rel=1e-5)
    mlu = solve(tunnels, tm, cap, "min-mlu", lam)
    assert mlu.value == pytest.approx(1.25, rel=1e-5)
    assert mlu.splits[tunnels.of(0)] == pytest.approx([0.5, 0.5], abs=1e-5)
    # 10% headroom: capacities of 9
    assert solve(tunnels, tm, cap, "max-flow", lam, headroom=0.1).carried == pytest.approx(18.0, rel=1e-5)


@pytest.mark.parametrize("scale", [1.0, 4.0])
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_the_regulariser_tends_to_the_lp_optimum_and_splits_are_valid(b4, objective, scale):
    """With lambda -> 0 the regularised optimum reaches the LP's; with Symphony's lambda it stays
    within 1%. Every allocation is valid: splits per demand sum to at most 1 (max-flow), to the
    concurrent fraction (mcf) or to 1 (min-mlu), and the capacity-bound objectives never load a
    link above its capacity."""
    topo, tms, tunnels, cap = b4
    tm = tms[3] * scale
    lp = solve(tunnels, tm, cap, objective)
    tiny = solve(tunnels, tm, cap, objective, regulariser=1e-7)
    sym = solve(tunnels, tm, cap, objective, regulariser=SYMPHONY_LAMBDA[objective])
    assert tiny.value == pytest.approx(lp.value, rel=1e-4)
    assert sym.value == pytest.approx(lp.value, rel=1e-2)
    vol = tunnels.volumes(tm)
    for sol in (lp, tiny, sym):
        per_demand = np.bincount(tunnels.demand_of, weights=sol.splits, minlength=len(tunnels.demands))
        if objective == "max-flow":
            assert per_demand.max() <= 1 + 1e-6
        elif objective == "mcf":
            assert per_demand[vol > 0] == pytest.approx(np.full((vol > 0).sum(), sol.value), abs=1e-5)
        else:
            assert per_demand == pytest.approx(np.ones(len(vol)), abs=1e-5)
        if objective != "min-mlu":
            assert sol.utilisation.max() <= 1 + 1e-5
    if scale > 1:  # congested: the capacity-bound objectives cannot carry everything
        assert lp.carried < tm.sum() * (1 - 1e-3) or objective == "min-mlu"


def test_bad_te_arguments_name_the_field(b4):
    _, tms, tunnels, cap = b4
    with pytest.raises(TeError, match="te.objective"):
        solve(tunnels, tms[0], cap, "max-min")
    with pytest.raises(TeError, match="te.regulariser"):
        solve(tunnels, tms[0], cap, "mcf", regulariser=-1.0)
    with pytest.raises(TeError, match="te.capacity_headroom"):
        solve(tunnels, tms[0], cap, "mcf", headroom=1.0)
    with pytest.raises(WanError, match="tunnels.k"):
        k_shortest(_triangle(), 0)


@pytest.mark.parametrize("splits, weights, drop", [
    ([1.0], [64], 0),
    ([0.5, 0.5], [32, 32], 0),
    ([0.75, 0.25, 0.0], [48, 16, 0], 0),
    ([0.3, 0.2], [19, 13], 32),  # 19.2, 12.8, 32: the largest remainder (12.8) gets the unit left
    ([0.0, 0.0], [0, 0], 64),  # nothing admitted: all to the dropping bucket
    ([1.2, -0.1], [64, 0], 0),  # clipped to [0, 1]
])
def test_bucket_weights_are_the_splits_in_64ths(splits, weights, drop):
    assert bucket_weights(splits) == (weights, drop)


def test_bucket_weights_of_every_b4_solution_sum_to_the_group_weight(b4):
    topo, tms, tunnels, cap = b4
    for objective in OBJECTIVES:
        sol = solve(tunnels, tms[0], cap, objective, SYMPHONY_LAMBDA[objective])
        for d in range(len(tunnels.demands)):
            x = sol.splits[tunnels.of(d)]
            w, drop = bucket_weights(x)
            assert sum(w) + drop == GROUP_WEIGHT
            assert np.abs(np.array(w) / GROUP_WEIGHT - np.clip(x, 0, 1)).max() < 1 / GROUP_WEIGHT
