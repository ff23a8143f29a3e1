"""MoE defaults that mislead are named (emulation/collective/runner.py, moe_warnings): token copies the
capacity limit dropped, a payload-efficient layer that sends more than the padded one (combine
tiles), and rotor slots shorter than R; the table labels bytes per GPU and padding over all GPUs."""

from __future__ import annotations

from pathlib import Path

import yaml

from emulation import api

ROOT = Path(__file__).resolve().parents[1]


def _moe(tmp_path: Path, guard_s: float = 12e-6, **moe) -> tuple[list[str], object]:
    data = yaml.safe_load((ROOT / "experiments" / "moe_ocs.yaml").read_text())
    data["moe"].update(moe)
    data["runs"] = [{**r, "guard_s": guard_s} for r in data["runs"] if r["name"].startswith("rotor")]
    env = api.run(api.from_dict(data, "moe"), backend="flow", out=tmp_path / "out")
    return env.warnings, env


def test_the_flashdmoe_setting_names_its_dropped_tokens_only(tmp_path):
    warnings, env = _moe(tmp_path)  # Zipf(1.2), CF 1.0: the hot experts overflow
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("moe: the capacity limit (C = 512 tokens per expert from each GPU, capacity_factor 1) "
                                  "dropped 26593 of 65536 routed token copies (41%)")
    uniform, _ = _moe(tmp_path / "u", skew="uniform", capacity_factor=2.0)
    assert uniform == []


def test_small_streams_in_whole_tiles_and_short_rotor_slots_are_named(tmp_path):
    # 64 tokens per GPU, top-2 over 16 experts: 8 tokens a pair, each combine stream padded to a
    # 128-token tile; with 1 us guards the padded pair buffer (16 tokens, 128 KiB: 3 us at
    # 400 Gbit/s with 15% headroom) makes slots of about 5 us, half of R = 10 us
    warnings, env = _moe(tmp_path, guard_s=1e-6, tokens_per_gpu=64, skew="uniform", capacity_factor=2.0)
    text = "\n".join(warnings)
    assert "moe: payload-efficient sends 62.9 MiB over the fabric, padded 28.0 MiB" in text, text
    assert "whole tiles of 128 tokens (78% of its bytes)" in text, text
    short = sorted(w for w in warnings if "shorter than R = 10 us" in w)
    assert [w.split(":")[0] for w in short] == ["rotor-padded", "rotor-payload"], warnings
    slot = env.result.runs[0].slots
    assert slot.turn_s / slot.slots_per_turn - 10e-6 < 10e-6
