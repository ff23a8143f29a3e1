"""Several tenants at once on the flow backend: one tenant equals the single-run simulator, tenants
on circuits of their own run as if alone, and tenants meeting on a switch share it max-min."""

import pytest

from emulation.fabric import assign_ports
from emulation.flowsim.simulate import SimulationError, simulate
from emulation.flowsim.tenants import Tenant, simulate_tenants
from emulation.planners.basic import plan_none
from emulation.workloads.allreduce import rhd_allreduce, ring_allreduce
from topologies import eps_star, ocs_star

MiB = 1 << 20


def test_one_tenant_on_every_gpu_equals_the_single_run_simulator():
    for fabric, w in ((ocs_star(8, 2, 100.0), ring_allreduce(8, 16 * MiB)),
                      (eps_star(8, 100.0), rhd_allreduce(8, 16 * MiB))):
        plan = plan_none(fabric, w)
        ref = simulate(fabric, w, plan, alpha_s=5e-6, delta_s=1e-6)
        got = simulate_tenants(fabric, fabric.initial, [Tenant("all", w, tuple(range(8)))], alpha_s=5e-6, delta_s=1e-6)
        assert got[0].step_end_s == pytest.approx([s.end_s for s in ref.steps], rel=1e-12)


def _rings(fabric, groups):
    pairs = [(g[i], g[(i + 1) % len(g)]) for g in groups for i in range(len(g))]
    return assign_ports(fabric, "ocs0", pairs)


def test_tenants_on_circuits_of_their_own_run_as_if_alone():
    f = ocs_star(16, 2, 100.0, 0.0, "empty")
    groups = [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11, 12, 13, 14, 15)]
    cfg = _rings(f, groups)
    ts = [Tenant(f"t{i}", ring_allreduce(len(g), 64 * MiB), g, start_s=0.001 * i) for i, g in enumerate(groups)]
    together = simulate_tenants(f, cfg, ts, alpha_s=1e-5)
    for t, both in zip(ts, together):
        alone = simulate_tenants(f, cfg, [t], alpha_s=1e-5)[0]
        assert both.time_s == pytest.approx(alone.time_s, rel=1e-12)
        assert both.step_end_s[0] > t.start_s


def test_tenants_whose_paths_meet_share_the_links_max_min():
    """On a static 8-GPU ring of cables, tenant a on the even GPUs and b on the odd ones: every
    transfer of either crosses the GPU between, so every directed link carries one flow of each.
    Alone a tenant's 4-ring gets each link to itself; together each flow gets half, and both
    take twice as long (bandwidth-bound: alpha = 0)."""
    from topologies import static_ring

    f = static_ring(8, 100.0)
    w = ring_allreduce(4, 32 * MiB)
    a, b = Tenant("a", w, (0, 2, 4, 6)), Tenant("b", w, (1, 3, 5, 7))
    alone = simulate_tenants(f, f.initial, [a])[0].time_s
    both = simulate_tenants(f, f.initial, [a, b])
    assert [r.time_s for r in both] == pytest.approx([2 * alone, 2 * alone], rel=1e-9)
    # b starting when a is half done: a is slowed only while they overlap
    late = simulate_tenants(f, f.initial, [a, Tenant("b", w, b.gpus, start_s=alone / 2)])
    assert alone < late[0].time_s < 2 * alone and late[1].time_s > alone


def test_a_tenant_needs_its_own_gpus():
    f = ocs_star(8, 2, 100.0)
    w = ring_allreduce(4, MiB)
    with pytest.raises(SimulationError, match="overlap"):
        simulate_tenants(f, f.initial, [Tenant("a", w, (0, 1, 2, 3)), Tenant("b", w, (3, 4, 5, 6))])
    with pytest.raises(SimulationError, match="4 ranks on 3 GPUs"):
        simulate_tenants(f, f.initial, [Tenant("a", w, (0, 1, 2))])


def test_bandwidth_redirection_gives_a_2x2x1_ring_three_times_the_bandwidth():
    """Morphlux: a 2x2x1 slice's ring on 2 of 6 torus ports against all 6 steered into it; with
    alpha = 0 the Ring AllReduce's time is exactly 3x shorter (three parallel circuits)."""
    from emulation.workloads.allreduce import ring_allreduce
    from topologies.builders import redirection_fabrics

    fabric, configs = redirection_fabrics(400.0)
    assert {k: sum(len(cs) for cs in c.values()) for k, c in configs.items()} == {"torus": 4, "photonic": 12}
    t = Tenant("slice", ring_allreduce(4, 16 << 20), (0, 1, 2, 3))
    times = {k: simulate_tenants(fabric, c, [t])[0].time_s for k, c in configs.items()}
    # 2 x 3 steps of 4 MiB at 400 Gbit/s on one circuit: 503.3 us
    assert times["torus"] == pytest.approx(6 * (4 << 20) * 8 / 400e9, rel=1e-9)
    assert times["torus"] / times["photonic"] == pytest.approx(3.0, rel=1e-9)
