#!/usr/bin/env python3
"""Slot fidelity of the time-slotted OCS (rotor mode) on the packet backend.

The OS-Ken controller cycles an 8-GPU, one-port-per-GPU OCS through the round-robin matchings
of K_8 on its own clock (``POST /rotor``), with a dark window before every slot; each slot's
measured start is the OpenFlow barrier acknowledging its new circuits. The error of a slot is
``measured start - planned start`` (planned times come from one clock origin, so errors do not
accumulate). Times here are emulated (wall-clock) seconds.

(1) ``--slots 200`` slots of ``--slot-ms 20`` with ``--dark-ms 2``: the distribution of the
absolute error (median, p90, p99, max, a histogram).
(2) Shorter slots (dark window 10% of the slot, ``--short-slots`` slots each): the median error
as a fraction of the slot, and the smallest slot length whose median error stays under 10%.

Needs root and Open vSwitch. Usage: ``.venv/bin/python scripts/bench_rotor.py [--gpus 8]
[--slots 200] [--slot-ms 20] [--dark-ms 2] [--sweep-ms 10 5 2 1 0.5] [--short-slots 100]
[--out DIR]``; writes ``DIR/slots.csv`` (default ``runs/bench_rotor``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from emulation.emulator.net import EmulatedFabric  # noqa: E402
from emulation.fabric import assign_ports  # noqa: E402
from emulation.poll import poll_until  # noqa: E402
from emulation.figures import write_csv  # noqa: E402
from emulation.workloads.matchings import round_robin_matchings  # noqa: E402
from topologies import ocs_star  # noqa: E402


def run_rotor(emu: EmulatedFabric, slots: int, slot_s: float, reconfiguration_delay_s: float, timeout_s: float) -> list[dict]:
    """Run one rotor of ``slots`` slots through the round-robin matchings; the ``rotor-slot``
    events (polling the controller's event log until ``rotor-done`` or ``timeout_s``)."""
    f = emu.fabric
    configs = [assign_ports(f, f.ocs[0].name, m) for m in round_robin_matchings(f.gpus)]
    since = len(emu.client.events())
    emu.client.start_rotor(configs, [slot_s] * len(configs), reconfiguration_delay_s, slots)
    got: list[dict] = []
    cursor = [since]

    def done() -> bool:
        new = emu.client.events(cursor[0])
        cursor[0] += len(new)
        got.extend(e for e in new if e["kind"] == "rotor-slot")
        return any(e["kind"] == "rotor-done" for e in new)

    if not poll_until(done, timeout_s):
        emu.client.stop_rotor()
        raise TimeoutError(f"the rotor did not finish {slots} slots in {timeout_s} s")
    return got


def summary(events: list[dict]) -> dict:
    """Absolute slot-start errors (s): median, p90, p99, max, mean."""
    err = np.abs([e["start_error_s"] for e in events])
    return {"median_s": float(np.median(err)), "p90_s": float(np.percentile(err, 90)),
            "p99_s": float(np.percentile(err, 99)), "max_s": float(err.max()), "mean_s": float(err.mean())}


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--slots", type=int, default=200)
    ap.add_argument("--slot-ms", type=float, default=20.0)
    ap.add_argument("--dark-ms", type=float, default=2.0)
    ap.add_argument("--sweep-ms", type=float, nargs="*", default=[10.0, 5.0, 2.0, 1.0, 0.5])
    ap.add_argument("--short-slots", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "runs" / "bench_rotor")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    if args.gpus < 2 or args.slots < 1 or args.slot_ms <= 0 or args.dark_ms < 0:
        print("--gpus >= 2, --slots >= 1, --slot-ms > 0, --dark-ms >= 0", file=sys.stderr)
        return 2
    from emulation.output import writing

    with writing(args.out):
        f = ocs_star(args.gpus, 1, 400.0, 0.0, "empty")
        rows: list[dict] = []
        with EmulatedFabric(f, args.out / "emulation", link_mbps=10.0) as emu:
            slot, dark = args.slot_ms * 1e-3, args.dark_ms * 1e-3
            ev = run_rotor(emu, args.slots, slot, dark, timeout_s=args.slots * (slot + dark) * 3 + 30)
            rows += [{"slot_ms": args.slot_ms, "dark_ms": args.dark_ms, **e} for e in ev]
            s = summary(ev)
            err = np.abs([e["start_error_s"] for e in ev]) * 1e3
            print(f"(1) {len(ev)} slots of {args.slot_ms:g} ms, dark {args.dark_ms:g} ms: |slot start error| median "
                  f"{s['median_s'] * 1e3:.3f} ms, p90 {s['p90_s'] * 1e3:.3f} ms, p99 {s['p99_s'] * 1e3:.3f} ms, "
                  f"max {s['max_s'] * 1e3:.3f} ms")
            dark_meas = [(e["t_live"] - e["t_dark"]) * 1e3 for e in ev]
            print(f"    measured dark window: median {np.median(dark_meas):.3f} ms (requested {args.dark_ms:g} ms)")
            edges = [0, 0.25, 0.5, 0.75, 1, 2, 5, 10, float("inf")]
            counts = np.histogram(err, bins=edges)[0]
            for lo, hi, c in zip(edges, edges[1:], counts):
                print(f"    {lo:>5g} - {hi:<5g} ms: {c:4d} {'#' * int(60 * c / len(err))}")
            smallest = None
            for ms in args.sweep_ms:
                slot = ms * 1e-3
                ev = run_rotor(emu, args.short_slots, slot, 0.1 * slot, timeout_s=args.short_slots * slot * 5 + 30)
                rows += [{"slot_ms": ms, "dark_ms": 0.1 * ms, **e} for e in ev]
                s = summary(ev)
                frac = s["median_s"] / slot
                ok = frac < 0.1
                if ok:
                    smallest = ms
                print(f"(2) slot {ms:g} ms, dark {0.1 * ms:g} ms: median error {s['median_s'] * 1e3:.3f} ms = "
                      f"{frac:.1%} of the slot, p99 {s['p99_s'] * 1e3:.3f} ms {'ok' if ok else '> 10%'}")
        print(f"smallest slot with median error < 10% of the slot: "
              f"{'none of those tried' if smallest is None else f'{smallest:g} ms'}")
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "slots.csv", rows)
        print(f"wrote {args.out}/slots.csv")
        return 0


if __name__ == "__main__":
    sys.exit(main())
