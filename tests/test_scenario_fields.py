"""Every field of every kind's scenario file says what it is (a description with its unit, in the
schema), and a bad value's one-line error names the field without pydantic's union tags and ends
with that description."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation import kinds
from emulation.planners.cost import CostModel
from emulation.scenario.fields import locate, section_fields, section_types
from emulation.scenario.schema import Scenario, ScenarioError
from emulation.workloads.iteration import ComputeSpec, ParallelSpec, TransformerSpec
from emulation.workloads.moe import MoELayer

ROOT = Path(__file__).resolve().parents[1]
DEMO = (ROOT / "experiments" / "demo.yaml").read_text()
RAILS = (ROOT / "experiments" / "rails_llama.yaml").read_text()


@pytest.mark.parametrize("name", kinds.NAMES)
def test_every_field_of_every_kinds_scenario_has_a_description(name):
    types = section_types(kinds.get(name).scenario)
    fields = [(t, f, info) for t in types for f, info in section_fields(t).items()]
    assert len(fields) > 30
    missing = [f"{t.__qualname__}.{f}" for t, f, info in fields if not (info.description or "").strip()]
    assert not missing, f"{len(missing)} fields without a description: {missing}"


def test_the_walk_reaches_the_dataclasses_a_scenario_uses():
    assert {CostModel, MoELayer} <= set(section_types(kinds.get("collective").scenario))
    assert {TransformerSpec, ParallelSpec, ComputeSpec} <= set(section_types(kinds.get("rails").scenario))
    # a stdlib dataclass's description is its field's metadata, which pydantic reads too
    assert "alpha" in section_fields(CostModel)["alpha_s"].description
    schema = Scenario.model_json_schema()
    assert "auto" in schema["$defs"]["EmulationSpec"]["properties"]["link_mbps"]["description"]
    assert "latency" in schema["$defs"]["CostModel"]["properties"]["alpha_s"]["description"]


def test_locate_drops_union_tags_and_finds_the_field():
    loc, field, union = locate(Scenario, ("emulation", "link_mbps", "float"))
    assert loc == ("emulation", "link_mbps") and union == 1 and "Mbit/s" in field.description
    loc, field, union = locate(Scenario, ("runs", 2, "planner"))
    assert loc == ("runs", 2, "planner") and union is None and "cost" in field.description
    assert "per hop" in locate(Scenario, ("cost", "delta_s"))[1].description  # a stdlib dataclass's field
    assert locate(Scenario, ("fabric", "colour"))[1] is None  # an unknown field has no description
    rails = kinds.get("rails").scenario
    loc, field, _ = locate(rails, ("rails", "model", "TransformerSpec", "layers"))
    assert loc == ("rails", "model", "layers") and field.description == "Transformer layers."
    loc, field, _ = locate(rails, ("rails", "larger", 0, "parallel", "tp"))
    assert loc == ("rails", "larger", 0, "parallel", "tp") and "Tensor-parallel" in field.description


def _error(tmp_path, text: str) -> str:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ScenarioError) as e:
        kinds.load(p)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg.removeprefix(f"{p}: ")


def test_a_bad_value_is_named_without_union_tags_and_gets_its_fields_description(tmp_path):
    msg = _error(tmp_path, DEMO.replace("link_mbps: auto", "link_mbps: x"))
    assert msg.startswith("emulation.link_mbps: Input should be a valid number"), msg
    assert ".float" not in msg and "literal" not in msg
    assert "; expected: the emulated rate B_e of every link, Mbit/s" in msg and "auto" in msg
    msg = _error(tmp_path, DEMO.replace("alpha_s: 5.0e-6", "alpha_s: -5.0e-6"))  # a stdlib dataclass's field
    assert msg.startswith("cost.alpha_s: must be a finite number >= 0") and "; expected: per-message latency" in msg
    msg = _error(tmp_path, DEMO.replace("gpus: 8", "gpus: 0"))
    assert msg.startswith("fabric.gpus: Input should be greater than or equal to 2; expected: number of GPUs"), msg
    msg = _error(tmp_path, DEMO.replace("port_gbps: 400", "port_gbps: 400\n  colour: red"))
    assert msg.startswith("fabric.colour: unknown field") and "did you mean" not in msg, msg


@pytest.mark.parametrize("old, new, want", [
    ("gpus: 8", "gpu: 8", "fabric.gpu: unknown field (did you mean gpus?)"),  # not "fabric.gpus: Field required"
    ("link_mbps: auto", "link_mpbs: auto", "emulation.link_mpbs: unknown field (did you mean link_mbps?)"),
    ("cost:", "costs:", "costs: unknown field (did you mean cost?)"),
    ("{name: ring, algorithm: ring", "{name: ring, algoritm: ring", "runs.0.algoritm: unknown field (did you mean algorithm?)"),
])
def test_a_misspelt_key_gets_did_you_mean(tmp_path, old, new, want):
    assert old in DEMO
    assert _error(tmp_path, DEMO.replace(old, new, 1)) == want


def test_a_model_given_field_by_field_is_checked_as_its_fields(tmp_path):
    msg = _error(tmp_path, RAILS.replace("model: llama3-8b ", "model: {name: tiny, layers: many} "))
    assert msg.startswith("rails.model.layers: Input should be a valid integer"), msg
    assert "; expected: transformer layers" in msg and "TransformerSpec" not in msg
    msg = _error(tmp_path, RAILS.replace("{tp: 4, pp: 2", "{tp: four, pp: 2"))  # a pydantic dataclass's field
    assert msg.startswith("rails.parallel.tp: Input should be a valid integer") and "tensor-parallel" in msg, msg


def test_the_plain_markdown_scenario_reference_is_the_code_s():
    """docs/reference/scenario-fields.md, readable without building the docs, is what the
    models say now (``python -m emulation.kinds.reference`` rewrites it): every kind, and a
    section's every field with its type, default, bounds and description."""
    from emulation.kinds.reference import PAGE, reference_markdown

    page = (ROOT / PAGE).read_text()
    assert page == reference_markdown(), "out of date: run python -m emulation.kinds.reference"
    for kind in ("collective", "training", "wan", "rails", "tenancy"):
        assert f"\n## {kind}\n" in page
    assert "| `gpus` | int | **required** | >= 2, <= 131072 | Number of GPUs" in page
    assert "| `link_mbps` |" in page and "| `reconfiguration_delay_s` | float | `0.0` | >= 0 |" in page

