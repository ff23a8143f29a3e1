"""Results on disk and on screen: ``result.json``, ``steps.csv``, ``timeline.png``, a table.

Spec: ``shared/DESIGN.md`` (results).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation.results import RunResult
from emulation.scenario import format_bytes


def ring_alpha_beta_s(ranks: int, nbytes: int, alpha_s: float, port_gbps: float) -> float:
    """Ring AllReduce cost ``2(n-1) alpha + 2(n-1)/n s / B`` (``specs/collectives.md``)."""
    n = ranks
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * nbytes * 8 / (port_gbps * 1e9)


def write(result: dict, out: Path, scenario_yaml: str) -> None:
    """Write ``scenario.yaml``, ``result.json``, ``steps.csv`` and ``timeline.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(scenario_yaml)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    with open(out / "steps.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "bytes", "step", "phase", "action", "start_s", "end_s",
                    "dark_window_requested_s", "dark_window_measured_s"])
        for r in result["runs"]:
            for s in r["steps"]:
                w.writerow([r["name"], r["bytes"], s["index"], s["phase"], s["action"], s["start_s"],
                            s["end_s"], s["dark_window_requested_s"], s["dark_window_measured_s"]])
    timeline(result, out / "timeline.png")


def timeline(result: dict, path: Path) -> None:
    """One row per run: its steps as bars (colour by phase), dark windows in black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [RunResult.from_json(r) for r in result["runs"]]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(runs) + 1.5))
    colours = {}
    palette = plt.get_cmap("tab10")
    for y, r in enumerate(runs):
        for s in r.steps:
            c = colours.setdefault(s.phase, palette(len(colours) % 10))
            ax.barh(y, (s.end_s - s.start_s) * 1e3, left=s.start_s * 1e3, color=c, edgecolor="white")
            if s.dark_window_measured_s:
                ax.barh(y, s.dark_window_measured_s * 1e3, left=s.start_s * 1e3, color="black", height=0.4)
    ax.set_yticks(range(len(runs)), [f"{r.name} {format_bytes(r.bytes)}" for r in runs])
    ax.set_xlabel("time (ms, real-equivalent)")
    ax.set_title(f"{result['scenario']} ({result['backend']}): steps; black = dark window")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, list(colours), loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_summary(result: dict, console: Console | None = None) -> None:
    """The summary table: one row per run and size."""
    console = console or Console(width=max(Console().width, 120))
    sem = result.get("semantics", "round-synchronous")
    t = Table(title=f"{result['scenario']} — backend {result['backend']}, {sem}")
    for col in ("run", "bytes", "time (ms)", "algbw (Gbit/s)", "busbw (Gbit/s)", "reconfigs",
                "dark req/meas (µs)", "checks"):
        t.add_column(col, justify="right" if col != "run" else "left")
    for r in result["runs"]:
        dark = [(s["dark_window_requested_s"], s["dark_window_measured_s"]) for s in r["steps"]
                if s["dark_window_measured_s"] is not None]
        dtxt = f"{dark[0][0] * 1e6:.1f}/{max(d[1] for d in dark) * 1e6:.1f}" if dark else "-"
        t.add_row(r["name"], format_bytes(r["bytes"]), f"{r['time_s'] * 1e3:.3f}",
                  f"{r['algbw_gbps']:.1f}", f"{r['busbw_gbps']:.1f}",
                  str(sum(s["action"] == "reconfigure" for s in r["steps"])), dtxt,
                  ("ok" if r["checks"]["ok"] else "FAIL") if r.get("checks") else "-")
    console.print(t)
    f, cost = result["fabric"], result["cost"]
    for r in result["runs"]:
        if r["algorithm"] == "ring" and r["planner"] == "none":
            pred = ring_alpha_beta_s(r["ranks"], r["bytes"], cost["alpha_s"], f["port_gbps"])
            verb = "simulated" if result["backend"] == "flow" else "measured"
            console.print(f"ring {format_bytes(r['bytes'])}: alpha-beta {pred * 1e3:.3f} ms, {verb} "
                          f"{r['time_s'] * 1e3:.3f} ms ({(r['time_s'] - pred) / pred:+.1%})")
    if "scale" in result:
        s = result["scale"]
        console.print(f"scale: links {s['link_mbps']} Mbit/s, byte scale {s['byte_scale']}, TDF {s['tdf']:.0f}")
    if "headroom" in result:
        h = result["headroom"]
        console.print(f"headroom: {h['efficiency']:.0%} of link rate at {h['offered_mbps']:.0f} Mbit/s offered")
    for w in result.get("warnings", []):
        console.print(f"[bold yellow]warning:[/] {w}")
