"""Scenario kinds as plug-ins (emulation/kinds): every (kind, command) pair either works or is
refused in one line naming the kind; every kind's result.json is the one envelope and validates
against the JSON Schema that `ocslab schema KIND` exports; files written for renamed keys still
load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from emulation import kinds
from emulation.output import configure_logging
from emulation.scenario import ScenarioError
from emulation.torchjob.launch import torch_available

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"


def _cli(*args: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _small(kind: str, tmp: Path) -> Path:
    """A small scenario file of ``kind`` (seconds on the flow backend)."""
    text = {
        "collective": (EXP / "demo.yaml").read_text().replace("sizes: [25MiB, 1MiB]", "sizes: [1MiB]"),
        "training": (EXP / "lumion.yaml").read_text(),
        "wan": (EXP / "wan_b4.yaml").read_text().replace("scale: 0.8}", "scale: 0.8, count: 2}"),
        "rails": "\n".join(line for line in (EXP / "rails_torch.yaml").read_text().splitlines()),
        "tenancy": (EXP / "tenancy_rack64.yaml").read_text().replace("jobs: 400", "jobs: 12"),
    }[kind]
    path = tmp / f"{kind}.yaml"
    path.write_text(text)
    return path


#: What each (kind, command) pair does: "works" (exit 0) or "refused" (exit 2, one line naming
#: the kind). The pairs that need real packets and PyTorch are emulation tests; ``ocslab up`` on a
#: collective scenario opens a prompt (tests/test_console.py drives it).
PAIRS = {
    ("collective", "run"): "works", ("collective", "compare"): "works", ("collective", "plan"): "works",
    ("collective", "te"): "refused", ("collective", "train"): "refused",
    ("training", "run"): "packets", ("training", "compare"): "refused", ("training", "plan"): "refused",
    ("training", "te"): "refused", ("training", "train"): "packets",
    ("wan", "run"): "works", ("wan", "compare"): "refused", ("wan", "plan"): "refused", ("wan", "te"): "works",
    ("wan", "train"): "refused",
    ("rails", "run"): "works", ("rails", "compare"): "refused", ("rails", "plan"): "refused",
    ("rails", "te"): "refused", ("rails", "train"): "packets",
    ("tenancy", "run"): "works", ("tenancy", "compare"): "refused", ("tenancy", "plan"): "refused",
    ("tenancy", "te"): "refused", ("tenancy", "train"): "refused",
    ("collective", "up"): "console", ("training", "up"): "refused", ("wan", "up"): "refused",
    ("rails", "up"): "refused", ("tenancy", "up"): "refused",
    ("collective", "fabric"): "works", ("training", "fabric"): "refused", ("wan", "fabric"): "refused",
    ("rails", "fabric"): "refused", ("tenancy", "fabric"): "refused",
}


def test_the_table_covers_every_kind_and_file_command_and_agrees_with_the_registry():
    assert set(PAIRS) == {(k, c) for k in kinds.NAMES for c in kinds.FILE_COMMANDS}
    for (k, c), what in PAIRS.items():
        assert kinds.get(k).answers(c) == (what != "refused"), (k, c)


def _argv(kind: str, command: str, path: Path, tmp: Path) -> list[str]:
    argv = [command, str(path)]
    if command in ("run", "compare", "train", "fabric"):
        argv += ["--out", str(tmp / f"{kind}-{command}")]
    if (kind, command) == ("collective", "compare"):  # a packet result: the flow result relabelled
        flow = tmp / "flow-result"
        assert _cli("run", str(path), "--backend", "flow", "--out", str(flow)).returncode == 0
        d = json.loads((flow / "result.json").read_text())
        d["backend"] = "packet"
        (tmp / "packet.json").write_text(json.dumps(d))
        argv += ["--packet-result", str(tmp / "packet.json")]
    if (kind, command) == ("collective", "run"):
        argv += ["--backend", "flow"]
    if (kind, command) == ("training", "train"):
        argv += ["--recovery", "optical"]
    return argv


def _pair(kind: str, command: str, tmp: Path) -> None:
    path = _small(kind, tmp)
    r = _cli(*_argv(kind, command, path, tmp))
    err = r.stderr.strip()
    if PAIRS[(kind, command)] == "refused":
        assert r.returncode == 2, (r.returncode, err[-500:])
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert f"a {kind} scenario has no {command}" in err and "ocslab run" in err, err
        assert not (tmp / f"{kind}-{command}").exists()
    else:
        assert r.returncode == 0, (r.returncode, err[-1500:], r.stdout[-500:])
        if command in ("run", "train"):
            env = kinds.read(tmp / f"{kind}-{command}")
            assert env.kind == kind and env.complete


@pytest.mark.parametrize("kind, command", sorted(p for p, w in PAIRS.items() if w not in ("packets", "console")))
def test_every_pair_works_or_refuses_in_one_line_naming_the_kind(tmp_path, kind, command):
    _pair(kind, command, tmp_path)


#: Packet pairs that a longer test already runs through the CLI, asserting far more.
RUN_ELSEWHERE = {("rails", "train"): "tests/test_opus.py::test_a_torch_job_drives_the_rails_and_matches_the_flow_replay",
                 ("training", "train"): "tests/test_lumion_emulation.py"}


def test_the_packet_pairs_run_here_or_in_a_longer_test():
    packets = {p for p, w in PAIRS.items() if w == "packets"}
    assert set(RUN_ELSEWHERE) < packets
    for pair, where in RUN_ELSEWHERE.items():
        path, _, name = where.partition("::")
        text = (ROOT / path).read_text()
        assert f'"emulation.cli", "{pair[1]}"' in text and (not name or f"def {name}(" in text), (pair, where)


@pytest.mark.emulation
@pytest.mark.skipif(not torch_available(), reason="PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
@pytest.mark.parametrize("kind, command", sorted(p for p, w in PAIRS.items() if w == "packets" and p not in RUN_ELSEWHERE))
def test_the_packet_pairs_work(run_dir, kind, command):
    """The torch jobs, shortened (the others are in :data:`RUN_ELSEWHERE`): one recovery of a
    smaller LUMION job; two rail iterations in one control mode."""
    path = _small(kind, run_dir)
    text = path.read_text()
    if kind == "training":
        text = text.replace("recovery: [optical, electrical, migration]", "recovery: [optical]")
        text = text.replace("steps: 45", "steps: 24").replace("hidden: 512", "hidden: 128")
    else:
        text = text.replace("modes: [on-demand, speculative-deferred]\n    iterations: 5",
                            "modes: [on-demand]\n    iterations: 2")
    path.write_text(text)
    out = run_dir / "out"
    argv = [command, str(path), "--out", str(out)]
    r = _cli(*argv, timeout=900)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:], r.stdout[-1000:])
    env = kinds.read(out)
    assert env.kind == kind and env.complete and env.backend in ("packet", "both")


@pytest.mark.parametrize("kind, backend", [("collective", "flow"), ("wan", "flow"), ("rails", "flow"),
                                           ("tenancy", "flow")])
def test_result_json_validates_against_the_exported_json_schema(tmp_path, kind, backend):
    path = _small(kind, tmp_path)
    out = tmp_path / "out"
    r = _cli("run", str(path), "--backend", backend, "--out", str(out))
    assert r.returncode == 0, r.stderr[-1500:]
    s = _cli("schema", kind)
    assert s.returncode == 0, s.stderr
    schema = json.loads(s.stdout)
    data = json.loads((out / "result.json").read_text(), parse_constant=lambda c: {"Infinity": 1e308}[c])
    jsonschema.validate(data, schema)
    assert data["kind"] == kind and data["schema_version"] == 1 and data["scenario"]
    # the schema has teeth: another kind's result, or a missing field, does not validate
    broken = {k: v for k, v in data.items() if k != "result"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    other = "wan" if kind != "wan" else "collective"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "kind": other}, schema)
    # and the reader gives back the typed result
    env = kinds.read(out)
    assert type(env.result).__name__ in {"CollectiveResult", "WanResult", "RailsResult", "TenancyResult"}


def test_a_result_of_another_kind_or_form_is_refused_in_one_line(tmp_path):
    from emulation.envelope import EnvelopeError, read_result
    from emulation.results import CollectiveResult

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"scenario": "demo", "backend": "flow", "runs": []}))
    with pytest.raises(EnvelopeError, match="not an ocslab result"):
        kinds.read(old)
    wan = tmp_path / "wan"
    assert _cli("run", str(_small("wan", tmp_path)), "--out", str(wan)).returncode == 0
    with pytest.raises(EnvelopeError, match="a wan result, not a collective one"):
        read_result(wan, CollectiveResult, kind="collective")


def test_renamed_keys_still_load_with_a_warning_and_both_spellings_are_refused(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text((EXP / "wan_b4.yaml").read_text()
                   .replace("  replay: {interval_s: 3, flows: 128, payload_bytes: 500}  # --backend packet\n", "")
                   .replace("emulation: {link_mbps: 8}  # --backend packet\n",
                            "packet: {link_mbps: 6, interval_s: 4, flows: 64, controller: ryu}\n")
                   .replace("capacity_headroom: 0", "headroom: 0.1"))
    configure_logging()  # warnings on stderr, as the command line sets them up
    kind, sc = kinds.load(old)
    err = capsys.readouterr().err
    assert kind.name == "wan"
    assert sc.emulation.link_mbps == 6 and sc.emulation.controller == "ryu"
    assert sc.wan.replay.interval_s == 4 and sc.wan.replay.flows == 64 and sc.wan.te.capacity_headroom == 0.1
    assert "packet.link_mbps is now emulation.link_mbps" in err and "wan.te.headroom is now wan.te.capacity_headroom" in err
    both = tmp_path / "both.yaml"
    both.write_text(old.read_text().replace("packet: {", "emulation: {link_mbps: 8}\npacket: {"))
    with pytest.raises(ScenarioError, match="packet.link_mbps: given twice"):
        kinds.load(both)
    rails = tmp_path / "rails.yaml"
    rails.write_text((EXP / "rails_torch.yaml").read_text().replace("ports_per_gpu: 1", "rail_ports: 1")
                     .replace("  torch_job:\n", "packet:\n").replace("\n    ", "\n  "))
    _, sc = kinds.load(rails)
    assert sc.rails.fabric.ports_per_gpu == 1 and sc.rails.torch_job.iterations == 5
    runs = tmp_path / "moe.yaml"
    runs.write_text((EXP / "moe_ocs.yaml").read_text().replace("slot_headroom:", "headroom:"))
    _, sc = kinds.load(runs)
    assert [r.slot_headroom for r in sc.runs if r.schedule != "none"] == [0.15] * 4


def test_a_kind_is_named_by_its_key_or_its_sections(tmp_path):
    assert kinds.kind_of({"wan": {}}) == "wan" and kinds.kind_of({"fabric": {}}) == "collective"
    assert kinds.kind_of({"failure": {}}) == "training" and kinds.kind_of({"kind": "rails"}) == "rails"
    with pytest.raises(ScenarioError, match="unknown kind 'ring'"):
        kinds.kind_of({"kind": "ring"})
    with pytest.raises(ScenarioError, match="cannot also be a tenancy one"):
        kinds.kind_of({"wan": {}, "tenancy": {}})
    for name in kinds.NAMES:  # every kind's scenario schema is exported too
        r = _cli("schema", name, "--scenario")
        assert r.returncode == 0 and json.loads(r.stdout)["type"] == "object"


def test_a_kind_with_two_results_reports_each_by_its_type_and_refuses_an_unknown_one(tmp_path):
    """The tenancy kind's trace result goes to its trace report; a result of no declared type is
    a TypeError naming it, not a wrong table."""
    from pydantic import BaseModel

    from emulation.envelope import envelope
    from emulation.flowsim.rack_sweep import TenancyResult, sweep_tenancy

    kind, sc = kinds.load(_small("tenancy", tmp_path))
    env = envelope("tenancy", sc.name, "flow", sweep_tenancy(sc.tenancy))
    assert isinstance(env.result, TenancyResult)
    assert kind.written(env, tmp_path) == ["runs.csv", "utilisation.png", "policies.png"]
    assert (tmp_path / "runs.csv").read_text().splitlines()[0].startswith("allocator,scheduler,allocation_bandwidth")

    class Other(BaseModel):
        x: int = 0

    with pytest.raises(TypeError, match="no report for a Other"):
        kind.shown(envelope("tenancy", sc.name, "flow", Other()))
    with pytest.raises(ValueError, match="tenancy.trace"):
        sweep_tenancy(sc.tenancy.model_copy(update={"trace": None}))
