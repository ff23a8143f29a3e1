"""Results on disk and on screen: ``result.json``, ``steps.csv``, ``timeline.png``, a table.

Spec: ``docs/architecture.md`` (results).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from emulation.drops import summarise
from emulation.envelope import ResultEnvelope
from emulation.figures import console as wide_console
from emulation.figures import figure, lanes, legend, table, write_csv
from emulation.scale import FRAMES_PER_STEP, MIN_STEP_WALL_S
from emulation.units import format_bytes


#: Steps of a ring collective on ``n`` ranks, as a multiple of ``n - 1``.
RING_STEPS = {"allreduce": 2, "reducescatter": 1, "allgather": 1}


def ring_alpha_beta_s(ranks: int, nbytes: int, alpha_s: float, port_gbps: float, collective: str = "allreduce",
                      delta_s: float = 0.0) -> float:
    """Seconds of a ring ``collective`` (``allreduce``, ``reducescatter`` or ``allgather``) of
    ``nbytes`` per rank on ``ranks`` ranks joined by a ring of one-hop circuits of ``port_gbps``:
    ``k (alpha + delta) + k/n s / B`` with ``k = 2(n-1)`` steps for AllReduce and ``n-1`` for the
    other two (the alpha-beta model, ``docs/mechanisms.md``; delta the per-hop propagation delay).

    :raises KeyError: another collective."""
    n = ranks
    k = RING_STEPS[collective] * (n - 1)
    return k * (alpha_s + delta_s) + k / n * nbytes * 8 / (port_gbps * 1e9)


def write(env: ResultEnvelope, out: Path) -> list[str]:
    """Write ``steps.csv`` and ``timeline.png`` into ``out`` (beside ``result.json``); their names."""
    write_csv(out / "steps.csv", ([r.name, r.bytes, r.iteration, s.index, s.phase, s.action, s.start_s, s.end_s,
                                   s.reconfiguration_delay_s, s.dark_window_measured_s, s.retransmissions,
                                   *summarise(s.drops or {}).values()]
                                  for r in env.result.runs for s in r.steps),
              ["run", "bytes", "iteration", "step", "phase", "action", "start_s", "end_s", "reconfiguration_delay_s",
               "dark_window_measured_s", "retransmissions", "drops_modelled", "drops_emulator"])
    timeline(env, out / "timeline.png")
    return ["steps.csv", "timeline.png"]


def timeline(env: ResultEnvelope, path: Path) -> None:
    """One row per run (the first three iterations of each): its steps as bars (colour by
    phase), dark windows in black, the straggler's arrival as a red tick."""
    runs = [r for r in env.result.runs if r.iteration < 3]
    with figure(path, size=(10, 0.5 * len(runs) + 1.5)) as (fig, axes):
        ax = axes[0, 0]
        colours = lanes(ax, ((y, s.start_s * 1e3, (s.end_s - s.start_s) * 1e3, s.phase)
                             for y, r in enumerate(runs) for s in r.steps), edges=True)
        lanes(ax, ((y, s.start_s * 1e3, s.dark_window_measured_s * 1e3, "dark") for y, r in enumerate(runs)
                   for s in r.steps if s.dark_window_measured_s), {"dark": "black"}, height=0.4)
        for y, r in enumerate(runs):
            if r.straggler_delay_s:
                ax.plot([r.straggler_delay_s * 1e3] * 2, [y - 0.45, y + 0.45], color="red", lw=2)
        ax.set_yticks(range(len(runs)), [f"{r.name} {format_bytes(r.bytes)}" + (f" #{r.iteration}" if r.iteration else "")
                                         for r in runs])
        ax.set_xlabel("time (ms, real-equivalent)")
        ax.set_title(f"{env.scenario} ({env.backend}): steps; black = dark window")
        legend(ax, colours, loc="lower right", fontsize="small")


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def print_summary(env: ResultEnvelope, console: Console | None = None) -> None:
    """The summary table: one row per run and size (and iteration, or per-iteration statistics
    when the scenario has several)."""
    result = env.result
    console = console or wide_console(120)
    straggler = result.straggler is not None
    if result.iterations > 1:
        iteration_table(env, console)
    else:
        rows = []
        cols = ["run", "bytes", "time (ms)", "algbw (Gbit/s)", "busbw (Gbit/s)", "reconfigs",
                "dark req/meas (µs)", "checks"]
        if straggler:
            cols[3:3] = ["D (ms)", "after arrival (ms)"]
        moe = any(r.padding_bytes or r.slots for r in result.runs)
        if moe:  # no reconfiguring steps; show the rotor instead
            cols[cols.index("reconfigs"):cols.index("checks")] = ["padding (all GPUs)", "slots/turn", "slot util"]
            cols[cols.index("bytes")] = "bytes/GPU"
        relays = any(r.slots and r.slots.forwarding == "two-hop" for r in result.runs)
        if relays:
            cols.insert(cols.index("checks"), "relayed")
        packets = env.backend == "packet"
        if packets:  # what the emulator's own counters say about the run (emulation/drops.py)
            cols[cols.index("checks"):cols.index("checks")] = ["retx", "drops mod/emu"]
        for r in result.runs:
            dark = [(s.reconfiguration_delay_s, s.dark_window_measured_s) for s in r.steps
                    if s.dark_window_measured_s is not None]
            dtxt = f"{dark[0][0] * 1e6:.1f}/{max(d[1] for d in dark) * 1e6:.1f}" if dark else "-"
            d = r.straggler_delay_s
            row = [r.name, format_bytes(r.bytes), f"{r.time_s * 1e3:.3f}", f"{r.algbw_gbps:.1f}", f"{r.busbw_gbps:.1f}",
                   str(r.reconfigurations), dtxt, ("ok" if r.checks.ok else "FAIL") if r.checks else "-"]
            if straggler:
                row[3:3] = [f"{d * 1e3:.3f}", f"{(r.time_s - d) * 1e3:.3f}"]
            if moe:
                sl = r.slots
                short = {"round-robin": "rr", "weighted-round-robin": "wrr", "bvn": "bvn"}
                i = cols.index("padding (all GPUs)")
                row[i:i + 2] = [_mib(r.padding_bytes),
                              f"{sl.slots_per_turn} {short.get(sl.method, sl.method)}" if sl else "-",
                              f"{sl.slot_utilisation:.2f}" if sl else "-"]
            if relays:
                two_hop = r.slots and r.slots.forwarding == "two-hop"
                row.insert(cols.index("relayed"), _mib(r.slots.relayed_bytes) if two_hop else "-")
            if packets:
                drops = summarise(r.drops or {})
                row[cols.index("retx"):cols.index("retx")] = [
                    str(sum(s.retransmissions or 0 for s in r.steps)), f"{drops['modelled']}/{drops['artefacts']}"]
            rows.append(row)
        console.print(table(f"{env.scenario} — backend {env.backend}, {result.semantics}", cols, rows, left=["run"]))
    for r in result.runs:
        if r.algorithm == "ring" and r.planner == "none" and not r.iteration and r.collective in RING_STEPS:
            pred = ring_alpha_beta_s(r.ranks, r.bytes, result.cost["alpha_s"], result.fabric.port_gbps, r.collective,
                                     result.cost.get("delta_s", 0.0))
            verb = "simulated" if env.backend == "flow" else "measured"
            d = r.straggler_delay_s
            got = r.time_s - d
            console.print(f"{r.name} {format_bytes(r.bytes)} ({r.collective} on a ring): alpha-beta {pred * 1e3:.3f} ms, {verb} "
                          f"{got * 1e3:.3f} ms{' after the straggler arrived' if d else ''} "
                          f"({(got - pred) / pred:+.1%})")
    if result.scale:
        s = result.scale
        console.print(f"scale: links {s['link_mbps']} Mbit/s, byte scale {s['byte_scale']}, TDF {s['tdf']:.0f}"
                      + (f", MTU {result.mtu}" if result.mtu else ""))
        raised = {f"{r.name} {format_bytes(r.bytes)}": r.byte_scale for r in result.runs
                  if r.byte_scale is not None and r.byte_scale != s["byte_scale"]}
        if raised:
            console.print("short steps emulated at a larger byte scale (each step's largest transfer at least "
                          f"{FRAMES_PER_STEP} frames and {MIN_STEP_WALL_S * 1e3:.0f} ms on the wire): " + ", ".join(
                              f"{k} {v:.3g} (TDF {v / s['byte_scale'] * s['tdf']:.0f})" for k, v in raised.items()))
    if result.calibration:
        c = result.calibration
        probes = ", ".join(f"{p['link_mbps']:g} Mbit/s {p['efficiency']:.0%}" for p in c["probes"])
        how = "auto" if c["requested"] is None else f"asked {c['requested']:g}"
        console.print(f"calibration ({how}): {c['link_mbps']:g} Mbit/s per link reaches the {c['target']:.0%} target "
                      f"under full load (probes: {probes})")
    if result.headroom:
        h = result.headroom
        console.print(f"headroom: {h['efficiency']:.0%} of link rate at {h['offered_mbps']:.0f} Mbit/s offered"
                      + ("; per server: " + ", ".join(f"{k} {v:.0%}" for k, v in h["servers"].items())
                         if h.get("servers") else ""))
    if result.servers:
        console.print(f"servers: the fabric was spread over {', '.join(result.servers)} (Mininet's cluster edition)")
    for w in env.warnings:
        console.print(f"[bold yellow]warning:[/] {w}")


def iteration_stats(env: ResultEnvelope) -> list[dict]:
    """Per (run, size): statistics of the per-iteration completion time (seconds).

    :returns: ``[{"name", "bytes", "iterations", "mean_s", "p50_s", "p95_s", "p99_s", "max_s",
        "mean_delay_s", "failed_checks"}]`` in the order of ``result.runs``.
    """
    result = env.result
    import numpy as np

    groups: dict[tuple[str, int], list] = {}
    for r in result.runs:
        groups.setdefault((r.name, r.bytes), []).append(r)
    out = []
    for (name, nbytes), rs in groups.items():
        t = np.array([r.time_s for r in rs])
        out.append({"name": name, "bytes": nbytes, "iterations": len(rs), "mean_s": float(t.mean()),
                    "p50_s": float(np.percentile(t, 50)), "p95_s": float(np.percentile(t, 95)),
                    "p99_s": float(np.percentile(t, 99)), "max_s": float(t.max()),
                    "mean_delay_s": float(np.mean([r.straggler_delay_s for r in rs])),
                    "failed_checks": sum(r.checks is not None and not r.checks.ok for r in rs)})
    return out


def iteration_table(env: ResultEnvelope, console: Console) -> None:
    """Print :func:`iteration_stats` as a table (times in ms)."""
    rows = [[st["name"], format_bytes(st["bytes"]),
             *(f"{st[k] * 1e3:.3f}" for k in ("mean_s", "p50_s", "p95_s", "p99_s", "max_s", "mean_delay_s")),
             "ok" if not st["failed_checks"] else f"{st['failed_checks']} FAIL"] for st in iteration_stats(env)]
    console.print(table(f"{env.scenario} — backend {env.backend}: per-iteration collective time over "
                        f"{env.result.iterations} iterations",
                        ("run", "bytes", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "max (ms)", "mean D (ms)",
                         "checks"), rows, left=["run"]))
