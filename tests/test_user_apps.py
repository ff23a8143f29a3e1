"""Your own controller apps, loaded beside the built-in ones: the two examples of
``controllers/examples/`` on the packet backend, and one loaded from outside the repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from emulation.emulator.net import EmulatedFabric
from emulation.emulator.orchestrator import run_workload
from emulation.planners import make_plan
from emulation.poll import wait_until
from emulation.scale import Scale
from topologies import ocs_star

pytestmark = pytest.mark.emulation
EXAMPLES = Path(__file__).resolve().parents[1] / "controllers" / "examples"


def _events(emu, kind: str) -> list[dict]:
    return [e for e in emu.client.events() if e["kind"] == kind]


def test_static_schedule_cycles_the_circuits_on_its_own_clock(run_dir):
    """4 GPUs x 2 ports from the ring: the app reconfigures 4 times, 1 s apart, alternating
    skip-one (0-2, 1-3) and the ring, each with its 20 ms dark window measured."""
    f = ocs_star(4, 2, 400, 0.0, "ring")
    with EmulatedFabric(f, run_dir, link_mbps=20, apps=(str(EXAMPLES / "static_schedule.py"),)) as emu:
        wait_until(lambda: len(_events(emu, "static-schedule")) >= 2, 15, lambda: AssertionError("no schedule"))
        pairs = {tuple(sorted((c.a.gpu, c.b.gpu))) for c in emu.client.circuits()["ocs0"]}
        wait_until(lambda: len(_events(emu, "static-schedule")) >= 4, 15, lambda: AssertionError("stalled"))
        steps = _events(emu, "static-schedule")
        recon = _events(emu, "reconfigured")
    assert [s["config"] for s in steps] == [0, 1, 0, 1]
    assert pairs == {(0, 1), (1, 2), (2, 3), (0, 3)}  # after the second step: the ring again
    gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:])]
    assert all(0.95 <= g <= 1.5 for g in gaps), gaps  # PERIOD_S = 1 s, plus each apply's dark window
    assert len(recon) == 4 and all(0.02 <= r["dark_window_measured_s"] <= 0.03 for r in recon)


def test_demand_driven_app_beats_a_static_ring_on_a_pairwise_alltoall(run_dir):
    """4 GPUs x 2 ports on one OCS, a ring of circuits, R = 10 us; pairwise AllToAll of 16 MiB
    (step k: GPU r swaps a quarter of its buffer with GPU r XOR k), planner none. The example app,
    loaded from a copy outside controllers/, gets every step's demand before the step and gives
    both ports of each GPU to its peer of that step; the same workload on the static ring (the
    run's planner owns the circuits, so the app stays out) is slower: 2 of its 3 steps use one of
    a GPU's two ports, and step 1 crosses two hops."""
    from emulation.flowsim import simulate
    from emulation.workloads import build

    mine = run_dir / "elsewhere" / "my_scheduler.py"
    mine.parent.mkdir()
    shutil.copy(EXAMPLES / "demand_driven.py", mine)
    n, size, alpha, r = 4, 16 << 20, 5e-6, 10e-6
    f = ocs_star(n, 2, 400, r, "ring")
    w = build("pairwise", n, size, "alltoall")
    plan = make_plan("none", f, w)
    scale = Scale(10.0, 0.1, 400)
    with EmulatedFabric(f, run_dir, link_mbps=scale.link_mbps, apps=(str(mine),)) as emu:
        ring = run_workload(emu, "ring", w, plan, scale, alpha, run_dir / "ring", owner="planner")
        app = run_workload(emu, "app", w, plan, scale, alpha, run_dir / "app", owner="app")
        decided = _events(emu, "demand-driven")
        begun = _events(emu, "collective-begin")
    ideal = simulate(f, w, make_plan("always", f, w), alpha_s=alpha).time_s
    static = simulate(f, w, plan, alpha_s=alpha).time_s
    wall_ms = scale.tdf * 1e3  # real-equivalent s -> the emulation's wall ms
    planned = [s.timing["events_s"] * wall_ms for s in ring.steps]  # posting alone: nobody waits
    owned = [(s.timing["events_s"] - s.dark_window_measured_s) * wall_ms for s in app.steps]
    print(f"pairwise alltoall 16 MiB: static ring {ring.time_s * 1e3:.4f} ms (flow {static * 1e3:.4f}), "
          f"demand app {app.time_s * 1e3:.4f} ms (flow, a circuit per step: {ideal * 1e3:.4f}), "
          f"ratio {app.time_s / ring.time_s:.3f}; step events between steps (wall ms): planned run "
          f"{max(planned):.1f} max, app's run {max(owned):.1f} max beside its dark windows, handlers "
          f"{max(s.timing['handlers_s'] for s in app.steps) * wall_ms:.1f} max")
    assert [(b["name"], b["owner"]) for b in begun] == [("ring", "planner"), ("app", "app")]
    assert [d["run"] for d in decided] == ["app"] * 3  # nothing while the planner owned the circuits
    assert [d["pairs"] for d in decided] == [[[a, a ^ k], [a, a ^ k], [b, b ^ k], [b, b ^ k]]
                                             for k, (a, b) in ((1, (0, 2)), (2, (0, 1)), (3, (0, 1)))]
    assert all(d["action"] == "reconfigure" for d in decided)
    assert [s.action for s in ring.steps] == ["keep"] * 3 and [s.action for s in app.steps] == ["reconfigure"] * 3
    assert all(r <= s.dark_window_measured_s for s in app.steps)  # each app dark window is in the run's time
    assert app.bytes_delivered == ring.bytes_delivered == w.bytes_sent
    # app/ring: flow model 0.640; packets 0.647-0.657 (5 runs on a 2-core machine, 2026-11;
    # ring 0.2667-0.2682 ms, app 0.1729-0.1756 ms)
    assert app.time_s < 0.75 * ring.time_s, (app.time_s, ring.time_s)
