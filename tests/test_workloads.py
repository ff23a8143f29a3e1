import math

import pytest

from emulation.workloads import ALGORITHMS, build
from emulation.workloads.checker import ScheduleError, check
from emulation.workloads.model import Step, Workload


@pytest.mark.parametrize("alg", ["ring", "rhd", "direct"])
@pytest.mark.parametrize("n", list(range(2, 34)))
def test_every_rank_ends_with_every_reduced_chunk(alg, n):
    check(build(alg, n, 10_000_019))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64])
def test_step_counts_power_of_two(n):
    assert len(build("ring", n, 1 << 20).steps) == 2 * (n - 1)
    assert len(build("rhd", n, 1 << 20).steps) == 2 * int(math.log2(n))


@pytest.mark.parametrize("n", [3, 6, 12])
def test_rhd_fold_adds_two_steps(n):
    m = 1 << (n.bit_length() - 1)
    w = build("rhd", n, 1 << 20)
    assert len(w.steps) == 2 * int(math.log2(m)) + 2
    assert w.steps[0].phase == "fold" and w.steps[-1].phase == "unfold"


@pytest.mark.parametrize("alg", ["ring", "rhd", "direct"])
@pytest.mark.parametrize("n", [4, 8, 32])
def test_bytes_per_rank_is_bandwidth_optimal(alg, n):
    s = 3 << 20
    w = build(alg, n, s)
    per_rank = [sum(t.bytes for st in w.steps for t in st.transfers if t.src == r) for r in range(n)]
    assert max(per_rank) == pytest.approx(2 * (n - 1) / n * s, rel=1e-6)


def test_rhd_partner_distance_doubles():
    w = build("rhd", 16, 1 << 20)
    for k, st in enumerate(w.steps[:4]):
        assert {t.dst ^ t.src for t in st.transfers} == {1 << k}
        assert {t.bytes for t in st.transfers} == {(1 << 20) >> (k + 1)}


def test_checker_catches_a_missing_and_a_doubled_transfer():
    w = build("ring", 5, 1000)
    broken = list(w.steps)
    broken[2] = Step(broken[2].phase, broken[2].transfers[1:])
    with pytest.raises(ScheduleError):
        check(Workload(w.collective, w.algorithm, w.ranks, w.bytes, w.chunks, tuple(broken)))
    doubled = list(w.steps)
    doubled.insert(1, w.steps[0])
    with pytest.raises(ScheduleError):
        check(Workload(w.collective, w.algorithm, w.ranks, w.bytes, w.chunks, tuple(doubled)))


def test_bad_sizes():
    with pytest.raises(ValueError):
        build("ring", 1, 100)
    with pytest.raises(ValueError):
        build("rhd", 4, 0)
    with pytest.raises(KeyError, match="known"):
        build("nope", 4, 100)


ALL = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]


@pytest.mark.parametrize("collective,alg", ALL)
@pytest.mark.parametrize("n", list(range(2, 34)))
def test_every_collective_computes_its_result_for_any_n(collective, alg, n):
    check(build(alg, n, 10_000_019, collective))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64])
def test_step_counts_of_the_other_collectives(n):
    lg = int(math.log2(n))
    counts = {("reducescatter", "ring"): n - 1, ("reducescatter", "rhd"): lg, ("reducescatter", "direct"): 1,
              ("allgather", "ring"): n - 1, ("allgather", "rd"): lg, ("allgather", "direct"): 1,
              ("alltoall", "pairwise"): n - 1, ("alltoall", "direct"): 1, ("broadcast", "binomial"): lg,
              ("allreduce", "rd"): lg}
    for (c, a), want in counts.items():
        assert len(build(a, n, 1 << 20, c).steps) == want, (c, a)


@pytest.mark.parametrize("collective,alg", [("reducescatter", "ring"), ("reducescatter", "rhd"),
                                            ("allgather", "ring"), ("allgather", "rd"), ("alltoall", "pairwise"),
                                            ("alltoall", "direct")])
@pytest.mark.parametrize("n", [4, 8, 32])
def test_scatter_gather_and_alltoall_send_n_minus_1_over_n_of_the_buffer(collective, alg, n):
    s = 3 << 20
    w = build(alg, n, s, collective)
    per_rank = [sum(t.bytes for st in w.steps for t in st.transfers if t.src == r) for r in range(n)]
    assert max(per_rank) == pytest.approx((n - 1) / n * s, rel=1e-6)


def test_recursive_partners_and_shard_order():
    rs, ag = build("rhd", 16, 1 << 20, "reducescatter"), build("rd", 16, 1 << 20, "allgather")
    assert [{t.src ^ t.dst for t in st.transfers} for st in rs.steps] == [{8}, {4}, {2}, {1}]  # halving
    assert [{t.src ^ t.dst for t in st.transfers} for st in ag.steps] == [{1}, {2}, {4}, {8}]  # doubling
    assert rs.owner == ag.owner == tuple(range(16))
    assert build("rd", 16, 1 << 20).steps[3].transfers[0].bytes == 1 << 20  # full vector every step
    odd = build("rhd", 12, 12 << 10, "reducescatter")
    assert sorted(odd.owner) == list(range(12)) and odd.steps[0].phase == "fold"


def test_pairwise_alltoall_is_a_matching_for_powers_of_two():
    for st in build("pairwise", 16, 1 << 20, "alltoall").steps:
        assert all(st.transfers[t.dst].dst == t.src for t in st.transfers)


def test_binomial_broadcast_doubles_the_holders():
    w = build("binomial", 13, 1000, "broadcast")
    assert [len(st.transfers) for st in w.steps] == [1, 2, 4, 5]


def test_checker_catches_data_sent_before_it_is_held_and_double_delivery():
    ag = build("ring", 5, 1000, "allgather")
    swapped = Workload(ag.collective, ag.algorithm, 5, 1000, 5, (ag.steps[1], ag.steps[0]) + ag.steps[2:], ag.owner)
    with pytest.raises(ScheduleError, match="does not hold"):
        check(swapped)
    a2a = build("direct", 4, 1000, "alltoall")
    twice = Workload(a2a.collective, a2a.algorithm, 4, 1000, 4, a2a.steps * 2)
    with pytest.raises(ScheduleError, match="already holds"):
        check(twice)
    rs = build("ring", 6, 1000, "reducescatter")
    with pytest.raises(ScheduleError):
        check(Workload(rs.collective, rs.algorithm, 6, 1000, 6, rs.steps[:-1], rs.owner))
