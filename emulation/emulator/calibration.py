"""Choose the emulated link rate this machine can carry faithfully: the headroom probe and the
calibration built on it.

The packet backend measures the emulated fabric only while the links, not the CPU, are the
bottleneck. How many Mbit/s per link a machine carries depends on the machine (two cores of one
kind differ by 2x, and one machine varies over an hour) and on the fabric (every port is a
queue in the kernel and a socket Open vSwitch polls). So the rate is measured, not assumed:

- :func:`measure_headroom` saturates every GPU-to-GPU link of the fabric at once for about a
  second and reports the *efficiency*: the link-bound time over the measured time (1 = the links
  were the bottleneck), and any packet the emulator lost.
- :func:`calibrate` probes candidate rates, halving from :data:`AUTO_START_MBPS` (or from the
  scenario's own rate), until the efficiency reaches the target (:data:`DEFAULT_TARGET`). With a
  rate given, it probes that rate and, if it misses the target, goes on down to name the rate
  that would work, so the run can be refused with it.

A slower machine gets a slower link rate: the time dilation factor ``TDF = s x B / B_e`` grows
and the run takes longer, but every delay is scaled by the same TDF and every measured time
divided by it, so the real-equivalent results are the same.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.net import EmulatedFabric, EmulationError
from emulation.fabric import Configuration, Fabric, assign_ports
from emulation.planners import make_plan
from emulation.routing import Routes, link_loads
from emulation.scale import Scale
from emulation.workloads.model import Step, Transfer, Workload

log = logging.getLogger(__name__)

#: First rate ``link_mbps: auto`` tries (Mbit/s per link); each next candidate is half or less.
#: Faster links pass the probe on small fabrics here but time worse: on an 8-GPU EPS the probe
#: reached 97% at 20 Mbit/s, yet Ring and StragglAR ran 5-9% slower than the flow model; at 10
#: Mbit/s they agreed within 0.1-0.8% (``scripts/reproduce_stragglar.py``). What does not scale
#: with the rate (agents waking late, the switch's per-packet latency) weighs more as the time
#: dilation factor falls.
AUTO_START_MBPS = 10.0
#: Below this the machine is refused: a run would take hours.
MIN_MBPS = 0.5
#: Efficiency the probe must reach. Measured on the demo fabric (8 GPUs x 2 ports, 16 directed
#: links saturated) on this machine kind, 5 probes each: 0.986-0.992 at 10 Mbit/s, 0.994-0.998
#: at 5, 0.80-0.97 at 20; the demo's runs at 10 Mbit/s agree with the flow model within 0.5-1.8%
#: at 25 MiB.
DEFAULT_TARGET = 0.98


#: Emulated seconds the guard band of a time-slotted run must at least last. The controller's
#: rotor installs each slot's circuits on its own clock; under load its slots started up to
#: 2-5 ms (p99) and 6 ms (max) late at 10 Mbit/s on 8 GPUs on this machine kind, and a guard band
#: shorter than that drops the first segments of a window in the dark. So a slotted scenario's
#: rate is capped where ``guard_s x TDF`` reaches this (the time dilation grows as the rate falls).
GUARD_FLOOR_S = 0.008


def slotted_rate_cap(guard_s: float, byte_scale: float, port_gbps: float) -> float:
    """The highest link rate (Mbit/s) at which a guard band of ``guard_s`` real seconds lasts
    :data:`GUARD_FLOOR_S` emulated: ``TDF = s x B / B_e >= GUARD_FLOOR_S / guard_s``.

    :raises ValueError: ``guard_s`` is not positive.
    """
    if guard_s <= 0:
        raise ValueError("guard_s must be positive")
    return byte_scale * port_gbps * 1e3 * guard_s / GUARD_FLOOR_S


class CalibrationError(EmulationError):
    """No rate down to :data:`MIN_MBPS` reaches the target: the machine cannot carry this
    fabric faithfully."""


def probe_fabric(fabric: Fabric) -> tuple[Fabric, list[tuple[int, int]]]:
    """The configuration the probe runs on and the (src, dst) GPU pairs it saturates: every
    directed GPU-to-GPU link of the initial configuration; where that joins no GPUs (an OCS that
    starts empty), a matching on each OCS that gives every GPU a circuit; on an EPS, GPU r -> r+1
    (every port sends and receives)."""
    pairs = sorted({(l.u, l.v) for l in fabric.links() if l.u < fabric.gpus and l.v < fabric.gpus})
    if pairs or not fabric.ocs:
        return fabric, pairs or [(r, (r + 1) % fabric.gpus) for r in range(fabric.gpus)]
    circuits = {}
    for ocs in fabric.ocs:
        gpus = sorted({p.gpu for p in ocs.ports})
        matching = [(gpus[i], gpus[i + 1]) for i in range(0, len(gpus) - 1, 2)]
        circuits[ocs.name] = assign_ports(fabric, ocs.name, matching, fill=True)[ocs.name]
    probe = dataclasses.replace(fabric, initial=Configuration(circuits))
    return probe, sorted({(l.u, l.v) for l in probe.links() if l.u < fabric.gpus and l.v < fabric.gpus})


def measure_headroom(emu: EmulatedFabric, scale: Scale, run_dir: Path, seconds: float = 1.0) -> dict:
    """Saturate every link of :func:`probe_fabric` for about ``seconds`` (emulated) and compare
    the measured time with the link-bound time.

    :returns: ``{"link_mbps", "offered_mbps", "expected_s", "measured_s", "efficiency", "drops"}``
        (emulated units; ``drops``: the probe run's drops, :mod:`emulation.drops`); on a fabric
        spread over servers also ``servers``: ``{server: efficiency}`` of the links its GPUs send
        on (the overall efficiency is the slowest server's).
    """
    from emulation.emulator.orchestrator import run_workload

    fabric, pairs = probe_fabric(emu.fabric)
    per_link = scale.link_mbps * 1e6 / 8 * seconds / scale.byte_scale  # real bytes
    step = Step("probe", tuple(Transfer(u, v, int(per_link), 0) for u, v in pairs))
    w = Workload("probe", "headroom", fabric.gpus, int(per_link), 1, (step,))
    plan = make_plan("none", fabric, w)
    try:
        res = run_workload(emu, "headroom", w, plan, scale, 0.0, run_dir)
    finally:
        if fabric is not emu.fabric:
            emu.client.apply(emu.fabric.initial, 0.0)
    loads = link_loads(Routes(fabric, fabric.initial, fabric.ports_per_gpu), step.transfers)
    expected = max(loads.values()) * scale.byte_scale * 8 / (scale.link_mbps * 1e6)
    measured = res.time_s * scale.tdf
    offered = sum(loads.values()) * scale.byte_scale * 8 / 1e6 / expected
    head = {"link_mbps": scale.link_mbps, "offered_mbps": offered, "expected_s": expected, "measured_s": measured,
            "efficiency": expected / measured if measured > 0 else 0.0,
            "drops": {k: v for k, v in res.drops.items() if k != "where"}}
    if getattr(emu, "cluster", None) is not None and res.transfers:
        ends: dict[str, float] = {}
        for t in res.transfers:
            server = emu.cluster.server_of(dpn.host_name(t.src), fabric.gpus)
            ends[server] = max(ends.get(server, 0.0), t.end_s * scale.tdf)
        head["servers"] = {s: expected / e if e > 0 else 0.0 for s, e in sorted(ends.items())}
    return head


def slowest_server(head: dict) -> str:
    """``" (slowest server: NAME, P%)"`` for a probe of a fabric spread over servers, else ''."""
    servers = head.get("servers") or {}
    if not servers:
        return ""
    name = min(servers, key=servers.get)
    return f" (slowest server: {name}, {servers[name]:.0%})"


@dataclass
class Calibration:
    """The outcome of :func:`calibrate`.

    :param link_mbps: the highest rate tried whose probe reached ``target`` (Mbit/s per link).
    :param requested: the rate the scenario asked for, or None for ``auto``.
    :param target: the efficiency the probe had to reach.
    :param probes: every probe, in order (:func:`measure_headroom`'s dicts).
    """

    link_mbps: float
    requested: float | None
    target: float
    probes: list[dict] = field(default_factory=list)

    @property
    def chosen(self) -> dict:
        """The probe at :attr:`link_mbps`."""
        return next(p for p in reversed(self.probes) if p["link_mbps"] == self.link_mbps)

    @property
    def requested_ok(self) -> bool:
        """The requested rate (if any) reached the target."""
        return self.requested is None or self.link_mbps == self.requested

    def refusal(self) -> str:
        """One line: the requested rate misses the target here, and the rate that does not."""
        asked = next(p for p in self.probes if p["link_mbps"] == self.requested)
        return (f"emulation.link_mbps: {self.requested:g} Mbit/s reached {asked['efficiency']:.1%} of link rate "
                f"under full load on this machine{slowest_server(asked)} (target {self.target:.0%}); {self.link_mbps:g} Mbit/s reached "
                f"{self.chosen['efficiency']:.1%}: set emulation.link_mbps: {self.link_mbps:g} (or auto)")

    def to_json(self) -> dict:
        """``{"link_mbps", "requested", "target", "probes": [{"link_mbps", "efficiency", ...}]}``."""
        return {"link_mbps": self.link_mbps, "requested": self.requested, "target": self.target,
                "probes": self.probes}


def _next_rate(rate: float, efficiency: float, target: float) -> float:
    """The next candidate below ``rate``: at most half of it, and no more than the rate the
    machine just carried with the target's margin."""
    carried = rate * max(efficiency, 0.0) / target * 0.9
    nxt = rate / 2
    while nxt > carried and nxt / 2 >= MIN_MBPS:
        nxt /= 2
    return nxt


def calibrate(emu: EmulatedFabric, requested: float | None, byte_scale: float, run_dir: Path,
              target: float = DEFAULT_TARGET, seconds: float = 1.0, max_mbps: float | None = None) -> Calibration:
    """Find the link rate at which ``emu`` reaches ``target`` under full load (module doc) and
    leave the emulation shaped at it.

    :param requested: probe this rate first (None: ``auto``, from :data:`AUTO_START_MBPS`, or
        ``max_mbps`` if lower).
    :param max_mbps: no higher rate is considered (e.g. :func:`slotted_rate_cap`).
    :raises CalibrationError: no rate down to :data:`MIN_MBPS` reaches ``target``.
    """
    rate = requested if requested is not None else min(AUTO_START_MBPS, max_mbps or AUTO_START_MBPS)
    cal = Calibration(rate, requested, target)
    while True:
        emu.set_link_mbps(rate)
        head = measure_headroom(emu, Scale(rate, byte_scale, emu.fabric.port_gbps),
                                run_dir / f"probe-{rate:g}mbps", seconds)
        cal.probes.append(head)
        log.info("headroom probe at %g Mbit/s per link: %.1f%% of link rate (target %.0f%%)", rate,
                 100 * head["efficiency"], 100 * target)
        if head["efficiency"] >= target:
            cal.link_mbps = rate
            return cal
        nxt = _next_rate(rate, head["efficiency"], target)
        if nxt < MIN_MBPS:
            raise CalibrationError(
                f"the headroom probe reached only {head['efficiency']:.0%} of link rate at {rate:g} Mbit/s per link"
                f"{slowest_server(head)} (target {target:.0%}); this machine cannot carry {emu.fabric.gpus} GPUs faithfully")
        rate = nxt
