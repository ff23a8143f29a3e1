#!/usr/bin/env python3
"""Benchmark of the flow-level backend at cluster scale (a benchmark, not a test): for every GPU
count, the seconds to build the workload, plan it and simulate it, and the peak memory of each
case (measured in a fresh process per case, so one case's memory does not hide another's).

Cases (AllReduce of ``--bytes``; MoE: one layer's dispatch and combine):

- ``ring`` on a static ring of links (``static_ring``): the bandwidth-optimal baseline;
- ``rhd`` on a non-blocking switch (``eps_star``);
- ``rhd`` on a static ring (paths of up to n/2 hops: n^2/4 (flow, link) pairs per step, so only
  up to ``--ring-rhd-max`` GPUs);
- ``pccl-dp``: RHD with PCCL's dp planner (arXiv 2509.15450) on an OCS star, R = 10 us;
- ``moe``: an MoE layer's all-to-all dispatch under uniform routing, i.e. a direct AllToAll of
  ``--bytes`` per GPU on a switch: n(n-1) transfers in one step, so only up to ``--moe-max`` GPUs.

Usage: ``.venv/bin/python scripts/bench_flowsim.py [--gpus 1024 4096 16384] [--bytes 1GiB]
[--semantics round-synchronous|dependency-driven] [--json runs/bench_flowsim.json] [--markdown]``. ``--markdown`` prints the table as the README
has it (the README's table is this output). ``--case NAME N`` runs one case in this process and
prints its JSON (what the parent calls).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = ("ring", "rhd", "rhd-ring", "pccl-dp", "moe")
FABRIC = {"ring": "static ring", "rhd": "non-blocking switch", "rhd-ring": "static ring", "pccl-dp": "OCS star, R = 10 us",
          "moe": "non-blocking switch"}


def run_case(case: str, n: int, nbytes: int, semantics: str = "round-synchronous") -> dict:
    """Build, plan and simulate one case in this process; its figures (seconds, bytes)."""
    from emulation.flowsim import simulate
    from emulation.planners import CostModel, make_plan
    from emulation.workloads import build
    from topologies import eps_star, ocs_star, static_ring

    t0 = time.perf_counter()
    if case == "moe":
        f = eps_star(n, 400.0)
        w = build("direct", n, nbytes, "alltoall")
    else:
        f = {"ring": static_ring, "rhd-ring": static_ring, "rhd": eps_star}.get(case, lambda n, g: ocs_star(n, 2, g, 10e-6))(n, 400.0)
        w = build("ring" if case == "ring" else "rhd", n, nbytes)
    t1 = time.perf_counter()
    plan = make_plan("dp" if case == "pccl-dp" else "none", f, w, CostModel(alpha_s=2e-6, delta_s=0.0))
    t2 = time.perf_counter()
    r = simulate(f, w, plan, alpha_s=2e-6, semantics=semantics, record_transfers=False)
    t3 = time.perf_counter()
    return {"case": case, "fabric": FABRIC[case], "gpus": n, "steps": len(w.steps), "transfers": w.transfer_count,
            "build_s": t1 - t0, "plan_s": t2 - t1, "simulate_s": t3 - t2, "total_s": t3 - t0,
            "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "reconfigurations": plan.reconfigurations, "time_s": r.time_s,
            "ok": r.bytes_delivered == r.bytes_sent}


def machine() -> str:
    """One line describing this machine (CPU model, cores, memory, Python)."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def markdown(rows: list[dict], nbytes_txt: str, where: str) -> str:
    """The README's table of ``rows``."""
    out = [f"AllReduce of {nbytes_txt} per GPU (moe: a direct AllToAll of {nbytes_txt} per GPU); {where}.",
           "", "| case | fabric | GPUs | steps | transfers | build (s) | plan (s) | simulate (s) | peak memory (GiB) "
               "| simulated time (ms) |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['case']} | {FABRIC[r['case']]} | {r['gpus']:,} | | | | | | | {r['skipped']} |")
            continue
        out.append(f"| {r['case']} | {r['fabric']} | {r['gpus']:,} | {r['steps']:,} | {r['transfers']:,} | "
                   f"{r['build_s']:.2f} | {r['plan_s']:.2f} | {r['simulate_s']:.2f} | {r['peak_bytes'] / 2 ** 30:.2f} | "
                   f"{r['time_s'] * 1e3:.3f} |")
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--bytes", default="1GiB")
    p.add_argument("--semantics", default="round-synchronous", choices=["round-synchronous", "dependency-driven"])
    p.add_argument("--ring-rhd-max", type=int, default=4096, help="largest GPU count for rhd on a static ring")
    p.add_argument("--moe-max", type=int, default=4096, help="largest GPU count for the MoE layer")
    p.add_argument("--pccl-max", type=int, default=4096, help="largest GPU count for the dp planner")
    p.add_argument("--json", type=Path, help="also write the figures here (e.g. runs/bench_flowsim.json)")
    p.add_argument("--markdown", action="store_true", help="print the README's table")
    p.add_argument("--case", nargs=2, metavar=("NAME", "GPUS"), help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    from emulation.units import format_bytes, parse_bytes

    try:
        nbytes = parse_bytes(args.bytes)
    except ValueError as e:
        print(f"bench_flowsim: --bytes: {e}", file=sys.stderr)
        return 2
    if args.case:
        print(json.dumps(run_case(args.case[0], int(args.case[1]), nbytes, args.semantics)))
        return 0
    limits = {"rhd-ring": args.ring_rhd_max, "moe": args.moe_max, "pccl-dp": args.pccl_max}
    rows = []
    for n in args.gpus:
        for case in args.cases:
            if n > limits.get(case, n):
                rows.append({"case": case, "gpus": n, "skipped": f"not run above {limits[case]:,} GPUs"})
                continue
            done = subprocess.run([sys.executable, __file__, "--bytes", args.bytes, "--semantics", args.semantics,
                                   "--case", case, str(n)],
                                  capture_output=True, text=True)
            if done.returncode:
                print(done.stderr, file=sys.stderr)
                return 1
            row = json.loads(done.stdout)
            rows.append(row)
            print(f"{n:>6} GPUs {case:<9} build {row['build_s']:6.2f} s  plan {row['plan_s']:6.2f} s  "
                  f"simulate {row['simulate_s']:6.2f} s  peak {row['peak_bytes'] / 2 ** 30:5.2f} GiB  "
                  f"simulated {row['time_s'] * 1e3:9.3f} ms", flush=True)
    where = machine()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": where, "bytes": nbytes, "rows": rows}, indent=1))
    if args.markdown:
        print(markdown(rows, format_bytes(nbytes), where))
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
