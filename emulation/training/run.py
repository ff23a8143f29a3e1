"""Run a training scenario's recoveries on the packet backend and summarise each one.

For every recovery of the scenario :func:`run_training` calls
:func:`emulation.emulator.recovery.run_recovery` on a fresh emulation and :func:`summarise`
turns its raw record into the figures LUMION reports:

- the **timeline**, seconds after the failure: ``detected`` (the controller's port-status
  event), ``decided`` (spare and configuration looked up), ``dark`` (the changed circuits'
  removal acknowledged), ``rewritten`` (new circuits acknowledged: they carry traffic),
  ``restarted`` (the relaunch), ``group_reformed`` (the last rank through its first barrier
  after rendezvous), ``first_step`` (the first completed step after the restart);
- failure -> rewritten in emulated seconds and **real-equivalent** seconds: the control-plane
  part (detection, decision, OpenFlow round trips) is real software on a real clock and is kept
  as measured; the dark window, dilated by the TDF for the emulation, is divided by it;
- **steady state** before the failure and after the recovery: the median step time (s, from a
  step's start to its update applied) over the steps past ``warmup_steps`` of each launch,
  the throughput (samples/s), the median AllReduce time, and the flow backend's AllReduce
  prediction for that configuration (alpha fitted before the failure);
- **loss**: first and last of each launch and its least-squares slope per step (negative: the
  job trains), the checkpoint step resumed from, and the steps run twice (after the
  checkpoint, before the failure): the same data and weights must give the same loss, so
  their largest difference shows the restart really resumed from the checkpoint;
- the **evidence** that no packet reached the failed GPU after the rewrite.

Spec: ``docs/mechanisms.md`` (LUMION, arXiv 2505.23105).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import numpy as np

from emulation.fabric import Configuration, Fabric
from emulation.output import Progress
from emulation.torchjob.predict import fit_alpha, predict_allreduce
from emulation.training.results import RecoveryComparison, RecoveryRun, TrainingResult


def _steady(steps: list[dict], warmup: int, batch: int) -> dict:
    """Median step time / AllReduce time and throughput of ``steps`` past the first ``warmup``."""
    use = steps[warmup:] if len(steps) > warmup else steps
    if not use:
        return {"steps": 0, "step_s": None, "allreduce_s": None, "samples_per_s": None}
    step_s = statistics.median(r["t_end"] - r["t_start"] for r in use)
    return {"steps": len(use), "step_s": step_s, "allreduce_s": statistics.median(r["allreduce_s"] for r in use),
            "samples_per_s": batch / step_s}


def _slope(rows: list[dict]) -> float | None:
    """Least-squares slope of the loss over the steps of ``rows`` (loss per step)."""
    if len(rows) < 2:
        return None
    return float(np.polyfit([r["step"] for r in rows], [r["loss"] for r in rows], 1)[0])


def summarise_recovery(raw: dict, sc, fabric: Fabric) -> RecoveryRun:
    """The figures of one recovery run (module doc) from :func:`run_recovery`'s record.

    :raises ValueError: the record lacks a phase (e.g. no step after the restart).
    """
    ev = raw["events"]
    t_fail = ev["failure"]["t"]
    fo = ev["failover"]
    rows = [r for r in raw["steps"] if "step" in r]
    before = [r for r in rows if r["launch"] == 0 and r["t_end"] <= t_fail]
    after = [r for r in rows if r["launch"] == 1]
    if not before or not after:
        raise ValueError(f"{raw['mode']}: no completed step {'before the failure' if not before else 'after the restart'}")
    relaunch = raw["launches"][1]
    resumed = relaunch[0]["resumed_from"] if relaunch else -1
    timeline = {
        "detected": ev["gpu-failed"]["t_detected"] - t_fail,
        "decided": fo["t_decided"] - t_fail,
        "dark": fo.get("t_dark", fo["t_request"]) - t_fail,
        "rewritten": fo["t_live"] - t_fail,
        "restarted": ev["restart"]["t"] - t_fail,
        "group_reformed": max(r["t_group"] for r in relaunch) - t_fail,
        "first_step": after[0]["t_end"] - t_fail,
    }
    dark = fo.get("dark_window_measured_s", 0.0)
    rewritten = timeline["rewritten"]
    job = sc.job
    st_before = _steady(before, job.warmup_steps, job.batch)
    st_after = _steady(after, job.warmup_steps, job.batch)
    nbytes = job.gradient_bytes
    old, new = raw["placement"]
    after_config = Configuration.from_json(fo["configuration"])  # what the controller installed
    emu_fabric = _emulated(fabric, sc.emulation.link_mbps)
    alpha = fit_alpha(emu_fabric, fabric.initial, old, nbytes, st_before["allreduce_s"])
    st_before["predicted_allreduce_s"] = predict_allreduce(emu_fabric, fabric.initial, old, nbytes, alpha)
    st_after["predicted_allreduce_s"] = predict_allreduce(emu_fabric, after_config, new, nbytes, alpha)
    loss_at = {r["step"]: r["loss"] for r in before}
    last_before = before[-1]["step"]
    replayed = [r for r in after if r["step"] in loss_at]
    return RecoveryRun.model_validate({
        "mode": raw["mode"],
        "failed_gpu": raw["failed_gpu"],
        "placement_before": old,
        "placement_after": new,
        "moved_ranks": fo["moved"],
        "detection": ev["gpu-failed"].get("detection", "port-status"),
        "restart": ev["restart"].get("restart", "cold"),
        "timeline_s": timeline,
        "failure_to_rewritten_s": {"emulated": rewritten, "real_equivalent": rewritten - dark + dark / sc.tdf,
                                   "dark_window_measured_s": dark,
                                   "reconfiguration_delay_s": fo.get("reconfiguration_delay_s", 0.0)},
        "steady": {"before": st_before, "after": st_after,
                   "after_over_before": st_after["step_s"] / st_before["step_s"]},
        "alpha_s": alpha,
        "loss": {"launch0_first": before[0]["loss"], "launch0_last": before[-1]["loss"],
                 "launch1_first": after[0]["loss"], "launch1_last": after[-1]["loss"],
                 "resumed_from": resumed, "loss_at_checkpoint": loss_at.get(resumed),
                 "last_step_before_failure": last_before, "steps_redone": last_before - resumed,
                 "launch0_slope_per_step": _slope(before), "launch1_slope_per_step": _slope(after),
                 "replayed_steps": len(replayed),
                 "replay_max_abs_diff": max((abs(r["loss"] - loss_at[r["step"]]) for r in replayed), default=None)},
        "evidence": raw["evidence"],
        "steps": [{"launch": r["launch"], "step": r["step"], "t_s": r["t_end"] - t_fail,
                   "step_s": r["t_end"] - r["t_start"], "allreduce_s": r["allreduce_s"], "loss": r["loss"]}
                  for r in rows],
    })


def _emulated(fabric: Fabric, link_mbps: float) -> Fabric:
    """``fabric`` at the emulated rates (the job sends real bytes: byte scale 1)."""
    f = link_mbps / 1000 / fabric.port_gbps
    eps = tuple(dataclasses.replace(e, port_gbps=e.port_gbps * f if e.port_gbps else None) for e in fabric.eps)
    return dataclasses.replace(fabric, port_gbps=link_mbps / 1000, eps=eps)


def run_training(sc, out: Path, progress: Progress | None = None) -> TrainingResult:
    """Run every recovery of ``sc`` (a :class:`emulation.kinds.training.TrainingScenario`) with
    real packets, a fresh emulation each, each recovery's raw record in ``out/MODE/raw.json``;
    the result (:class:`~emulation.training.results.TrainingResult`).

    :raises emulation.emulator.net.EmulationError: the emulation or the job failed.
    """
    from emulation.emulator.capabilities import detect
    from emulation.emulator.recovery import run_recovery

    fabric = sc.build_fabric()
    caps = detect()
    runs = []
    for i, mode in enumerate(sc.recovery):
        if progress:
            progress(mode, i, len(sc.recovery))
        raw = run_recovery(fabric, sc.job.model_dump(), list(sc.placement), list(sc.spares), mode, sc.failure.gpu,
                           sc.failure.at_step, sc.emulation.link_mbps, sc.fabric.reconfiguration_delay_s * sc.tdf,
                           out / mode, sc.timeout_s, caps, restart=sc.job.restart)
        (out / mode / "raw.json").write_text(json.dumps(raw, indent=1))
        runs.append(summarise_recovery(raw, sc, fabric))
    if progress:
        progress("done", len(sc.recovery), len(sc.recovery))
    return TrainingResult(tdf=sc.tdf, parameters=sc.job.parameters, gradient_bytes=sc.job.gradient_bytes,
                          capabilities=caps.to_json(), runs=runs, comparison=compare_recoveries(runs))


def compare_recoveries(runs: list[RecoveryRun]) -> RecoveryComparison:
    """Steady-state step time after each recovery over the optical one's (and over the step
    time before the failure), when an optical run is present. Samples/s is batch / step time,
    so ``after_over_optical`` is also the optical recovery's throughput over each one's."""
    by = {r.mode: r for r in runs}
    optical = {}
    if "optical" in by:
        ref = by["optical"].steady.after.step_s
        optical = {m: r.steady.after.step_s / ref for m, r in by.items()}
    return RecoveryComparison(after_over_optical=optical,
                              after_over_before={m: r.steady.after_over_before for m, r in by.items()})
