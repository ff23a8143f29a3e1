#!/usr/bin/env python3
"""Benchmark: the flow backend's replay of one training iteration on photonic rails (Opus) at
cluster scale, printing the seconds it takes.

    .venv/bin/python scripts/bench_rails.py [--servers 128] [--gpus-per-server 8] [--json]

Default: Llama-3-70B on 1,024 GPUs (128 servers x 8 rails; TP=8, PP=8, DP=16, 32 micro-batches),
on-demand and speculative at R = 100 ms, 3 iterations replayed (the first starts from an
unconfigured fabric). Each mode is replayed twice: one rail standing for all (the rails do not
interact: every GPU of a server runs the same program on its own rail) and every rail explicit
(all 1,024 GPUs as ranks); the two give the same iteration time, which the script checks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation.flowsim.iteration import simulate_iteration  # noqa: E402
from emulation.workloads.iteration import MODELS, ComputeSpec, ParallelSpec, build_trace  # noqa: E402
from emulation.flowsim.rail_times import tp_allreduce_s  # noqa: E402
from topologies.rail_network import RailNetwork  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=128)
    ap.add_argument("--gpus-per-server", type=int, default=8)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--micro-batches", type=int, default=32)
    ap.add_argument("--model", default="llama3-70b", choices=sorted(MODELS))
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    a = parser().parse_args(argv)
    if a.servers % a.pp:
        print(f"bench_rails: --pp {a.pp} must divide --servers {a.servers}", file=sys.stderr)
        return 2
    G = a.gpus_per_server
    net = RailNetwork(port_gbps=400, ports_per_gpu=2, scaleup_gbps=3600)
    t0 = time.perf_counter()
    tr = build_trace(MODELS[a.model], ParallelSpec(tp=G, pp=a.pp, dp=a.servers // a.pp, micro_batches=a.micro_batches),
                     ComputeSpec(), lambda b: tp_allreduce_s(net, G, b))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = tr.all_rails(G)
    expand_s = time.perf_counter() - t0
    rows = []
    for mode in ("on-demand", "speculative"):
        for label, trace in (("one rail", tr), ("every rail", full)):
            t0 = time.perf_counter()
            res = simulate_iteration(trace, net, mode, a.delay_ms / 1e3, 0.002, iterations=3)
            wall = time.perf_counter() - t0
            rows.append({"mode": mode, "ranks": trace.ranks, "replayed": label, "iteration_s": res.iteration_s,
                         "reconfigurations": res.reconfigurations_per_iteration, "wall_s": wall,
                         "wall_per_iteration_s": wall / 3})
    out = {"model": a.model, "gpus": a.servers * G, "servers": a.servers, "gpus_per_server": G, "pp": a.pp,
           "dp": a.servers // a.pp, "micro_batches": a.micro_batches, "delay_ms": a.delay_ms,
           "build_trace_s": build_s, "expand_rails_s": expand_s, "ops_per_iteration": sum(map(len, full.programs)),
           "replays": rows}
    for mode in ("on-demand", "speculative"):
        one, every = (r["iteration_s"] for r in rows if r["mode"] == mode)
        if abs(one - every) > 1e-9 * one:
            print(f"bench_rails: {mode}: one rail gives {one} s, every rail {every} s", file=sys.stderr)
            return 1
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{a.model} on {out['gpus']} GPUs ({a.servers} servers x {G}), TP={G} PP={a.pp} DP={out['dp']}, "
          f"{a.micro_batches} micro-batches, R = {a.delay_ms:g} ms: trace built in {build_s:.2f} s, "
          f"{out['ops_per_iteration']} ops per iteration over all GPUs")
    for r in rows:
        print(f"  {r['mode']:<12} {r['replayed']:<10} {r['ranks']:>5} ranks: iteration {r['iteration_s']:.3f} s "
              f"simulated, {r['reconfigurations']:.1f} rewires per iteration; replay {r['wall_per_iteration_s']:.2f} s "
              f"per iteration ({r['wall_s']:.2f} s for 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
