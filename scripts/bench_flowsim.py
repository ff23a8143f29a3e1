#!/usr/bin/env python3
"""Benchmark of the flow-level backend (a benchmark, not a test): wall-clock seconds and
simulated transfers per second for Ring and RHD AllReduce at 128, 512 and 1,024 GPUs on a
static ring and on a non-blocking switch (EPS).

Usage: ``.venv/bin/python scripts/bench_flowsim.py [--gpus 128 512 1024] [--bytes 1GiB]
[--semantics round-synchronous|dependency-driven] [--json runs/bench_flowsim.json]``

Times are split into building the workload, planning, and simulating; the targets
(1,024-GPU Ring in < 5 s, 1,024-GPU RHD on a ring in < 30 s) concern the simulation.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from emulation.flowsim import simulate  # noqa: E402
from emulation.planners import make_plan  # noqa: E402
from emulation.units import format_bytes, parse_bytes  # noqa: E402
from emulation.workloads import build  # noqa: E402
from topologies import eps_star, static_ring  # noqa: E402

FABRICS = {"ring": static_ring, "non-blocking": eps_star}


def bench(n: int, alg: str, fabric: str, nbytes: int, semantics: str) -> dict:
    """One case: ``{"gpus", "algorithm", "fabric", "steps", "transfers", "build_s", "plan_s",
    "simulate_s", "transfers_per_s", "time_s"}`` (time_s: simulated completion, seconds)."""
    f = FABRICS[fabric](n, 400.0)
    t0 = time.perf_counter()
    w = build(alg, n, nbytes)
    t1 = time.perf_counter()
    plan = make_plan("none", f, w)
    t2 = time.perf_counter()
    r = simulate(f, w, plan, alpha_s=2e-6, semantics=semantics, record_transfers=False)
    t3 = time.perf_counter()
    return {"gpus": n, "algorithm": alg, "fabric": fabric, "steps": len(w.steps), "transfers": w.transfer_count,
            "build_s": t1 - t0, "plan_s": t2 - t1, "simulate_s": t3 - t2,
            "transfers_per_s": w.transfer_count / (t3 - t2), "time_s": r.time_s, "ok": r.bytes_delivered == r.bytes_sent}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[128, 512, 1024])
    p.add_argument("--bytes", default="1GiB")
    p.add_argument("--semantics", default="round-synchronous", choices=["round-synchronous", "dependency-driven"])
    p.add_argument("--json", type=Path, help="also write the figures here (e.g. runs/bench_flowsim.json)")
    args = p.parse_args()
    nbytes = parse_bytes(args.bytes)
    console = Console(width=170)
    t = Table(title=f"flowsim benchmark: AllReduce of {format_bytes(nbytes)}, {args.semantics}, "
                    f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    for c in ("GPUs", "algorithm", "fabric", "steps", "transfers", "build (s)", "plan (s)", "simulate (s)",
              "transfers/s", "simulated time (ms)"):
        t.add_column(c, justify="left" if c in ("algorithm", "fabric") else "right")
    rows = []
    for n in args.gpus:
        for alg in ("ring", "rhd"):
            for fabric in FABRICS:
                row = bench(n, alg, fabric, nbytes, args.semantics)
                rows.append(row)
                t.add_row(str(n), alg, fabric, str(row["steps"]), f"{row['transfers']:,}", f"{row['build_s']:.2f}",
                          f"{row['plan_s']:.2f}", f"{row['simulate_s']:.2f}", f"{row['transfers_per_s']:,.0f}",
                          f"{row['time_s'] * 1e3:.3f}")
                console.print(f"  {n} GPUs {alg} on {fabric}: simulate {row['simulate_s']:.2f} s", style="dim")
    console.print(t)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
