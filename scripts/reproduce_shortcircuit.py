#!/usr/bin/env python3
"""Reproduce "Short-circuiting Rings for Low-Latency AllReduce" (arXiv 2510.03491) on the flow
backend: (a) Ring vs recursive halving-doubling (RHD) vs full-vector recursive doubling (RD) on a
static ring; (b) RHD with circuits to each step's partners, planned by the greedy heuristic and
by the dynamic program, vs Ring, as the reconfiguration delay R grows.

Usage: ``.venv/bin/python scripts/reproduce_shortcircuit.py [--gpus 16 64] [--sizes 4KiB ...]
[--r-us 0.01 0.1 1 3.7 10 1000] [--alpha-us 0] [--delta-us 0.5] [--gbps 400] [--out DIR]``

Prints the tables, writes ``DIR/sweep_a.csv``, ``DIR/sweep_b.csv``, ``DIR/shortcircuit_a.png``
and ``DIR/shortcircuit_b.png`` (default ``DIR`` = ``runs/reproduce_shortcircuit``). Propagation
is the cost model's sum over steps of delta x the step's longest path (hops); RHD's is
2(n-1) delta like Ring's. Spec: ``docs/mechanisms.md`` (short-circuiting).

Ends with the verdicts against the paper (:mod:`emulation.reproduce`; ``DIR/verdicts.json``) and
exits 1 if one missed; they need 16 and 64 GPUs, 4 KiB and R = 3.7 us in the sweeps (the
defaults), else they are ``not run``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from emulation.planners import CostModel, StepCoster, make_plan  # noqa: E402
from emulation.units import format_bytes  # noqa: E402
from emulation.sweep import (  # noqa: E402
    add_model_arguments,
    time_planner,
    model_from_arguments,
    parse_sizes,
    time_plan,
)
from emulation.figures import write_csv  # noqa: E402
from emulation.reproduce import Verdicts  # noqa: E402
from emulation.workloads import build  # noqa: E402
from topologies import ocs_star, static_ring  # noqa: E402

SIZES = ["4KiB", "16KiB", "64KiB", "256KiB", "1MiB", "4MiB", "16MiB", "64MiB"]
R_US = [0.01, 0.1, 1.0, 3.7, 10.0, 1000.0]
ALGS = ("ring", "rhd", "rd")


def sweep_a(gpus: list[int], sizes: list[int], model: CostModel, gbps: float) -> list[dict]:
    """(a): one row per (n, size): completion time (s) and propagation (s) of each algorithm on
    a static ring, and RHD's bandwidth-term ratio to Ring's."""
    rows = []
    for n in gpus:
        f = static_ring(n, gbps)
        coster = StepCoster(f, model)
        for s in sizes:
            row: dict = {"gpus": n, "bytes": s}
            for alg in ALGS:
                w = build(alg, n, s)
                row[f"{alg}_s"] = time_planner(f, w, "none", model).time_s
                costs = [coster.cost(st, f.initial) for st in w.steps]
                row[f"{alg}_prop_s"] = sum(c.dilation for c in costs) * model.delta_s
                row[f"{alg}_bw_s"] = sum(c.max_link_bytes for c in costs) / f.port_bytes_per_s
            row["best"] = min(ALGS, key=lambda a: row[f"{a}_s"])
            rows.append(row)
    return rows


def sweep_b(gpus: list[int], sizes: list[int], reconfiguration_delay_s: list[float], model: CostModel, gbps: float) -> list[dict]:
    """(b): one row per (n, size, R): Ring and static RHD on the ring, RHD planned by greedy and
    dp on an OCS whose base configuration is the ring (seconds), and dp's reconfigurations."""
    rows = []
    for n in gpus:
        for s in sizes:
            ring_f = ocs_star(n, 2, gbps, 0.0, "ring")
            ring = time_planner(ring_f, build("ring", n, s), "none", model).time_s
            rhd = time_planner(ring_f, build("rhd", n, s), "none", model).time_s
            for r in reconfiguration_delay_s:
                f = ocs_star(n, 2, gbps, r, "ring")
                w = build("rhd", n, s)
                greedy = time_planner(f, w, "greedy", model)
                dp_plan = make_plan("dp", f, w, model)
                dp = time_plan(f, dp_plan, model)
                rows.append({"gpus": n, "bytes": s, "reconfiguration_delay_s": r, "ring_s": ring, "rhd_static_s": rhd,
                             "rhd_greedy_s": greedy.time_s, "rhd_dp_s": dp.time_s,
                             "greedy_reconfigurations": greedy.reconfigurations,
                             "dp_reconfigurations": dp.reconfigurations,
                             "dp_actions": "".join("R" if s_.action == "reconfigure" else "k" for s_ in dp_plan.steps),
                             "speedup_dp_over_ring": ring / dp.time_s})
    return rows


def _us(x: float) -> str:
    return f"{x * 1e6:.2f}"


def print_a(rows: list[dict], console: Console, delta_s: float) -> None:
    t = Table(title="(a) AllReduce on a static ring: completion time and propagation (us)")
    for c in ("n", "size", "Ring", "RHD", "RD", "best", "prop Ring", "prop RHD", "prop RD",
              "2(n-1)delta", "bw RHD / bw Ring"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["gpus"]), format_bytes(r["bytes"]), _us(r["ring_s"]), _us(r["rhd_s"]), _us(r["rd_s"]),
                  r["best"].upper(), _us(r["ring_prop_s"]), _us(r["rhd_prop_s"]), _us(r["rd_prop_s"]),
                  _us(2 * (r["gpus"] - 1) * delta_s), f"{r['rhd_bw_s'] / r['ring_bw_s']:.2f}")
    console.print(t)


def print_b(rows: list[dict], console: Console) -> None:
    t = Table(title="(b) switched RHD vs Ring on a ring (us); dp actions per step: k keep, R reconfigure")
    for c in ("n", "size", "R (us)", "Ring", "RHD static", "RHD greedy", "RHD dp", "dp actions",
              "Ring / RHD dp"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["gpus"]), format_bytes(r["bytes"]), f"{r['reconfiguration_delay_s'] * 1e6:g}", _us(r["ring_s"]),
                  _us(r["rhd_static_s"]), _us(r["rhd_greedy_s"]), _us(r["rhd_dp_s"]), r["dp_actions"],
                  f"{r['speedup_dp_over_ring']:.2f}x")
    console.print(t)


def plot(rows_a: list[dict], rows_b: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = sorted({r["gpus"] for r in rows_a})
    fig, axes = plt.subplots(1, len(gpus), figsize=(6 * len(gpus), 4), squeeze=False)
    for ax, n in zip(axes[0], gpus):
        rs = [r for r in rows_a if r["gpus"] == n]
        x = [r["bytes"] for r in rs]
        for alg, style in zip(ALGS, ("o-", "s-", "^-")):
            ax.plot(x, [r[f"{alg}_s"] * 1e6 for r in rs], style, label=alg.upper())
        ax.plot(x, [r["ring_prop_s"] * 1e6 for r in rs], "k:", label="propagation (Ring = RHD)")
        ax.set(xscale="log", yscale="log", xlabel="buffer (bytes)", ylabel="time (us)", title=f"static ring, n = {n}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "shortcircuit_a.png", dpi=120)
    plt.close(fig)
    gpus = sorted({r["gpus"] for r in rows_b})
    fig, axes = plt.subplots(1, len(gpus), figsize=(6 * len(gpus), 4), squeeze=False)
    for ax, n in zip(axes[0], gpus):
        for s in sorted({r["bytes"] for r in rows_b}):
            rs = [r for r in rows_b if r["gpus"] == n and r["bytes"] == s]
            line, = ax.plot([r["reconfiguration_delay_s"] for r in rs], [r["speedup_dp_over_ring"] for r in rs], "o-",
                            label=f"{format_bytes(s)} dp")
            ax.plot([r["reconfiguration_delay_s"] for r in rs], [r["ring_s"] / r["rhd_greedy_s"] for r in rs], "x--",
                    color=line.get_color(), label=f"{format_bytes(s)} greedy")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="reconfiguration delay R (s)", ylabel="Ring time / switched RHD time",
               title=f"short-circuited RHD vs Ring, n = {n}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "shortcircuit_b.png", dpi=120)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[16, 64])
    p.add_argument("--sizes", nargs="+", default=SIZES)
    p.add_argument("--b-sizes", nargs="+", default=["4KiB", "64KiB", "1MiB", "16MiB"], help="sizes of sweep (b)")
    p.add_argument("--r-us", type=float, nargs="+", default=R_US, help="reconfiguration delays R of (b), us")
    add_model_arguments(p, alpha_us=0.0, out="runs/reproduce_shortcircuit")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes)
        b_sizes = parse_sizes(args.b_sizes, "--b-sizes")
        model = model_from_arguments(args)
    except ValueError as e:
        print(f"reproduce_shortcircuit: {e}", file=sys.stderr)
        return 2
    if min(args.gpus) < 3 or any(r < 0 for r in args.r_us):
        print("reproduce_shortcircuit: --gpus must be >= 3 and --r-us >= 0", file=sys.stderr)
        return 2
    from emulation.output import writing

    with writing(args.out):
        console = Console(width=160)
        args.out.mkdir(parents=True, exist_ok=True)
        rows_a = sweep_a(args.gpus, sizes, model, args.gbps)
        print_a(rows_a, console, model.delta_s)
        for n in args.gpus:
            rs = [r for r in rows_a if r["gpus"] == n]
            equal = all(abs(r["ring_prop_s"] - r["rhd_prop_s"]) < 1e-15 for r in rs)
            losses = sum(r["rhd_s"] > r["ring_s"] for r in rs)
            console.print(f"n = {n}: total propagation Ring {_us(rs[0]['ring_prop_s'])} us, RHD "
                          f"{_us(rs[0]['rhd_prop_s'])} us ({'equal' if equal else 'NOT equal'}); RHD slower than "
                          f"Ring at {losses}/{len(rs)} sizes; RHD's bandwidth term is "
                          f"{rs[-1]['rhd_bw_s'] / rs[-1]['ring_bw_s']:.2f}x Ring's (congestion 2^k at step k)")
        rows_b = sweep_b(args.gpus, b_sizes, [r * 1e-6 for r in args.r_us], model, args.gbps)
        print_b(rows_b, console)
        for n in args.gpus:
            rs = [r for r in rows_b if r["gpus"] == n]
            best = max(rs, key=lambda r: r["speedup_dp_over_ring"])
            wins = sorted({r["reconfiguration_delay_s"] for r in rs if r["speedup_dp_over_ring"] > 1})
            console.print(f"n = {n}: switched RHD (dp) beats Ring for R <= {max(wins) * 1e6:g} us at some size; "
                          f"best {best['speedup_dp_over_ring']:.2f}x at {format_bytes(best['bytes'])}, "
                          f"R = {best['reconfiguration_delay_s'] * 1e6:g} us" if wins else f"n = {n}: switched RHD never beats Ring")
        write_csv(args.out / "sweep_a.csv", rows_a)
        write_csv(args.out / "sweep_b.csv", rows_b)
        plot(rows_a, rows_b, args.out)
        console.print(f"wrote {args.out}/sweep_a.csv, sweep_b.csv, shortcircuit_a.png, shortcircuit_b.png")
        return verdicts(rows_a, rows_b).finish(args.out)


def verdicts(rows_a: list[dict], rows_b: list[dict]) -> Verdicts:
    """The paper's claims judged on the two sweeps (module doc)."""
    v = Verdicts("shortcircuit")
    a = [r for r in rows_a if r["gpus"] in (16, 64)]
    small = [r for r in a if r["bytes"] == 4096]
    b = [r for r in rows_b if r["gpus"] == 64 and abs(r["reconfiguration_delay_s"] - 3.7e-6) < 1e-12]
    if {r["gpus"] for r in small} != {16, 64} or not b:
        for c in ("propagation", "ring_optimal", "circuits_win"):
            v.skip(c, "judged at 16 and 64 GPUs, 4 KiB and R = 3.7 us (the defaults)")
        return v
    worst = max(abs(r["ring_prop_s"] - r["rhd_prop_s"]) / r["ring_prop_s"] for r in a)
    v.judge("propagation", worst < 1e-9, f"largest relative difference {worst:.1e} over {len(a)} points")
    v.judge("ring_optimal", all(r["ring_s"] < r["rhd_s"] for r in small),
            "; ".join(f"{r['gpus']} GPUs: Ring {_us(r['ring_s'])} us, RHD {_us(r['rhd_s'])} us" for r in small))
    best = max(b, key=lambda r: r["speedup_dp_over_ring"])
    v.judge("circuits_win", best["speedup_dp_over_ring"] > 1,
            f"best Ring / switched RHD {best['speedup_dp_over_ring']:.2f}x at {format_bytes(best['bytes'])}")
    return v


if __name__ == "__main__":
    sys.exit(main())
