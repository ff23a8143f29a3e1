"""A training scenario's results on screen and on disk: recovery timeline, steady state, loss,
evidence (tables), and ``timeline.png`` (LUMION, arXiv 2505.23105), drawn with the shared
helpers of :mod:`emulation.figures`.

Spec: ``scripts/reproduce_lumion.py`` prints the recovery timeline and the steady-state
step time / throughput, and saves a timeline plot.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from emulation import figures
from emulation.envelope import ResultEnvelope
from emulation.torchjob.recoveries import RecoveryComparison, RecoveryRun, TrainingResult

#: Timeline phases in order, with their labels
#: (:class:`emulation.torchjob.recoveries.Timeline`, filled by
#: :func:`emulation.torchjob.recoveries.summarise_recovery`).
PHASES = (("detected", "detected"), ("rewritten", "circuits rewritten"), ("restarted", "job restarted"),
          ("group_reformed", "group re-formed"), ("first_step", "first step"))


def _s(x: float | None, unit: float = 1.0, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x * unit)


def _rewrite_row(r: RecoveryRun) -> list[str]:
    f = r.failure_to_rewritten_s
    return [r.mode, _s(f.emulated, 1e3, "{:.1f}"), _s(f.real_equivalent, 1e3, "{:.2f}"),
            _s(f.reconfiguration_delay_s, 1e3, "{:.1f}"), _s(f.dark_window_measured_s, 1e3, "{:.1f}")]


def _steady_row(r: RecoveryRun, comparison: RecoveryComparison) -> list[str]:
    b, a = r.steady.before, r.steady.after
    ratio = comparison.after_over_optical.get(r.mode)
    return [r.mode, _s(b.step_s), _s(a.step_s), f"{r.steady.after_over_before:.3f}",
            _s(a.samples_per_s, 1, "{:.1f}"), _s(a.allreduce_s), _s(a.predicted_allreduce_s),
            "-" if ratio is None else f"{ratio:.2f}x"]


def _loss_row(r: RecoveryRun) -> list[object]:
    lo = r.loss
    return [r.mode, f"{lo.launch0_first:.3f} -> {lo.launch0_last:.3f}", _s(lo.launch0_slope_per_step, 1, "{:+.4f}"),
            lo.resumed_from, lo.steps_redone, _s(lo.replay_max_abs_diff, 1, "{:.1e}"),
            f"{lo.launch1_first:.3f} -> {lo.launch1_last:.3f}", _s(lo.launch1_slope_per_step, 1, "{:+.4f}")]


def _evidence_row(r: RecoveryRun) -> list[object]:
    p = r.evidence["packets_to_failed_gpu"]
    return [r.mode, r.failed_gpu, r.placement_after, p["between_failure_and_rewrite"], p["after_rewrite"],
            len(r.evidence["ocs_rules_to_failed_gpu"])]


def print_summary(env: ResultEnvelope, console: Console | None = None) -> None:
    """Print the timeline, failure-to-rewritten, steady-state, loss and evidence tables (on
    ``console``, default a console at least 150 characters wide)."""
    result, con = env.result, console or figures.console(150)
    runs = result.runs
    con.print(figures.table(
        "Recovery timeline (emulated seconds after the failure; detection by port status)",
        ["recovery", *(label for _, label in PHASES)],
        ([r.mode, *(_s(getattr(r.timeline_s, k)) for k, _ in PHASES)] for r in runs), left=["recovery"]))
    con.print(figures.table(
        f"Failure -> circuits rewritten (TDF {result.tdf:g}: control plane as measured, dark window / TDF)",
        ["recovery", "emulated (ms)", "real-equivalent (ms)", "dark requested (ms)", "dark measured (ms)"],
        map(_rewrite_row, runs)))
    con.print(figures.table(
        f"Steady state (median over steps past warm-up; {result.parameters:,} parameters, "
        f"{result.gradient_bytes / 1e6:.2f} MB AllReduced per step)",
        ["recovery", "step before (s)", "step after (s)", "after / before", "samples/s after", "AllReduce after (s)",
         "flow prediction (s)", "optical throughput / this"],
        (_steady_row(r, result.comparison) for r in runs)))
    con.print(figures.table(
        "Loss (mean cross-entropy of the global batch)",
        ["recovery", "launch 0: first -> last", "slope/step", "resumed from step", "steps redone", "replay |diff|",
         "launch 1: first -> last", "slope/step"],
        map(_loss_row, runs)))
    con.print(figures.table(
        "Packets the switches sent toward the failed GPU (ovs-ofctl dump-ports of its facing ports)",
        ["recovery", "failed GPU", "new placement", "failure -> rewrite", "after the rewrite", "OCS rules to it"],
        map(_evidence_row, runs)))


def write(env: ResultEnvelope, out: Path) -> list[str]:
    """``timeline.png`` (:func:`timeline_plot`); its name."""
    timeline_plot(env.result, out / "timeline.png")
    return ["timeline.png"]


def timeline_plot(result: TrainingResult, path: Path) -> None:
    """``path`` (PNG): per recovery, every step's duration against its end time (seconds after
    the failure) with the recovery phases marked; below, the loss per step of every recovery.

    :raises OSError: ``path`` cannot be written.
    """
    from matplotlib import colormaps

    runs = result.runs
    colours = colormaps["tab10"]
    with figures.figure(path, rows=len(runs) + 1, size=(10, 2.4 * (len(runs) + 1))) as (_, axes):
        for ax, r in zip(axes[:, 0], runs):
            for launch, marker in ((0, "o"), (1, "s")):
                pts = [s for s in r.steps if s.launch == launch]
                ax.plot([s.t_s for s in pts], [s.step_s for s in pts], marker=marker, ms=3, lw=1,
                        label=f"launch {launch}" + (" (GPUs " + ",".join(map(str, r.placement_after)) + ")"
                                                    if launch else ""))
            ax.axvline(0, color="red", lw=1.5)
            for i, (key, label) in enumerate(PHASES):
                ax.axvline(getattr(r.timeline_s, key), color=colours(i + 2), lw=1, ls="--", label=label)
            top = max([s.step_s for s in r.steps] or [1.0])
            ax.set_ylim(0, 1.5 * top)  # room for the legend above the steps
            ax.set_title(f"{r.mode}: GPU {r.failed_gpu} fails at 0", fontsize=9)
            ax.set_ylabel("step time (s)")
            ax.set_xlabel("seconds after the failure", fontsize=8)
            ax.legend(fontsize=6, ncol=4, loc="upper left")
        ax = axes[-1, 0]
        for i, r in enumerate(runs):
            for launch, ls in ((0, "-"), (1, "--")):
                pts = [s for s in r.steps if s.launch == launch]
                ax.plot([s.step for s in pts], [s.loss for s in pts], ls=ls, color=colours(i),
                        lw=1 + 1.5 * (len(runs) - i), alpha=0.8, label=f"{r.mode} launch {launch}")
        ax.set_title("loss per step (a relaunch repeats the steps after its checkpoint)", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend(fontsize=6, ncol=3)
