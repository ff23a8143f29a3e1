"""The power and cost model of electrical against photonic rails (topologies/power_cost.py):
counts worked by hand, the Opus authors' own count reproduced, and a malformed components file
refused naming the entry and field."""

from __future__ import annotations

import pytest
import yaml

from topologies.power_cost import (DATA, CostDataError, compare_rails, electrical_rails, electrical_rails_opus_count,
                                   load_components, photonic_rails)


def test_counts_worked_by_hand():
    one_tier = electrical_rails(16, 8, 64)  # 16 servers fit one 64-port switch per rail
    assert (one_tier.eps_ports, one_tier.transceivers, one_tier.fibres) == (128, 256, 128)
    two_tier = electrical_rails(256, 8, 64)  # per rail: 256 ports down, 256 up, 256 at the spines
    assert (two_tier.eps_ports, two_tier.transceivers, two_tier.fibres) == (8 * 768, 8 * 1024, 8 * 512)
    ocs = photonic_rails(256, 8)
    assert (ocs.ocs_ports, ocs.transceivers, ocs.fibres, ocs.eps_ports) == (4096, 2048, 2048, 0)
    with pytest.raises(ValueError, match="more than two tiers"):
        electrical_rails(2049, 1, 64)
    with pytest.raises(ValueError, match="whole number of servers"):
        compare_rails(2050, load_components()[0]["h200-400g"])


def test_h200_at_2048_gpus_power_and_cost_by_component():
    sets, paper = load_components()
    c = compare_rails(2048, sets["h200-400g"])
    (e, p), (ec, pc) = c.power_w, c.cost_usd
    assert e["switches"] == pytest.approx(6144 * 2524 / 64) and e["transceivers"] == 8192 * 10 and e["fibres"] == 0
    assert p["ocs"] == pytest.approx(4096 * 75 / 192) and p["transceivers"] == 2048 * 10
    assert c.power_ratio == pytest.approx((242304 + 81920) / (1600 + 20480))
    assert ec["switches"] == pytest.approx(6144 * 37299 / 64) and pc["ocs"] == pytest.approx(4096 * 520)
    assert pc["fibres"] == pytest.approx(2048 * (376 + 5 * 30)) and ec["fibres"] == pytest.approx(2 * pc["fibres"])
    assert paper["power_factor"] == 23 and paper["cost_factor"] == 4


def test_the_opus_codes_count_gives_its_headline():
    """At 128 servers of 8 GPUs its per-rail fat trees of 23-port switches hold 5,060 ports; with
    its constants the ratios are its abstract's (over 23x power, about 4x cost)."""
    cs = load_components()[0]["h200-400g"]
    theirs = electrical_rails_opus_count(128, 8)
    assert theirs.eps_ports == 5060 and theirs.transceivers == 1024 + 5060
    ours = photonic_rails(128, 8)
    power = theirs.power_w(cs)["total"] / ours.power_w(cs)["total"]
    cost = theirs.cost_usd(cs)["total"] / (ours.cost_usd(cs)["total"] - ours.cost_usd(cs)["fibres"])
    assert 23 < power < 24 and 4.0 < cost < 4.5


def test_every_figure_has_its_source_and_a_malformed_file_is_refused(tmp_path):
    raw = yaml.safe_load(DATA.read_text())
    assert all(c["source"] and c["quote"] and c["confidence"] for c in raw["components"].values())
    bad = dict(raw, components={**raw["components"], "ocs-polatis-6000n": {**raw["components"]["ocs-polatis-6000n"],
                                                                          "quote": ""}})
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(CostDataError, match="components.ocs-polatis-6000n: every figure needs its source"):
        load_components(tmp_path / "a.yaml")
    bad = dict(raw, sets={"x": {**raw["sets"]["h200-400g"], "ocs": "transceiver-400g"}})
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(CostDataError, match="sets.x.ocs: 'transceiver-400g' is not a component of kind ocs"):
        load_components(tmp_path / "b.yaml")
    bad = dict(raw, components={**raw["components"], "eps-64x400g": {**raw["components"]["eps-64x400g"],
                                                                    "power_w": "a lot"}})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(CostDataError, match="components.eps-64x400g.power_w: a number >= 0 is required"):
        load_components(tmp_path / "c.yaml")
