#!/usr/bin/env python3
"""Spectra on parallel OCSes: makespan of Spectra, its baseline and the lower bound, per workload.

Spec: ``docs/papers/spectra.md`` (Spectra, arXiv 2603.07373: decompose, schedule by load,
equalize by splitting; makespans 1.4x lower than the baseline on GPT workloads, 1.9x on MoE and
2.4x on standard benchmarks). For every workload, s = 2, 4, 8 OCSes and a sweep of the
reconfiguration delay delta, it plans Spectra and the baseline (:mod:`emulation.planners.spectra`),
checks both schedules (every pair served, every slot a permutation or matching), computes the
lower bound, and runs Spectra's schedule on the flow backend
(:mod:`emulation.flowsim.parallel_ocs`), whose makespan must equal the planner's. Workloads
(:mod:`emulation.workloads.spectra`): a GPT-like iteration (Llama-3-70B's shape, TP 8 in a
server, PP 4 x DP on the rail), two MoE layers (Qwen3-30B-A3B's routing shape: shared Zipf(1.2)
popularity, per-GPU Dirichlet(0.3)), and three synthetic benchmarks (uniform dense, sparse
skewed, sum of 4 permutations). Circuits ``directed`` (the paper's permutations) and ``duplex``
(this emulator's OCS: matchings).

With ``--packet``, Spectra's duplex schedules also run on the packet backend
(:mod:`emulation.emulator.parallel_ocs`: one Open vSwitch bridge per OCS, the controller running
each OCS's sequence on its own timeline) for every workload at ``--packet-gpus`` x
``--packet-switches`` and delta = ``--packet-delay-us``, beside the flow backend's run of the same
schedule, every slot lengthened by the guard a packet sender needs
(:func:`emulation.emulator.parallel_ocs.packet_guard_s`).

Usage: ``.venv/bin/python scripts/reproduce_spectra.py [--gpus N] [--switches S ...] [--delays-us
D ...] [--circuits directed|duplex|both] [--no-flow] [--packet [--packet-gpus N ...]
[--packet-switches S ...] [--packet-delay-us D]] [--out DIR]`` (default
``runs/reproduce_spectra``; writes ``spectra.csv``, and ``packet.csv`` with ``--packet``).

Ends with the verdicts against the paper (:mod:`emulation.reproduce`; ``DIR/verdicts.json``):
the mean baseline/Spectra factor of each workload class with directed circuits (the paper's)
at 16 GPUs, and Spectra's mean makespan over the lower bound; exits 1 if one missed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation.figures import write_csv  # noqa: E402
from emulation.flowsim.parallel_ocs import simulate_parallel  # noqa: E402
from emulation.output import fail, writing  # noqa: E402
from emulation.planners import spectra as sp  # noqa: E402
from emulation.reproduce import Verdicts  # noqa: E402
from emulation.units import bytes_per_s  # noqa: E402
from emulation.workloads import spectra as wl  # noqa: E402

#: The paper's average makespan reduction over its baseline, by workload class (abstract).
PAPER = {"GPT": 1.4, "MoE": 1.9, "standard": 2.4}


def workloads(n: int) -> list[tuple[str, str, object]]:
    """``[(name, class, (n, n) bytes)]`` of the evaluation (module doc)."""
    return [
        ("gpt", "GPT", wl.gpt_matrix(pp=4, dp=n // 4)),
        ("moe-zipf", "MoE", wl.moe_matrix(gpus=n, skew="zipf", skew_param=1.2)),
        ("moe-dirichlet", "MoE", wl.moe_matrix(gpus=n, skew="dirichlet", skew_param=0.3, popularity="per-gpu")),
        ("uniform", "standard", wl.uniform_matrix(n)),
        ("skewed", "standard", wl.skewed_matrix(n, large=4, small=min(8, n - 5))),
        ("sparse", "standard", wl.sparse_matrix(n, k=4)),
    ]


def table(n: int, switches: list[int], delays: list[float], gbps: float, circuits: list[str], flow: bool) -> list[dict]:
    rate = bytes_per_s(gbps)
    rows = []
    print(f"{n} GPUs, {gbps:g} Gbit/s per port; times in ms; base = baseline; decomposition: the one Spectra "
          f"kept, its configurations + splits; flow: the flow backend's makespan / the planner's - 1")
    print(f"{'workload':<14} {'circuits':<8} {'s':>2} {'delta us':>8} | {'Spectra':>9} {'base':>9} {'LB':>9} "
          f"{'Sp/LB':>6} {'base/Sp':>7} | {'decomposition':<14} {'paper':>5} {'flow':>8}")
    for name, cls, d in workloads(n):
        for circ in circuits:
            for s in switches:
                for delta in delays:
                    a = sp.spectra(d, s, rate, delta, circ)
                    b = sp.baseline(d, s, rate, delta, circ)
                    lb = sp.lower_bound(d, s, rate, delta, circ)
                    sp.check_schedule(a.schedule, d, s, rate, delta, circ)
                    sp.check_schedule(b.schedule, d, s, rate, delta, circ)
                    dev = None
                    if flow:
                        res = simulate_parallel(wl.demand_workload(d, name), a.schedule, gbps)
                        dev = res.time_s / a.makespan_s - 1
                    row = {"workload": name, "class": cls, "circuits": circ, "switches": s, "delta_s": delta,
                           "spectra_s": a.makespan_s, "baseline_s": b.makespan_s, "lower_bound_s": lb,
                           "spectra_over_lb": a.makespan_s / lb, "baseline_over_spectra": b.makespan_s / a.makespan_s,
                           "decomposition": a.decomposition, "terms": a.terms, "splits": a.splits,
                           "baseline_decomposition": b.decomposition, "flow_deviation": dev}
                    rows.append(row)
                    dec = f"{a.decomposition} {a.terms}+{a.splits}"
                    print(f"{name:<14} {circ:<8} {s:>2} {delta * 1e6:>8g} | {a.makespan_s * 1e3:>9.3f} "
                          f"{b.makespan_s * 1e3:>9.3f} {lb * 1e3:>9.3f} {row['spectra_over_lb']:>6.3f} "
                          f"{row['baseline_over_spectra']:>6.2f}x | {dec:<14} {PAPER[cls]:>4}x "
                          f"{'' if dev is None else f'{dev:+.0e}':>8}")
    return rows


def summary(rows: list[dict], flow: bool, wall: float, packet: list[dict] | None = None) -> None:
    for circ in sorted({r["circuits"] for r in rows}):
        sub = [r for r in rows if r["circuits"] == circ]
        parts = []
        for cls, paper in PAPER.items():
            got = [r["baseline_over_spectra"] for r in sub if r["class"] == cls]
            parts.append(f"{cls} {sum(got) / len(got):.2f}x (paper {paper}x, range {min(got):.2f}-{max(got):.2f})")
        print(f"{circ}: baseline/Spectra mean over s and delta: " + ", ".join(parts))
    ratio = [r["spectra_over_lb"] for r in rows]
    worse = sum(r["baseline_over_spectra"] < 1 - 1e-9 for r in rows)
    below = sum(x < 1 - 1e-9 for x in ratio)
    line = (f"summary: {len(rows)} schedules checked; Spectra/LB {min(ratio):.3f}-{max(ratio):.3f} "
            f"(mean {sum(ratio) / len(ratio):.3f}, {'never below 1' if not below else f'BELOW 1 in {below}'}); "
            f"Spectra later than the baseline in {worse}")
    if flow:
        dev = max(abs(r["flow_deviation"]) for r in rows)
        line += f"; flow backend = planner within {dev:.0e} in all {len(rows)}"
    if packet:
        ran = [r for r in packet if r["packet_s"] is not None]
        err = [abs(r["error"]) for r in ran]
        line += (f"; packets within {max(err, default=0.0):.2%} of flow in {len(ran)} runs "
                 f"({sum(r['delivered'] for r in ran)} delivered every byte)")
        if len(ran) < len(packet):
            line += "; not carried here: " + ", ".join(f"{r['workload']} at {r['gpus']} GPUs, s = {r['switches']}"
                                                      for r in packet if r["packet_s"] is None)
    print(line + f"; {wall:.0f} s")


#: Wall seconds a packet run may last at most: a workload whose makespan would take longer at
#: byte scale 0.1 runs at a smaller byte scale (the same real-equivalent times).
PACKET_WALL_S = 40.0


#: The lowest link rate a packet run steps down to (Mbit/s).
MIN_PACKET_MBPS = 1.25


def packet_table(gpus: list[int], switches: list[int], delay: float, gbps: float, out: Path) -> list[dict]:
    """Every workload's duplex Spectra schedule at each (n, s) with real packets beside the flow
    backend, one emulated fabric per (n, s) at the calibrated link rate; one row each (module
    doc). A run whose senders ran out of windows (the machine did not carry the fabric's slots)
    runs again on a new fabric: with a start guard of 1.25 x the controller's largest lateness if
    the guard was shorter, else at half the rate, down to :data:`MIN_PACKET_MBPS`; each row keeps
    its start guard and the settings given up.

    At the lowest rate, the workloads left get rows with ``packet_s`` None (not carried here).

    :raises emulation.emulator.net.EmulationError: a run failed otherwise.
    """
    from emulation.emulator.parallel_ocs import START_GUARD_S, WindowsMissed

    rows: list[dict] = []
    print(f"packets: delta {delay * 1e6:g} us; times in us (real-equivalent); guard: what every slot is lengthened "
          f"by for packets; flow and packets run the guarded schedule")
    print(f"{'workload':<14} {'n':>3} {'s':>2} | {'Spectra':>9} {'guard':>6} {'flow':>9} {'packets':>9} {'error':>7} | "
          f"{'link':>9} {'TDF':>7} {'dark us':>8} {'late ms':>7} {'drops':>5} {'wall s':>6}")
    for n in gpus:
        for s in switches:
            todo = workloads(n)
            rate_mbps, tried, guard = None, [], START_GUARD_S
            while todo:
                d_out = out / "packet" / f"{n}gpus-{s}ocs-{len(tried)}"
                try:
                    _packet_rows(n, s, delay, gbps, d_out, todo, rate_mbps, guard, tried, rows)
                    todo = []
                except WindowsMissed as e:
                    rate_mbps = e.link_mbps
                    done = {r["workload"] for r in rows if (r["gpus"], r["switches"]) == (n, s)}
                    todo = [w for w in todo if w[0] not in done]
                    tried.append(f"{rate_mbps:g}Mb/{guard * 1e3:.0f}ms")
                    if guard < 1.25 * e.late_s:  # the controller was late: wait for it longer
                        guard = math.ceil(1.25 * e.late_s * 100) / 100
                    elif rate_mbps / 2 >= MIN_PACKET_MBPS:
                        rate_mbps /= 2
                    else:  # this machine does not carry the rest: say so in their rows
                        print(f"{', '.join(w[0] for w in todo)} at {n} GPUs, s = {s}: not carried on this machine "
                              f"(given up: {' '.join(tried)}; {str(e).split(': ', 1)[0]})")
                        rows += [{"workload": w[0], "gpus": n, "switches": s, "delta_s": delay, "packet_s": None,
                                  "error": None, "delivered": False, "given_up": " ".join(tried)} for w in todo]
                        break
                    print(f"{todo[0][0]}: not faithful at {tried[-1]} (the controller up to {e.late_s * 1e3:.0f} ms "
                          f"late): again at {rate_mbps:g} Mbit/s with a {guard * 1e3:.0f} ms start guard")
    return rows


def _packet_rows(n: int, s: int, delay: float, gbps: float, d_out: Path, todo: list, rate_mbps: float | None,
                 start_guard_s: float, tried: list[str], rows: list[dict]) -> None:
    """Run ``todo``'s workloads at (n, s) on one new fabric, at ``rate_mbps`` or (None) the
    calibrated rate (Mbit/s), senders starting ``start_guard_s`` (wall s) into each window;
    append a row per run to ``rows``.

    :raises emulation.emulator.parallel_ocs.WindowsMissed: a run missed its windows (at the
        rate it names)."""
    from emulation.emulator.parallel_ocs import packet_guard_s, run_parallel_ocs
    from emulation.emulator.session import PacketSession
    from emulation.scale import Scale
    from emulation.scenario.schema import EmulationSpec
    from topologies.builders import parallel_ocs

    rate = bytes_per_s(gbps)
    spec = EmulationSpec(byte_scale=0.1, **({"link_mbps": rate_mbps, "headroom": "skip"} if rate_mbps else {}))
    with PacketSession(parallel_ocs(n, s, gbps, delay), d_out, spec) as session:
        emu, base = session.emu, session.scale
        for name, _cls, d in todo:
            a = sp.spectra(d, s, rate, delay, "duplex")
            wall = a.makespan_s * base.tdf
            scale = base if wall <= PACKET_WALL_S else Scale(base.link_mbps, base.byte_scale * PACKET_WALL_S / wall,
                                                             gbps)
            guard = packet_guard_s(a.schedule, scale, emu.mtu, start_guard_s)
            sched = a.schedule.guarded(guard)
            w = wl.demand_workload(d, name)
            flow = simulate_parallel(w, sched, gbps)
            t = time.perf_counter()
            pkt = run_parallel_ocs(emu, name, w, sched, scale, 0.0, d_out / name, start_guard_s)
            row = {"workload": name, "gpus": n, "switches": s, "delta_s": delay, "spectra_s": a.makespan_s,
                   "guard_s": guard, "flow_s": flow.time_s, "packet_s": pkt.time_s,
                   "error": pkt.time_s / flow.time_s - 1, "link_mbps": scale.link_mbps,
                   "start_guard_s": start_guard_s, "given_up": " ".join(tried),
                   "byte_scale": scale.byte_scale, "tdf": scale.tdf,
                   "dark_measured_s": pkt.slots.dark_window_measured_s,
                   "start_error_p99_s": pkt.slots.start_error_s.p99,
                   "drops_dark": pkt.drops.get("dark", 0), "retransmissions": pkt.steps[0].retransmissions,
                   "delivered": pkt.bytes_delivered == pkt.bytes_sent, "wall_s": time.perf_counter() - t}
            rows.append(row)
            print(f"{name:<14} {n:>3} {s:>2} | {a.makespan_s * 1e6:>9.1f} {guard * 1e6:>6.1f} "
                  f"{flow.time_s * 1e6:>9.1f} {pkt.time_s * 1e6:>9.1f} {row['error']:>+7.2%} | "
                  f"{scale.link_mbps:>4g} Mb/s {scale.tdf:>7.0f} {row['dark_measured_s'] * 1e6:>8.2f} "
                  f"{row['start_error_p99_s'] * 1e3:>7.2f} {row['drops_dark']:>5} {row['wall_s']:>6.1f}")


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=16, help="GPUs n, a multiple of 4 from 8 (GPT: PP 4 x DP n/4)")
    ap.add_argument("--switches", type=int, nargs="+", default=[2, 4, 8], help="numbers of parallel OCSes s")
    ap.add_argument("--delays-us", type=float, nargs="+", default=[10.0, 100.0, 1000.0, 10000.0],
                    help="reconfiguration delays delta, us")
    ap.add_argument("--port-gbps", type=float, default=400.0, help="rate B of every port, Gbit/s")
    ap.add_argument("--circuits", choices=["directed", "duplex", "both"], default="both",
                    help="directed permutations (the paper's), duplex matchings (this emulator's OCS) or both")
    ap.add_argument("--flow", action=argparse.BooleanOptionalAction, default=True,
                    help="run every Spectra schedule on the flow backend (default on)")
    ap.add_argument("--packet", action="store_true", help="also run the duplex schedules with real packets (root)")
    ap.add_argument("--packet-gpus", type=int, nargs="+", default=[8], help="GPUs of the packet runs (8 or 12 or 16)")
    ap.add_argument("--packet-switches", type=int, nargs="+", default=[2, 4], help="OCSes s of the packet runs")
    ap.add_argument("--packet-delay-us", type=float, default=100.0, help="delta of the packet runs, us")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "runs" / "reproduce_spectra")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    if args.gpus < 8 or args.gpus % 4 or args.gpus > 256:
        return fail(f"--gpus: a multiple of 4 from 8 to 256 (GPT: PP 4 x DP n/4), got {args.gpus}")
    if min(args.switches) < 1 or max(args.switches) > 64:
        return fail(f"--switches: from 1 to 64, got {' '.join(map(str, args.switches))}")
    if min(args.delays_us) < 0:
        return fail(f"--delays-us: must be >= 0, got {' '.join(f'{d:g}' for d in args.delays_us)}")
    if not args.port_gbps > 0:
        return fail(f"--port-gbps: must be positive, got {args.port_gbps:g}")
    if args.packet and (min(args.packet_gpus) < 8 or any(g % 4 for g in args.packet_gpus) or max(args.packet_gpus) > 16):
        return fail(f"--packet-gpus: multiples of 4 from 8 to 16, got {' '.join(map(str, args.packet_gpus))}")
    if args.packet and (min(args.packet_switches) < 1 or max(args.packet_switches) > 4):
        return fail(f"--packet-switches: from 1 to 4, got {' '.join(map(str, args.packet_switches))}")
    if args.packet and args.packet_delay_us < 0:
        return fail(f"--packet-delay-us: must be >= 0, got {args.packet_delay_us:g}")
    circuits = ["directed", "duplex"] if args.circuits == "both" else [args.circuits]
    with writing(args.out):
        t = time.perf_counter()
        rows = table(args.gpus, args.switches, [d * 1e-6 for d in args.delays_us], args.port_gbps, circuits,
                     args.flow)
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "spectra.csv", rows)
        packet = None
        if args.packet:
            packet = packet_table(args.packet_gpus, args.packet_switches, args.packet_delay_us * 1e-6, args.port_gbps,
                                  args.out)
            write_csv(args.out / "packet.csv", packet)
        summary(rows, args.flow, time.perf_counter() - t, packet)
        print(f"wrote {args.out}/spectra.csv" + (f" and {args.out}/packet.csv" if packet else ""))
        return verdicts(rows, args.gpus, packet).finish(args.out, args.packet)


def verdicts(rows: list[dict], gpus: int, packet: list[dict] | None = None) -> Verdicts:
    """The paper's average factors per workload class (directed circuits, 16 GPUs) and the bound."""
    v = Verdicts("spectra")
    directed = [r for r in rows if r["circuits"] == "directed"]
    for cls, claim in (("GPT", "gpt"), ("MoE", "moe"), ("standard", "standard")):
        got = [r["baseline_over_spectra"] for r in directed if r["class"] == cls]
        if gpus != 16 or not got:
            v.skip(claim, "judged with directed circuits at 16 GPUs (the defaults)")
            continue
        v.judge(claim, sum(got) / len(got), f"mean of {len(got)} schedules, {min(got):.2f}-{max(got):.2f}")
    ratio = [r["spectra_over_lb"] for r in rows]
    below = sum(x < 1 - 1e-9 for x in ratio)
    v.judge("bound", None if below else sum(ratio) / len(ratio),
            f"BELOW the lower bound in {below} schedules: a bug" if below
            else f"{min(ratio):.3f}-{max(ratio):.3f} over {len(ratio)} schedules, never below 1")
    if packet:
        ran = [r for r in packet if r["packet_s"] is not None]
        left = len(packet) - len(ran)
        worst = max(ran, key=lambda r: abs(r["error"]), default=None)
        v.judge("packet_agreement", None if left or worst is None else abs(worst["error"]),
                f"{left} runs not carried on this machine" if left else
                f"worst {worst['workload']} at s = {worst['switches']} over {len(ran)} runs")
    return v


if __name__ == "__main__":
    sys.exit(main())
