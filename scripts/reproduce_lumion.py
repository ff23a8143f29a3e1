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

Ends with the verdicts against the paper (:mod:`emulation.reproduce`; ``DIR/verdicts.json``):
the optical swap keeps the AllReduce time (flow), the throughput ratio (shown: the scenario's
half-rate electrical path sets it), and on packets the swap-and-restart time, the step time
after the swap and every recovery's own checks; exits 1 if one missed.

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
from emulation.reproduce import Verdicts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def part1(sc: TrainingScenario, v: Verdicts) -> None:
    setup = sc.recovery_setup()
    fabric = setup.fabric
    nbytes = sc.job.gradient_bytes
    print(f"(1) flow backend: ring AllReduce of {nbytes / 1e6:.2f} MB of gradients on {sc.fabric.gpus} GPUs, "
          f"{sc.fabric.port_gbps:g} Gbit/s circuits, electrical path {sc.fabric.electrical_gbps:g} Gbit/s, alpha 0")
    base = predict_allreduce(fabric, fabric.initial, list(setup.placement), nbytes)
    print(f"    before the failure: {base * 1e6:.1f} us")
    after = {}
    for mode in sc.recovery:
        fo = failover_table(fabric, mode, setup.placement, setup.spares)[sc.failure.gpu]
        after[mode] = t = predict_allreduce(fabric, fo.configuration, list(fo.placement), nbytes)
        print(f"    {mode:<10} GPUs {list(fo.placement)}: {t * 1e6:.1f} us ({t / base:.2f}x before)")
    if "optical" in after:
        v.judge("same_bandwidth", after["optical"] / base, f"{after['optical'] * 1e6:.1f} us against "
                f"{base * 1e6:.1f} us before")
        if "electrical" in after:
            v.judge("throughput", after["electrical"] / after["optical"], "the AllReduce that is the job's step")
    print("    electrical recovery vs the electrical path's rate:")
    for frac in (0.25, 0.5, 0.75, 1.0):
        eps = tuple(dataclasses.replace(e, port_gbps=sc.fabric.port_gbps * frac) for e in fabric.eps)
        f = dataclasses.replace(fabric, eps=eps)
        fo = failover_table(f, "electrical", setup.placement, setup.spares)[sc.failure.gpu]
        t = predict_allreduce(f, fo.configuration, list(fo.placement), nbytes)
        print(f"      {frac:>4.2f} x port rate: {t / base:.2f}x the AllReduce before the failure")


def part2(sc: TrainingScenario, out: Path, v: Verdicts) -> None:
    print(f"\n(2) packet backend: {', '.join(sc.recovery)}; results in {out}")
    env = kinds.run_scenario("training", sc, out,
                             progress=lambda label, i, n: print(f"    [{i}/{n}] {label}", flush=True))
    by = {r["mode"]: r for r in env.result.model_dump()["runs"]}
    for m, r in by.items():
        f, p, lo = r["failure_to_rewritten_s"], r["evidence"]["packets_to_failed_gpu"], r["loss"]
        print(f"    {m}: failure -> circuits rewritten {f['emulated'] * 1e3:.1f} ms emulated, "
              f"{f['real_equivalent'] * 1e3:.2f} ms real-equivalent; {p['after_rewrite']} packets reached GPU "
              f"{r['failed_gpu']}'s ports after the rewrite ({p['between_failure_and_rewrite']} before it); loss "
              f"{lo['launch0_first']:.3f} -> {lo['launch0_last']:.3f}, after the restart {lo['launch1_first']:.3f} -> "
              f"{lo['launch1_last']:.3f}; the {lo['replayed_steps']} steps run again from step {lo['resumed_from']}'s "
              f"checkpoint match within {lo['replay_max_abs_diff'] or 0:.1e}")
    falling = [m for m, r in by.items() if r["loss"]["launch0_slope_per_step"] < 0 and r["loss"]["launch1_slope_per_step"] < 0]
    v.judge("checks", not env.failed_checks and len(falling) == len(by),
            "; ".join(c.line() for c in env.failed_checks)
            + "".join(f"; {m}: the loss did not fall" for m in by if m not in falling) or f"{len(by)} recoveries")
    if "optical" in by:
        o = by["optical"]
        v.judge("swap_time", o["timeline_s"]["first_step"], f"rewritten after {o['timeline_s']['rewritten'] * 1e3:.0f} "
                f"ms, restarted after {o['timeline_s']['restarted'] * 1e3:.0f} ms")
        v.judge("steady", o["steady"]["after_over_before"], f"{o['steady']['after']['step_s']:.3f} s against "
                f"{o['steady']['before']['step_s']:.3f} s")
    if "electrical" in by and "optical" in by:
        ratio = env.result.comparison.after_over_optical["electrical"]  # = optical throughput / electrical
        print(f"    optical throughput {ratio:.2f}x the electrical recovery's (calibrated: the half-rate path sets it)")
    print(f"timeline plot: {out / 'timeline.png'}")


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
    from emulation.output import writing

    sc = kinds.load_as(ROOT / "experiments" / "lumion.yaml", "training")
    with writing(args.out, clear=True):
        v = Verdicts("lumion")
        part1(sc, v)
        if args.packet:
            part2(sc, args.out, v)
            part3(sc, args.out / "restart")
        return v.finish(args.out, args.packet)


if __name__ == "__main__":
    sys.exit(main())
