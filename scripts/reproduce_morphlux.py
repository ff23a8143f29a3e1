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

Parts 2-4 need root, Open vSwitch and (4) torch. Ends with the verdicts against the papers
(:mod:`emulation.reproduce`; ``DIR/verdicts.json``) and exits 1 if one missed. Usage:
``.venv/bin/python scripts/reproduce_morphlux.py [--no-packet] [--out DIR]`` (default
``runs/reproduce_morphlux``); about 5 minutes, of which (1) 40 s.
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
from emulation.reproduce import Verdicts  # noqa: E402
from emulation.tenancy.report import print_summary  # noqa: E402
from emulation.workloads.allreduce import ring_allreduce  # noqa: E402
from emulation.workloads.model import Tenant  # noqa: E402
from topologies.builders import redirection_fabrics  # noqa: E402
from topologies.torus_rack import LEGAL_SHAPES, TorusRack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def part1(v: Verdicts, schedulers: list[str] | None = None) -> None:
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
    v.judge("stranded", used == [33, 50, 67, 83, 100], f"torus: {'/'.join(map(str, used))}%")
    sc = kinds.load_as(ROOT / "experiments" / "tenancy_rack64.yaml", "tenancy")
    if schedulers:
        sc = sc.model_copy(update={"tenancy": sc.tenancy.model_copy(update={"schedulers": schedulers})})
    t0 = time.monotonic()
    res = sweep_tenancy(sc.tenancy)
    print(f"    {len(res.runs)} replays of {sc.tenancy.trace.jobs} jobs in {time.monotonic() - t0:.1f} s")
    print_summary(envelope("tenancy", sc.name, "flow", res))
    tor, pho = res.run("torus-contiguous", "fifo").metrics, res.run("photonic", "fifo").metrics
    gain = pho["allocation_bandwidth"] / tor["allocation_bandwidth"] - 1
    v.judge("bandwidth", gain, f"{pho['allocation_bandwidth']:.1%} against {tor['allocation_bandwidth']:.1%}")
    v.judge("fragmentation", 1 - pho["fragmentation"] / tor["fragmentation"] if tor["fragmentation"] else None,
            f"{pho['fragmentation']:.2%} of requests against {tor['fragmentation']:.2%}")
    st, fifo = res.run("torus-contiguous", "static").metrics, tor
    v.judge("propius_utilisation", fifo["utilisation"] / st["utilisation"])
    v.judge("propius_throughput", fifo["throughput_jobs_per_h"] / st["throughput_jobs_per_h"])
    v.judge("propius_jct", st["jct_mean_s"] / fifo["jct_mean_s"])
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


def part2(out: Path, flow_only: bool, v: Verdicts) -> None:
    size, alpha = 16 << 20, 5e-6
    fabric, configs = redirection_fabrics(400.0)
    tenant = Tenant("slice", ring_allreduce(4, size), (0, 1, 2, 3))
    flow = {k: simulate_tenants(fabric, c, [tenant], alpha_s=alpha)[0].time_s for k, c in configs.items()}
    print(f"\n(2) bandwidth redirection: Ring AllReduce of {size >> 20} MiB on a 2x2x1 slice, 400 Gbit/s ports")
    print(f"    flow: 2 of 6 ports {flow['torus'] * 1e6:.1f} us, all 6 {flow['photonic'] * 1e6:.1f} us "
          f"({flow['torus'] / flow['photonic']:.2f}x; alpha {alpha * 1e6:g} us per message)")
    bw = {k: simulate_tenants(fabric, c, [tenant], alpha_s=0.0)[0].time_s for k, c in configs.items()}
    v.judge("redirection", bw["torus"] / bw["photonic"], f"{bw['torus'] * 1e6:.1f} us against "
            f"{bw['photonic'] * 1e6:.1f} us with alpha 0")
    if flow_only:
        return
    from emulation.emulator.session import PacketSession
    from emulation.emulator.tenants import run_tenants
    from emulation.scenario.schema import EmulationSpec

    with PacketSession(fabric, out / "redirection", EmulationSpec(byte_scale=0.1)) as s:  # calibrated
        scale = s.scale
        pkt = {k: run_tenants(s.emu, [tenant], c, scale, alpha, out / "redirection" / k)[0].time_s
               for k, c in configs.items()}
    print(f"    packets at {scale.link_mbps:g} Mbit/s (TDF {scale.tdf:g}): 2 of 6 ports {pkt['torus'] * 1e6:.1f} us "
          f"({pkt['torus'] / flow['torus'] - 1:+.1%} vs flow), all 6 {pkt['photonic'] * 1e6:.1f} us "
          f"({pkt['photonic'] / flow['photonic'] - 1:+.1%}), {pkt['torus'] / pkt['photonic']:.2f}x")
    worst = max(pkt, key=lambda k: abs(pkt[k] / flow[k] - 1))
    v.judge("redirection_packets", abs(pkt[worst] / flow[worst] - 1), f"worst {worst}; packets "
            f"{pkt['torus'] / pkt['photonic']:.2f}x against flow {flow['torus'] / flow['photonic']:.2f}x")


def part3(out: Path, v: Verdicts) -> list[str]:
    """The tenants on packets; their failed checks, one line each."""
    print("\n(3) tenants at once on the packet backend (experiments/tenancy_packets.yaml)")
    sc = kinds.load_as(ROOT / "experiments" / "tenancy_packets.yaml", "tenancy")
    env = kinds.run_scenario("tenancy", sc, out / "tenants")
    res = env.result.model_dump()
    worst = max(res["tenants"], key=lambda r: max(abs(r["alone_error"]), abs(r["together_error"])))
    v.judge("tenants", max(abs(worst["alone_error"]), abs(worst["together_error"])), f"worst tenant {worst['name']}")
    return [f"tenants: {c.line()}" for c in env.failed_checks]


def part4(out: Path, v: Verdicts) -> list[str]:
    """The spare swap on packets; its failed checks, one line each."""
    from emulation.torchjob.launch import torch_available

    print("\n(4) a failed accelerator swapped for a spare (4 per rack) by the OCS, the job relaunched "
          "(experiments/lumion.yaml, optical)")
    if not torch_available():
        return ["spare swap: torch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)"]
    sc = kinds.load_as(ROOT / "experiments" / "lumion.yaml", "training")
    sc = sc.model_copy(update={"recovery": ["optical"]})
    env = kinds.run_scenario("training", sc, out / "spares")
    r = env.result.runs[0]
    f, tl = r.failure_to_rewritten_s, r.timeline_s
    print(f"    GPU {r.failed_gpu} failed; placement {r.placement_before} -> {r.placement_after}; failure -> "
          f"circuits rewritten {f.emulated * 1e3:.1f} ms emulated ({f.real_equivalent * 1e3:.2f} ms real-equivalent), "
          f"-> first step of the relaunched job {tl.first_step:.2f} s emulated; step time after the swap "
          f"{r.steady.after.step_s:.3f} s against {r.steady.before.step_s:.3f} s before")
    v.judge("failover", tl.first_step, f"circuits rewritten after {f.emulated * 1e3:.0f} ms")
    return [f"spare swap: {c.line()}" for c in env.failed_checks]


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packet", action=argparse.BooleanOptionalAction, default=True,
                    help="the packet parts (root, Open vSwitch; default on; --no-packet: parts (1) and (2) on the flow backend only, no root)")
    ap.add_argument("--schedulers", nargs="+", metavar="NAME",
                    help="part (1)'s job-manager policies (default the scenario's six; the verdicts need fifo)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce_morphlux")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    from emulation.flowsim.job_manager import POLICIES

    bad = [x for x in args.schedulers or () if x not in POLICIES]
    if bad or (args.schedulers and "fifo" not in args.schedulers):
        print(f"reproduce_morphlux: --schedulers: {bad[0] + ' is unknown' if bad else 'fifo is needed'} "
              f"(known: {', '.join(POLICIES)})", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    from emulation.output import writing

    with writing(args.out, clear=True):
        args.out.mkdir(parents=True)
        v = Verdicts("morphlux")
        part1(v, args.schedulers)
        part2(args.out, not args.packet, v)
        if args.packet:
            failed = part3(args.out, v) + part4(args.out, v)
            v.judge("packet_checks", not failed, "; ".join(failed))
        print(f"\n{time.monotonic() - t0:.0f} s; results in {args.out}")
        return v.finish(args.out, args.packet)


if __name__ == "__main__":
    sys.exit(main())
