"""One packet session: a scenario's ``emulation:`` section made into a running, calibrated fabric.

Every packet path of ocslab starts its fabric here: a collective's runs (``ocslab run``), the
console (``ocslab up``), tenants, LUMION's recoveries and ``ocslab torch allreduce-perf``. A
:class:`PacketSession` is a context manager. On entry it

1. detects the machine's capabilities and begins the result's packet-backend record
   (:attr:`PacketSession.meta`: capabilities, controller, apps, MTU, servers, datapath, warnings);
2. builds the fabric (:class:`~emulation.emulator.net.EmulatedFabric`, logs in
   ``out/emulation``) with the section's controller, apps, MTU and servers, at the starting rate:
   the given ``link_mbps``, or the calibration's first probe for ``auto``;
3. calibrates the link rate by the section's ``headroom`` policy
   (:mod:`emulation.emulator.calibration`): ``auto`` takes the highest rate whose headroom probe
   reaches ``headroom_target``; a given rate is probed and, if it misses, refused (``refuse``,
   unless forced) or used with a warning (``warn``); ``skip`` keeps it unprobed;
4. gives the scale model of the rate (:attr:`PacketSession.scale`: the section's
   ``byte_scale``, or the caller's for a job that sends real bytes).

On exit the fabric is torn down, whatever happened. :meth:`PacketSession.record` is the
packet-backend part of the result: the record, the scale, the TCP congestion controls the agents
ran and who changed the circuits.

Spec: ``docs/architecture.md`` (the packet backend; the scale model).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from emulation.fabric import Fabric
from emulation.scale import Scale

if TYPE_CHECKING:  # the scenario layer is above this one: its model is only read here
    from emulation.scenario.schema import EmulationSpec

log = logging.getLogger(__name__)


class HeadroomError(RuntimeError):
    """The machine cannot sustain the scenario's emulated load (the CPU would be the bottleneck)."""


def requested_mbps(spec: "EmulationSpec") -> float | None:
    """The section's ``link_mbps`` as Mbit/s, or None for ``auto``."""
    return None if spec.link_mbps == "auto" else float(spec.link_mbps)


class PacketSession:
    """A running, calibrated fabric for ``spec`` (module doc).

    :param fabric: the fabric to build.
    :param out: the results directory (logs and probes in ``out/emulation``).
    :param spec: the scenario's ``emulation:`` section.
    :param port_gbps: real port rate, Gbit/s, for the scale model (default the fabric's).
    :param byte_scale: bytes sent per real byte (default ``spec.byte_scale``; 1 for a job that
        sends its real bytes).
    :param delta_s: real per-hop propagation delay, s (netem; a warning where it is missing).
    :param rate_cap_mbps: no higher rate is calibrated or accepted (a time-slotted run's guard).
    :param force: go on when a given rate misses the headroom target.
    :param ofctl_rest: Ryu's ``ofctl_rest`` port (None: as ``OCSLAB_OFCTL_REST`` says).
    :param progress: told ``calibrating the link rate`` before the probes.

    Attributes once entered: ``emu`` (the :class:`~emulation.emulator.net.EmulatedFabric`),
    ``rate`` (Mbit/s per link), ``scale``, ``meta`` (the record so far).

    :raises HeadroomError: the given rate misses the target (policy ``refuse``, not forced).
    :raises emulation.emulator.calibration.CalibrationError: no rate reaches the target.
    :raises emulation.emulator.net.EmulationError: the fabric could not be brought up.
    :raises emulation.emulator.net.MachineUnfit: a server does not resolve or has no route.
    """

    def __init__(self, fabric: Fabric, out: Path, spec: "EmulationSpec", *, port_gbps: float | None = None,
                 byte_scale: float | None = None, delta_s: float = 0.0, rate_cap_mbps: float | None = None,
                 force: bool = False, ofctl_rest: int | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        self.fabric, self.out, self.spec = fabric, Path(out), spec
        self.port_gbps = fabric.port_gbps if port_gbps is None else port_gbps
        self.byte_scale = spec.byte_scale if byte_scale is None else byte_scale
        self.delta_s, self.rate_cap_mbps, self.force = delta_s, rate_cap_mbps, force
        self.ofctl_rest, self.progress = ofctl_rest, progress
        self.emu = None
        self.rate = 0.0
        self.scale: Scale | None = None
        self.meta: dict = {}

    def scale_at(self, mbps: float) -> Scale:
        """The scale model at ``mbps`` per link."""
        return Scale(mbps, self.byte_scale, self.port_gbps)

    def __enter__(self) -> "PacketSession":
        from emulation.emulator.calibration import AUTO_START_MBPS
        from emulation.emulator.capabilities import detect
        from emulation.emulator.net import EmulatedFabric

        spec = self.spec
        requested = requested_mbps(spec)
        caps = detect()
        self.meta = {"capabilities": caps.to_json(), "warnings": [], "controller": spec.controller,
                     "apps": list(spec.apps), "mtu": spec.mtu}
        if not caps.netem and self.delta_s > 0:
            self.meta["warnings"].append("netem missing: per-hop propagation delay delta was not emulated")
        cap = self.rate_cap_mbps
        if cap is not None:
            self.meta["slotted_rate_cap_mbps"] = cap
        start = requested if requested is not None else min(AUTO_START_MBPS, cap or AUTO_START_MBPS)
        servers = cluster_of(spec)
        if servers is not None:
            self.meta["servers"] = servers.servers
            self.meta["ocs"] = spec.ocs
        shards = len(servers.servers) if servers is not None and spec.ocs == "sharded" else 1
        self.emu = EmulatedFabric(self.fabric, self.out / "emulation", link_mbps=start,
                                  delay_s=self.delta_s * self.scale_at(start).tdf, capabilities=caps,
                                  controller=spec.controller, apps=spec.apps, mtu=spec.mtu,
                                  ofctl_rest=self.ofctl_rest, servers=servers, ocs_shards=shards)
        self.emu.__enter__()
        try:
            self.meta["datapath"] = self.emu.datapath
            self.rate = self._calibrate(requested)
            self.scale = self.scale_at(self.rate)
        except BaseException as e:
            self.emu.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def __exit__(self, *exc) -> bool:
        return bool(self.emu.__exit__(*exc))

    def _calibrate(self, requested: float | None) -> float:
        from emulation.emulator.calibration import calibrate

        spec, emu = self.spec, self.emu
        if spec.headroom == "skip":
            return emu.link_mbps
        if self.progress:
            self.progress("calibrating the link rate", 0, 1)
        cal = calibrate(emu, requested, self.byte_scale, self.out / "emulation" / "calibration", spec.headroom_target,
                        max_mbps=self.rate_cap_mbps)
        self.meta["calibration"] = cal.to_json()
        self.meta["headroom"] = cal.chosen
        rate = cal.link_mbps
        log.info("calibrated: %g Mbit/s per link (%s)", rate,
                 ", ".join(f"{q['link_mbps']:g} Mbit/s {q['efficiency']:.0%}" for q in cal.probes))
        if not cal.requested_ok:
            if spec.headroom == "refuse" and not self.force:
                raise HeadroomError(cal.refusal())
            self.meta["warnings"].append(cal.refusal() + " (run anyway)")
            self.meta["headroom"] = next(p for p in cal.probes if p["link_mbps"] == requested)
            rate = requested
            emu.set_link_mbps(rate)
        return rate

    def record(self) -> dict:
        """The packet-backend record of the session so far: :attr:`meta` with the ``scale``
        model, the TCP congestion controls the agents' connections ran (``tcp_congestion``), who
        changed the circuits (``circuits_changed_by``), the warnings on the user's apps'
        requests (:func:`ownership`) and, with a sharded OCS, the circuits set up and those
        joining two shards (``cross_server_circuits``)."""
        try:
            events = self.emu.client.events()
        except Exception:  # noqa: BLE001 - a dead controller: its failure is the run's error already
            events = []
        changed_by, warnings = ownership(events)
        if self.meta.get("ocs") == "sharded":  # which circuits joined two shards (through a lane)
            made = [e for e in events if e.get("kind") == "reconfigured" and e.get("changed")]
            self.meta["cross_server_circuits"] = {"added": sum(e.get("added", 0) for e in made),
                                                  "crossing": sum(e.get("added_crossing", 0) for e in made)}
        return {**self.meta, "warnings": list(dict.fromkeys([*self.meta["warnings"], *warnings])),
                "scale": self.scale.to_json() if self.scale else None,
                "tcp_congestion": sorted(self.emu.tcp_congestion), "circuits_changed_by": changed_by}


def cluster_of(spec: "EmulationSpec"):
    """The :class:`~emulation.emulator.cluster.Cluster` of an ``emulation:`` section's
    ``servers`` (None without), reached with its ``ssh_config``, else the lab's
    (:mod:`emulation.emulator.server_lab`) when the lab has every one of them.

    :raises emulation.emulator.net.MachineUnfit: a server does not resolve or has no route.
    """
    if not spec.servers:
        return None
    from emulation.emulator import server_lab
    from emulation.emulator.cluster import Cluster
    from emulation.emulator.net import MachineUnfit
    from emulation.emulator.sites import ClusterError

    config = spec.ssh_config
    if config is None and set(spec.servers) <= {s.name for s in server_lab.lab_servers()}:
        config = str(server_lab.ssh_config())
    try:
        return Cluster(list(spec.servers), Path(config).expanduser().resolve() if config else None)
    except ClusterError as e:
        raise MachineUnfit(f"emulation.{e}") from None


def ownership(events: list[dict]) -> tuple[dict[str, int], list[str]]:
    """Who changed the circuits, and what the user's apps were refused, from the controller's
    events (``GET /events``): ``({who: reconfigurations}, [warning, ...])``; ``who`` is
    ``emulator`` (the planner's and the emulator's own), ``rotor``, ``failover``, ``opus`` or an
    app's name. One warning per app that had requests refused because the planner or the
    emulator owned the circuits, or that asked for a step's circuits after the step was released
    (``docs/controllers.md``, Who owns the OCS when)."""
    changed: dict[str, int] = {}
    refused: dict[str, list[dict]] = {}
    late: dict[str, int] = {}
    for e in events:
        if e.get("kind") == "reconfigured" and e.get("changed", True):
            changed[e.get("by", "emulator")] = changed.get(e.get("by", "emulator"), 0) + 1
        elif e.get("kind") == "ownership-refused":
            refused.setdefault(e.get("by", "?"), []).append(e)
        elif e.get("kind") == "step-request-late":
            late[e.get("by", "?")] = late.get(e.get("by", "?"), 0) + 1
    warnings = []
    for app, rs in sorted(refused.items()):
        owners = " and the ".join(sorted({r.get("owner", "?") for r in rs}))
        runs = ", ".join(sorted({r.get("run") for r in rs if r.get("run")}))
        warnings.append(f"{app}: {len(rs)} circuit request(s) refused, nothing changed: the {owners} owned the "
                        f"circuits{f' (runs {runs})' if runs else ''}; only runs with planner: none give them to your "
                        "apps (docs/controllers.md, Who owns the OCS when)")
    for app, n in sorted(late.items()):
        warnings.append(f"{app}: {n} step request(s) came after the step was released (nothing changed): ask in the "
                        "EventStepBegin handler, before it returns")
    return changed, warnings
