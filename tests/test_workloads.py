import math

import pytest

from emulation.workloads import build
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
