#!/usr/bin/env python3
"""Reproduce SWOT's point (reconfiguration overlapped with transmission, arXiv 2510.19322) on
both backends: recursive halving-doubling (RHD) AllReduce with circuits to each step's peers, on
one OCS with 2 ports per GPU starting in a ring, swept over the reconfiguration delay R.

Three ways to run it, each on the flow and on the packet backend:

- ``always``, round-synchronous (the baseline): every step rewires every port to its peer and
  starts once the previous step has finished and the dark window R has passed;
- ``always``, dependency-driven: the same plan; a transfer starts as soon as its chunks have
  arrived and its circuit is live (alpha overlaps R; steps on one configuration need no barrier);
- ``overlap``, dependency-driven: every GPU keeps one port on the current step's peer and wires
  the other to the next step's peer (:mod:`emulation.planners.overlap`), so each step runs on
  kept circuits while the other ports are dark.

Usage: ``.venv/bin/python scripts/reproduce_swot.py [--gpus 8 16] [--sizes 1MiB 16MiB]
[--r-us 10 30 100] [--flow-r-us 1 3 10 30 100 300 1000] [--no-packet] [--out DIR]``

Prints one table per GPU count with the time saved against the baseline beside SWOT's reported
range, and the packet backend's agreement with the flow backend; writes ``DIR/swot.csv`` and each
packet scenario's results under ``DIR/packet/`` (default ``DIR`` = ``runs/reproduce_swot``).
Ends with one summary line and the verdicts against the paper (:mod:`emulation.reproduce`;
``DIR/verdicts.json``): the largest saving of the flow sweep against SWOT's, and the
dependency-driven packet runs' agreement with the flow backend; exits 1 if one missed.
Docs: ``docs/papers/swot.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from emulation.figures import table, write_csv  # noqa: E402
from emulation.reproduce import Verdicts  # noqa: E402
from emulation.units import format_bytes, parse_bytes  # noqa: E402

#: SWOT's reported reduction of collective time (simulation): up to 89.7%.
PAPER_MAX_SAVING = 0.897
#: The three ways compared: (column, planner, semantics).
WAYS = (("always-rs", "always", "round-synchronous"), ("always-dd", "always", "dependency-driven"),
        ("overlap-dd", "overlap", "dependency-driven"))
SEMANTICS = ("round-synchronous", "dependency-driven")


def scenario_text(gpus: int, r_s: float, sizes: list[int], semantics: str, backend: str) -> str:
    """The scenario of one (GPU count, R, semantics): RHD under ``always`` and ``overlap``."""
    return (f"name: swot-{gpus}-{r_s * 1e6:g}us-{semantics}\n"
            f"fabric: {{topology: ocs-star, gpus: {gpus}, ports_per_gpu: 2, port_gbps: 400, "
            f"reconfiguration_delay_s: {r_s!r}, initial: ring}}\n"
            "cost: {alpha_s: 5.0e-6, delta_s: 0.0}\n"
            f"sizes: [{', '.join(str(s) for s in sizes)}]\n"
            "runs:\n  - {name: always, algorithm: rhd, planner: always}\n"
            "  - {name: overlap, algorithm: rhd, planner: overlap}\n"
            f"semantics: {semantics}\nemulation: {{link_mbps: auto, byte_scale: 0.1}}\nbackend: {backend}\n")


def run_scenario(text: str, backend: str, out: Path) -> dict[tuple[str, int], float]:
    """Run one scenario on ``backend`` (results under ``out`` for the packet backend); ``{(run,
    bytes): time_s}``."""
    from emulation import kinds

    out.mkdir(parents=True, exist_ok=True)
    path = out / "scenario-in.yaml"
    path.write_text(text)
    kind, sc = kinds.load(path)
    env = kinds.run_scenario(kind, sc, out / backend, backend, show=False)
    return {(r.name, r.bytes): r.time_s for r in env.result.runs}


def sweep(gpus: list[int], sizes: list[int], r_packet: list[float], r_flow: list[float], packet: bool,
          out: Path, console: Console) -> list[dict]:
    """One row per (GPU count, R, size): every way's time on the flow backend and, at the R of
    ``r_packet`` when ``packet``, on the packet backend (seconds)."""
    rows = []
    for n in gpus:
        for r in sorted(set(r_flow) | (set(r_packet) if packet else set())):
            times: dict[tuple[str, str, str, int], float] = {}
            backends = ("flow", "packet") if packet and r in r_packet else ("flow",)
            for sem in SEMANTICS:
                for backend in backends:
                    t0 = time.monotonic()
                    got = run_scenario(scenario_text(n, r, sizes, sem, backend), backend,
                                       out / "packet" / f"{n}gpus-{r * 1e6:g}us-{sem}")
                    if backend == "packet":
                        console.print(f"  {n} GPUs, R = {r * 1e6:g} us, {sem}: packets in {time.monotonic() - t0:.0f} s")
                    for (name, size), t in got.items():
                        times[(backend, name, sem, size)] = t
            for s in sizes:
                row = {"gpus": n, "reconfiguration_delay_s": r, "bytes": s}
                for col, planner, sem in WAYS:
                    for backend in backends:
                        row[f"{col}_{backend}_s"] = times[(backend, planner, sem, s)]
                for backend in backends:
                    base = row[f"always-rs_{backend}_s"]
                    row[f"saved_{backend}"] = 1 - row[f"overlap-dd_{backend}_s"] / base
                    row[f"saved_dd_{backend}"] = 1 - row[f"always-dd_{backend}_s"] / base
                    row[f"saved_best_{backend}"] = max(row[f"saved_{backend}"], row[f"saved_dd_{backend}"])
                if "packet" in backends:
                    err = {c: abs(row[f"{c}_mininet_s"] / row[f"{c}_flow_s"] - 1) for c, _p, _s in WAYS}
                    row["max_error"] = max(err.values())
                    row["max_error_dd"] = max(e for (c, _p, sem), e in zip(WAYS, err.values()) if sem != SEMANTICS[0])
                rows.append(row)
    return rows


def print_rows(rows: list[dict], console: Console) -> None:
    """One table per GPU count."""
    for n in sorted({r["gpus"] for r in rows}):
        out = []
        for r in (x for x in rows if x["gpus"] == n):
            pk = "packet" if "max_error" in r else None
            cell = lambda c: (f"{r[f'{c}_flow_s'] * 1e6:.1f}" + (f" / {r[f'{c}_mininet_s'] * 1e6:.1f}" if pk else ""))  # noqa: E731
            out.append([f"{r['reconfiguration_delay_s'] * 1e6:g}", format_bytes(r["bytes"]),
                        *(cell(c) for c, _p, _s in WAYS),
                        f"{r['saved_dd_flow']:.1%}" + (f" / {r['saved_dd_mininet']:.1%}" if pk else ""),
                        f"{r['saved_flow']:.1%}" + (f" / {r['saved_mininet']:.1%}" if pk else ""),
                        f"{r['max_error']:.1%}" if pk else "-"])
        console.print(table(
            f"RHD on {n} GPUs x 2 ports, 400 Gbit/s, alpha 5 us: time (us, flow / packets) and time saved against "
            f"always round-synchronous (SWOT: up to {PAPER_MAX_SAVING:.1%})",
            ("R (us)", "size", "always, round-sync.", "always, dep.-driven", "overlap, dep.-driven",
             "saved: dep.-driven", "saved: overlap", "packets vs flow (max)"), out))


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[8, 16])
    p.add_argument("--sizes", nargs="+", default=["1MiB", "16MiB"])
    p.add_argument("--r-us", type=float, nargs="+", default=[10.0, 30.0, 100.0], help="R of the packet runs, us")
    p.add_argument("--flow-r-us", type=float, nargs="+", default=[1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0],
                   help="R of the flow-only sweep, us")
    p.add_argument("--no-packet", action="store_true", help="the flow backend only")
    p.add_argument("--out", type=Path, default=Path("runs/reproduce_swot"))
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    try:
        sizes = [parse_bytes(s) for s in args.sizes]
    except ValueError as e:
        print(f"reproduce_swot: --sizes: {e}", file=sys.stderr)
        return 2
    bad = [n for n in args.gpus if n < 4 or n & (n - 1)]
    if bad:
        print(f"reproduce_swot: --gpus: RHD needs a power of two >= 4, got {bad[0]}", file=sys.stderr)
        return 2
    if any(r < 0 for r in args.r_us + args.flow_r_us):
        print("reproduce_swot: --r-us and --flow-r-us must be >= 0", file=sys.stderr)
        return 2
    from emulation.output import writing

    t0 = time.monotonic()
    with writing(args.out, clear=True):
        console = Console(width=170)
        rows = sweep(args.gpus, sizes, [r * 1e-6 for r in args.r_us], [r * 1e-6 for r in args.flow_r_us],
                     not args.no_packet, args.out, console)
        print_rows(rows, console)
        header = list(dict.fromkeys(k for r in rows for k in r))  # packet columns only where packets ran
        write_csv(args.out / "swot.csv", ([r.get(k, "") for k in header] for r in rows), header)
    best = [r["saved_best_flow"] for r in rows]
    pk = [r for r in rows if "max_error" in r]
    line = (f"SWOT: dependency-driven with the better plan saves {min(best):.1%}..{max(best):.1%} of round-synchronous "
            f"RHD's time on the flow backend (paper: up to {PAPER_MAX_SAVING:.1%})")
    if pk:
        line += (f"; on packets {min(r['saved_best_mininet'] for r in pk):.1%}.."
                 f"{max(r['saved_best_mininet'] for r in pk):.1%}; packets within "
                 f"{max(r['max_error_dd'] for r in pk):.1%} of flow dependency-driven ({2 * len(pk)} runs), "
                 f"{max(r['max_error'] for r in pk):.1%} with the round-synchronous ones")
    console.print(line + f" ({time.monotonic() - t0:.0f} s)")
    v = Verdicts("swot")
    if sorted(args.gpus) == [8, 16] and min(args.flow_r_us) <= 1 and max(args.flow_r_us) >= 1000:
        top = max(rows, key=lambda r: r["saved_best_flow"])
        v.judge("saving", top["saved_best_flow"], f"{top['gpus']} GPUs, R = {top['reconfiguration_delay_s'] * 1e6:g} "
                f"us, {format_bytes(top['bytes'])}")
    else:
        v.skip("saving", "judged over 8 and 16 GPUs and R from 1 to 1000 us (the defaults)")
    if pk:
        worst = max(pk, key=lambda r: r["max_error_dd"])
        v.judge("packet_agreement", worst["max_error_dd"], f"{2 * len(pk)} dependency-driven runs; worst at "
                f"{worst['gpus']} GPUs, R = {worst['reconfiguration_delay_s'] * 1e6:g} us, {format_bytes(worst['bytes'])}")
    return v.finish(args.out, not args.no_packet)


if __name__ == "__main__":
    sys.exit(main())
