"""The flow backend's fast paths at cluster scale against their general paths: paths on a ring
as runs of lanes and on a switch as two links (equal to the routing tables), max-min over
runs (equal to pairs), steps whose flows share no link in closed form (equal to the fluid
engine), StragglAR's doubling construction as arrays (equal to the construction written with
one object per move)."""

from __future__ import annotations

import numpy as np
import pytest

from emulation.flowsim import simulate
from emulation.flowsim.maxmin import max_min_rates, max_min_rates_runs
from emulation.flowsim.steps import StepSimulator
from emulation.planners import make_plan
from emulation.routing import Routes, _expand
from emulation.workloads import build
from emulation.workloads.stragglar import _doubling_rounds, stragglar_allreduce
from stragglar_reference import reference_doubling_rounds, reference_stragglar_allreduce
from topologies import eps_star, ocs_star, static_ring

FIELDS = ("transfer", "channel", "fraction", "hops", "pair_flow", "pair_link")


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    src, dst = np.divmod(np.arange(n * n), n)
    keep = src != dst
    return src[keep], dst[keep]


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 16, 33])
@pytest.mark.parametrize("make", [static_ring, lambda n: ocs_star(n, 2), lambda n: ocs_star(n, 3),
                                  lambda n: ocs_star(n, 4)], ids=["cables", "ocs-p2", "ocs-p3", "ocs-p4"])
def test_ring_runs_are_the_tables_paths(make, n):
    """Every pair of every ring (cables, circuits with 2-4 ports, odd and even n, ties at n/2
    split over channels): the same subflows, fractions and links, in path order, as the general
    routing, and the same bytes per link."""
    f = make(n)
    r = Routes(f, f.initial, f.ports_per_gpu)
    assert r.ring() is not None
    src, dst = _all_pairs(n)
    fast = r.subflow_arrays(src, dst)
    assert fast.runs is not None and fast.runs.flow.size <= 2 * fast.transfer.size
    r._ring = None  # the general path
    slow = r.subflow_arrays(src, dst)
    for name in FIELDS:
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    w = np.arange(fast.transfer.size) + 0.5
    assert np.array_equal(fast.link_loads(w, len(r.links)), slow.link_loads(w, len(r.links)))


def test_not_a_ring_and_not_a_star_take_the_general_path():
    torus = ocs_star(16, 4, initial="torus")
    assert Routes(torus, torus.initial, 4).ring() is None and Routes(torus, torus.initial, 4).star() is None
    two = ocs_star(8, 2, initial="empty")
    assert Routes(two, two.initial, 2).ring() is None  # no circuit at all


@pytest.mark.parametrize("n", [2, 3, 8, 17])
def test_switch_paths_are_the_tables_paths(n):
    f = eps_star(n)
    r = Routes(f, f.initial, 1)
    assert r.star() is not None
    src, dst = _all_pairs(n)
    fast = r.subflow_arrays(src, dst)
    r._star = None
    slow = r.subflow_arrays(src, dst)
    for name in FIELDS:
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name


def test_max_min_over_runs_equals_max_min_over_pairs():
    """Random runs over a random lane order (dark links, ties): the same rates to 1e-12."""
    rng = np.random.default_rng(11)
    for trial in range(400):
        lanes = int(rng.integers(1, 30))
        links = lanes + int(rng.integers(0, 4))
        lane = rng.permutation(links)[:lanes]
        rf, rs, rl = [], [], []
        for f in range(int(rng.integers(1, 20))):
            s = int(rng.integers(0, lanes))
            rf.append(f)
            rs.append(s)
            rl.append(int(rng.integers(1, lanes - s + 1)))
        rf, rs, rl = map(np.array, (rf, rs, rl))
        cap = rng.choice([0.0, 1.0, 2.5, 4.0], links) if trial % 2 else rng.random(links) * 3
        want = max_min_rates(np.repeat(rf, rl), lane[_expand(rs, rs + rl)], cap, rf.size)
        got = max_min_rates_runs(rf, rs, rl, lane, cap, rf.size)
        assert np.abs(got - want).max() <= 1e-12 * max(want.max(), 1e-300)


@pytest.mark.parametrize("make, alg, size", [
    (lambda: static_ring(64), "rhd", 10**8 + 7),  # ring runs through the fluid engine
    (lambda: ocs_star(48, 2, 400.0, 0.0), "rhd", 1 << 26),  # fold/unfold on a ring of circuits
    (lambda: eps_star(32), "stragglar", 10**8 + 7),  # matchings on a switch: closed form
    (lambda: eps_star(32), "ring", 10**8 + 7),
])
def test_fast_steps_equal_the_fluid_engine(monkeypatch, make, alg, size):
    """Round-synchronous and dependency-driven runs with the fast paths (ring runs, flows alone
    on their links in closed form) against the same runs through the fluid engine over
    (subflow, link) pairs: every step's end within 1e-9, every link's bytes equal."""
    f = make()
    w = build(alg, f.gpus, size)
    plan = make_plan("none", f, w)
    arr = np.zeros(f.gpus)
    arr[-1] = 2e-4
    fast = [simulate(f, w, plan, alpha_s=2e-6, delta_s=1e-7, semantics=s, arrivals_s=arr, record_transfers=False)
            for s in ("round-synchronous", "dependency-driven")]
    monkeypatch.setattr(Routes, "ring", lambda self: None)
    monkeypatch.setattr(Routes, "star", lambda self: None)
    monkeypatch.setattr(StepSimulator, "_alone", lambda self, routed, moving: None)
    slow = [simulate(f, w, plan, alpha_s=2e-6, delta_s=1e-7, semantics=s, arrivals_s=arr, record_transfers=False)
            for s in ("round-synchronous", "dependency-driven")]
    for a, b in zip(fast, slow):
        ends = np.array([[x.end_s, y.end_s] for x, y in zip(a.steps, b.steps)])
        assert np.abs(ends[:, 0] - ends[:, 1]).max() <= 1e-9 * b.time_s
        assert a.link_bytes == b.link_bytes and [s.max_link_bytes for s in a.steps] == [s.max_link_bytes for s in b.steps]


def test_doubling_columns_are_the_per_move_construction():
    """StragglAR's rounds for n a power of two up to 512, and its whole workload (phase A as
    windows of one chunk array) for every n up to 20 and powers of two to 128: equal to the
    first construction (phase B of other n is the unchanged greedy matching)."""
    for n in (2, 4, 8, 16, 32, 64, 128, 256, 512):
        assert _doubling_rounds(n) == reference_doubling_rounds(n), n
    for n in list(range(2, 21)) + [32, 64, 128]:
        assert stragglar_allreduce(n, 10**6 + 7) == reference_stragglar_allreduce(n, 10**6 + 7), n


def test_circuits_for_a_matching_are_the_loops_circuits(monkeypatch):
    """assign_ports on pairs that form a matching (array operations) against its loop: the same
    circuits, or the same one-line error, on random matchings with repeated pairs, kept circuits
    (some on demanded pairs) and fill, on 1 to 4 ports per GPU."""
    import random

    import emulation.fabric as fabric_module
    from emulation.fabric import FabricError, assign_ports

    fast = fabric_module._assign_matching

    def loop(*args, **kwargs):
        raise ImportError  # as without numpy: assign_ports takes its loop

    rng = random.Random(3)
    seen = {"error": 0, "kept": 0, "fill": 0}
    for _ in range(400):
        n, p = rng.choice([4, 6, 8, 10, 16]), rng.choice([1, 2, 3, 4])
        f = ocs_star(n, p, 400.0, 0.0, "empty")
        gpus = rng.sample(range(n), n)
        k = rng.randint(1, n // 2)
        pairs = [(gpus[2 * i], gpus[2 * i + 1]) for i in range(k) for _ in range(rng.randint(1, p + 1))]
        rng.shuffle(pairs)
        same = [(gpus[2 * i], gpus[2 * i + 1]) for i in range(k) if rng.random() < 0.5]  # circuits that stay
        rest = [g for g in range(n) if not any(g in q for q in same)]
        rng.shuffle(rest)
        old = same + [(rest[2 * i], rest[2 * i + 1]) for i in range(rng.randint(0, len(rest) // 2))]
        monkeypatch.setattr(fabric_module, "_assign_matching", loop)
        keep = assign_ports(f, "ocs0", old)["ocs0"] if old and rng.random() < 0.8 else frozenset()
        fill = rng.random() < 0.5
        got = []
        for impl in (fast, loop):
            monkeypatch.setattr(fabric_module, "_assign_matching", impl)
            try:
                got.append(assign_ports(f, "ocs0", pairs, fill=fill, keep=keep)["ocs0"])
            except FabricError as e:
                got.append(str(e))
        assert got[0] == got[1]
        seen["error"] += isinstance(got[0], str)
        seen["kept"] += bool(keep) and not isinstance(got[0], str) and bool(got[0] & keep)
        seen["fill"] += fill
    assert min(seen.values()) > 20, seen
