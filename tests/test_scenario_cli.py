import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.scenario import ScenarioError, load_scenario, resolve
from emulation.units import parse_bytes

ROOT = Path(__file__).resolve().parents[1]
GOOD = (ROOT / "experiments" / "demo.yaml").read_text()


def test_demo_loads_and_resolves():
    sc = load_scenario(ROOT / "experiments" / "demo.yaml")
    assert sc.sizes == [25 << 20, 1 << 20]
    assert [r.name for r in sc.runs] == ["ring", "rhd-static", "rhd-circuits"]
    assert sc.emulation.link_mbps == "auto" and sc.emulation.headroom == "refuse"
    exp = resolve(sc)
    assert exp.scale(10.0).tdf == pytest.approx(0.1 * 400e9 / 10e6)
    assert [(size, r.name) for size, r in exp.jobs][:3] == [(25 << 20, "ring"), (25 << 20, "rhd-static"),
                                                           (25 << 20, "rhd-circuits")]


def test_auto_link_rate_needs_the_headroom_probe(tmp_path):
    p = tmp_path / "auto.yaml"
    p.write_text(GOOD.replace("  link_mbps: auto", "  headroom: skip\n  link_mbps: auto", 1))
    with pytest.raises(ScenarioError, match=r"emulation\.link_mbps: auto .*headroom: skip"):
        load_scenario(p)


@pytest.mark.parametrize("old,new,field", [
    ("gpus: 8", "gpus: 1", "fabric.gpus"),
    ("gpus: 8", "gpu: 8", "fabric.gpu"),
    ("algorithm: ring,", "algorithm: rin,", "runs.0.algorithm"),
    ("planner: always", "planner: sometimes", "runs.2.planner"),
    ("[25MiB, 1MiB]", "[25MiB, lots]", "sizes"),
    ("link_mbps: auto", "link_mbps: 5000", "emulation.link_mbps"),
    ("link_mbps: auto", "link_mbps: fast", "emulation.link_mbps"),
    ("ports_per_gpu: 2", "ports_per_gpu: 1", "fabric"),
    ("topology: ocs-star", "topology: hypercube", "fabric.topology"),
    ("name: rhd-static,", "name: ring,", "runs"),
    ("{name: ring, algorithm: ring,", "{name: ring, collective: allsum, algorithm: ring,", "runs.0.collective"),
    ("{name: ring, algorithm: ring,", "{name: ring, collective: alltoall, algorithm: ring,", "runs.0.algorithm"),
    ("initial: ring", "initial: torus", "fabric"),  # a torus base needs 4 ports per GPU
])
def test_bad_fields_give_one_line_naming_the_field(tmp_path, old, new, field):
    assert old in GOOD
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    msg = str(e.value)
    assert "\n" not in msg and f": {field}" in msg, msg


def test_collective_planner_and_base_topology_keys_resolve(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(GOOD.replace("planner: always}", "planner: dp}\n  - {name: a2a, collective: alltoall, "
                              "algorithm: direct, planner: greedy}")
                 .replace("ports_per_gpu: 2", "ports_per_gpu: 4").replace("initial: ring", "initial: torus"))
    sc = load_scenario(p)
    exp = resolve(sc)
    assert len(exp.fabric.initial["ocs0"]) == 16  # 2 x 4 torus: 8 GPUs x 4 ports / 2
    plan = exp.resolve(sc.runs[3], 1 << 20).schedule
    assert plan.workload.collective == "alltoall" and plan.planner == "greedy"
    assert exp.resolve(sc.runs[2], 1 << 20).schedule.planner == "dp"


def test_not_yaml_and_not_a_mapping(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("fabric: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(p)
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(p)


def test_parse_bytes():
    assert parse_bytes("25MiB") == 25 << 20
    assert parse_bytes("4 KiB") == 4096
    assert parse_bytes("1GB") == 10**9
    assert parse_bytes(123) == 123
    for bad in ("-1", "1 XB", True, 0):
        with pytest.raises(ValueError):
            parse_bytes(bad)
    # one convention: binary with i, decimal without, T as well as G; a bare M is either, refused naming both
    assert parse_bytes("64MB") == 64 * 10**6 and parse_bytes("64mib") == 64 << 20 and parse_bytes("1TiB") == 2**40
    for bare, both in (("64M", "write 64MiB (64 x 2^20) or 64MB (64 x 10^6)"), ("2g", "write 2GiB (2 x 2^30) or 2GB")):
        with pytest.raises(ValueError, match=re.escape(both)):
            parse_bytes(bare)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_bad_input_exits_2_with_one_line_and_creates_nothing(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace("gpus: 8", "gpus: -3"))
    out = tmp_path / "out"
    r = _cli("run", str(p), "--out", str(out))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "fabric.gpus" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    r = _cli("run", str(p), "--backend", "nonsense")
    assert r.returncode == 2 and "--backend" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _cli("workload", "ring", "--ranks", "1", "--bytes", "1MiB")
    assert r.returncode == 2 and "ranks" in r.stderr


def test_cli_schedule_json():
    r = _cli("workload", "rhd", "--ranks", "8", "--bytes", "1MiB", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["algorithm"], d["ranks"], d["bytes"]) == ("rhd", 8, 1 << 20)
    assert len(d["steps"]) == 6 and d["steps"][0]["phase"] == "reduce-scatter"
    t = d["steps"][0]["transfers"][0]
    assert set(t) >= {"src", "dst", "bytes", "chunk"} and t["bytes"] == 1 << 19


def test_cli_flow_backend_writes_the_same_result_form(tmp_path):
    out = tmp_path / "flow"
    r = _cli("run", "experiments/demo.yaml", "--backend", "flow", "--out", str(out))
    assert r.returncode == 0, r.stderr
    env = json.loads((out / "result.json").read_text())
    d = env["result"]
    assert env["kind"] == "collective" and env["backend"] == "flow" and d["semantics"] == "round-synchronous"
    assert {(x["name"], x["bytes"]) for x in d["runs"]} == {
        (n, s) for n in ("ring", "rhd-static", "rhd-circuits") for s in (25 << 20, 1 << 20)}
    for run in d["runs"]:
        assert run["checks"]["ok"] and run["bytes_delivered"] == run["bytes_sent"]
        assert run["transfers"] and run["steps"] and run["link_bytes"]
    assert (out / "steps.csv").exists() and (out / "timeline.png").exists()
    again = tmp_path / "again"
    assert _cli("run", "experiments/demo.yaml", "--backend", "flow", "--out", str(again)).returncode == 0
    runs2 = json.loads((again / "result.json").read_text())["result"]["runs"]
    assert [x["time_s"] for x in runs2] == [x["time_s"] for x in d["runs"]]  # deterministic


def test_cli_semantics_and_compare_inputs_are_checked(tmp_path):
    p = tmp_path / "dep.yaml"  # the packet backend runs per-step plans dependency-driven, not rotors
    p.write_text("name: dep\nfabric: {topology: ocs-star, gpus: 8, ports_per_gpu: 1, port_gbps: 400, "
                 "reconfiguration_delay_s: 1.0e-5, initial: empty}\nsizes: [1MiB]\n"
                 "runs: [{name: rotor, algorithm: ring, schedule: rotor}]\nsemantics: dependency-driven\n")
    r = _cli("run", str(p), "--out", str(tmp_path / "o1"))
    assert r.returncode == 2 and "semantics" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o1").exists()
    assert _cli("run", str(p), "--backend", "flow", "--out", str(tmp_path / "o2")).returncode == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = _cli("compare", "experiments/demo.yaml", "--packet-result", str(bad), "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "--packet-result" in r.stderr and not (tmp_path / "c").exists()
    p2 = tmp_path / "strag.yaml"
    p2.write_text(GOOD + "straggler: {rank: 8, delay_s: 1.0e-3}\n")
    r = _cli("run", str(p2))
    assert r.returncode == 2 and "straggler.rank" in r.stderr


def test_compare_reuses_a_packet_result(tmp_path):
    """compare pairs runs and steps of a packet result with a fresh flow run (here the
    'packet' result is a flow result relabelled, so every error must be exactly 0)."""
    flow = tmp_path / "f"
    assert _cli("run", "experiments/demo.yaml", "--backend", "flow", "--out", str(flow)).returncode == 0
    d = json.loads((flow / "result.json").read_text())
    d["backend"] = "packet"
    fake = tmp_path / "packet.json"
    fake.write_text(json.dumps(d))
    out = tmp_path / "cmp"
    r = _cli("compare", "experiments/demo.yaml", "--packet-result", str(fake), "--out", str(out), "--max-error", "0.001")
    assert r.returncode == 0, r.stderr
    c = json.loads((out / "compare.json").read_text())
    assert len(c["runs"]) == 6 and c["max_abs_error"] == 0.0
    assert all(s["error"] == 0.0 for run in c["runs"] for s in run["steps"])
    assert (out / "compare.png").exists()
    d["result"]["runs"][0]["time_s"] *= 2  # now one run disagrees by -50%
    fake.write_text(json.dumps(d))
    r = _cli("compare", "experiments/demo.yaml", "--packet-result", str(fake), "--out", str(tmp_path / "cmp2"),
             "--max-error", "0.1")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "check failed: ring 25MiB: agreement: packet 1.975 ms against flow 0.988 ms" in r.stderr
    c = json.loads((tmp_path / "cmp2" / "compare.json").read_text())
    assert [(f["check"], f["where"]) for f in c["failed_checks"]] == [("agreement", "ring 25MiB")]
    # a packet result whose own check failed: compare decides 1 whatever the agreement, naming it
    d["result"]["runs"][0]["time_s"] /= 2
    d["result"]["runs"][1]["checks"].update(ok=False, problems=["link capacity: step 3 moved 1.500x what its busiest "
                                                                "link can carry"])
    fake.write_text(json.dumps(d))
    r = _cli("compare", "experiments/demo.yaml", "--packet-result", str(fake), "--out", str(tmp_path / "cmp3"))
    assert r.returncode == 1 and "check failed: packet rhd-static 25MiB: link capacity: step 3 moved 1.500x" in r.stderr
    c = json.loads((tmp_path / "cmp3" / "compare.json").read_text())
    assert c["max_abs_error"] == 0.0 and [f["check"] for f in c["failed_checks"]] == ["link capacity"]


def test_a_scenario_copied_with_changes_runs_the_changes_not_the_experiment_resolved_at_load(tmp_path):
    """A scenario keeps the experiment resolved when it was loaded; a copy with fields changed
    (a script's sweep) must be resolved again, or it would run the old fields."""
    from emulation import kinds

    sc = kinds.load_as(ROOT / "experiments" / "demo.yaml", "collective")
    assert sc.experiment is not None and sc.model_copy().experiment is sc.experiment
    one = sc.model_copy(update={"sizes": [1 << 20]})
    assert one.experiment is None
    env = kinds.run_scenario("collective", one, tmp_path / "out", "flow", show=False)
    assert {r.bytes for r in env.result.runs} == {1 << 20}


def test_the_alpha_beta_line_uses_each_ring_collectives_own_closed_form(tmp_path):
    """The summary's alpha-beta line: AllReduce 2(n-1) steps, ReduceScatter and AllGather n-1,
    each paying alpha + delta; the flow backend equals it to the rounding (a correct ring
    AllGather once printed as -47% against the AllReduce formula)."""
    from emulation.collective.report import ring_alpha_beta_s

    scen = tmp_path / "ab.yaml"
    scen.write_text((ROOT / "experiments" / "demo.yaml").read_text()
                    .replace("  delta_s: 0.0 ", "  delta_s: 1.0e-6 ")
                    .replace("  - {name: ring, algorithm: ring, planner: none}",
                             "  - {name: ring, algorithm: ring, planner: none}\n"
                             "  - {name: ag, collective: allgather, algorithm: ring, planner: none}\n"
                             "  - {name: rs, collective: reducescatter, algorithm: ring, planner: none}"))
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", str(scen), "--backend", "flow", "--out",
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = re.findall(r"^(\w+) 25MiB \((\w+) on a ring\): alpha-beta ([\d.]+) ms, simulated ([\d.]+) ms \(([-+][\d.]+)%\)",
                       r.stdout, re.M)
    assert {(name, coll) for name, coll, *_ in lines} == {("ring", "allreduce"), ("ag", "allgather"),
                                                          ("rs", "reducescatter")}, r.stdout
    for name, coll, pred, got, err in lines:
        assert float(pred) == pytest.approx(ring_alpha_beta_s(8, 25 << 20, 5e-6, 400, coll, 1e-6) * 1e3, abs=5e-4)
        assert abs(float(err)) < 0.1, (name, pred, got)
    assert ring_alpha_beta_s(8, 25 << 20, 5e-6, 400, "allgather", 1e-6) == pytest.approx(
        0.5 * ring_alpha_beta_s(8, 25 << 20, 5e-6, 400, "allreduce", 1e-6))


def test_set_and_sizes_change_the_scenario_for_one_command_and_are_checked_like_the_file(tmp_path):
    """``--set KEY=VALUE`` and ``--sizes`` run the file with fields changed (recorded in the run's
    scenario.yaml); a misspelt key, a refused value or sizes on a kind without them: one line, 2."""
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    out = tmp_path / "r1e-4"
    r = cli("run", "experiments/demo.yaml", "--backend", "flow", "--set", "fabric.reconfiguration_delay_s=1e-4",
            "--sizes", "1MiB", "--out", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads((out / "result.json").read_text())["result"]
    assert {x["bytes"] for x in d["runs"]} == {2**20}
    circuits = next(x for x in d["runs"] if x["name"] == "rhd-circuits")
    assert {s["reconfiguration_delay_s"] for s in circuits["steps"] if s["action"] == "reconfigure"} == {1e-4}
    assert "reconfiguration_delay_s: 0.0001" in (out / "scenario.yaml").read_text()
    for args, want in [(("--set", "fabric.reconfigration_delay_s=1e-4"), "(did you mean reconfiguration_delay_s?)"),
                       (("--set", "fabric.gpus=eight"), "fabric.gpus: Input should be a valid integer"),
                       (("--set", "gpus"), "--set gpus: KEY=VALUE"),
                       (("--sizes", ","), "--sizes ',': give sizes")]:
        bad = cli("run", "experiments/demo.yaml", "--backend", "flow", *args, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and want in bad.stderr, bad.stderr
        assert not (tmp_path / "bad").exists()
    wan = cli("run", "experiments/wan_b4.yaml", "--sizes", "1MiB", "--out", str(tmp_path / "bad"))
    assert wan.returncode == 2 and "--sizes: a wan scenario has no sizes" in wan.stderr
