"""WAN slicing (Symphony's randomised connected slicing, per-router, one) and the divergence
experiment on B4 with its Abilene matrices (flow level)."""

import networkx as nx
import numpy as np
import pytest

from emulation.planners.divergence import Deviation, diverged, evaluate
from emulation.planners.slicing import make_slicing
from emulation.planners.te import SYMPHONY_LAMBDA, solve
from emulation.planners.tunnels import k_shortest
from topologies.wan import WanError, load_bundled


@pytest.fixture(scope="module")
def b4():
    topo, tms = load_bundled("b4")
    return topo, tms, k_shortest(topo, 4), np.array(topo.capacity), tms.matrices.mean(axis=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_slices_are_connected_balanced_and_seeded(b4, seed):
    topo, _, _, _, mean = b4
    s = make_slicing("random", topo, mean, 5, seed)
    assert s.count == 5 and sorted(set(s.slice_of)) == list(range(5))
    g = topo.graph().to_undirected()
    for k in range(5):
        assert nx.is_connected(g.subgraph(s.routers(k)))
    weight = mean.sum(axis=1)
    per = np.bincount(s.slice_of, weights=weight, minlength=5)
    assert per.min() >= 0.7 * weight.sum() / 5 or per.min() == weight[s.routers(int(per.argmin()))].max()
    assert make_slicing("random", topo, mean, 5, seed) == s  # deterministic in the seed


def test_blast_radius_of_one_per_router_and_random_slicings(b4):
    topo, _, _, _, mean = b4
    share = mean.sum(axis=1) / mean.sum()
    assert make_slicing("one", topo, mean).blast_radius(mean) == pytest.approx(1.0)
    assert make_slicing("per-router", topo, mean).blast_radius(mean) == pytest.approx(share.max())
    rs = make_slicing("random", topo, mean, 5, 0)
    assert share.max() <= rs.blast_radius(mean) < 1.0
    with pytest.raises(WanError, match="slices.count"):
        make_slicing("random", topo, mean, 13)
    with pytest.raises(WanError, match="slices.method"):
        make_slicing("regional", topo, mean)


def test_without_deviation_one_slice_is_the_central_solve(b4):
    topo, tms, tunnels, cap, mean = b4
    tm = tms[5] * 1.5
    one = make_slicing("one", topo, mean)
    got = diverged(tunnels, tm, cap, one, "max-flow", Deviation(sd=0.0))
    central = evaluate(tunnels, solve(tunnels, tm, cap, "max-flow").splits, tm, cap)
    assert got.congestion == central.congestion
    assert central.congestion < 1e-6 * cap.sum()  # rounding only: the LP respects every capacity
    assert got.carried == pytest.approx(central.carried, rel=1e-9)


def test_the_regulariser_removes_divergence_induced_congestion_on_b4(b4):
    """Five random slices, each with its own view of the demand (|N(0, 5%)| per demand), max-flow
    at 0.8 x the measured matrices 0, 6, ..., 30: the LP union overloads links (measured: mean
    congestion 133.5, per-router current practice 342.0), Symphony's regularised union does not
    (0.0), and no allocation from the true demand does."""
    topo, tms, tunnels, cap, mean = b4
    slices = make_slicing("random", topo, mean, 5, 0)
    per_router = make_slicing("per-router", topo, mean)
    dev = Deviation(sd=0.05)
    lp, sym, pr = [], [], []
    for i in range(0, 36, 6):
        tm = tms[i] * 0.8
        lp.append(diverged(tunnels, tm, cap, slices, "max-flow", dev, i).congestion)
        sym.append(diverged(tunnels, tm, cap, slices, "max-flow", dev, i, SYMPHONY_LAMBDA["max-flow"]).congestion)
        pr.append(diverged(tunnels, tm, cap, per_router, "max-flow", dev, i).congestion)
    assert np.mean(lp) > 10 and np.mean(pr) > np.mean(lp)
    assert np.mean(sym) <= 0.05 * np.mean(lp)
