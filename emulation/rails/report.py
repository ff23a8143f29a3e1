"""A rail result on disk and on screen: ``sweep.csv``, ``overhead.png`` (overhead
against R per mode, the paper's beside it), ``timeline.png`` (one steady iteration per mode: what
every rank did) and tables."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from emulation.envelope import ResultEnvelope
from emulation.figures import console, figure, lanes, legend, table, write_csv
from emulation.flowsim.rail_sweep import FabricRun, RailsResult
from emulation.torchjob.rails_job import TorchJobResult

#: Colours of the timeline, by what a rank does (comm ops by dimension).
COLOURS = {"compute": "#c8c8c8", "pp": "#1f77b4", "dp": "#2ca02c", "edp": "#98df8a", "ep": "#ff7f0e",
           "mp": "#9467bd", "wait-controller": "#d62728", "wait": "#ffffff"}


def write(env: ResultEnvelope, out: Path) -> list[str]:
    """A sweep's ``sweep.csv``, ``overhead.png`` and ``timeline.png``; their names."""
    result = env.result
    write_csv(out / "sweep.csv", ({"gpus": fr.gpus, **p.model_dump()} for fr in [result.main] + result.larger
                                  for p in fr.points))
    overhead_plot(result, out / "overhead.png")
    timeline_plot(result, out / "timeline.png")
    return ["sweep.csv", "overhead.png", "timeline.png"]


def write_packet(env: ResultEnvelope, out: Path) -> list[str]:
    """A torch job's ``timeline.png`` (:func:`packet_timeline_plot`); its name."""
    packet_timeline_plot(env.result, out / "timeline.png")
    return ["timeline.png"]


def overhead_plot(result: RailsResult, path: Path) -> None:
    """Overhead (%) against R (ms, symmetric log) per mode: the scenario's fabric with the paper's
    rows dashed, and each larger fabric in a panel of its own."""
    runs = [result.main] + result.larger
    styles = {"on-demand": "#1f77b4", "speculative": "#d62728", "speculative-deferred": "#9467bd"}
    paper = result.paper or {}
    with figure(path, 1, len(runs), size=(6.5 * len(runs), 4.2)) as (fig, axes):
        for k, (ax, fr) in enumerate(zip(axes[0], runs)):
            for mode, colour in styles.items():
                pts = [p for p in fr.points if p.mode == mode]
                if pts:
                    ax.plot([p.reconfiguration_delay_s * 1e3 for p in pts], [p.overhead * 100 for p in pts], "o-",
                            color=colour, ms=4, label=f"{mode} (ocslab)")
            base = paper.get("baseline_s")
            if k == 0 and base:
                delays = sorted({p.reconfiguration_delay_s * 1e3 for p in fr.points if p.mode != "eps"})
                for mode, row in paper.get("times_s", {}).items():
                    have = [(d, x) for d, x in zip(delays, row) if x is not None]
                    ax.plot([d for d, _ in have], [(x / base - 1) * 100 for _, x in have], "x--",
                            color=styles.get(mode, "k"), alpha=0.7, label=f"{mode} (paper)")
            ax.set_xscale("symlog", linthresh=10)
            ax.set_xlabel("reconfiguration delay R (ms)")
            ax.set_ylabel("iteration time over electrical rails (%)")
            ax.set_title(f"{fr.model}, {fr.gpus} GPUs ({_par(fr.parallel)})", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"{result.model}: overhead of photonic rails against R")


def draw_lanes(ax, timeline: dict, names: list[str]) -> None:
    """Draw ``timeline`` (``{"t0", "t1", "intervals": [[lane, t0, t1, kind, dim, phase]]}``,
    seconds) on ``ax`` (:func:`emulation.figures.lanes`): lane i (labelled ``names[i]``, top to
    bottom) holds its intervals clipped to ``[t0, t1]``, from 0 at ``t0``, coloured by
    :data:`COLOURS`: compute, waiting on the controller, any other wait (white) or the comm op's
    dimension."""
    t0, t1 = timeline["t0"], timeline["t1"]
    lanes(ax, ((lane, max(a, t0) - t0, min(b, t1) - max(a, t0),
                kind if kind in ("compute", "wait-controller") else ("wait" if kind.startswith("wait") else dim))
               for lane, a, b, kind, dim, _phase in timeline["intervals"] if min(b, t1) > max(a, t0)), dict(COLOURS))
    ax.set_xlim(0, t1 - t0)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()


def timeline_plot(result: RailsResult, path: Path) -> None:
    """One steady iteration per mode: a lane per rank (server), coloured by compute, the comm
    dimension, or waiting on the controller."""
    modes = list(result.timeline)
    servers = [f"server {r}" for r in range(result.main.servers)]
    with figure(path, len(modes), 1, size=(11, 1.0 + 0.45 * result.main.servers * len(modes)),
                rect=(0, 0.05, 1, 1)) as (fig, axes):
        for ax, mode in zip(axes[:, 0], modes):
            tl = result.timeline[mode]
            draw_lanes(ax, tl, servers)
            R = "" if mode == "eps" else f", R = {result.timeline_delay_s * 1e3:g} ms"
            ax.set_title(f"{mode}{R}: one iteration, {tl['t1'] - tl['t0']:.2f} s", fontsize=9)
        axes[-1, 0].set_xlabel("seconds into the iteration")
        legend(fig, COLOURS, ("wait",), loc="lower center", ncol=len(COLOURS) - 1, fontsize=7)


def _table(fr: FabricRun, paper: dict | None, title: str) -> Table:
    """Per delay and mode: ``iteration s  overhead  reconfigurations per iteration``; the
    paper's ``s (overhead)`` beside its modes."""
    modes = [m for m in dict.fromkeys(p.mode for p in fr.points) if m != "eps"]
    delays = sorted({p.reconfiguration_delay_s for p in fr.points if p.mode != "eps"})
    base = (paper or {}).get("baseline_s")
    published = (paper or {}).get("times_s", {}) if base else {}
    columns = ["R (ms)"]
    for m in modes:
        columns += [f"{m}: s, overhead, reconf."] + ([f"paper {m}"] if m in published else [])
    by = {(p.mode, p.reconfiguration_delay_s): p for p in fr.points}
    rows = []
    for i, R in enumerate(delays):
        row = [f"{R * 1e3:g}"]
        for m in modes:
            p = by[(m, R)]
            row.append(f"{p.iteration_s:.2f} {p.overhead:+6.1%} {p.reconfigurations:5.1f}")
            if m in published:
                x = published[m][i]
                row.append("-" if x is None else f"{x:.2f} {x / base - 1:+6.1%}")
        rows.append(row)
    return table(title, columns, rows)


def print_summary(env: ResultEnvelope) -> None:
    """A sweep's tables (ours beside the paper's) and the larger fabrics' wall times."""
    result, name, con = env.result, env.scenario, console(160)
    m = result.main
    paper = result.paper
    con.print(f"{name}: {result.model} ({result.params / 1e9:.2f} B parameters) on {m.gpus} GPUs "
              f"({m.servers} servers x {m.gpus_per_server}), {_par(m.parallel)}; electrical rails "
              f"{m.baseline_s:.2f} s per iteration" + (f" (paper: {paper['baseline_s']:.2f} s without a controller)"
                                                       if paper and paper.get("baseline_s") else "")
              + f"; {m.phases[0]}-{m.phases[1]} rail phases per rank; controller round trip "
              f"{result.control_rtt_s * 1e3:g} ms")
    con.print(_table(m, paper, f"iteration time against R, {m.gpus} GPUs"))
    for fr in result.larger:
        con.print(_table(fr, None, f"{fr.model} on {fr.gpus} GPUs ({fr.servers} servers x {fr.gpus_per_server}), "
                                   f"{_par(fr.parallel)}: "
                                   f"electrical {fr.baseline_s:.2f} s"))
        con.print(f"{fr.gpus} GPUs: {len(fr.points)} replays in {fr.wall_s:.1f} s (slowest {fr.replay_s:.2f} s)")


def _par(p: dict) -> str:
    ep = f" EP={p['ep']}" if p.get("ep", 1) > 1 else ""
    return f"TP={p['tp']} PP={p['pp']} DP={p['dp']}{ep}, {p['micro_batches']} micro-batches"


def packet_timeline_plot(result: TorchJobResult, path: Path) -> None:
    """The second iteration of each mode's torch job: a lane per GPU, coloured by compute, the
    dimension of each comm op, and time waiting on the controller (red)."""
    modes, gpus = list(result.runs), [f"GPU {g}" for g in range(result.gpus)]
    with figure(path, len(modes), 1, size=(11, 1.2 + 0.32 * result.gpus * len(modes)),
                rect=(0, 0.05, 1, 1)) as (fig, axes):
        for ax, mode in zip(axes[:, 0], modes):
            run = result.runs[mode]
            draw_lanes(ax, run.timeline, gpus)
            dark = [r.measured_s for r in run.reconfigurations]
            ax.set_title(f"{mode}: iteration {run.iteration_s:.2f} s (flow {run.flow_iteration_s:.2f} s, "
                         f"{run.deviation:+.1%}); {len(dark)} rewires, dark "
                         f"{min(dark, default=0) * 1e3:.0f}-{max(dark, default=0) * 1e3:.0f} ms for R = "
                         f"{result.reconfiguration_delay_s * 1e3:g} ms", fontsize=9)
        axes[-1, 0].set_xlabel("seconds into the second iteration")
        legend(fig, COLOURS, ("wait", "ep", "edp"), loc="lower center", ncol=len(COLOURS) - 3, fontsize=7)


def print_packet(env: ResultEnvelope) -> None:
    """A torch job's row per mode: measured and flow iteration time, waits, rewires, dark
    windows, loss."""
    res, rows = env.result, []
    for mode, r in res.runs.items():
        dark, loss = [x.measured_s for x in r.reconfigurations], r.loss
        rows.append([mode, f"{r.iteration_s:.3f}", f"{r.flow_iteration_s:.3f}", f"{r.deviation:+.1%}",
                     f"{r.control_wait_s:.3f}", len(dark),
                     f"{min(dark, default=0) * 1e3:.1f}-{max(dark, default=0) * 1e3:.1f}",
                     f"{loss[0]:.3f} -> {loss[-1]:.3f}" if loss else "-", f"{r.control_rtt_s * 1e3:.2f}"])
    console(160).print(table(
        f"{env.scenario}: torch job on {res.gpus} emulated GPUs ({res.servers} servers x {res.gpus_per_server}), "
        f"links {res.link_mbps:g} Mbit/s, R = {res.reconfiguration_delay_s * 1e3:g} ms"
        + "".join(f"; {mode} emulated at {res.link_mbps / r.time_dilation:g} Mbit/s (time dilation {r.time_dilation:g},"
                  f" times below divided by it)" for mode, r in res.runs.items() if r.time_dilation != 1),
        ("mode", "iteration (s)", "flow (s)", "deviation", "controller wait (s/it.)", "rewires", "dark measured (ms)",
         "loss first -> last", "round trip (ms)"), rows))
