#!/usr/bin/env python3
"""MoE dispatch + combine on an EPS, a round-robin rotor OCS and a duplex BvN-planned OCS.

Spec: ``docs/mechanisms.md`` (FlashDMoE traffic: 8 GPUs, H = 2048 FP32, top-2, capacity factor 1.0),
``docs/mechanisms.md`` (PipSwitch, arXiv 2501.18136 matchings, Birkhoff-von Neumann). Scenarios:
``experiments/moe_eps.yaml`` and ``experiments/moe_ocs.yaml`` (their layer is overridden below).

(1) Flow backend, 8 GPUs, 8 and 16 experts, skews uniform / Zipf(1.2) / Dirichlet(0.3), capacity
    factor 1.0 (and 2.0, beyond the spec, where the hot pairs exceed the rotor's slot): network
    bytes padded vs payload-efficient, dropped tokens, and dispatch+combine time on the EPS, the
    rotor and the plan, with slot utilisation and the plan's method and slots per turn.
(2) ``--packet``: the same 8-GPU, 16-expert layer (Zipf 1.2 and uniform) on real packets (EPS and
    both OCS schedules, padded and payload), against the flow backend: agreement within 15%.
(3) 64 GPUs, 64 experts, Zipf 1.2 on the flow backend (rotor and plan): times and wall clock.
(4) Two-hop forwarding on the rotor (``experiments/moe_twohop.yaml``, RotorLB-style relaying of the
    pairs' excess through intermediate GPUs), flow backend: shared vs per-GPU expert popularity,
    capacity factors 1.0 and 2.0, rotor slots of 200-400 us: direct vs two-hop vs the BvN plan;
    with ``--packet`` the scenario's four runs on real packets against the flow backend; and a
    64-GPU per-GPU-affinity layer on the flow backend.

Usage: ``.venv/bin/python scripts/reproduce_moe.py [--packet] [--out DIR]`` (default
``runs/reproduce_moe``; ``--packet`` needs root and Open vSwitch).

Ends with the verdicts against the paper (:mod:`emulation.reproduce`; ``DIR/verdicts.json``):
the payload-efficient dispatch volume against the paper's formula (uniform routing, a capacity
factor that drops nothing), payload against padded bytes, and with ``--packet`` the packets'
agreement with the flow backend; exits 1 if one missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation.collective import runner  # noqa: E402
from emulation.scenario import Scenario, load_scenario  # noqa: E402
from emulation.figures import write_csv  # noqa: E402
from emulation.reproduce import Verdicts  # noqa: E402
from emulation.envelope import ResultEnvelope  # noqa: E402
from emulation.workloads.moe import route  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SKEWS = [("uniform", 1.0), ("zipf", 1.2), ("dirichlet", 0.3)]


def with_layer(sc: Scenario, gpus: int | None = None, **moe) -> Scenario:
    """``sc`` with its ``moe`` section (and GPU count) changed."""
    upd: dict = {"moe": dataclasses.replace(sc.moe, **moe, gpus=gpus or sc.moe.gpus)}
    if gpus:
        upd["fabric"] = sc.fabric.model_copy(update={"gpus": gpus})
    return sc.model_copy(update=upd)


#: Every packet run's failed checks, one line each (the ``packet_checks`` verdict).
PACKET_FAILURES: list[str] = []


def packet_run(sc: Scenario, out: Path) -> ResultEnvelope:
    """``sc`` on the packet backend as ``ocslab run`` does it (judged, ``result.json`` written
    in ``out``); its failed checks noted in :data:`PACKET_FAILURES`."""
    from emulation import kinds

    env = kinds.run_scenario("collective", sc, out, "packet", show=False)
    PACKET_FAILURES.extend(f"{sc.name}: {c.line()}" for c in env.failed_checks)
    return env


def times(env: ResultEnvelope) -> dict[str, dict]:
    """``{run name: run record}`` (``result.json``'s form)."""
    return {r.name: r.to_json() for r in env.result.runs}


def part1(eps: Scenario, ocs: Scenario) -> list[dict]:
    rows = []
    print("(1) flow backend, 8 GPUs, top-2, 4096 tokens/GPU, H 2048 FP32; times in ms (dispatch + combine)")
    print(f"{'E':>3} {'skew':<14} {'CF':>3} {'padded MiB':>10} {'payload MiB':>11} {'ratio':>5} {'dropped':>7} | "
          f"{'mode':<7} {'EPS':>6} {'rotor':>6} {'plan':>6} {'util r/p':>9} plan")
    for cf in (1.0, 2.0):
        for experts in (8, 16):
            for skew, a in SKEWS:
                e = with_layer(eps, experts=experts, skew=skew, skew_param=a, capacity_factor=cf)
                o = with_layer(ocs, experts=experts, skew=skew, skew_param=a, capacity_factor=cf)
                tr = route(o.moe)
                pad, pay = tr.network_bytes("padded"), tr.network_bytes("payload")
                te, to = times(runner.run_flow(e)), times(runner.run_flow(o))
                for mode in ("padded", "payload"):
                    r, p = to[f"rotor-{mode}"], to[f"plan-{mode}"]
                    row = {"experts": experts, "skew": f"{skew}({a:g})", "cf": cf, "padded_bytes": pad,
                           "payload_bytes": pay, "ratio": pad / pay, "dropped": tr.dropped, "mode": mode,
                           "eps_s": te[f"eps-{mode}"]["time_s"], "rotor_s": r["time_s"], "plan_s": p["time_s"],
                           "rotor_util": r["slots"]["slot_utilisation"], "plan_util": p["slots"]["slot_utilisation"],
                           "plan_method": p["slots"]["method"], "plan_slots": p["slots"]["slots_per_turn"],
                           "padding_bytes": r["padding_bytes"]}
                    rows.append(row)
                    print(f"{experts:>3} {row['skew']:<14} {cf:>3g} {pad / 2**20:>10.1f} {pay / 2**20:>11.1f} "
                          f"{pad / pay:>5.2f} {tr.dropped:>7} | {mode:<7} {row['eps_s'] * 1e3:>6.3f} "
                          f"{row['rotor_s'] * 1e3:>6.3f} {row['plan_s'] * 1e3:>6.3f} "
                          f"{row['rotor_util']:>4.2f}/{row['plan_util']:.2f} {row['plan_slots']} {row['plan_method']}")
    later = [r for r in rows if r["plan_s"] > r["rotor_s"] * (1 + 1e-9)]
    skewed = [r for r in rows if not r["skew"].startswith("uniform")]
    print(f"plan later than the rotor in {len(later)} of {len(rows)} cases; payload-efficient sends fewer bytes "
          f"than padded in {sum(r['ratio'] > 1 for r in skewed)} of {len(skewed)} skewed cases "
          f"(ratio {min(r['ratio'] for r in skewed):.2f}-{max(r['ratio'] for r in skewed):.2f})")
    return rows


def part2(eps: Scenario, ocs: Scenario, out: Path) -> list[dict]:
    rows = []
    print("(2) packet vs flow, 8 GPUs, 16 experts; ms")
    for skew, a in (("zipf", 1.2), ("uniform", 1.0)):
        for sc in (with_layer(eps, skew=skew, skew_param=a), with_layer(ocs, skew=skew, skew_param=a)):
            flow = times(runner.run_flow(sc))
            pkt = times(packet_run(sc, out / f"{sc.name}-{skew}"))
            for name, f in flow.items():
                p = pkt[name]
                dev = p["time_s"] / f["time_s"] - 1
                rows.append({"skew": skew, "run": name, "packet_s": p["time_s"], "flow_s": f["time_s"], "deviation": dev,
                             "retransmissions": sum(s["retransmissions"] or 0 for s in p["steps"])})
                util = f" slot util {p['slots']['slot_utilisation']:.2f}/{f['slots']['slot_utilisation']:.2f}" \
                    if p.get("slots") else ""
                print(f"    {skew:<8} {name:<14} packet {p['time_s'] * 1e3:.3f}  flow {f['time_s'] * 1e3:.3f}  "
                      f"{dev:+.1%}{util}  retransmissions {rows[-1]['retransmissions']}")
    print(f"largest |packet/flow - 1|: {max(abs(r['deviation']) for r in rows):.1%}")
    return rows


def volume(ocs: Scenario) -> tuple[float, str]:
    """Payload-efficient dispatch bytes per GPU over FlashDMoE's ``S k H b (P-1)/P`` with uniform
    routing and a capacity factor that drops nothing (``E / k``: no expert can get more than
    the ``S`` tokens of a source)."""
    m = ocs.moe
    tr = route(with_layer(ocs, skew="uniform", skew_param=1.0, capacity_factor=m.experts / m.top_k).moe)
    d = tr.matrix("dispatch", "payload").astype(float)
    per_gpu = float((d.sum() - d.trace()) / m.gpus)
    formula = m.tokens_per_gpu * m.top_k * m.hidden * m.element_bytes * (m.gpus - 1) / m.gpus
    return per_gpu / formula, (f"{per_gpu / 2**20:.2f} MiB against {formula / 2**20:.2f} MiB, {tr.dropped} tokens "
                               f"dropped ({m.gpus} GPUs, {m.experts} experts)")


def verdicts(ocs: Scenario, flow_rows: list[dict], packet_rows: list[dict] | None) -> Verdicts:
    """FlashDMoE's traffic claims and the packet agreement (module doc)."""
    v = Verdicts("moe")
    ratio, note = volume(ocs)
    v.judge("volume", ratio, note)
    skewed = [r for r in flow_rows if not r["skew"].startswith("uniform")]
    v.judge("payload_fewer", all(r["ratio"] > 1 for r in skewed),
            f"padded / payload {min(r['ratio'] for r in skewed):.2f}-{max(r['ratio'] for r in skewed):.2f} over "
            f"{len(skewed) // 2} skewed layers")
    if packet_rows:
        worst = max(packet_rows, key=lambda r: abs(r["deviation"]))
        v.judge("packet_agreement", abs(worst["deviation"]), f"worst {worst['run']} ({worst['skew']}) "
                f"{worst['deviation']:+.1%} over {len(packet_rows)} runs")
        v.judge("packet_checks", not PACKET_FAILURES, "; ".join(PACKET_FAILURES) or "every packet run's checks held")
    return v


def part3(ocs: Scenario) -> None:
    sc = with_layer(ocs, gpus=64, experts=64, skew="zipf", skew_param=1.2)
    t = time.perf_counter()
    res = times(runner.run_flow(sc))
    wall = time.perf_counter() - t
    print(f"(3) 64 GPUs, 64 experts, Zipf 1.2, flow backend ({wall:.1f} s wall for {len(res)} runs):")
    for name, r in res.items():
        print(f"    {name:<14} {r['time_s'] * 1e3:.3f} ms, {r['slots']['slots_per_turn']} slots per turn "
              f"({r['slots']['method']}), slot utilisation {r['slots']['slot_utilisation']:.2f}")


def part4(twohop: Scenario, out: Path, packet: bool) -> list[dict]:
    rows = []
    print("(4) two-hop forwarding on the rotor, 8 GPUs, 16 experts, payload-efficient; ms (flow backend)")
    print(f"{'popularity':<10} {'skew':<14} {'CF':>3} {'slot us':>7} | {'direct':>7} {'two-hop':>7} {'plan':>7} "
          f"{'relayed MiB':>11} {'gain':>6}")
    for pop in ("shared", "per-gpu"):
        for skew, a in SKEWS[1:]:
            for cf in (1.0, 2.0):
                for slot in (200e-6, 300e-6, 400e-6):
                    runs = [r.model_copy(update={"slot_s": slot}) if r.slot_s else r for r in twohop.runs]
                    sc = with_layer(twohop, popularity=pop, skew=skew, skew_param=a, capacity_factor=cf)
                    res = times(runner.run_flow(sc.model_copy(update={"runs": runs})))
                    d, h, p = res["rotor-direct"], res["rotor-two-hop"], res["plan"]
                    row = {"popularity": pop, "skew": f"{skew}({a:g})", "cf": cf, "slot_s": slot,
                           "direct_s": d["time_s"], "two_hop_s": h["time_s"], "plan_s": p["time_s"],
                           "relayed_bytes": h["slots"]["relayed_bytes"]}
                    rows.append(row)
                    print(f"{pop:<10} {row['skew']:<14} {cf:>3g} {slot * 1e6:>7.0f} | {d['time_s'] * 1e3:>7.3f} "
                          f"{h['time_s'] * 1e3:>7.3f} {p['time_s'] * 1e3:>7.3f} {row['relayed_bytes'] / 2**20:>11.1f} "
                          f"{d['time_s'] / h['time_s']:>5.2f}x")
    worse = [r for r in rows if r["two_hop_s"] > r["direct_s"] * (1 + 1e-9)]
    used = [r for r in rows if r["relayed_bytes"]]
    print(f"two-hop relays in {len(used)} of {len(rows)} cases and is later than direct in {len(worse)}; "
          f"speed-up where it relays: {min(r['direct_s'] / r['two_hop_s'] for r in used):.2f}x-"
          f"{max(r['direct_s'] / r['two_hop_s'] for r in used):.2f}x")
    if packet:
        flow = times(runner.run_flow(twohop))
        pkt = times(packet_run(twohop, out / twohop.name))
        print("    packet vs flow, experiments/moe_twohop.yaml:")
        for name, f in flow.items():
            p = pkt[name]
            print(f"    {name:<18} packet {p['time_s'] * 1e3:.3f}  flow {f['time_s'] * 1e3:.3f}  "
                  f"{p['time_s'] / f['time_s'] - 1:+.1%}  relayed {p['slots']['relayed_bytes'] / 2**20:.1f} MiB  "
                  f"retransmissions {sum(s['retransmissions'] or 0 for s in p['steps'])}")
    sc = with_layer(twohop, gpus=64, experts=64)
    runs = [r.model_copy(update={"slot_s": 50e-6}) if r.slot_s else r for r in twohop.runs]
    t = time.perf_counter()
    res = times(runner.run_flow(sc.model_copy(update={"runs": runs})))
    print(f"    64 GPUs, 64 experts, per-GPU Zipf 1.2, CF 2.0, rotor slots 50 us ({time.perf_counter() - t:.1f} s wall):")
    for name, r in res.items():
        print(f"    {name:<18} {r['time_s'] * 1e3:.3f} ms, relayed {r['slots'].get('relayed_bytes', 0) / 2**20:.1f} MiB")
    return rows


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packet", action=argparse.BooleanOptionalAction, default=False,
                    help="also run part (2) on real packets (root, Open vSwitch; default off)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "runs" / "reproduce_moe")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    from emulation.output import writing

    with writing(args.out):
        eps = load_scenario(ROOT / "experiments" / "moe_eps.yaml")
        ocs = load_scenario(ROOT / "experiments" / "moe_ocs.yaml")
        twohop = load_scenario(ROOT / "experiments" / "moe_twohop.yaml")
        args.out.mkdir(parents=True, exist_ok=True)
        flow_rows = part1(eps, ocs)
        write_csv(args.out / "flow.csv", flow_rows)
        packet_rows = None
        if args.packet:
            packet_rows = part2(eps, ocs, args.out)
            write_csv(args.out / "packet.csv", packet_rows)
        part3(ocs)
        write_csv(args.out / "two_hop.csv", part4(twohop, args.out, args.packet))
        print(f"wrote {args.out}/flow.csv, two_hop.csv" + (" and packet.csv" if args.packet else ""))
        return verdicts(ocs, flow_rows, packet_rows).finish(args.out, args.packet)


if __name__ == "__main__":
    sys.exit(main())
