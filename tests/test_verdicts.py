"""Exit status is the verdict: 0 every check held, 1 a run completed but a check failed (the
result written with the failed check named, one line on stderr), 2 refused input; and the
paper reproductions' verdicts (:mod:`emulation.reproduce`).

Each command is run three ways where it can be without root: its checks holding, made to fail
a check (a broken backend, a wrong TE solution, a capture whose dark window undercuts R, a
session or job whose result carries a failure), and given bad input. The packet-backend halves
of the same paths (a real demo compare, a real capture) are in the emulation tests.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulation import cli
from emulation.envelope import FailedCheck, envelope
from emulation.reproduce import Claim, Verdicts, read_verdicts
from emulation.reproduce.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "experiments" / "demo.yaml"


@pytest.fixture
def out_dir(request) -> Path:
    """A fresh directory under runs/tests/ (not the system temporary directory)."""
    d = ROOT / "runs" / "tests" / request.node.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def _stderr_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


# --- ocslab run ----------------------------------------------------------------------------------

def test_run_exits_0_when_every_check_holds_and_1_naming_the_check_a_broken_backend_failed(out_dir, capsys,
                                                                                          monkeypatch):
    """The demo on the flow backend holds its checks (exit 0, no failed check in the result).
    With the simulator made to report every step in half its time (a broken backend: its
    links would carry twice their capacity) the run completes, its result is written whole
    with the failed check named, one stderr line gives the numbers, and the exit status is 1."""
    assert cli.main(["run", str(DEMO), "--backend", "flow", "--out", str(out_dir / "ok")]) == 0
    ok = json.loads((out_dir / "ok" / "result.json").read_text())
    assert ok["complete"] and ok["failed_checks"] == []
    capsys.readouterr()

    from emulation.flowsim import run as flow_run

    real = flow_run.simulate

    def twice_as_fast(*args, **kwargs):
        res = real(*args, **kwargs)
        for s in res.steps:
            s.end_s = s.start_s + (s.end_s - s.start_s) / 2
        res.time_s /= 2
        return res

    monkeypatch.setattr(flow_run, "simulate", twice_as_fast)
    assert cli.main(["run", str(DEMO), "--backend", "flow", "--out", str(out_dir / "broken")]) == 1
    (line,) = _stderr_lines(capsys)
    # a step's time is alpha plus its bytes' time: halved, its busiest link moved 1.5-2x its capacity
    assert re.fullmatch(r"ocslab: check failed: ring 25MiB: link capacity: step \d+ moved 1\.[5-9]\d\dx what its "
                        r"busiest link can carry \(and \d+ more: failed_checks in result.json\)", line), line
    res = json.loads((out_dir / "broken" / "result.json").read_text())
    assert res["complete"] and res["error"] is None
    assert {(f["check"], f["where"]) for f in res["failed_checks"]} >= {
        ("link capacity", f"{r} 25MiB") for r in ("ring", "rhd-static", "rhd-circuits")}
    assert all(not r["checks"]["ok"] for r in res["result"]["runs"] if r["bytes"] == 25 << 20)


def test_run_refuses_bad_input_with_2(out_dir, capsys):
    bad = out_dir / "bad.yaml"
    bad.write_text(DEMO.read_text().replace("gpus: 8", "gpus: 1"))
    assert cli.main(["run", str(bad), "--backend", "flow", "--out", str(out_dir / "o")]) == 2
    (line,) = _stderr_lines(capsys)
    assert "fabric.gpus" in line and not (out_dir / "o").exists()


# --- ocslab te -----------------------------------------------------------------------------------

def test_te_exits_1_when_the_solution_overloads_a_link_and_2_for_a_bad_matrix(capsys, monkeypatch):
    """``ocslab te`` checks the solution it prints: a max-flow allocation within capacity exits 0;
    the same solver made to send twice the optimal splits loads links past capacity (exit 1,
    the check named); a matrix index the WAN lacks is refused (exit 2)."""
    wan = str(ROOT / "experiments" / "wan_b4.yaml")
    assert cli.main(["te", wan, "--tm", "3", "--json"]) == 0
    capsys.readouterr()
    from emulation.planners import te

    real = te.solve

    def greedy(*args, **kwargs):
        sol = real(*args, **kwargs)
        return te.TeSolution(sol.objective, sol.regulariser, sol.splits * 2, sol.load * 2, sol.utilisation * 2,
                             sol.value, sol.carried * 2)

    monkeypatch.setattr(te, "solve", greedy)
    assert cli.main(["te", wan, "--tm", "3"]) == 1
    lines = _stderr_lines(capsys)
    assert len(lines) == 1 and "check failed: matrix 3: splits: demand" in lines[0]
    monkeypatch.undo()
    assert cli.main(["te", wan, "--tm", "99"]) == 2
    assert "--tm" in _stderr_lines(capsys)[0]


# --- ocslab pcap ---------------------------------------------------------------------------------

def _capture(run: Path, gap_ms: float) -> Path:
    """A run directory holding a capture of one reconfiguration (R = 40 ms) of GPU 0's port 1:
    its wire probes, sent every 1 ms, fall silent for ``gap_ms``."""
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    from emulation import dataplane as dpn
    from emulation.emulator.probe import PAYLOAD

    pcap = run / "emulation" / "pcap"
    pcap.mkdir(parents=True)
    (pcap / "clock.json").write_text(json.dumps({"realtime_minus_monotonic_s": 0.0, "devices": [],
                                                 "probe_devices": ["g1-eth0"], "gpu_of_device": {},
                                                 "first_hop_complete": False}))
    sent = np.arange(0.9, 1.2, 1e-3)
    lost = (sent >= 1.0005) & (sent < 1.0005 + gap_ms / 1e3)
    dst = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1])  # byte 5: the sending port
    src = bytes.fromhex(dpn.gpu_mac(0).replace(":", ""))
    frames = []
    for seq, t in enumerate(sent):
        if not lost[seq]:
            f = Ether(dst + src + bytes.fromhex("88b5") + PAYLOAD.pack(0, seq, int(t * 1e9)) + bytes(30))
            f.time = t
            frames.append(f)
    wrpcap(str(pcap / "probe-g1-eth0.pcap"), frames)
    ev = {"seq": 1, "t": 1.001, "kind": "reconfigured", "changed": True, "t_dark": 1.001, "t_live": 1.041,
          "reconfiguration_delay_s": 0.040, "dark_window_measured_s": 0.040, "rewired": [[0, 1]]}
    (run / "emulation" / "events.jsonl").write_text(json.dumps(ev) + "\n")
    return run


def test_pcap_exits_0_when_the_wire_agrees_1_when_a_window_undercuts_r_and_2_without_a_capture(out_dir, capsys):
    """``ocslab pcap DIR``: the probes of the rewired port silent for 40 ms across a 40 ms
    reconfiguration agree (exit 0); silent for 30 ms they show a window shorter than R, which no
    real switch can give (exit 1, the window named in ``pcap.json`` and on stderr); a directory
    without a capture is refused (exit 2). Retransmissions are not held against TCP_INFO here: the
    capture does not hold every sender's OCS input port, and the summary says so."""
    good = _capture(out_dir / "good", 40.0)
    assert cli.main(["pcap", str(good)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "agrees" in out and "not counted (the capture does not hold every sender's OCS input port" in out
    bad = _capture(out_dir / "bad", 30.0)
    assert cli.main(["pcap", str(bad)]) == 1
    (line,) = _stderr_lines(capsys)
    assert "check failed: reconfiguration at 1.001 s: dark window: wire 30.00 ms" in line and "requested 40.00" in line
    rep = json.loads((bad / "pcap.json").read_text())
    assert [f["check"] for f in rep["failed_checks"]] == ["dark window"]
    assert rep["tcp"]["retransmissions_first_hop"] is None
    (out_dir / "empty").mkdir()
    assert cli.main(["pcap", str(out_dir / "empty")]) == 2
    assert "no capture" in _stderr_lines(capsys)[0]


# --- ocslab up, train, torch allreduce-perf: the result's failures decide ------------------------

def _failing_collective(exp):
    """A packet session's envelope whose one run failed its link-capacity check."""
    from emulation.results import Checks, RunResult
    from emulation.collective.runner import collective_envelope

    run = RunResult(name="ring", collective="allreduce", algorithm="ring", planner="none", ranks=8, bytes=1 << 20,
                    backend="packet", time_s=1e-4,
                    checks=Checks(ok=False, bytes_conserved=True, max_link_utilisation=1.2, busbw_over_injection=0.5,
                                  problems=["link capacity: step 2 moved 1.200x what its busiest link can carry"]))
    return collective_envelope(exp, "packet", [run], {"complete": True})


def test_up_exits_1_when_a_collective_of_the_session_failed_a_check(out_dir, capsys, monkeypatch):
    """``ocslab up`` decides on its session's collectives like a run: one that failed a check
    makes the session exit 1, named on stderr and in ``result.json``. (A session whose
    collectives hold exits 0: ``tests/test_console.py`` runs one on real packets.)"""
    import emulation.collective.console

    monkeypatch.setattr(emulation.collective.console, "up", lambda exp, out, **_: _failing_collective(exp))
    assert cli.main(["up", str(DEMO), "--out", str(out_dir / "s")]) == 1
    (line,) = _stderr_lines(capsys)
    assert line == "ocslab: check failed: ring 1MiB: link capacity: step 2 moved 1.200x what its busiest link can carry"
    assert json.loads((out_dir / "s" / "result.json").read_text())["failed_checks"][0]["where"] == "ring 1MiB"


def test_a_training_result_fails_isolation_and_resume_and_train_exits_1(out_dir, capsys, monkeypatch):
    """The training kind's checks (a packet reaching the failed GPU after the rewrite, replayed
    steps that do not repeat their losses) fail in the envelope, and ``ocslab train`` exits 1
    naming the first."""
    from emulation import kinds
    from emulation.torchjob.recoveries import TrainingResult

    kind = kinds.get("training")
    run = {"mode": "optical", "failed_gpu": 2, "placement_before": [0, 1, 2, 3], "placement_after": [0, 1, 4, 3],
           "moved_ranks": [2], "detection": "port status", "restart": "warm",
           "timeline_s": dict.fromkeys(("detected", "decided", "dark", "rewritten", "restarted", "group_reformed",
                                        "first_step"), 0.1),
           "failure_to_rewritten_s": {"emulated": 0.11, "real_equivalent": 0.01, "dark_window_measured_s": 0.1,
                                      "reconfiguration_delay_s": 0.1},
           "steady": {"before": {"step_s": 0.69, "allreduce_s": 0.68, "samples_per_s": 92.0, "steps": 10},
                      "after": {"step_s": 0.69, "allreduce_s": 0.68, "samples_per_s": 92.0, "steps": 10},
                      "after_over_before": 1.0},
           "alpha_s": 1e-4,
           "loss": {"launch0_first": 2.3, "launch0_last": 1.8, "launch1_first": 1.9, "launch1_last": 1.1,
                    "resumed_from": 14, "loss_at_checkpoint": 2.0, "last_step_before_failure": 16,
                    "steps_redone": 2, "launch0_slope_per_step": -0.01, "launch1_slope_per_step": -0.01,
                    "replayed_steps": 2, "replay_max_abs_diff": 0.0},
           "evidence": {"packets_to_failed_gpu": {"after_rewrite": 0, "between_failure_and_rewrite": 740},
                        "ocs_rules_to_failed_gpu": []}, "steps": []}
    good = TrainingResult.model_validate({"tdf": 5000, "parameters": 1, "gradient_bytes": 4, "capabilities": {},
                                          "runs": [run], "comparison": {"after_over_before": {"optical": 1.0}}})
    assert good.failed_checks() == []
    run["evidence"]["packets_to_failed_gpu"]["after_rewrite"] = 3
    run["loss"]["replay_max_abs_diff"] = 0.02
    bad = TrainingResult.model_validate({**good.model_dump(), "runs": [run]})
    assert [(c.check, c.where) for c in bad.failed_checks()] == [("isolation", "optical"), ("resume", "optical")]
    env = kind.judge(envelope("training", "lumion", "packet", bad))
    assert [c.check for c in env.failed_checks] == ["isolation", "resume"]

    from emulation.kinds import command_job

    status = command_job(kind, kinds.load_as(ROOT / "experiments" / "lumion.yaml", "training"), out_dir / "t",
                         "train", 1, lambda out, progress: envelope("training", "lumion", "packet", bad))
    assert status == 1
    (line,) = _stderr_lines(capsys)
    assert line.startswith("ocslab: check failed: optical: isolation: 3 packets reached GPU 2's switch ports") \
        and "(and 1 more" in line
    assert [c["check"] for c in json.loads((out_dir / "t" / "result.json").read_text())["failed_checks"]] == \
        ["isolation", "resume"]


def test_allreduce_perf_exits_1_when_gloo_gave_a_wrong_sum(out_dir, capsys):
    """``ocslab torch allreduce-perf`` checks every size's sum on every rank: a wrong one exits 1,
    naming the size."""
    from types import SimpleNamespace

    row = dict(bytes=1 << 20, time_s=0.1, busbw_gbps=0.02, predicted_s=0.1, predicted_busbw_gbps=0.02, deviation=0.0)
    res = SimpleNamespace(torch="2.13.0", alpha_s=1e-3, rows=[SimpleNamespace(**row, correct=True),
                                                                SimpleNamespace(**{**row, "bytes": 4 << 20},
                                                                                correct=False)])
    args = SimpleNamespace(gpus=8, link_mbps=20.0)
    assert cli._show_allreduce_perf(args, out_dir, SimpleNamespace(**{**res.__dict__, "rows": res.rows[:1]})) == 0
    assert cli._show_allreduce_perf(args, out_dir, res) == 1
    (line,) = _stderr_lines(capsys)
    assert line.startswith("ocslab: check failed: 4MiB: sum: gloo's AllReduce did not give every rank the sum")


# --- the paper reproductions ---------------------------------------------------------------------

def test_each_rule_judges_against_the_papers_figure():
    def claim(rule, value, tol=0.0, gain=False):
        return Claim("t.x", "P", "0000.00000", "h", "p", value, rule, tol, "why", gain=gain)

    assert claim("within", 3.0, 0.25).judge(3.7) == "held" and claim("within", 3.0, 0.25).judge(3.8) == "missed"
    assert claim("within", 3.0, 0.25).judge(2.25) == "held" and claim("within", 3.0, 0.25).judge(2.2) == "missed"
    # a factor near 1 is judged on its gain: 1.4x +-25% of the gain is 1.3x-1.5x, not 1.05x-1.75x
    assert claim("within", 1.4, 0.25, gain=True).judge(1.3) == "held"
    assert claim("within", 1.4, 0.25, gain=True).judge(1.14) == "missed"
    assert claim("within", (0.22, 0.25), 0.25).judge(0.2) == "held" \
        and claim("within", (0.22, 0.25), 0.25).judge(0.16) == "missed" \
        and claim("within", (0.22, 0.25), 0.25).judge(0.32) == "missed"
    assert claim("factor", 14.0, 2.0).judge(27.9) == "held" and claim("factor", 14.0, 2.0).judge(float("inf")) == "missed"
    assert claim("factor", 14.0, 2.0).judge(6.9) == "missed"
    assert claim("at_least", 23.0).judge(23.9) == "held" and claim("at_least", 23.0).judge(14.7) == "missed"
    assert claim("at_most", 0.06).judge(0.028) == "held" and claim("at_most", 0.06).judge(0.061) == "missed"
    assert claim("direction", 1.88).judge(1.13) == "held" and claim("direction", 1.88).judge(0.99) == "missed"
    assert claim("holds", None).judge(True) == "held" and claim("holds", None).judge(False) == "missed"
    assert claim("calibrated", 10.18).judge(10.15) == "calibrated"
    assert claim("within", 3.0, 0.25).judge(None) == "error" and claim("within", 3.0, 0.25).judge(float("nan")) == "error"
    with pytest.raises(TypeError):
        claim("holds", None).judge(1.0)


def test_the_claims_table_is_one_table_with_a_reason_for_every_tolerance():
    """Every claim has a unique id naming its script, an arXiv id (or is one of ocslab's own
    checks), a reason, and a rule its value fits; no claim judges a figure an input was fitted to."""
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    from emulation.reproduce.suite import SCRIPTS

    assert {c.script for c in CLAIMS} == set(SCRIPTS)
    for c in CLAIMS:
        assert c.reason and c.headline and c.paper_text, c.id
        assert c.paper == "ocslab" or (c.arxiv[:4].isdigit() and "." in c.arxiv), c.id
        if c.rule in ("holds", "not modelled"):
            assert c.value is None, c.id
        elif c.rule != "calibrated":
            assert c.value is not None, c.id
        assert c.part == "flow" or c.paper == "ocslab" or c.rule in ("holds", "at_most", "within"), c.id


def test_a_script_that_judges_records_every_claim_and_decides(out_dir):
    """A script's :class:`Verdicts`: judged claims keep their verdict, claims it skipped say
    ``not run``, unjudged flow claims are ``error`` (exit 1), packet claims without packets
    ``not run``; ``verdicts.json`` holds every row."""
    v = Verdicts("stragglar")
    v.judge("rounds", True)
    v.skip("large_n", "not at n = 64")
    assert v.finish(out_dir, packet=False) == 1  # stragglar.server was never judged: an error
    rows = {r.id: r.verdict for r in read_verdicts(out_dir / "verdicts.json")}
    assert rows == {"stragglar.rounds": "held", "stragglar.large_n": "not run", "stragglar.server": "error",
                    "stragglar.packet_ratio": "not run"}
    v = Verdicts("lumion")
    v.judge("same_bandwidth", 1.0)
    v.judge("throughput", 2.1)
    assert v.finish(out_dir / "l", packet=False) == 0
    assert {r.id: r.verdict for r in read_verdicts(out_dir / "l" / "verdicts.json")} == {
        "lumion.same_bandwidth": "held", "lumion.throughput": "calibrated", "lumion.swap_time": "not run",
        "lumion.steady": "not run", "lumion.checks": "not run"}


def _docs_verdicts() -> dict[str, str]:
    """``docs/papers/index.md``'s results table: claim id -> verdict."""
    got = {}
    for line in (ROOT / "docs" / "papers" / "index.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 7 and cells[0].startswith("`") and cells[0].endswith("`"):
            got[cells[0].strip("`")] = cells[-1].strip("*")
    return got


def test_the_docs_tolerance_table_is_the_claims_table():
    """``docs/papers/index.md`` lists every claim with its tolerance and reason as the code
    judges it (generated by :func:`emulation.reproduce.suite.claims_markdown`)."""
    from emulation.reproduce.suite import claims_markdown

    text = (ROOT / "docs" / "papers" / "index.md").read_text()
    assert claims_markdown() in text, "docs/papers/index.md: paste emulation.reproduce.suite.claims_markdown()"


@pytest.mark.long
def test_ocslab_reproduce_quick_gives_the_docs_verdicts_and_exits_with_them(out_dir):
    """``ocslab reproduce --quick`` runs every reproduction's flow form (smaller sweeps that
    measure every headline as the full form does): no script fails, every flow headline gets the
    verdict ``docs/papers/index.md`` reports from the full run (a change that breaks a headline,
    or mends one without the page saying so, fails here), and the exit status is 1 exactly when
    one missed. ``--only`` runs a subset; an unknown name is refused."""
    out = out_dir / "all"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "reproduce", "--quick", "--jobs", "2", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    rows = read_verdicts(out / "verdicts.json")
    got = {v.id: v.verdict for v in rows}
    assert "error" not in got.values(), [(v.id, v.note) for v in rows if v.verdict == "error"]
    docs = _docs_verdicts()
    flow = {c.id for c in CLAIMS if c.part == "flow"}
    assert {k: got[k] for k in flow} == {k: docs[k] for k in flow}
    assert all(got[c.id] == "not run" for c in CLAIMS if c.part == "packet")
    assert r.returncode == (1 if "missed" in got.values() else 0), r.stderr
    assert (out / "verdicts.md").read_text().count("\n") == len(CLAIMS) + 2
    one = subprocess.run([sys.executable, "-m", "emulation.cli", "reproduce", "--only", "stragglar", "shortcircuit",
                          "--out", str(out_dir / "two")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    two = {v.verdict for v in read_verdicts(out_dir / "two" / "verdicts.json")}
    assert two <= {"held", "missed", "not run"} and "held" in two, one.stdout[-2000:]
    assert one.returncode == (1 if "missed" in two else 0), one.stdout[-2000:]
    bad = subprocess.run([sys.executable, "-m", "emulation.cli", "reproduce", "--only", "nonesuch", "--out",
                          str(out_dir / "bad")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--only: unknown reproduction 'nonesuch'" in bad.stderr
    assert not (out_dir / "bad").exists()


def test_a_failed_check_line_names_where_the_check_and_its_detail():
    assert FailedCheck.of("link capacity: step 3 moved 1.2x", "ring 25MiB").line() == \
        "ring 25MiB: link capacity: step 3 moved 1.2x"
    assert FailedCheck.of("no colon here").check == "check"


def test_a_failed_check_names_the_user_app_that_changed_the_circuits(out_dir):
    """A run whose circuits a user's app changed (``circuits_changed_by``) and whose check failed
    names the app in the failed check: the likely cause of a broken step. The planner's and the
    emulator's own changes are not named."""
    from emulation import api
    from emulation.checks import failed_checks

    env = api.run(api.changed(api.load(DEMO), {"sizes": ["1MiB"]}), backend="flow", out=out_dir / "r")
    run = env.result.runs[0]
    broken = run.model_copy(update={"checks": run.checks.model_copy(update={"ok": False, "problems": [
        "emulator drops: no_route 134"]})})
    result = env.result.model_copy(update={"runs": [broken], "circuits_changed_by": {"emulator": 4, "greedy": 3}})
    (check,) = failed_checks(result)
    assert (check.check, check.where) == ("emulator drops", "ring 1MiB")
    assert check.detail.startswith("no_route 134 (your apps changed the circuits during the runs: greedy 3 time(s);")
    planner_only = result.model_copy(update={"circuits_changed_by": {"emulator": 4, "planner": 2}})
    assert [c.detail for c in failed_checks(planner_only)] == ["no_route 134"]
