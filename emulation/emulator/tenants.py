"""Several tenants' workloads at once with real packets, on one running
:class:`~emulation.emulator.net.EmulatedFabric` (the packet side of
:mod:`emulation.flowsim.tenants`).

The controller sets the configuration holding every tenant's circuits before the run (circuits
are set at allocation, untimed). One agent per GPU, as in :mod:`emulation.emulator.orchestrator`;
a GPU of no tenant runs an idle agent. Each tenant has its own step barrier: its step i+1 is
released, to its agents only, when all of them have reported step i, so tenants never wait for
each other; each tenant's time runs on its own clock (the orchestrator's: a step starts when its
previous one ended; the barrier's own time is left out). When a tenant's last step ends, its
agents have had every byte acknowledged, and the controller takes its circuits away
(:meth:`~emulation.emulator.controller_client.ControllerClient.apply` of the configuration
without them, R = 0: only the tenant's ports change) while the others keep running.

Isolation is measured, not assumed (:func:`isolation_capture`): on the OCS input port of every
tenant GPU's fibres, a kernel packet filter keeps each frame that is not an IPv4 packet between two
GPUs of that tenant; a tenant's traffic on another tenant's circuits would have to enter the OCS
through one of that tenant's ports, and shows there (:func:`foreign_packets`).

:func:`measure_tenants` runs the whole measurement on a fresh emulation: the link rate calibrated
by the headroom probe with every GPU sending, each tenant alone (the others' GPUs idle), then all
of them at once under the isolation capture; each tenant's circuits are taken away when it ends.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from emulation import dataplane as dpn
from emulation.emulator.agent_schedule import AgentSchedules
from emulation.emulator.capture import Capture
from emulation.emulator.net import EmulatedFabric, EmulationError
from emulation.emulator.orchestrator import AGENT_TIMEOUT_MARGIN_S, RELEASE_LEAD_S, agents
from emulation.fabric import Circuit, Configuration, Fabric
from emulation.output import Progress
from emulation.routing import Routes, RoutingError
from emulation.scale import Scale
from emulation.workloads.model import Tenant


@dataclass
class TenantMeasured:
    """One tenant's run on the packet backend: step end times and completion time (real-
    equivalent s, on the tenant's own clock from its start), TCP retransmissions."""

    name: str
    step_end_s: list[float] = field(default_factory=list)
    retransmissions: int = 0

    @property
    def time_s(self) -> float:
        """Completion time, s."""
        return self.step_end_s[-1] if self.step_end_s else 0.0


def tenant_circuits(configuration: Configuration, gpus: set[int]) -> dict[str, set[Circuit]]:
    """The circuits of ``configuration`` joining two of ``gpus``, per OCS."""
    return {o: {c for c in cs if c.a.gpu in gpus and c.b.gpu in gpus} for o, cs in configuration.items()}


def run_tenants(emu: EmulatedFabric, tenants: list[Tenant], configuration: Configuration, scale: Scale,
                alpha_s: float, run_dir: Path, step_timeout_s: float = 120.0) -> list[TenantMeasured]:
    """Run every tenant at once (module doc); one :class:`TenantMeasured` per tenant, in order.

    :param alpha_s: real per-message latency (agents wait ``alpha_s x TDF`` before a transfer).
    :raises EmulationError: a transfer cannot be routed on ``configuration``, GPUs are shared, an
        agent or the controller was lost, or a step took longer than ``step_timeout_s``.
    """
    fabric, tdf = emu.fabric, scale.tdf
    owner: dict[int, int] = {}
    for k, t in enumerate(tenants):
        for g in t.gpus:
            if g in owner or not 0 <= g < fabric.gpus:
                raise EmulationError(f"tenant {t.name}: GPU {g} is another tenant's or not in the fabric")
            owner[g] = k
    routes = Routes(fabric, configuration, fabric.ports_per_gpu)
    compiled = []
    for k, t in enumerate(tenants):
        sch = AgentSchedules(fabric.gpus, alpha_s * tdf)
        tid = 0
        for st in t.workload.steps:
            si = sch.add_step()
            if not st.transfers:
                continue
            g = np.asarray(t.gpus)
            try:
                sf = routes.subflow_arrays(g[[x.src for x in st.transfers]], g[[x.dst for x in st.transfers]])
            except RoutingError as e:
                raise EmulationError(f"tenant {t.name}: {e}") from None
            for j, x in enumerate(st.transfers):
                eb = scale.emulated_bytes(x.bytes)
                mine = np.flatnonzero(sf.transfer == j)
                parts = [[int(sf.channel[f]), int(eb * sf.fraction[f])] for f in mine]
                parts[0][1] += eb - sum(b for _, b in parts)
                sch.transfer(si, tid, t.gpus[x.src], t.gpus[x.dst], parts)
                tid += 1
        if t.workload.steps:
            for g in t.gpus:  # the tenant's circuits go when it ends: nothing may be in flight then
                sch.ranks[g]["steps"][-1]["drain"] = True
        sch.timeout(step_timeout_s + AGENT_TIMEOUT_MARGIN_S)
        compiled.append(sch)
    idle = AgentSchedules(fabric.gpus, alpha_s * tdf)
    idle.timeout(step_timeout_s + AGENT_TIMEOUT_MARGIN_S)
    schedules = [compiled[owner[g]].ranks[g] if g in owner else idle.ranks[g] for g in range(fabric.gpus)]

    emu.client.apply(configuration, 0.0)
    emu.settle()
    run_dir.mkdir(parents=True, exist_ok=True)
    out = [TenantMeasured(t.name) for t in tenants]
    with agents(emu, schedules, run_dir) as (coord, alive):
        remaining = configuration
        step = [0] * len(tenants)
        clock = [0.0] * len(tenants)  # each tenant's own clock, emulated s
        origin = [0.0] * len(tenants)
        at_of = [0.0] * len(tenants)
        got: list[list[dict]] = [[] for _ in tenants]
        released = [0.0] * len(tenants)

        def go(k: int, at: float) -> None:
            t = tenants[k]
            origin[k] = at - clock[k]
            at_of[k] = at
            released[k] = time.monotonic()
            for g in t.gpus:
                coord.send(g, {"go": step[k], "at": at, "origin": origin[k]})

        now = time.monotonic() + 4 * RELEASE_LEAD_S
        live = set()
        for k, t in enumerate(tenants):
            if t.workload.steps:
                go(k, now + t.start_s * tdf)  # a later start: the tenant's clock starts then
                live.add(k)
        while live:
            try:
                msg = coord.inbox.get(timeout=0.2)
            except queue.Empty:
                alive()
                for k in live:
                    if time.monotonic() - released[k] > step_timeout_s:
                        raise EmulationError(f"tenant {tenants[k].name}: step {step[k]} took over {step_timeout_s:g} s")
                continue
            if msg.get("eof"):
                alive()
                continue
            if "done" not in msg:
                continue
            k = owner[msg["rank"]]
            got[k].append(msg)
            if len(got[k]) < len(tenants[k].gpus):
                continue
            reports, got[k] = got[k], []
            ends = [t for m in reports for t in m["recv"].values()]
            end = max(ends, default=at_of[k])
            clock[k] = end - origin[k]
            out[k].step_end_s.append(clock[k] / tdf)
            out[k].retransmissions = sum(m.get("retrans", 0) for m in reports)  # cumulative per agent
            step[k] += 1
            if step[k] < len(tenants[k].workload.steps):
                go(k, time.monotonic() + RELEASE_LEAD_S)
                continue
            live.discard(k)
            mine = tenant_circuits(remaining, set(tenants[k].gpus))
            remaining = Configuration({o: set(cs) - mine.get(o, set()) for o, cs in remaining.items()})
            emu.client.apply(remaining, 0.0)  # released at exit: only this tenant's ports change
    return out


def foreign_filter(gpus: Iterable[int]) -> str:
    """A pcap-filter expression (tcpdump syntax) matching every frame that is *not* an IPv4 packet
    between two of ``gpus``: on an OCS input port of a tenant's GPU, the other tenants' traffic
    (and anything else that should not be there)."""
    hosts = sorted(dpn.gpu_ip(g) for g in gpus)
    src = " or ".join(f"src host {h}" for h in hosts)
    dst = " or ".join(f"dst host {h}" for h in hosts)
    return f"not (ip and ({src}) and ({dst}))"


def isolation_capture(emu: EmulatedFabric, tenants: list[Tenant], out_dir: Path) -> Capture:
    """A :class:`~emulation.emulator.capture.Capture` on the OCS input ports of every tenant's GPUs
    that keeps only the frames foreign to the port's tenant (:func:`foreign_filter`; the kernel
    filters, so a tenant's own traffic costs no copy to user space). Not started."""
    owner = {g: t for t in tenants for g in t.gpus}
    filters = {}
    for dev, gpu in emu.ocs_input_gpus().items():
        if gpu in owner:
            filters[dev] = foreign_filter(owner[gpu].gpus)
    return Capture(sorted(filters), out_dir, filters=filters)


def foreign_packets(emu: EmulatedFabric, tenants: list[Tenant], capture_dir: Path) -> dict[str, int]:
    """Per tenant, the frames an :func:`isolation_capture` kept on its GPUs' OCS input ports: other
    tenants' packets on this tenant's circuits (0 = isolated)."""
    from scapy.utils import RawPcapReader

    owner = {g: t.name for t in tenants for g in t.gpus}
    out = {t.name: 0 for t in tenants}
    for dev, gpu in emu.ocs_input_gpus().items():
        name = owner.get(gpu)
        if name is None:
            continue
        for path in sorted(Path(capture_dir).glob(f"{dev}.pcap*")):
            if path.stat().st_size > 24:  # more than the file header
                out[name] += sum(1 for _ in RawPcapReader(str(path)))
    return out


@dataclass
class TenantsMeasured:
    """What :func:`measure_tenants` measured: the ``scale`` model of the link rate run, the
    headroom probe at that rate, each tenant ``alone`` and all of them ``together`` (in the
    tenants' order), ``foreign`` frames of another tenant seen on each tenant's OCS ports (by
    name; the isolation measure) and the circuits left after every tenant ended."""

    scale: Scale
    headroom: dict | None
    alone: list[TenantMeasured]
    together: list[TenantMeasured]
    foreign: dict[str, int]
    circuits_left: int


def measure_tenants(fabric: Fabric, configuration: Configuration, tenants: list[Tenant], alpha_s: float, out: Path,
                    spec, *, force: bool = False, progress: Progress | None = None) -> TenantsMeasured:
    """The tenants on a fresh packet session of ``fabric`` for the scenario's ``emulation:``
    section ``spec`` (:class:`~emulation.emulator.session.PacketSession`, logs in
    ``out/emulation``: the link rate calibrated by the headroom probe with every GPU sending),
    each tenant alone (its start at 0, the others' GPUs idle), then all of them at once
    (:func:`run_tenants`, on ``configuration``) under an :func:`isolation_capture`.

    :param alpha_s: real per-message latency, s.
    :param force: run a requested rate that misses the headroom target.
    :raises emulation.emulator.session.HeadroomError: the requested rate misses the target
        (``headroom: refuse``, not ``force``).
    :raises CalibrationError: no link rate is faithful on this machine.
    :raises EmulationError: the emulation failed.
    """
    steps = len(tenants) + 1
    from emulation.emulator.session import PacketSession

    calibrating = (lambda what, done, total: progress(what, 0, steps + 1)) if progress else None
    with PacketSession(fabric, out, spec, force=force, progress=calibrating) as session:
        emu, scale = session.emu, session.scale
        alone = []
        for k, t in enumerate(tenants):
            if progress:
                progress(f"{t.name} alone", k + 1, steps + 1)
            alone.append(run_tenants(emu, [Tenant(t.name, t.workload, t.gpus, 0.0)], configuration, scale, alpha_s,
                                     out / "emulation" / f"alone-{t.name}")[0])
        if progress:
            progress("together", steps, steps + 1)
        watch = isolation_capture(emu, tenants, out / "emulation" / "isolation")
        watch.start()
        try:
            together = run_tenants(emu, tenants, configuration, scale, alpha_s, out / "emulation" / "together")
        finally:
            watch.stop()
        foreign = foreign_packets(emu, tenants, out / "emulation" / "isolation")
        left = emu.client.circuits()
    if progress:
        progress("done", steps + 1, steps + 1)
    return TenantsMeasured(scale=scale, headroom=session.meta.get("headroom"), alone=alone, together=together, foreign=foreign,
                           circuits_left=sum(len(cs) for cs in left.values()))
