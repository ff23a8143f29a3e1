"""LUMION (arXiv 2505.23105): the rack with spares, its slower electrical path in both backends, the
precomputed failover configurations, training scenario files, and the training program's
checkpoint/resume (a real single-rank torch job on loopback; skipped without PyTorch).
The emulation test (real failure and recovery) is in ``tests/test_lumion_emulation.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.cli import main
from emulation.fabric import EPS, Fabric, FabricError, Link, PortRef
from emulation.flowsim import simulate
from emulation.planners import make_plan
from emulation.planners.failover import circuits_touching, failover, failover_table
from emulation.torchjob.recoveries import JobSpec
from emulation.torchjob.launch import torch_available
from emulation.torchjob.predict import fit_alpha, predict_allreduce
from emulation.workloads import build
from topologies.builders import rack

ROOT = Path(__file__).resolve().parents[1]


def _gpu_pairs(config) -> set[frozenset]:
    return {frozenset((c.a.gpu, c.b.gpu)) for _, c in config.all_circuits()}


def test_rack_puts_the_working_gpus_in_a_ring_of_circuits_and_leaves_the_spares_dark():
    f = rack(5, 3, ports_per_gpu=2, port_gbps=100, electrical_gbps=50)
    assert f.gpus == 8 and f.ports_per_gpu == 3
    assert _gpu_pairs(f.initial) == {frozenset((i, (i + 1) % 5)) for i in range(5)}
    assert all(not circuits_touching(f.initial, s) for s in (5, 6, 7))
    assert len(f.ocs[0].ports) == 16 and len(f.eps[0].ports) == 8
    assert f.link_gbps(Link(0, 2, 8, 0)) == 50 and f.link_gbps(Link(8, 3, 3, 2)) == 50
    assert f.link_gbps(Link(0, 0, 1, 0)) == 100
    assert Fabric.from_json(f.to_json()) == f
    with pytest.raises(FabricError, match="spares"):
        rack(4, -1)
    with pytest.raises(FabricError, match="ring needs 3 working GPUs with 2 ports"):
        rack(4, 2, ports_per_gpu=1)
    with pytest.raises(FabricError, match="port_gbps must be positive"):
        Fabric("x", 2, 1, 1.0, eps=(EPS("e", (PortRef(0, 0), PortRef(1, 0)), 0.0),))


def test_the_flow_backend_runs_eps_links_at_the_switch_rate():
    # Two GPUs on an EPS of a quarter of the port rate: one transfer takes 4x its port time.
    fast = Fabric("f", 2, 1, 8.0, eps=(EPS("e", (PortRef(0, 0), PortRef(1, 0))),))
    slow = Fabric("s", 2, 1, 8.0, eps=(EPS("e", (PortRef(0, 0), PortRef(1, 0)), 2.0),))
    w = build("ring", 2, 1 << 20)
    t_fast = simulate(fast, w, make_plan("none", fast, w)).time_s
    t_slow = simulate(slow, w, make_plan("none", slow, w)).time_s
    assert t_fast == pytest.approx((1 << 20) / 2 * 8 / 8e9 * 2, rel=1e-9)  # 2 steps of s/2 bytes at 8 Gbit/s
    assert t_slow == pytest.approx(4 * t_fast, rel=1e-9)


def test_placed_workload_moves_ranks_onto_gpus():
    w = build("ring", 4, 4096).placed([0, 1, 6, 3], 8)
    assert w.ranks == 8
    assert {t.src for s in w.steps for t in s.transfers} == {0, 1, 6, 3}
    with pytest.raises(ValueError, match="distinct GPUs"):
        build("ring", 4, 4096).placed([0, 1, 1, 3], 8)
    with pytest.raises(ValueError, match="distinct GPUs"):
        build("ring", 4, 4096).placed([0, 1, 2, 8], 8)


def test_optical_failover_splices_the_spare_into_the_failed_gpus_place_and_keeps_the_rest():
    f = rack(6, 2)
    fo = failover(f, "optical", tuple(range(6)), f.initial, 3, spare=6)
    assert fo.placement == (0, 1, 2, 6, 4, 5) and fo.moved == (3,)
    assert _gpu_pairs(fo.configuration) == {frozenset(p) for p in [(0, 1), (1, 2), (2, 6), (6, 4), (4, 5), (5, 0)]}
    assert not circuits_touching(fo.configuration, 3)
    untouched = {c for _, c in f.initial.all_circuits() if 3 not in (c.a.gpu, c.b.gpu)}
    assert untouched <= set(fo.configuration["ocs0"])  # only the failed GPU's two circuits change


def test_electrical_failover_only_isolates_the_failed_gpu_and_migration_rings_the_fresh_set():
    f = rack(4, 4, electrical_gbps=50)
    el = failover(f, "electrical", (0, 1, 2, 3), f.initial, 2, spare=4)
    assert el.placement == (0, 1, 4, 3)
    assert _gpu_pairs(el.configuration) == {frozenset((0, 1)), frozenset((3, 0))}
    mig = failover(f, "migration", (0, 1, 2, 3), f.initial, 2, spares=(4, 5, 6, 7))
    assert mig.placement == (4, 5, 6, 7) and mig.moved == (0, 1, 2, 3)
    assert _gpu_pairs(mig.configuration) == {frozenset(p) for p in [(4, 5), (5, 6), (6, 7), (7, 4)]}
    table = failover_table(f, "optical", (0, 1, 2, 3), (4, 5, 6, 7))
    assert sorted(table) == [0, 1, 2, 3] and all(fo.placement[g] == 4 for g, fo in table.items())
    with pytest.raises(FabricError, match="migration needs 4 fresh GPUs"):
        failover(f, "migration", (0, 1, 2, 3), f.initial, 2, spares=(4, 5))
    with pytest.raises(FabricError, match="runs no rank"):
        failover(f, "optical", (0, 1, 2, 3), f.initial, 5, spare=4)
    with pytest.raises(FabricError, match="needs a free spare"):
        failover(f, "optical", (0, 1, 2, 3), f.initial, 2, spare=None)
    with pytest.raises(FabricError, match="unknown recovery"):
        failover(f, "teleport", (0, 1, 2, 3), f.initial, 2, spare=4)


def test_flow_prediction_electrical_recovery_is_bound_by_the_slower_path():
    f = rack(4, 4, port_gbps=100, electrical_gbps=25)
    nbytes = 1 << 22
    base = predict_allreduce(f, f.initial, [0, 1, 2, 3], nbytes)
    assert base == pytest.approx(2 * 3 / 4 * nbytes * 8 / 100e9, rel=1e-9)  # ring: 2 (n-1)/n s / B
    opt = failover_table(f, "optical", (0, 1, 2, 3), (4, 5, 6, 7))[1]
    el = failover_table(f, "electrical", (0, 1, 2, 3), (4, 5, 6, 7))[1]
    assert predict_allreduce(f, opt.configuration, list(opt.placement), nbytes) == pytest.approx(base, rel=1e-9)
    assert predict_allreduce(f, el.configuration, list(el.placement), nbytes) == pytest.approx(4 * base, rel=1e-9)
    alpha = fit_alpha(f, f.initial, [0, 1, 2, 3], nbytes, base + 6 * 1e-3)
    assert alpha == pytest.approx(1e-3, rel=1e-6)


def test_job_spec_counts_parameters_and_gradient_bytes():
    job = JobSpec(features=32, hidden=512, layers=2, classes=10)
    assert job.parameters == 32 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert job.gradient_bytes == 4 * (job.parameters + 1)


GOOD = """name: t
fabric: {topology: rack, gpus: 4, spares: 4, port_gbps: 100, electrical_gbps: 50}
failure: {gpu: 2, at_step: 7}
recovery: [optical, electrical, migration]
"""


@pytest.mark.parametrize("change, message", [
    (("spares: 4", "spares: 0"), "fabric.spares: the rack needs at least one spare GPU"),
    (("spares: 4", "spares: 2"), "fabric.spares: migration restarts the job on 4 fresh GPUs"),
    ((", electrical_gbps: 50", ""), "fabric.electrical_gbps: the electrical recovery"),
    (("gpu: 2", "gpu: 4"), "failure.gpu: 4 is not a working GPU"),
    (("at_step: 7", "at_step: -1"), "failure.at_step: Input should be greater than or equal to 0"),
    (("at_step: 7", "at_step: 9"), "failure.at_step: step 9 ends with a checkpoint (every 5 steps)"),
    (("at_step: 7", "at_s: 7"), "failure.at_s: unknown field (did you mean at_step?)"),
    (("[optical, electrical, migration]", "[optical, optical]"), "recovery: a recovery is listed twice"),
    (("[optical, electrical, migration]", "[teleport]"), "recovery.0: Input should be"),
    (("topology: rack", "topology: ocs-star"), "fabric.spares: only a rack has spare GPUs"),
    (("failure:", "job: {batch: 2}\nfailure:"), "job.batch: 2 samples cannot be split over 4 GPUs"),
    (("failure:", "job: {batch: 99, samples: 10}\nfailure:"), "job.batch: 99 exceeds the dataset's 10 samples"),
    (("failure:", "job: {colour: red}\nfailure:"), "job.colour: unknown field"),
])
def test_bad_training_scenarios_get_one_line_naming_the_field_and_exit_2(tmp_path, capsys, change, message):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace(*change))
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith(f"ocslab: {path}: ")
    assert not (ROOT / "runs" / "t").exists()


def test_scenario_kinds_point_at_their_own_command(capsys):
    assert main(["run", str(ROOT / "experiments" / "lumion.yaml"), "--backend", "flow"]) == 2
    assert "a training scenario runs on packet, not flow" in capsys.readouterr().err
    assert main(["train", str(ROOT / "experiments" / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert "a collective scenario has no train" in err and "ocslab run" in err
    assert main(["train", str(ROOT / "experiments" / "lumion.yaml"), "--recovery", "optical,teleport"]) == 2
    assert "--recovery: 'teleport' is not a recovery of the scenario" in capsys.readouterr().err


def _train(job: dict, d: Path, launch: int, port: int) -> None:
    (d / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1",
           "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    subprocess.run([sys.executable, "-m", "emulation.torchjob.train", "--job", str(d / "job.json"), "--dir", str(d),
                    "--launch", str(launch)], env=env, cwd=ROOT, check=True, timeout=300, capture_output=True)


def _losses(d: Path) -> dict[tuple[int, int], float]:
    rows = [json.loads(x) for x in (d / "steps.jsonl").read_text().splitlines()]
    return {(r["launch"], r["step"]): r["loss"] for r in rows if "step" in r}


@pytest.mark.skipif(not torch_available(), reason="PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
def test_training_resumes_from_its_checkpoint_exactly(run_dir):
    job = JobSpec(hidden=64, steps=8, checkpoint_every=3, lr=0.05).model_dump()
    straight, split = run_dir / "straight", run_dir / "split"
    straight.mkdir()
    split.mkdir()
    _train(job, straight, 0, 29611)
    _train({**job, "steps": 5}, split, 0, 29612)  # checkpoint after step 2; steps 3 and 4 are lost
    _train(job, split, 1, 29613)
    a, b = _losses(straight), _losses(split)
    assert json.loads((split / "launch-1" / "rank-0.json").read_text())["resumed_from"] == 5 - 5 % 3 - 1
    assert sorted(s for la, s in b if la == 1) == [3, 4, 5, 6, 7]
    for s in range(8):  # the same data and weights give the same loss, launch after launch
        assert b.get((0, s), b.get((1, s))) == pytest.approx(a[(0, s)], abs=1e-6)
    assert a[(0, 7)] < a[(0, 0)]


def _raw(mode: str, fabric, placement_after: list[int], after_durations: list[float]) -> dict:
    """A synthetic :func:`emulation.torchjob.recovery.run_recovery` record: launch 0 runs steps
    0..7 (and logs step 8 after the failure), the controller rewires, launch 1 resumes from the
    checkpoint of step 4 and runs steps 5..11 with ``after_durations``."""
    rows, t = [], 100.0
    for step, d in enumerate([3.0, 2.0, 1.0, 1.2, 1.1, 1.0, 0.8, 1.4]):
        rows.append({"launch": 0, "step": step, "t_start": t, "t_end": t + d, "allreduce_s": d / 2,
                     "loss": 2.0 - 0.1 * step})
        t += d
    t_fail = t + 0.05
    rows.append({"launch": 0, "step": 8, "t_start": t, "t_end": t_fail + 0.3, "allreduce_s": 0.1, "loss": 1.2})
    t = t_fail + 1.5
    for step, d in zip(range(5, 12), after_durations):
        rows.append({"launch": 1, "step": step, "t_start": t, "t_end": t + d, "allreduce_s": d / 4,
                     "loss": 2.0 - 0.1 * step + (1e-4 if step <= 7 else 0.0)})
        t += d
    fo = failover_table(fabric, mode, (0, 1, 2, 3), (4, 5, 6, 7))[2]
    return {
        "mode": mode, "failed_gpu": 2, "placement": [[0, 1, 2, 3], placement_after], "spares": [4, 5, 6, 7],
        "events": {"failure": {"t": t_fail, "gpu": 2},
                   "gpu-failed": {"t_detected": t_fail + 0.01, "detection": "port-status"},
                   "failover": {"t_decided": t_fail + 0.012, "t_dark": t_fail + 0.02, "t_request": t_fail + 0.015,
                                "t_live": t_fail + 0.5, "dark_window_measured_s": 0.4,
                                "reconfiguration_delay_s": 0.4, "configuration": fo.configuration.to_json(),
                                "moved": list(fo.moved), "placement": list(fo.placement)},
                   "restart": {"t": t_fail + 0.6, "restart": "warm"}},
        "launches": [[{"rank": r} for r in range(4)],
                     [{"rank": r, "resumed_from": 4, "t_group": t_fail + 1.0 + 0.1 * r} for r in range(4)]],
        "steps": [{"launch": 0, "event": "start"}] + rows,
        "evidence": {"packets_to_failed_gpu": {"between_failure_and_rewrite": 3, "after_rewrite": 0},
                     "ocs_rules_to_failed_gpu": []},
    }


def test_a_recovery_record_is_summarised_into_the_figures_lumion_reports():
    """Steady state, timeline, real-equivalent time, loss and the flow prediction of a synthetic
    supervisor record (arXiv 2505.23105); two recoveries compared."""
    from emulation.kinds.training import TrainingScenario
    from emulation.torchjob.recoveries import compare_recoveries, summarise_recovery

    sc = TrainingScenario.model_validate({
        "name": "t", "fabric": {"topology": "rack", "gpus": 4, "spares": 4, "port_gbps": 100, "electrical_gbps": 50,
                                "reconfiguration_delay_s": 20e-6},
        "emulation": {"link_mbps": 20}, "job": {"hidden": 64, "layers": 1, "steps": 20},
        "failure": {"gpu": 2, "at_step": 7}, "recovery": ["optical", "electrical"]})
    setup = sc.recovery_setup()
    fabric = setup.fabric
    optical = summarise_recovery(_raw("optical", fabric, [0, 1, 4, 3], [2.5, 1.5, 2.0, 2.2, 1.8, 2.0, 2.1]), setup)
    assert optical.mode == "optical" and optical.placement_after == [0, 1, 4, 3] and optical.moved_ranks == [2]
    st = optical.steady
    assert st.before.steps == 6 and st.before.step_s == pytest.approx(1.05)  # median past 2 warm-up steps
    assert st.before.allreduce_s == pytest.approx(0.525) and st.before.samples_per_s == pytest.approx(64 / 1.05)
    assert st.after.steps == 5 and st.after.step_s == pytest.approx(2.0) and st.after.allreduce_s == pytest.approx(0.5)
    assert st.after_over_before == pytest.approx(2.0 / 1.05)
    # alpha is fitted so the prediction before the failure is the measured AllReduce; the optical
    # recovery restores the same ring of full-rate circuits, so the prediction after is the same
    fluid = 2 * 3 / 4 * sc.job.gradient_bytes * 8 / 20e6  # the ring's bytes at 20 Mbit/s, alpha 0
    assert optical.alpha_s == pytest.approx((0.525 - fluid) / 6)  # 2 (n - 1) messages
    assert st.before.predicted_allreduce_s == pytest.approx(0.525)
    assert st.after.predicted_allreduce_s == pytest.approx(0.525)
    tl = optical.timeline_s
    assert (tl.detected, tl.decided, tl.dark, tl.rewritten, tl.restarted, tl.group_reformed) == pytest.approx(
        (0.01, 0.012, 0.02, 0.5, 0.6, 1.3))
    assert tl.first_step == pytest.approx(1.5 + 2.5)
    f = optical.failure_to_rewritten_s
    assert setup.tdf == pytest.approx(5000)  # 100 Gbit/s over 20 Mbit/s, byte scale 1
    assert f.emulated == pytest.approx(0.5) and f.real_equivalent == pytest.approx(0.5 - 0.4 + 0.4 / 5000)
    lo = optical.loss
    assert (lo.resumed_from, lo.last_step_before_failure, lo.steps_redone, lo.replayed_steps) == (4, 7, 3, 3)
    assert lo.launch0_first == pytest.approx(2.0) and lo.launch0_last == pytest.approx(1.3)
    assert lo.launch1_first == pytest.approx(1.5 + 1e-4) and lo.launch1_last == pytest.approx(0.9)
    assert lo.launch0_slope_per_step == pytest.approx(-0.1)
    assert lo.launch1_slope_per_step == pytest.approx(-0.1, rel=1e-3)
    assert lo.replay_max_abs_diff == pytest.approx(1e-4, rel=1e-6) and lo.loss_at_checkpoint == pytest.approx(1.6)
    assert len(optical.steps) == 16 and optical.steps[8].t_s == pytest.approx(0.3)  # step 8 of launch 0, after
    assert optical.evidence["packets_to_failed_gpu"]["after_rewrite"] == 0

    electrical = summarise_recovery(_raw("electrical", fabric, [0, 1, 4, 3], [5.0, 3.0, 4.0, 4.4, 3.6, 4.0, 4.2]),
                                    setup)
    assert electrical.steady.after.step_s == pytest.approx(4.0)
    # the spare reached over the half-rate electrical path: the ring's fluid time doubles
    assert electrical.steady.after.predicted_allreduce_s == pytest.approx(0.525 + fluid)
    cmp = compare_recoveries([optical, electrical])
    assert cmp.after_over_optical == pytest.approx({"optical": 1.0, "electrical": 2.0})
    assert cmp.after_over_before == pytest.approx({"optical": 2.0 / 1.05, "electrical": 4.0 / 1.05})
    assert compare_recoveries([electrical]).after_over_optical == {}
    with pytest.raises(ValueError, match="electrical: no completed step after the restart"):
        summarise_recovery(_raw("electrical", fabric, [0, 1, 4, 3], []), setup)


def test_the_training_report_prints_its_tables_and_draws_the_timeline(tmp_path):
    """The recovery tables and ``timeline.png`` of a result built from synthetic records."""
    from rich.console import Console

    from emulation.kinds.training import TrainingScenario
    from emulation.envelope import envelope
    from emulation.torchjob.recoveries import TrainingResult, compare_recoveries, summarise_recovery
    from emulation.training import report

    sc = TrainingScenario.model_validate({
        "name": "t", "fabric": {"topology": "rack", "gpus": 4, "spares": 4, "port_gbps": 100, "electrical_gbps": 50},
        "emulation": {"link_mbps": 20}, "job": {"hidden": 64, "layers": 1, "steps": 20},
        "failure": {"gpu": 2, "at_step": 7}, "recovery": ["optical", "electrical"]})
    setup = sc.recovery_setup()
    runs = [summarise_recovery(_raw("optical", setup.fabric, [0, 1, 4, 3], [2.5, 1.5, 2.0, 2.2, 1.8, 2.0, 2.1]), setup),
            summarise_recovery(_raw("electrical", setup.fabric, [0, 1, 4, 3], [5.0, 3.0, 4.0, 4.4, 3.6, 4.0, 4.2]),
                               setup)]
    result = TrainingResult(tdf=setup.tdf, parameters=sc.job.parameters, gradient_bytes=sc.job.gradient_bytes,
                            capabilities={}, runs=runs, comparison=compare_recoveries(runs))
    con = Console(record=True, width=200)
    report.print_summary(envelope("training", "t", "packet", result), con)
    text = con.export_text()
    for title in ("Recovery timeline", "Failure -> circuits rewritten (TDF 5000", "Steady state", "Loss",
                  "Packets the switches sent"):
        assert title in text
    assert "2.00x" in text and "1.905" in text and "[0, 1, 4, 3]" in text  # electrical / optical; after / before
    assert "-0.1000" in text and "1.0e-04" in text  # loss slope; replayed steps match their first losses
    report.timeline_plot(result, tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_recoveries_supervises_one_emulation_per_recovery(tmp_path, monkeypatch):
    """The loop over recoveries, with the supervisor and the capability probe replaced: one
    supervised run per mode with the setup's arguments (dark window R x TDF, emulated), its raw
    record in ``out/MODE/raw.json``, progress per mode."""
    import emulation.emulator.capabilities as capabilities
    import emulation.torchjob.recovery as supervisor
    from emulation.kinds.training import TrainingScenario
    from emulation.torchjob.recoveries import run_recoveries

    class Caps:
        def to_json(self) -> dict:
            return {"netem": True}

    calls = []

    def run_recovery(fabric, job, placement, spares, mode, failed_gpu, at_step, spec, dark_s, out, timeout_s,
                     restart="warm"):
        calls.append((mode, placement, spares, failed_gpu, at_step, spec.link_mbps, dark_s, out, timeout_s, restart))
        out.mkdir(parents=True)
        return _raw(mode, fabric, [0, 1, 4, 3], [2.5, 1.5, 2.0, 2.2, 1.8, 2.0, 2.1])

    monkeypatch.setattr(supervisor, "run_recovery", run_recovery)
    monkeypatch.setattr(capabilities, "detect", Caps)
    sc = TrainingScenario.model_validate({
        "name": "t", "fabric": {"topology": "rack", "gpus": 4, "spares": 4, "port_gbps": 100, "electrical_gbps": 50,
                                "reconfiguration_delay_s": 20e-6},
        "emulation": {"link_mbps": 20}, "job": {"hidden": 64, "layers": 1, "steps": 20, "restart": "cold"},
        "failure": {"gpu": 2, "at_step": 7}, "recovery": ["optical", "electrical"], "timeout_s": 60})
    progress = []
    got = run_recoveries(sc.recovery_setup(), sc.recovery, tmp_path, lambda *a: progress.append(a))
    runs = got.runs
    assert [r.mode for r in runs] == ["optical", "electrical"] and got.capabilities == {"netem": True}
    assert progress == [("optical", 0, 2), ("electrical", 1, 2), ("done", 2, 2)]
    assert [c[:6] for c in calls] == [(m, [0, 1, 2, 3], [4, 5, 6, 7], 2, 7, 20) for m in ("optical", "electrical")]
    assert calls[0][6] == pytest.approx(20e-6 * 5000) and calls[0][7:] == (tmp_path / "optical", 60, "cold")
    assert json.loads((tmp_path / "electrical" / "raw.json").read_text())["mode"] == "electrical"
