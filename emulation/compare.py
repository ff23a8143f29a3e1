"""Flow-vs-packet agreement: one scenario's ``result.json`` from each backend, side by side.

The relative error of a time is ``(flow - packet) / packet`` (the packet backend is the
reference: it measured real packets). Per run the completion time is compared; per step the
step's duration (``end - start``, dark window included).

Spec: ``docs/architecture.md`` (results: ``ocslab compare``).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation.units import format_bytes


class CompareError(ValueError):
    """The two results do not describe the same scenario and runs."""


def _err(flow: float, packet: float) -> float:
    return (flow - packet) / packet if packet > 0 else float("inf")


def compare(packet: dict, flow: dict) -> dict:
    """Compare two ``result.json`` dicts of one scenario.

    :returns: ``{"scenario", "runs": [{"name", "bytes", "iteration", "packet_s", "flow_s", "error",
        "steps": [{"index", "phase", "action", "packet_s", "flow_s", "error"}]}],
        "max_abs_error"}``; times in real-equivalent seconds, errors as fractions.
    :raises CompareError: the runs or their steps differ.
    """
    if packet.get("backend") != "mininet" or flow.get("backend") != "flow":
        raise CompareError("compare needs a mininet result and a flow result")
    fruns = {(r["name"], r["bytes"], r.get("iteration", 0)): r for r in flow["runs"]}
    out = []
    for p in packet["runs"]:
        it = p.get("iteration", 0)
        f = fruns.get((p["name"], p["bytes"], it))
        if f is None:
            raise CompareError(f"run {p['name']} {format_bytes(p['bytes'])} iteration {it} has no flow result")
        if len(f["steps"]) != len(p["steps"]):
            raise CompareError(f"run {p['name']}: {len(p['steps'])} packet steps but {len(f['steps'])} flow steps")
        steps = []
        for ps, fs in zip(p["steps"], f["steps"]):
            pd, fd = ps["end_s"] - ps["start_s"], fs["end_s"] - fs["start_s"]
            steps.append({"index": ps["index"], "phase": ps["phase"], "action": ps["action"],
                          "packet_s": pd, "flow_s": fd, "error": _err(fd, pd)})
        out.append({"name": p["name"], "bytes": p["bytes"], "iteration": it, "packet_s": p["time_s"], "flow_s": f["time_s"],
                    "error": _err(f["time_s"], p["time_s"]), "steps": steps})
    return {"scenario": packet["scenario"], "runs": out,
            "max_abs_error": max((abs(r["error"]) for r in out), default=0.0)}


def _it(r: dict) -> str:
    return f" #{r['iteration']}" if r.get("iteration") else ""


def write(cmp: dict, out: Path) -> None:
    """Write ``compare.json`` and ``compare.png`` (completion times per run, and every step's
    flow duration against its packet duration) into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(cmp, indent=1))
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
    labels = [f"{r['name']}\n{format_bytes(r['bytes'])}{_it(r)}" for r in cmp["runs"]]
    x = range(len(labels))
    a.bar([i - 0.2 for i in x], [r["packet_s"] * 1e3 for r in cmp["runs"]], 0.4, label="packet (mininet)")
    a.bar([i + 0.2 for i in x], [r["flow_s"] * 1e3 for r in cmp["runs"]], 0.4, label="flow")
    for i, r in enumerate(cmp["runs"]):
        a.annotate(f"{r['error']:+.1%}", (i, max(r["packet_s"], r["flow_s"]) * 1e3), ha="center",
                   va="bottom", fontsize="small")
    a.set_xticks(list(x), labels, fontsize="small")
    a.set_ylabel("completion time (ms, real-equivalent)")
    a.set_yscale("log")
    a.legend()
    a.set_title(f"{cmp['scenario']}: completion time")
    for r in cmp["runs"]:
        b.scatter([s["packet_s"] * 1e6 for s in r["steps"]], [s["flow_s"] * 1e6 for s in r["steps"]], s=12,
                  label=f"{r['name']} {format_bytes(r['bytes'])}")
    lim = [min(s["packet_s"] for r in cmp["runs"] for s in r["steps"]) * 1e6 * 0.8,
           max(s["packet_s"] for r in cmp["runs"] for s in r["steps"]) * 1e6 * 1.2]
    b.plot(lim, lim, "k--", lw=0.8, label="flow = packet")
    b.fill_between(lim, [v * 0.9 for v in lim], [v * 1.1 for v in lim], color="grey", alpha=0.15, label="±10%")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("packet step duration (µs)")
    b.set_ylabel("flow step duration (µs)")
    b.set_title("per step")
    b.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(out / "compare.png", dpi=110)
    plt.close(fig)


def print_compare(cmp: dict, console: Console | None = None, steps: bool = True) -> None:
    """Print the per-run table and (``steps``) one per-step table per run."""
    console = console or Console(width=max(Console().width, 110))
    t = Table(title=f"{cmp['scenario']}: flow vs packet (error = (flow - packet) / packet)")
    for c in ("run", "bytes", "packet (ms)", "flow (ms)", "error"):
        t.add_column(c, justify="left" if c == "run" else "right")
    for r in cmp["runs"]:
        t.add_row(r["name"] + _it(r), format_bytes(r["bytes"]), f"{r['packet_s'] * 1e3:.4f}", f"{r['flow_s'] * 1e3:.4f}",
                  f"{r['error']:+.1%}")
    console.print(t)
    if steps:
        for r in cmp["runs"]:
            st = Table(title=f"{r['name']} {format_bytes(r['bytes'])}: steps", title_justify="left")
            for c in ("step", "phase", "action", "packet (µs)", "flow (µs)", "error"):
                st.add_column(c, justify="right" if c in ("step", "packet (µs)", "flow (µs)", "error") else "left")
            for s in r["steps"]:
                st.add_row(str(s["index"]), s["phase"], s["action"], f"{s['packet_s'] * 1e6:.2f}",
                           f"{s['flow_s'] * 1e6:.2f}", f"{s['error']:+.1%}")
            console.print(st)
    console.print(f"largest completion-time error: {cmp['max_abs_error']:.1%}")
