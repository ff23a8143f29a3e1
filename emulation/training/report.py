"""A training scenario's results on screen and on disk: recovery timeline, steady state, loss,
evidence (tables), and ``timeline.png``.

Spec: ``scripts/reproduce_lumion.py`` prints the recovery timeline and the steady-state
step time / throughput, and saves a timeline plot.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation.training.results import TrainingResult

#: Timeline phases in order, with their labels (:func:`emulation.torchjob.recoveries.summarise_recovery`).
PHASES = (("detected", "detected"), ("rewritten", "circuits rewritten"), ("restarted", "job restarted"),
          ("group_reformed", "group re-formed"), ("first_step", "first step"))


def _s(x: float | None, unit: float = 1.0, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x * unit)


def print_summary(result: TrainingResult, console: Console | None = None) -> None:
    """Print the timeline, failure-to-rewritten, steady-state, loss and evidence tables."""
    con = console or Console(width=None if Console().is_terminal else 150)
    runs = result.runs
    t = Table(title="Recovery timeline (emulated seconds after the failure; detection by port status)")
    t.add_column("recovery")
    for _, label in PHASES:
        t.add_column(label, justify="right")
    for r in runs:
        t.add_row(r.mode, *(_s(getattr(r.timeline_s, k)) for k, _ in PHASES))
    con.print(t)

    t = Table(title=f"Failure -> circuits rewritten (TDF {result.tdf:g}: control plane as measured, "
                    "dark window / TDF)")
    for c in ("recovery", "emulated (ms)", "real-equivalent (ms)", "dark requested (ms)", "dark measured (ms)"):
        t.add_column(c, justify="right")
    for r in runs:
        f = r.failure_to_rewritten_s
        t.add_row(r.mode, _s(f.emulated, 1e3, "{:.1f}"), _s(f.real_equivalent, 1e3, "{:.2f}"),
                  _s(f.reconfiguration_delay_s, 1e3, "{:.1f}"), _s(f.dark_window_measured_s, 1e3, "{:.1f}"))
    con.print(t)

    cmp = result.comparison
    t = Table(title=f"Steady state (median over steps past warm-up; {result.parameters:,} parameters, "
                    f"{result.gradient_bytes / 1e6:.2f} MB AllReduced per step)")
    for c in ("recovery", "step before (s)", "step after (s)", "after / before", "samples/s after",
              "AllReduce after (s)", "flow prediction (s)", "optical throughput / this"):
        t.add_column(c, justify="right")
    for r in runs:
        b, a = r.steady.before, r.steady.after
        ratio = cmp.after_over_optical.get(r.mode)
        t.add_row(r.mode, _s(b.step_s), _s(a.step_s), f"{r.steady.after_over_before:.3f}",
                  _s(a.samples_per_s, 1, "{:.1f}"), _s(a.allreduce_s), _s(a.predicted_allreduce_s),
                  "-" if ratio is None else f"{ratio:.2f}x")
    con.print(t)

    t = Table(title="Loss (mean cross-entropy of the global batch)")
    for c in ("recovery", "launch 0: first -> last", "slope/step", "resumed from step", "steps redone",
              "replay |diff|", "launch 1: first -> last", "slope/step"):
        t.add_column(c, justify="right")
    for r in runs:
        lo = r.loss
        t.add_row(r.mode, f"{lo.launch0_first:.3f} -> {lo.launch0_last:.3f}",
                  _s(lo.launch0_slope_per_step, 1, "{:+.4f}"), str(lo.resumed_from), str(lo.steps_redone),
                  _s(lo.replay_max_abs_diff, 1, "{:.1e}"),
                  f"{lo.launch1_first:.3f} -> {lo.launch1_last:.3f}", _s(lo.launch1_slope_per_step, 1, "{:+.4f}"))
    con.print(t)

    t = Table(title="Packets the switches sent toward the failed GPU (ovs-ofctl dump-ports of its facing ports)")
    for c in ("recovery", "failed GPU", "new placement", "failure -> rewrite", "after the rewrite", "OCS rules to it"):
        t.add_column(c, justify="right")
    for r in runs:
        p = r.evidence["packets_to_failed_gpu"]
        t.add_row(r.mode, str(r.failed_gpu), str(r.placement_after), str(p["between_failure_and_rewrite"]),
                  str(p["after_rewrite"]), str(len(r.evidence["ocs_rules_to_failed_gpu"])))
    con.print(t)


def timeline_plot(result: TrainingResult, path: Path) -> None:
    """``path`` (PNG): per recovery, every step's duration against its end time (seconds after
    the failure) with the recovery phases marked; below, the loss per step of every recovery."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result.runs
    fig, axes = plt.subplots(len(runs) + 1, 1, figsize=(10, 2.4 * (len(runs) + 1)), squeeze=False)
    colours = plt.get_cmap("tab10")
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
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
