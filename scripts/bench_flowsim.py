#!/usr/bin/env python3
"""Benchmark of the flow-level backend at cluster scale (a benchmark, not a test): for every GPU
count and case, the seconds to build the workload, plan it and simulate it, and the peak memory
(each case in a fresh process, so one case's memory does not hide another's), with the machine's
load average when the case started.

Cases (:mod:`emulation.flowsim.cases`; AllReduce of ``--bytes`` per GPU unless said): ``ring``
(static ring), ``rhd`` and ``rd`` (non-blocking switch), ``rhd-ring`` (RHD on an OCS star's ring
of circuits, never reconfigured), ``pccl-dp`` (RHD under PCCL's dynamic program, arXiv
2509.15450, R = 10 us), ``stragglar`` (arXiv 2505.23523, straggler 1 ms late), ``moe`` (direct
AllToAll inside every expert-parallel group of 64 GPUs at once); and ``opus``, one training
iteration of Llama-3-70B on photonic rails (Opus, arXiv 2507.08119: speculative control, R =
100 ms, 3 iterations replayed, one rail standing for all), at ``--opus-gpus``.

Before a case runs, the memory model (:mod:`emulation.flowsim.limits`) is asked whether it fits
this machine; a case that does not is reported with the model's line and not run, except
``stragglar``, which then runs in closed form (:mod:`emulation.flowsim.stragglar`: the same
times without building its O(n^2) transfers; its row's fabric says so).

``--sweep N`` also runs a sweep of 8 points at N GPUs (ring, rhd, rd and rhd-ring at two buffer
sizes) serially and on a local Dask cluster of ``--workers`` processes (:mod:`emulation.parallel`)
and checks that the rows are equal.

Usage: ``.venv/bin/python scripts/bench_flowsim.py [--gpus 1024 16384 131072] [--bytes 1GiB]
[--cases ring rhd ...] [--opus-gpus 2048 16384] [--semantics round-synchronous|dependency-driven]
[--sweep 131072] [--workers 2] [--wait-load 1.2 [--wait-max 1200]] [--json runs/bench_flowsim.json]
[--markdown]``. ``--markdown``
prints the table as docs/flow-backend.md has it. ``--case NAME N`` runs one case in this process
and prints its JSON (what the parent calls).
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

from emulation.flowsim.cases import CASES, FABRICS  # noqa: E402

ALL = CASES + ("opus",)
LABEL = dict(FABRICS, opus="photonic rails, one rail")
SWEEP_CASES = ("ring", "rhd", "rd", "rhd-ring")


def refusal(case: str, n: int, nbytes: int, semantics: str) -> str | None:
    """The memory model's line if ``case`` on ``n`` GPUs does not fit this machine, else None."""
    from emulation.flowsim.cases import case_inputs, case_plan
    from emulation.flowsim.limits import check_memory, shape_of

    if case == "opus":
        return None

    def shape_at(k: int):
        f, w = case_inputs(case, k, nbytes)
        p = case_plan(case, f, w)
        return shape_of(p.workload, len({id(s.configuration) for s in p.steps}) + 1)

    from emulation.flowsim.cases import EP_GROUP

    at = tuple(EP_GROUP << i for i in range(5)) if case == "moe" else (8, 16, 32, 64, 128)  # groups of 64 from 64 up
    return check_memory([shape_at], n, field=f"{case} at {n} GPUs", semantics=semantics, at=at)


def run_case(case: str, n: int, nbytes: int, semantics: str = "round-synchronous") -> dict:
    """Build, plan and simulate one case in this process; its figures (seconds, bytes)."""
    load = os.getloadavg()[0]
    why = refusal(case, n, nbytes, semantics)
    if why and case == "stragglar":
        closed = run_stragglar_closed_form(n, nbytes, semantics, load)
        if closed:
            return closed
    if why:
        return {"case": case, "fabric": LABEL[case], "gpus": n, "refused": why, "load": load}
    if case == "opus":
        return run_opus(n, load)
    from emulation.flowsim import simulate
    from emulation.flowsim.cases import ALPHA_S, case_arrivals, case_inputs, case_plan

    t0 = time.perf_counter()
    f, w = case_inputs(case, n, nbytes)
    t1 = time.perf_counter()
    plan = case_plan(case, f, w)
    t2 = time.perf_counter()
    r = simulate(f, plan.workload, plan, alpha_s=ALPHA_S, semantics=semantics, arrivals_s=case_arrivals(case, n),
                 record_transfers=False)
    t3 = time.perf_counter()
    return {"case": case, "fabric": LABEL[case], "gpus": n, "steps": len(plan.workload.steps),
            "transfers": plan.workload.transfer_count, "build_s": t1 - t0, "plan_s": t2 - t1, "simulate_s": t3 - t2,
            "total_s": t3 - t0, "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "reconfigurations": plan.reconfigurations, "time_s": r.time_s, "load": load,
            "ok": r.bytes_delivered == r.bytes_sent}


def run_stragglar_closed_form(n: int, nbytes: int, semantics: str, load: float) -> dict | None:
    """The stragglar case in closed form (:mod:`emulation.flowsim.stragglar`: every step from one
    or two representative transfers, no workload built), or None where that does not apply."""
    from emulation.flowsim.cases import ALPHA_S, PORT_GBPS, case_arrivals
    from emulation.flowsim.stragglar import closed_form_refusal, simulate_stragglar_switch
    from topologies.builders import eps_star

    t0 = time.perf_counter()
    f = eps_star(n, PORT_GBPS)
    if closed_form_refusal(f, semantics):
        return None
    t1 = time.perf_counter()
    r = simulate_stragglar_switch(f, nbytes, alpha_s=ALPHA_S, arrivals_s=case_arrivals("stragglar", n))
    t2 = time.perf_counter()
    return {"case": "stragglar", "fabric": LABEL["stragglar"] + ", closed form", "gpus": n, "steps": len(r.steps),
            "transfers": r.transfers_omitted, "build_s": t1 - t0, "plan_s": 0.0, "simulate_s": t2 - t1,
            "total_s": t2 - t0, "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "reconfigurations": 0, "time_s": r.time_s, "load": load, "ok": r.bytes_delivered == r.bytes_sent}


def run_opus(n: int, load: float) -> dict:
    """One Llama-3-70B iteration on photonic rails of ``n`` GPUs (8 per server, TP 8, PP 8)."""
    from emulation.flowsim.iteration import simulate_iteration
    from emulation.workloads.iteration import MODELS, ComputeSpec, ParallelSpec, build_trace
    from emulation.flowsim.rail_times import tp_allreduce_s
    from topologies.rail_network import RailNetwork

    per, pp = 8, 8
    servers = n // per
    net = RailNetwork(port_gbps=400, ports_per_gpu=2, scaleup_gbps=3600)
    t0 = time.perf_counter()
    tr = build_trace(MODELS["llama3-70b"], ParallelSpec(tp=per, pp=pp, dp=servers // pp, micro_batches=32),
                     ComputeSpec(), lambda b: tp_allreduce_s(net, per, b))
    t1 = time.perf_counter()
    res = simulate_iteration(tr, net, "speculative", 0.1, 0.002, iterations=3)
    t2 = time.perf_counter()
    return {"case": "opus", "fabric": LABEL["opus"], "gpus": n, "steps": sum(map(len, tr.programs)),
            "transfers": 0, "build_s": t1 - t0, "plan_s": 0.0, "simulate_s": t2 - t1, "total_s": t2 - t0,
            "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "reconfigurations":
            res.reconfigurations_per_iteration, "time_s": res.iteration_s, "load": load, "ok": True}


def sweep_point(point: tuple[str, int, int]) -> dict:
    """One point of the sweep: ``(case, GPUs, bytes)`` -> its result's figures (seconds, bytes)."""
    from emulation.flowsim import simulate
    from emulation.flowsim.cases import ALPHA_S, case_arrivals, case_inputs, case_plan

    case, n, nbytes = point
    f, w = case_inputs(case, n, nbytes)
    plan = case_plan(case, f, w)
    r = simulate(f, plan.workload, plan, alpha_s=ALPHA_S, arrivals_s=case_arrivals(case, n), record_transfers=False)
    return {"case": case, "gpus": n, "bytes": nbytes, "time_s": r.time_s, "busbw_gbps": r.busbw_gbps,
            "bytes_delivered": r.bytes_delivered, "last_step_end_s": r.steps[-1].end_s}


def run_sweep(n: int, workers: int) -> dict:
    """The 8-point sweep at ``n`` GPUs serially and on a local Dask cluster of ``workers``."""
    from emulation.parallel import map_points

    points = [(c, n, s) for c in SWEEP_CASES for s in (256 << 20, 1 << 30)]
    out = {"gpus": n, "points": len(points), "workers": workers, "load": os.getloadavg()[0]}
    t0 = time.perf_counter()
    serial = map_points(sweep_point, points)
    out["serial_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dask = map_points(sweep_point, points, engine="dask", workers=workers)
    out["dask_s"] = time.perf_counter() - t0
    out["rows"], out["same_rows"] = serial, serial == dask
    return out


def wait_for_load(limit: float | None, patience_s: float = 1200.0) -> None:
    """Wait until the 1-minute load average is below ``limit`` (None: do not wait), polling every
    10 s, at most ``patience_s``; the case records the load it started at either way."""
    end = time.monotonic() + patience_s
    while limit is not None and os.getloadavg()[0] >= limit and time.monotonic() < end:
        time.sleep(10)


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


def markdown(rows: list[dict], nbytes_txt: str, where: str, semantics: str) -> str:
    """The table of ``rows`` as docs/flow-backend.md has it."""
    out = [f"{semantics}; AllReduce of {nbytes_txt} per GPU (moe: a direct AllToAll of {nbytes_txt} per GPU in "
           f"every group of 64; opus: one Llama-3-70B iteration); {where}.", "",
           "| case | fabric | GPUs | steps | transfers | build (s) | plan (s) | simulate (s) | peak memory (GiB) "
           "| simulated time (ms) | load |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if "refused" in r:
            out.append(f"| {r['case']} | {r['fabric']} | {r['gpus']:,} | | | | | | | refused: {r['refused']} | "
                       f"{r['load']:.2f} |")
            continue
        out.append(f"| {r['case']} | {r['fabric']} | {r['gpus']:,} | {r['steps']:,} | {r['transfers']:,} | "
                   f"{r['build_s']:.2f} | {r['plan_s']:.2f} | {r['simulate_s']:.2f} | {r['peak_bytes'] / 2 ** 30:.2f} | "
                   f"{r['time_s'] * 1e3:.3f} | {r['load']:.2f} |")
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[1024, 16384, 131072])
    p.add_argument("--cases", nargs="+", choices=ALL, default=list(ALL))
    p.add_argument("--opus-gpus", type=int, nargs="+", default=[2048, 16384],
                   help="GPU counts of the opus case (multiples of 64), instead of --gpus")
    p.add_argument("--bytes", default="1GiB")
    p.add_argument("--semantics", default="round-synchronous", choices=["round-synchronous", "dependency-driven"])
    p.add_argument("--sweep", type=int, metavar="GPUS", help="also run the 8-point sweep at GPUS, serially and on Dask")
    p.add_argument("--workers", type=int, default=2, help="local Dask workers of the sweep")
    p.add_argument("--wait-load", type=float, metavar="LOAD",
                   help="before each case, wait until the 1-minute load average is below LOAD")
    p.add_argument("--wait-max", type=float, default=1200.0, metavar="SECONDS",
                   help="the longest wait for --wait-load before a case runs anyway (its row records the load)")
    p.add_argument("--json", type=Path, help="also write the figures here (e.g. runs/bench_flowsim.json)")
    p.add_argument("--markdown", action="store_true", help="print the table as docs/flow-backend.md has it")
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
    if any(n % 64 for n in args.opus_gpus) and "opus" in args.cases:
        print("bench_flowsim: --opus-gpus: multiples of 64 (8 GPUs per server, 8 pipeline stages)", file=sys.stderr)
        return 2
    todo = [(n, c) for n in args.gpus for c in args.cases if c != "opus"]
    todo += [(n, "opus") for n in args.opus_gpus if "opus" in args.cases]
    rows = []
    for n, case in todo:
        wait_for_load(args.wait_load, args.wait_max)
        done = subprocess.run([sys.executable, __file__, "--bytes", args.bytes, "--semantics", args.semantics,
                               "--case", case, str(n)], capture_output=True, text=True)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
        row = json.loads(done.stdout)
        rows.append(row)
        if "refused" in row:
            print(f"{n:>7} GPUs {case:<9} refused: {row['refused']}", flush=True)
            continue
        print(f"{n:>7} GPUs {case:<9} build {row['build_s']:6.2f} s  plan {row['plan_s']:6.2f} s  "
              f"simulate {row['simulate_s']:6.2f} s  peak {row['peak_bytes'] / 2 ** 30:5.2f} GiB  "
              f"simulated {row['time_s'] * 1e3:10.3f} ms  load {row['load']:.2f}", flush=True)
    sweep = None
    if args.sweep:
        wait_for_load(args.wait_load, args.wait_max)
        sweep = run_sweep(args.sweep, args.workers)
        print(f"sweep of {sweep['points']} points at {args.sweep} GPUs: serial {sweep['serial_s']:.1f} s, Dask "
              f"{args.workers} workers {sweep['dask_s']:.1f} s, same rows: {sweep['same_rows']} "
              f"(load {sweep['load']:.2f})", flush=True)
        for row in sweep["rows"]:
            print(f"  {row['case']:<9} {format_bytes(row['bytes']):>7}: {row['time_s'] * 1e3:10.3f} ms, "
                  f"busbw {row['busbw_gbps']:7.1f} Gbit/s, {row['bytes_delivered']} bytes delivered")
    where = machine()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": where, "bytes": nbytes, "semantics": args.semantics,
                                         "rows": rows, "sweep": sweep}, indent=1))
    if args.markdown:
        print(markdown(rows, format_bytes(nbytes), where, args.semantics))
    return 0 if all(r.get("ok", True) for r in rows) and (sweep is None or sweep["same_rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
