#!/usr/bin/env python3
"""The packet backend's ceiling on this machine (a benchmark, not a test): for each GPU count,
the highest emulated link rate at which both the headroom probe and a Ring AllReduce stay
within 10% of alpha-beta.

For every GPU count n (default 8, 16, 32, 64) the demo's fabric kind is emulated (an OCS star,
2 ports per GPU, circuits in a ring) and, from ``--start-mbps`` down by halves, each rate is
measured twice:

- the headroom probe (:func:`emulation.emulator.calibration.measure_headroom`): every link
  saturated at once for ``--probe-s`` emulated seconds; efficiency = link-bound time / measured
  time;
- a Ring AllReduce of ``--bytes`` (``--byte-scale`` of it on the wire), whose measured time is
  compared with the flow backend's on the same plan (alpha-beta: Ring on a ring of circuits is
  2(n-1) (alpha + s/(nB))).

The first rate (from the top) where the probe reaches 90% and Ring is within 10% is the
ceiling at n; lower rates are not tried. A count whose every rate down to ``--min-mbps`` fails
has no ceiling ("none"): this machine cannot emulate n GPUs faithfully.

Usage (root, Open vSwitch running): ``.venv/bin/python scripts/bench_packet_ceiling.py
[--gpus 8 16 32 64] [--start-mbps 20] [--min-mbps 0.625] [--mtu 1500|9000] [--json runs/ceiling.json]
[--markdown]``. Results and logs under ``runs/bench_packet_ceiling/``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_flowsim import machine  # noqa: E402

PROBE_TARGET = 0.90
RING_TOLERANCE = 0.10


def measure(n: int, rates: list[float], nbytes: int, byte_scale: float, alpha_s: float, probe_s: float,
            out: Path, mtu: int) -> list[dict]:
    """Probe and Ring at each of ``rates`` (descending) on n GPUs until one passes; every row."""
    from emulation.emulator.calibration import measure_headroom
    from emulation.emulator.net import EmulatedFabric
    from emulation.emulator.orchestrator import run_workload
    from emulation.flowsim import simulate
    from emulation.planners import make_plan
    from emulation.scale import Scale
    from emulation.workloads import build
    from topologies import ocs_star

    f = ocs_star(n, 2, 400.0, 0.0, "ring")
    w = build("ring", n, nbytes)
    plan = make_plan("none", f, w)
    flow = simulate(f, w, plan, alpha_s=alpha_s, record_transfers=False).time_s
    rows = []
    t0 = time.monotonic()
    with EmulatedFabric(f, out / f"gpus{n}", link_mbps=rates[0], mtu=mtu) as emu:
        setup_s = time.monotonic() - t0
        for rate in rates:
            emu.set_link_mbps(rate)
            scale = Scale(rate, byte_scale, f.port_gbps)
            head = measure_headroom(emu, scale, out / f"gpus{n}" / f"probe-{rate:g}", probe_s)
            pkt = run_workload(emu, "ring", w, plan, scale, alpha_s, out / f"gpus{n}" / f"ring-{rate:g}")
            row = {"gpus": n, "mtu": mtu, "link_mbps": rate, "tdf": scale.tdf, "probe_efficiency": head["efficiency"],
                   "ring_packet_s": pkt.time_s, "ring_flow_s": flow, "ring_error": (pkt.time_s - flow) / flow,
                   "retransmissions": sum(s.retransmissions or 0 for s in pkt.steps), "setup_s": setup_s}
            row["ok"] = row["probe_efficiency"] >= PROBE_TARGET and abs(row["ring_error"]) <= RING_TOLERANCE
            rows.append(row)
            print(f"{n:>3} GPUs {rate:>7g} Mbit/s: probe {head['efficiency']:6.1%}  ring {pkt.time_s * 1e3:8.3f} ms "
                  f"vs {flow * 1e3:8.3f} ms ({row['ring_error']:+6.1%})  {'ok' if row['ok'] else 'no'}", flush=True)
            if row["ok"]:
                break
    return rows


def markdown(rows: list[dict], gpus: list[int], where: str) -> str:
    """The README's ceiling table."""
    out = [f"{where}; OCS star, 2 ports per GPU, ring of circuits; Ring AllReduce within 10% of alpha-beta and the "
           "headroom probe at 90% or more.", "",
           "| GPUs | highest link rate (Mbit/s) | TDF | probe efficiency | Ring: packets / flow (ms) | error | "
           "rates tried |", "|--:|--:|--:|--:|--:|--:|---|"]
    for n in gpus:
        mine = [r for r in rows if r["gpus"] == n]
        ok = [r for r in mine if r["ok"]]
        tried = ", ".join(f"{r['link_mbps']:g}" for r in mine)
        if not ok:
            out.append(f"| {n} | none | | | | | {tried} |")
            continue
        r = ok[0]
        out.append(f"| {n} | {r['link_mbps']:g} | {r['tdf']:,.0f} | {r['probe_efficiency']:.1%} | "
                   f"{r['ring_packet_s'] * 1e3:.3f} / {r['ring_flow_s'] * 1e3:.3f} | {r['ring_error']:+.1%} | {tried} |")
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--start-mbps", type=float, default=20.0)
    p.add_argument("--min-mbps", type=float, default=0.625)
    p.add_argument("--bytes", default="25MiB")
    p.add_argument("--byte-scale", type=float, default=0.1)
    p.add_argument("--alpha-us", type=float, default=5.0)
    p.add_argument("--probe-s", type=float, default=1.0)
    p.add_argument("--mtu", type=int, default=1500, help="MTU of the fabric's interfaces (1500 ... 9000 bytes)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_packet_ceiling")
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    from emulation.units import parse_bytes

    try:
        nbytes = parse_bytes(args.bytes)
    except ValueError as e:
        print(f"bench_packet_ceiling: --bytes: {e}", file=sys.stderr)
        return 2
    from emulation import dataplane as dpn

    if not dpn.MTU <= args.mtu <= dpn.MAX_MTU:
        print(f"bench_packet_ceiling: --mtu: must be in [{dpn.MTU}, {dpn.MAX_MTU}] bytes, got {args.mtu}",
              file=sys.stderr)
        return 2
    if not (0 < args.min_mbps <= args.start_mbps <= 1000) or not 0 < args.byte_scale <= 1 or min(args.gpus) < 2:
        print("bench_packet_ceiling: need 0 < --min-mbps <= --start-mbps <= 1000, 0 < --byte-scale <= 1, "
              "--gpus >= 2", file=sys.stderr)
        return 2
    from emulation.output import writing

    with writing(args.out):
        rates = [args.start_mbps]
        while rates[-1] / 2 >= args.min_mbps:
            rates.append(rates[-1] / 2)
        from emulation.emulator.net import EmulationError

        rows = []
        for n in args.gpus:
            try:
                rows += measure(n, rates, nbytes, args.byte_scale, args.alpha_us * 1e-6, args.probe_s, args.out, args.mtu)
            except EmulationError as e:
                print(f"bench_packet_ceiling: {e}", file=sys.stderr)
                return 2
        where = machine()
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"machine": where, "rows": rows}, indent=1))
        if args.markdown:
            print(markdown(rows, args.gpus, where))
        return 0


if __name__ == "__main__":
    sys.exit(main())
