#!/usr/bin/env python3
"""LUMION: a real training job loses a GPU; the OCS splices a spare into its place.

Spec: ``docs/mechanisms.md`` (LUMION: replacing a failed GPU inside the rack). Scenario:
``experiments/lumion.yaml`` (4 working GPUs + 4 spares on one OCS, a half-rate electrical
switch beside it; data-parallel training of an MLP with gloo; GPU 2 fails after 12 s).

(1) Flow backend (no root): the AllReduce time of the job's gradients on the ring before the
    failure and on each recovery's configuration, at the real rate, and the electrical
    recovery's slowdown as the electrical path's rate varies.
(2) Packet backend (root, Open vSwitch, torch): the scenario's three recoveries on real packets
    (``ocslab train``): the recovery timeline (failure, detected, circuits rewritten, job
    restarted, group re-formed, first step), failure -> rewritten in emulated and real-equivalent
    time, the steady-state step time and throughput before the failure, after recovery, and for
    both baselines, the loss before and after, the packets that reached the failed GPU after the
    rewrite; saves ``timeline.png``; checks the acceptance and exits 1 if one fails.
(3) The optical recovery again with a cold restart (new processes instead of warm standbys):
    what starting Python and torch adds to the recovery on these machines.

Usage: ``.venv/bin/python scripts/reproduce_lumion.py [--no-packet] [--out DIR]`` (default
``runs/reproduce_lumion``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emulation.planners.failover import failover_table  # noqa: E402
from emulation.torchjob.predict import predict_allreduce  # noqa: E402
from emulation import kinds  # noqa: E402
from emulation.kinds.training import TrainingScenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def part1(sc: TrainingScenario) -> None:
    setup = sc.recovery_setup()
    fabric = setup.fabric
    nbytes = sc.job.gradient_bytes
    print(f"(1) flow backend: ring AllReduce of {nbytes / 1e6:.2f} MB of gradients on {sc.fabric.gpus} GPUs, "
          f"{sc.fabric.port_gbps:g} Gbit/s circuits, electrical path {sc.fabric.electrical_gbps:g} Gbit/s, alpha 0")
    base = predict_allreduce(fabric, fabric.initial, list(setup.placement), nbytes)
    print(f"    before the failure: {base * 1e6:.1f} us")
    for mode in sc.recovery:
        fo = failover_table(fabric, mode, setup.placement, setup.spares)[sc.failure.gpu]
        t = predict_allreduce(fabric, fo.configuration, list(fo.placement), nbytes)
        print(f"    {mode:<10} GPUs {list(fo.placement)}: {t * 1e6:.1f} us ({t / base:.2f}x before)")
    print("    electrical recovery vs the electrical path's rate:")
    for frac in (0.25, 0.5, 0.75, 1.0):
        eps = tuple(dataclasses.replace(e, port_gbps=sc.fabric.port_gbps * frac) for e in fabric.eps)
        f = dataclasses.replace(fabric, eps=eps)
        fo = failover_table(f, "electrical", setup.placement, setup.spares)[sc.failure.gpu]
        t = predict_allreduce(f, fo.configuration, list(fo.placement), nbytes)
        print(f"      {frac:>4.2f} x port rate: {t / base:.2f}x the AllReduce before the failure")


def part2(sc: TrainingScenario, out: Path) -> int:
    print(f"\n(2) packet backend: {', '.join(sc.recovery)}; results in {out}")
    res = kinds.run_scenario("training", sc, out,
                             progress=lambda label, i, n: print(f"    [{i}/{n}] {label}", flush=True)).result
    by = {r["mode"]: r for r in res.model_dump()["runs"]}
    ok = True

    def check(cond: bool, text: str) -> None:
        nonlocal ok
        ok &= bool(cond)
        print(f"    {'ok  ' if cond else 'FAIL'} {text}")

    print("acceptance:")
    if "optical" in by:
        r = by["optical"]["steady"]
        check(abs(r["after_over_before"] - 1) <= 0.10,
              f"optical: step time after recovery {r['after']['step_s']:.3f} s vs before {r['before']['step_s']:.3f} s "
              f"({r['after_over_before'] - 1:+.1%}, within 10%)")
    if "electrical" in by and "optical" in by:
        ratio = res.comparison.after_over_optical["electrical"]  # = optical throughput / electrical
        check(ratio > 1.2, f"electrical: step time {ratio:.2f}x the optical recovery's; optical throughput "
                           f"{ratio:.2f}x the electrical (paper: about 2x)")
    for m, r in by.items():
        f = r["failure_to_rewritten_s"]
        print(f"    {m}: failure -> circuits rewritten {f['emulated'] * 1e3:.1f} ms emulated, "
              f"{f['real_equivalent'] * 1e3:.2f} ms real-equivalent")
        p = r["evidence"]["packets_to_failed_gpu"]
        check(p["after_rewrite"] == 0 and not r["evidence"]["ocs_rules_to_failed_gpu"],
              f"{m}: {p['after_rewrite']} packets reached GPU {r['failed_gpu']}'s ports after the rewrite "
              f"({p['between_failure_and_rewrite']} between the failure and the rewrite); no OCS rule outputs to them")
        lo = r["loss"]
        check(lo["launch0_slope_per_step"] < 0 and lo["launch1_slope_per_step"] < 0,
              f"{m}: loss decreases before ({lo['launch0_first']:.3f} -> {lo['launch0_last']:.3f}) and after the restart "
              f"({lo['launch1_first']:.3f} -> {lo['launch1_last']:.3f})")
        check(lo["replay_max_abs_diff"] is not None and lo["replay_max_abs_diff"] < 1e-3,
              f"{m}: resumed from the checkpoint of step {lo['resumed_from']}: the {lo['replayed_steps']} steps run again "
              f"match their first losses within {lo['replay_max_abs_diff'] or 0:.1e}")
    print(f"timeline plot: {out / 'timeline.png'}")
    return 0 if ok else 1


def part3(sc: TrainingScenario, out: Path) -> None:
    other = "cold" if sc.job.restart == "warm" else "warm"
    print(f"\n(3) optical recovery with a {other} restart; results in {out}")
    alt = sc.model_copy(update={"recovery": ["optical"], "job": sc.job.model_copy(update={"restart": other})})
    kinds.run_scenario("training", alt, out)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packet", action=argparse.BooleanOptionalAction, default=True,
                    help="the packet parts (root, Open vSwitch; default on; --no-packet: part (1) only, no root)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce_lumion")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    sc = kinds.load_as(ROOT / "experiments" / "lumion.yaml", "training")
    part1(sc)
    if not args.packet:
        return 0
    from emulation.output import writing

    with writing(args.out, clear=True):
        status = part2(sc, args.out)
        part3(sc, args.out / "restart")
        return status


if __name__ == "__main__":
    sys.exit(main())
