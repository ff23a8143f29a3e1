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
- a Ring AllReduce of ``--bytes``, whose measured time is compared with the flow backend's on
  the same plan (alpha-beta: Ring on a ring of circuits is 2(n-1) (alpha + s/(nB))). It is sent
  at the byte scale ``ocslab run`` would use (``--byte-scale-rule run``, the default:
  ``--byte-scale``, raised up to 8 times so that every step is at least 64 frames and 250 ms on the wire,
  :func:`emulation.emulator.execute.step_scale`), or at ``--byte-scale`` itself (``fixed``, as the
  tables before steering were measured). Ring's steps each wait for their slowest GPU, and a
  busy machine starts n senders over milliseconds; a larger byte scale makes a step longer
  against that skew.

The first rate (from the top) where the probe reaches 90% and Ring is within 10% is the
ceiling at n; lower rates are not tried. A count whose every rate down to ``--min-mbps`` fails
has no ceiling ("none"): this machine cannot emulate n GPUs faithfully.

Every row also gives the link load the machine carried (efficiency x rate x links); the largest
of a passing row, per datapath, is this machine's forwarding capacity (a lower bound: an
overloaded probe carries less than the machine can, as losses and retransmissions take their
share), from which the script prints the capacity model (:func:`emulation.emulator.limits.lab_gpus`): GPUs per machine at 5-40 Mbit/s per link,
and how many GPUs a lab of ``--machines`` such machines runs a Ring on at 10 Mbit/s.

Each count is measured on two datapaths in turn (``--datapath both``, the default): every port on
a packet socket served by ovs-vswitchd's one main thread, wherever the scheduler puts it
(before), and after: at MTU 1500 the GPUs' ports polled by a PMD thread over AF_XDP on a core of
its own (:mod:`emulation.emulator.pmd`); above it, where jumbo frames do not fit an XDP socket,
ovs-vswitchd pinned to one core and the GPUs' receive steered to the others
(:mod:`emulation.emulator.steering`). ``--datapath all`` measures all three.

With ``--servers A B ...`` (lab servers, ``ocslab servers up``, or machines your ssh reaches)
each count is instead spread over the servers (docs/cluster.md) and measured twice, with one
central OCS on the first server and with the OCS sharded over all of them
(``emulation.ocs: sharded``), on the servers' packet-socket datapath.

Usage (root, Open vSwitch running): ``.venv/bin/python scripts/bench_packet_ceiling.py
[--gpus 8 16 32 64] [--start-mbps 20] [--min-mbps 0.625] [--mtu 1500|9000] [--datapath both|all|packet|pmd|steer]
[--byte-scale-rule run|fixed] [--servers A B ...] [--machines 16] [--json runs/ceiling.json] [--markdown]``. Results and logs under ``runs/bench_packet_ceiling/``.
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

from emulation.emulator.limits import PROBE_PASS as PROBE_TARGET  # noqa: E402
RING_TOLERANCE = 0.10
#: the datapaths measured, before first
DATAPATHS = ("packet", "pmd", "steer")
#: the OCS layouts measured on servers (``--servers``), central first
LAYOUTS = ("central", "sharded")


def measure(n: int, rates: list[float], nbytes: int, byte_scale: float, alpha_s: float, probe_s: float,
            out: Path, mtu: int, datapath: str = "pmd", rule: str = "run", servers=None,
            ocs: str = "central") -> list[dict]:
    """Probe and Ring at each of ``rates`` (descending) on n GPUs until one passes; every row.
    ``rule``: Ring's byte scale, ``run`` (as ``ocslab run`` raises it for short steps) or
    ``fixed`` (``byte_scale``). ``servers``: a :class:`~emulation.emulator.cluster.Cluster` to
    spread the fabric over, its OCS ``ocs`` (``central`` or ``sharded``); the row's ``datapath``
    is then ``ocs``."""
    from emulation.emulator.calibration import measure_headroom
    from emulation.emulator.execute import step_scale
    from emulation.emulator.limits import carried_mbps
    from emulation.emulator.net import EmulatedFabric, EmulationError
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
    shards = len(servers.servers) if servers is not None and ocs == "sharded" else 1
    where = out / f"gpus{n}-{datapath if servers is None else ocs}"
    with EmulatedFabric(f, where, link_mbps=rates[0], mtu=mtu, datapath=datapath, servers=servers,
                        ocs_shards=shards) as emu:
        setup_s = time.monotonic() - t0
        if servers is not None:
            datapath = ocs
        elif emu.datapath != datapath:  # refused here: the fabric fell back (pmd: no AF_XDP; steer: no pinning)
            raise EmulationError(f"--datapath {datapath}: this machine runs the fabric on {emu.datapath} instead")
        for rate in rates:
            emu.set_link_mbps(rate)
            scale = Scale(rate, byte_scale, f.port_gbps)
            head = measure_headroom(emu, scale, where / f"probe-{rate:g}", probe_s)
            ring_scale = step_scale(w, scale, mtu, f.ports_per_gpu) if rule == "run" else scale
            pkt = run_workload(emu, "ring", w, plan, ring_scale, alpha_s, where / f"ring-{rate:g}")
            row = {"gpus": n, "datapath": datapath, "mtu": mtu, "link_mbps": rate, "tdf": ring_scale.tdf,
                   "byte_scale": ring_scale.byte_scale, "probe_efficiency": head["efficiency"],
                   "ring_packet_s": pkt.time_s, "ring_flow_s": flow, "ring_error": (pkt.time_s - flow) / flow,
                   "retransmissions": sum(s.retransmissions or 0 for s in pkt.steps), "setup_s": setup_s,
                   "carried_mbps": carried_mbps(n, 2, rate, head["efficiency"])}
            row["ok"] = row["probe_efficiency"] >= PROBE_TARGET and abs(row["ring_error"]) <= RING_TOLERANCE
            rows.append(row)
            print(f"{n:>3} GPUs {datapath:>6} {rate:>7g} Mbit/s: probe {head['efficiency']:6.1%}  ring (byte scale "
                  f"{ring_scale.byte_scale:.3g}) {pkt.time_s * 1e3:8.3f} ms "
                  f"vs {flow * 1e3:8.3f} ms ({row['ring_error']:+6.1%})  {'ok' if row['ok'] else 'no'}", flush=True)
            if row["ok"]:
                break
    return rows


def _cell(rows: list[dict]) -> tuple[str, float | None]:
    """One datapath's cell of the table (its highest passing rate, probe and Ring error) and the rate."""
    ok = [r for r in rows if r["ok"]]
    if not ok:
        tried = ", ".join(f"{r['link_mbps']:g}" for r in rows)
        return (f"none (tried {tried})" if rows else "-"), None
    r = ok[0]
    scaled = f" (byte scale {r['byte_scale']:.2g})" if "byte_scale" in r else ""
    return f"{r['link_mbps']:g} Mbit/s, probe {r['probe_efficiency']:.1%}, Ring {r['ring_error']:+.1%}{scaled}", r["link_mbps"]


def markdown(rows: list[dict], gpus: list[int], where: str) -> str:
    """The ceiling table: per GPU count, the highest link rate on each datapath measured (packet
    sockets only: before; a PMD thread over AF_XDP, or steering: after) and each after's gain."""
    paths = [d for d in (*DATAPATHS, *LAYOUTS) if any(r["datapath"] == d for r in rows)]
    names = {"packet": "before: packet sockets, one thread", "pmd": "after: PMD thread over AF_XDP + main thread",
             "steer": "after: Open vSwitch on one core, the GPUs' receive steered to the other",
             "central": "one central OCS", "sharded": "the OCS sharded over the servers"}
    mtu = rows[0]["mtu"] if rows else 1500
    base = "central" if "central" in paths else "packet"
    gains = [d for d in paths if d != base] if base in paths else []
    out = [f"{where}; MTU {mtu}; OCS star, 2 ports per GPU, ring of circuits; the highest link rate at which the "
           "headroom probe reaches 90% and Ring AllReduce is within 10% of alpha-beta.", "",
           "| GPUs | " + " | ".join(names[d] for d in paths) + "".join(f" | gain ({d})" for d in gains) + " |",
           "|--:|" + "---|" * len(paths) + "--:|" * len(gains)]
    for n in gpus:
        cells = {d: _cell([r for r in rows if r["gpus"] == n and r["datapath"] == d]) for d in paths}
        line = f"| {n} | " + " | ".join(c for c, _ in cells.values()) + " |"
        for d in gains:
            a, b = cells[base][1], cells[d][1]
            line += f" {b / a:g}x |" if a and b else " - |"
        out.append(line)
    return "\n".join(out)


def capacity(rows: list[dict], machines: int) -> str:
    """The capacity model per datapath measured: the most link load a passing probe carried here,
    the GPUs per machine it allows at 5-40 Mbit/s, and a lab of ``machines`` machines at 10
    Mbit/s (:func:`emulation.emulator.limits.lab_gpus`)."""
    from emulation.emulator.limits import gpus_per_machine, lab_gpus

    out = []
    for d in dict.fromkeys(r["datapath"] for r in rows):
        passed = [r for r in rows if r["datapath"] == d and r["ok"]]
        if not passed:
            out.append(f"capacity model ({d}): no rate passed, so no capacity is measured")
            continue
        best = max(passed, key=lambda r: r["carried_mbps"])
        cap = best["carried_mbps"]
        per = ", ".join(f"{gpus_per_machine(cap, r)} at {r:g}" for r in (5, 10, 20, 40))
        who = "the servers together" if d in LAYOUTS else "this machine"
        out.append(f"capacity model ({d}): {who} carried at most {cap:.0f} Mbit/s of link load ({best['gpus']} "
                   f"GPUs at {best['link_mbps']:g} Mbit/s, probe {best['probe_efficiency']:.1%}); GPUs per machine "
                   f"(2 ports, probe >= 90%): {per} Mbit/s; {machines} machines at 10 Mbit/s: "
                   f"{lab_gpus(machines, cap, 10.0)} GPUs with the OCS sharded per machine, "
                   f"{lab_gpus(machines, cap, 10.0, ocs='central')} with one central OCS")
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
    p.add_argument("--datapath", choices=("both", "all", *DATAPATHS), default="both",
                   help="packet: every port on packet sockets, one ovs-vswitchd thread (before); pmd: the GPUs' "
                        "ports polled by a PMD thread over AF_XDP (after, MTU 1500 only); steer: ovs-vswitchd on "
                        "one core, the GPUs' receive steered to the others; both: packet, then pmd at MTU 1500 "
                        "and steer above; all: each in turn")
    p.add_argument("--byte-scale-rule", choices=("run", "fixed"), default="run",
                   help="Ring's byte scale: run (raised for short steps, as ocslab run does; default) or fixed "
                        "(--byte-scale)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_packet_ceiling")
    p.add_argument("--servers", nargs="+", default=[],
                   help="spread each fabric over these servers (ssh destinations; the lab's while it has them) "
                        "and measure a central and a sharded OCS instead of the datapaths")
    p.add_argument("--machines", type=int, default=16, help="machines of the lab the capacity model sizes (default 16)")
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
    if (not (0 < args.min_mbps <= args.start_mbps <= 1000) or not 0 < args.byte_scale <= 1 or min(args.gpus) < 2
            or args.machines < 1):
        print("bench_packet_ceiling: need 0 < --min-mbps <= --start-mbps <= 1000, 0 < --byte-scale <= 1, "
              "--gpus >= 2, --machines >= 1", file=sys.stderr)
        return 2
    from emulation.output import writing

    with writing(args.out):
        rates = [args.start_mbps]
        while rates[-1] / 2 >= args.min_mbps:
            rates.append(rates[-1] / 2)
        from emulation.emulator.net import EmulationError

        rows = []
        paths = {"both": ["packet", "pmd" if args.mtu <= dpn.MTU else "steer"], "all": list(DATAPATHS)}.get(
            args.datapath, [args.datapath])
        if args.mtu > dpn.MTU and "pmd" in paths:
            paths.remove("pmd")  # jumbo frames do not fit an XDP socket's frames
        cluster = None
        if args.servers:
            from emulation.emulator.session import cluster_of
            from emulation.scenario.schema import EmulationSpec

            from pydantic import ValidationError

            try:
                cluster = cluster_of(EmulationSpec(servers=tuple(args.servers), ocs="sharded"))
            except ValidationError as e:
                print(f"bench_packet_ceiling: --servers: {e.errors()[0]['msg'].removeprefix('Value error, ')}",
                      file=sys.stderr)
                return 2
            except EmulationError as e:
                print(f"bench_packet_ceiling: --servers: {e}", file=sys.stderr)
                return 2
            paths = ["packet"]
        try:
            for n in args.gpus:
                for d in paths:
                    for ocs in LAYOUTS if cluster is not None else ("central",):
                        rows += measure(n, rates, nbytes, args.byte_scale, args.alpha_us * 1e-6, args.probe_s,
                                        args.out, args.mtu, d, args.byte_scale_rule, cluster, ocs)
        except EmulationError as e:
            print(f"bench_packet_ceiling: {e}", file=sys.stderr)
            return 2
        finally:
            if cluster is not None:
                cluster.close()
        where = machine() + (f"; spread over {', '.join(args.servers)}" if cluster is not None else "")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"machine": where, "rows": rows}, indent=1))
        if args.markdown:
            print(markdown(rows, args.gpus, where))
        if rows:
            print(capacity(rows, args.machines))
        return 0


if __name__ == "__main__":
    sys.exit(main())
