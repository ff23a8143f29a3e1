#!/usr/bin/env python3
"""Benchmark: replay a tenancy trace of about 10,000 slice requests (rounds) on the 64-accelerator
rack with each allocator, printing wall seconds, requests per second and the integer programs
the photonic allocator solved and remembered.

    .venv/bin/python scripts/bench_tenancy.py [--requests 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation.flowsim.job_manager import simulate_job_manager  # noqa: E402
from emulation.flowsim.job_metrics import metrics  # noqa: E402
from emulation.planners import allocators as al  # noqa: E402
from emulation.workloads.tenant_jobs import make_trace  # noqa: E402
from topologies.torus_rack import TorusRack  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000, help="slice requests to replay (about)")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    if args.requests < 1:
        print("bench_tenancy: --requests: must be positive", file=sys.stderr)
        return 2
    rack = TorusRack()
    # the scenario's mix (experiments/tenancy_rack64.yaml): 5.5 rounds per job on average
    jobs = make_trace(max(1, round(args.requests / 5.5)), 0, 250, {4: 0.4, 8: 0.3, 16: 0.2, 32: 0.1}, (1, 10),
                      (60, 600), 0.5, 4)
    out = []
    for name, cls in al.ALLOCATORS.items():
        alloc = cls(rack)
        calls = {"n": 0}
        solve = al.route_circuits

        def counted(*a, **k):
            calls["n"] += 1
            return solve(*a, **k)

        al.route_circuits = counted
        try:
            t = time.perf_counter()
            r = simulate_job_manager(rack, jobs, alloc, args.policy)
            wall = time.perf_counter() - t
        finally:
            al.route_circuits = solve
        m = metrics(r)
        row = {"allocator": name, "policy": args.policy, "jobs": len(jobs), "requests": m["requests"],
               "wall_s": wall, "requests_per_s": m["requests"] / wall, "programs_solved": calls["n"],
               "programs_remembered": len(getattr(alloc, "_solved", {}))}
        out.append(row)
        if not args.json:
            print(f"{name:17s} {m['requests']:6d} requests ({len(jobs)} jobs) in {wall:6.2f} s "
                  f"({row['requests_per_s']:7.0f}/s), integer programs solved {calls['n']}")
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
