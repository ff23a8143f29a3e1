"""The packet backend's scale model: small steps get a larger byte scale (emulation.scale)."""

from emulation import dataplane as dpn
from emulation.scale import FRAMES_PER_STEP, MAX_RAISE, Scale
from emulation.scenario.load import load_experiment


def test_a_small_step_is_raised_to_its_frames_within_the_caps():
    s = Scale(10.0, 0.1, 400.0)
    mss = dpn.mss(dpn.MTU)
    assert s.for_steps(10 * FRAMES_PER_STEP * mss, mss) is s  # 640 frames at 0.1: enough already
    raised = s.for_steps(131072, mss)  # the demo's 1 MiB Ring: 9 frames at 0.1
    assert abs(raised.byte_scale * 131072 / mss - FRAMES_PER_STEP) < 1e-9
    assert raised.tdf / s.tdf == raised.byte_scale / 0.1 > 7
    assert s.for_steps(1000, mss).byte_scale == MAX_RAISE * 0.1  # capped at 8 times the scenario's
    assert Scale(10.0, 0.5, 400.0).for_steps(1000, mss).byte_scale == 1.0  # and at 1
    assert s.for_steps(0, mss) is s


def test_the_demo_runs_its_small_messages_at_a_larger_byte_scale():
    from emulation.emulator.execute import run_scale
    from emulation.runner import frame_warning

    _sc, exp = load_experiment("experiments/demo.yaml")
    scale = exp.scale(10.0)
    got = {(r.name, r.size_bytes): (r.smallest_step_bytes, run_scale(r, scale, dpn.MTU).byte_scale)
           for r in exp.runs()}
    assert got[("ring", 25 << 20)] == (3276800, 0.1)  # 226 frames: the scenario's own scale
    assert got[("ring", 1 << 20)][0] == 131072 and 0.70 < got[("ring", 1 << 20)][1] < 0.71
    assert all(0.70 < s < 0.71 for (name, size), (_b, s) in got.items() if size == 1 << 20)
    tiny = next(r for r in exp.runs() if r.size_bytes == 1 << 20)
    assert frame_warning(tiny, 0.1, dpn.MTU) and "frames on the wire" in frame_warning(tiny, 0.1, dpn.MTU)
    assert frame_warning(tiny, run_scale(tiny, scale, dpn.MTU).byte_scale, dpn.MTU) is None
