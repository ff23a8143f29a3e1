#!/usr/bin/env python3
"""Morphlux (arXiv 2508.03674) and Lumorph (arXiv 2501.18169) on a shared rack, with Propius'
job-manager policies (arXiv 2510.19617). Model and formulas: ``docs/tenancy.md``.

(1) Flow backend: the torus's stranded bandwidth per legal slice shape against the photonic
    allocator's; the seeded trace of ``experiments/tenancy_rack64.yaml`` under both allocators
    and every policy against static partitioning, beside the papers' headlines.
(2) Bandwidth redirection (flow and packet backends): a 2x2x1 slice's Ring AllReduce over the 2
    of its 6 ports a torus lets it use, against all 6 steered into its ring by the interposer.
(3) Packet backend: ``experiments/tenancy_packets.yaml``, three tenants alone and at once on 16
    emulated GPUs, with the isolation count.
(4) Packet backend, torch: a failed accelerator swapped for one of the rack's 4 spares by the
    OCS and a real data-parallel job relaunched on it (``experiments/lumion.yaml``, optical
    recovery): failure to circuits rewritten, to the job's first step, and the step time after.

Parts 2-4 need root, Open vSwitch and (4) torch. Prints the acceptance checks and exits 1 if one
fails. Usage: ``.venv/bin/python scripts/reproduce_morphlux.py [--no-packet] [--out DIR]``
(default ``runs/reproduce_morphlux``); about 5 minutes, of which (1) 40 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation import kinds  # noqa: E402
from emulation.envelope import envelope  # noqa: E402
from emulation.flowsim.rack_sweep import sweep_tenancy  # noqa: E402
from emulation.flowsim.tenants import simulate_tenants  # noqa: E402
from emulation.planners.allocators import ClusterState, Photonic, TorusContiguous  # noqa: E402
from emulation.tenancy.report import print_summary  # noqa: E402
from emulation.workloads.allreduce import ring_allreduce  # noqa: E402
from emulation.workloads.model import Tenant  # noqa: E402
from topologies.builders import redirection_fabrics  # noqa: E402
from topologies.torus_rack import LEGAL_SHAPES, TorusRack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHECKS: list[bool] = []


def check(cond: bool, text: str) -> None:
    CHECKS.append(bool(cond))
    print(f"    {'ok  ' if cond else 'FAIL'} {text}", flush=True)


def part1() -> None:
    rack = TorusRack()
    print("(1) flow backend: the 4x4x4 rack of 2x2x1 servers")
    print("    slice shape   torus ports used   photonic")
    torus, photonic = TorusContiguous(rack), Photonic(rack)
    used = []
    for s in LEGAL_SHAPES:
        n = s[0] * s[1] * s[2]
        t, p = torus.allocate(ClusterState(rack), n), photonic.allocate(ClusterState(rack), n)
        used.append(round(t.bandwidth * 100))
        print(f"    {'x'.join(map(str, s)):<12}  {t.bandwidth:>15.0%}  {p.bandwidth:>9.0%}")
    check(used == [33, 50, 67, 83, 100], f"torus: {used} % of ports usable per shape (spec: 33/50/67/83/100)")
    sc = kinds.load_as(ROOT / "experiments" / "tenancy_rack64.yaml", "tenancy")
    t0 = time.monotonic()
    res = sweep_tenancy(sc.tenancy)
    print(f"    {len(res.runs)} replays of {sc.tenancy.trace.jobs} jobs in {time.monotonic() - t0:.1f} s")
    print_summary(envelope("tenancy", sc.name, "flow", res))
    tor, pho = res.run("torus-contiguous", "fifo").metrics, res.run("photonic", "fifo").metrics
    gain = pho["allocation_bandwidth"] / tor["allocation_bandwidth"] - 1
    frag = pho["fragmentation"] / tor["fragmentation"] - 1 if tor["fragmentation"] else 0.0
    check(gain > 0.3, f"photonic vs torus allocation bandwidth {gain:+.0%} (paper: +66%)")
    check(frag < -0.5, f"photonic vs torus fragmentation {frag:+.0%} (paper: -70%)")
    for a in ("torus-contiguous", "photonic"):
        st = res.run(a, "static").metrics
        best = min((r for r in res.runs if r.allocator == a and r.scheduler != "static"),
                   key=lambda r: r.metrics["jct_mean_s"])
        fifo = res.run(a, "fifo").metrics
        print(f"    {a}: sharing (fifo) vs static halves: utilisation {fifo['utilisation'] / st['utilisation']:.2f}x, "
              f"throughput {fifo['throughput_jobs_per_h'] / st['throughput_jobs_per_h']:.2f}x, mean JCT "
              f"{st['jct_mean_s'] / fifo['jct_mean_s']:.2f}x shorter (Propius: up to 1.88x, 2.76x, 1.26x); "
              f"best policy {best.scheduler}, mean JCT {best.metrics['jct_mean_s']:.0f} s "
              f"({best.metrics['jct_mean_s'] / fifo['jct_mean_s'] - 1:+.1%} vs fifo)")
        check(st["jct_mean_s"] > fifo["jct_mean_s"], f"{a}: sharing beats static partitioning on mean JCT")


def part2(out: Path, flow_only: bool) -> None:
    size, alpha = 16 << 20, 5e-6
    fabric, configs = redirection_fabrics(400.0)
    tenant = Tenant("slice", ring_allreduce(4, size), (0, 1, 2, 3))
    flow = {k: simulate_tenants(fabric, c, [tenant], alpha_s=alpha)[0].time_s for k, c in configs.items()}
    print(f"\n(2) bandwidth redirection: Ring AllReduce of {size >> 20} MiB on a 2x2x1 slice, 400 Gbit/s ports")
    print(f"    flow: 2 of 6 ports {flow['torus'] * 1e6:.1f} us, all 6 {flow['photonic'] * 1e6:.1f} us "
          f"({flow['torus'] / flow['photonic']:.2f}x)")
    check(flow["torus"] / flow["photonic"] > 2.5, "flow: redirecting 6 ports into the ring speeds it up about 3x")
    if flow_only:
        return
    from emulation.emulator.calibration import calibrated_scale
    from emulation.emulator.net import EmulatedFabric
    from emulation.emulator.tenants import run_tenants

    with EmulatedFabric(fabric, out / "redirection", link_mbps=10.0) as emu:
        scale = calibrated_scale(emu, 0.1, out / "redirection" / "calibration")
        pkt = {k: run_tenants(emu, [tenant], c, scale, alpha, out / "redirection" / k)[0].time_s
               for k, c in configs.items()}
    print(f"    packets at {scale.link_mbps:g} Mbit/s (TDF {scale.tdf:g}): 2 of 6 ports {pkt['torus'] * 1e6:.1f} us "
          f"({pkt['torus'] / flow['torus'] - 1:+.1%} vs flow), all 6 {pkt['photonic'] * 1e6:.1f} us "
          f"({pkt['photonic'] / flow['photonic'] - 1:+.1%}), {pkt['torus'] / pkt['photonic']:.2f}x")
    check(all(abs(pkt[k] / flow[k] - 1) < 0.15 for k in pkt), "packets: both within 15% of the flow backend")
    check(pkt["torus"] / pkt["photonic"] > 2.5, "packets: redirection speeds the ring up about 3x")


def part3(out: Path) -> None:
    print("\n(3) tenants at once on the packet backend (experiments/tenancy_packets.yaml)")
    sc = kinds.load_as(ROOT / "experiments" / "tenancy_packets.yaml", "tenancy")
    res = kinds.run_scenario("tenancy", sc, out / "tenants").result.model_dump()
    worst = max(max(abs(r["alone_error"]), abs(r["together_error"])) for r in res["tenants"])
    check(worst < 0.15, f"every tenant alone and together within 15% of the flow backend (worst {worst:.1%})")
    foreign = sum(r["foreign_packets"] for r in res["tenants"])
    check(foreign == 0 and res["circuits_left"] == 0,
          f"{foreign} frames of a tenant on another's OCS ports; {res['circuits_left']} circuits left at the end")


def part4(out: Path) -> None:
    from emulation.torchjob.launch import torch_available

    print("\n(4) a failed accelerator swapped for a spare (4 per rack) by the OCS, the job relaunched "
          "(experiments/lumion.yaml, optical)")
    if not torch_available():
        check(False, "torch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
        return
    sc = kinds.load_as(ROOT / "experiments" / "lumion.yaml", "training")
    sc = sc.model_copy(update={"recovery": ["optical"]})
    res = kinds.run_scenario("training", sc, out / "spares").result
    r = res.runs[0]
    f, tl = r.failure_to_rewritten_s, r.timeline_s
    print(f"    GPU {r.failed_gpu} failed; placement {r.placement_before} -> {r.placement_after}; failure -> "
          f"circuits rewritten {f.emulated * 1e3:.1f} ms emulated ({f.real_equivalent * 1e3:.2f} ms real-equivalent), "
          f"-> first step of the relaunched job {tl.first_step:.2f} s emulated")
    check(abs(r.steady.after_over_before - 1) <= 0.10,
          f"step time after the swap {r.steady.after.step_s:.3f} s vs before {r.steady.before.step_s:.3f} s "
          f"({r.steady.after_over_before - 1:+.1%}, within 10%)")
    check(r.evidence["packets_to_failed_gpu"]["after_rewrite"] == 0, "no packet reached the failed GPU after the rewrite")


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packet", action=argparse.BooleanOptionalAction, default=True,
                    help="the packet parts (root, Open vSwitch; default on; --no-packet: parts (1) and (2) on the flow backend only, no root)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce_morphlux")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    t0 = time.monotonic()
    from emulation.output import writing

    with writing(args.out, clear=True):
        args.out.mkdir(parents=True)
        part1()
        part2(args.out, not args.packet)
        if args.packet:
            part3(args.out)
            part4(args.out)
        print(f"\n{sum(CHECKS)} of {len(CHECKS)} checks passed in {time.monotonic() - t0:.0f} s; results in {args.out}")
        return 0 if all(CHECKS) else 1


if __name__ == "__main__":
    sys.exit(main())
