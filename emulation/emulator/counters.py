"""Counters of one running emulation that say where its packets were lost (the categories are
those of :mod:`emulation.drops`).

- ``congestion``: tc qdisc drops on the transmit end of every shaped fabric link;
- ``dark`` and ``no_route``: the controller's lowest-priority rule on every bridge sends what
  no circuit or route takes to the bridge's own port, which is down, and Open vSwitch counts
  exactly what it drops there (``ovs-appctl dpctl/show -s``);
- ``veth``: ``tx_dropped``/``rx_dropped`` of our root-namespace devices (on a fabric spread over
  servers, also the UDP datagrams a server could not take: VXLAN frames lost between servers);
- ``backlog``: ``/proc/net/softnet_stat``;
- ``ovs_rx``: drops of Open vSwitch's receive packet sockets on our ports (``ss -f link -m``),
  and of the XDP sockets of ports polled over AF_XDP (:mod:`emulation.emulator.pmd`);
- ``datapath``: upcalls lost (``ovs-appctl dpctl/show``);
- ``ovs_tx``: conservation over the whole run: packets the GPUs sent (their interfaces'
  counters) that neither arrived nor appear in any counter above. The wire probes of a captured
  run (:mod:`emulation.emulator.probe`) are taken out of both sides: a NIC sends a copy of its
  GPU's probe out of every fabric port and an OCS drops, uncounted, those of a port without a
  circuit, so the GPUs' counters do not balance for them. The probes sent are the packet count
  of the NICs' rule for them; the probe copies a GPU received are the frames its stack did not
  take (no protocol handles their EtherType: the receive ``drop`` of ``/proc/net/dev``). A quiet
  snapshot pauses the probes while it reads (:attr:`DropCounters.probes`).

On a fabric spread over servers (:mod:`emulation.emulator.cluster`) every counter is read on the
server that holds the device, bridge or host, and summed; ``backlog`` once per machine.

Everything but ``ovs_tx`` is read at every step boundary; ``ovs_tx`` needs the fabric to be quiet
(no packet in flight), which it is before the first step and after the last. Every counter is
read from devices, sockets and bridges this emulation owns, except ``backlog`` and
``datapath``, which the kernel keeps per machine and Open vSwitch per datapath.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from emulation import dataplane as dpn
from emulation.emulator.sites import LOCAL, Site
from emulation.poll import poll_until


@dataclass(frozen=True)
class Ports:
    """Which of the emulation's interfaces play which role.

    :param fabric_tx: root-namespace devices whose egress qdisc is a shaped fabric link.
    :param ovs_ports: every root-namespace device attached to one of our bridges.
    :param hosts: ``{host pid: interface}`` of every GPU (its end of the injection link).
    :param ocs_bridges: OCS bridge names; :param forwarding_bridges: NIC and EPS bridge names.
    :param servers: ``{device, bridge or str(host pid): server}`` where the fabric is spread over
        servers; empty: everything on this machine.
    """

    fabric_tx: tuple[str, ...]
    ovs_ports: tuple[str, ...]
    hosts: dict[int, str]
    ocs_bridges: tuple[str, ...]
    forwarding_bridges: tuple[str, ...]
    servers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of_net(net) -> Ports:
        """Classify the interfaces of a built Mininet network of :mod:`topologies.mininet_topos`
        (nodes of the cluster edition carry their ``server``)."""
        fabric_tx, ovs, hosts, servers = [], [], {}, {}
        for link in net.links:
            if getattr(link, "isPatchLink", False):
                continue
            for me, peer in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
                kind, peer_kind = dpn.node_kind(me.node.name), dpn.node_kind(peer.node.name)
                server = getattr(me.node, "server", None)
                if server is not None:
                    servers[me.name if kind != "g" else str(me.node.pid)] = server
                if kind == "g":
                    hosts[me.node.pid] = me.name
                    continue
                ovs.append(me.name)
                if kind and peer_kind and (kind in "ne" and peer_kind in "ne") or (kind == "n" and peer_kind == "o"):
                    fabric_tx.append(me.name)
        for sw in net.switches:
            if getattr(sw, "server", None) is not None:
                servers[sw.name] = sw.server
        return Ports(tuple(sorted(fabric_tx)), tuple(sorted(ovs)), hosts,
                     tuple(sorted(s.name for s in net.switches if dpn.node_kind(s.name) == "o")),
                     tuple(sorted(s.name for s in net.switches if dpn.node_kind(s.name) in ("n", "e"))), servers)


@dataclass
class Snapshot:
    """Counter values at one instant (packets); ``t`` is CLOCK_MONOTONIC seconds.

    ``qdisc_drops``, ``ovs_rx`` and ``sunk`` are per device (``sunk``: packets Open vSwitch
    dropped at each bridge's own port)."""

    t: float
    qdisc_drops: dict[str, int]
    veth_drops: int
    backlog: int
    ovs_rx: dict[str, int]
    sunk: dict[str, int]
    datapath_lost: int
    host_tx: int
    host_rx: int
    host_rx_unhandled: int = 0
    probes_tx: int | None = None


def nic_drops_are_dark(fabric) -> bool:
    """True if a NIC's drops on ``fabric`` (a :class:`~emulation.fabric.Fabric`) are packets that
    crossed a reconfiguration into the wrong circuit, to be counted ``dark``: GPUs of one port on
    OCSes (nothing transits a NIC), or every GPU's port k on OCS k alone (parallel OCSes:
    :attr:`~emulation.fabric.Fabric.port_per_ocs`), whose NICs send channel k out of port k
    whatever the circuits. A NIC then drops only what an OCS handed it for another GPU: a frame
    sent outside its window (a TCP retransmission or ACK) that met the next circuit."""
    return bool(fabric.ocs) and (fabric.ports_per_gpu == 1 or fabric.port_per_ocs)


class DropCounters:
    """Reads the drop counters of one running emulation (module doc).

    :param ports: the roles of the emulation's interfaces (:meth:`Ports.of_net`).
    :param misdelivered_is_dark: a NIC's drops are packets that crossed a reconfiguration into the
        wrong circuit, not holes in its routes (:func:`nic_drops_are_dark`).
    :param sites: ``{server: Site}`` of the servers named in ``ports.servers`` (a fabric spread
        over servers); None: this machine.
    """

    def __init__(self, ports: Ports, misdelivered_is_dark: bool = False, sites: dict[str, Site] | None = None):
        #: the wire probe processes of a captured run (:mod:`emulation.emulator.probe`): a quiet
        #: snapshot pauses them (SIGSTOP) while it waits for quiet and counts them apart
        self.probes: list = []
        #: our AF_XDP ports (:mod:`emulation.emulator.pmd`): their XDP sockets' drops count as ``ovs_rx``
        self.xsk_ports: list[str] = []
        self.ports = ports
        self.misdelivered_is_dark = misdelivered_is_dark
        self._ovs_set = set(ports.ovs_ports)
        self._bridges = set(ports.ocs_bridges) | set(ports.forwarding_bridges)
        self._sites = dict(sites or {})
        #: one site per machine, whose per-machine counters (``backlog``) are read
        self._machines = self._one_per_machine()

    def site_of_device(self, name: str) -> Site:
        """Where device, bridge or ``str(host pid)`` ``name`` lives."""
        server = self.ports.servers.get(name)
        return self._sites[server] if server is not None else LOCAL

    def _all_sites(self) -> list[Site]:
        return list(self._sites.values()) or [LOCAL]

    def _one_per_machine(self) -> list[Site]:
        seen, out = set(), []
        for site in self._all_sites():
            boot = site.read(["/proc/sys/kernel/random/boot_id"]).get("/proc/sys/kernel/random/boot_id")
            if boot is None or boot not in seen:
                seen.add(boot)
                out.append(site)
        return out

    def by_site(self, names) -> list[tuple[Site, list[str]]]:
        """``names`` (devices, bridges or ``str(host pid)``) grouped by the site holding them."""
        groups: dict[int, tuple[Site, list[str]]] = {}
        for n in names:
            site = self.site_of_device(n)
            groups.setdefault(id(site), (site, []))[1].append(n)
        return list(groups.values())

    # ---- readers ---------------------------------------------------------------------------
    def _qdisc_drops(self) -> dict[str, int]:
        out = {}
        for site in self._all_sites():
            for q in json.loads(site.out(["tc", "-s", "-j", "qdisc", "show"], 10) or "[]"):
                dev = q.get("dev")
                if dev in self._ovs_set and q.get("root") and self.site_of_device(dev) is site:
                    out[dev] = int(q.get("drops", 0))
        return out

    def _veth_drops(self) -> int:
        total = 0
        for site, devs in self.by_site(self.ports.ovs_ports):
            paths = [f"/sys/class/net/{dev}/statistics/{name}" for dev in devs for name in ("tx_dropped", "rx_dropped")]
            for text in site.read(paths).values():
                try:
                    total += int(text)
                except ValueError:
                    pass
        return total

    def _tunnel_drops(self) -> int:
        """UDP datagrams the servers' network stacks could not take (``/proc/net/snmp``:
        ``InErrors``, which includes ``RcvbufErrors``): VXLAN frames lost between servers."""
        total = 0
        for site in self._all_sites():
            if not site.remote:
                continue
            total += snmp_counters(site.read(["/proc/net/snmp"]).get("/proc/net/snmp", ""), ("Udp:",)).get("InErrors", 0)
        return total

    def _softnet_drops(self) -> int:
        total = 0
        for site in self._machines:
            text = site.read(["/proc/net/softnet_stat"]).get("/proc/net/softnet_stat", "")
            total += sum(int(line.split()[1], 16) for line in text.splitlines())
        return total

    def _ovs_socket_drops(self) -> dict[str, int]:
        """``{device: drops}`` of Open vSwitch's receive packet sockets on our ports."""
        out = {}
        lines = [(site, line) for site in self._all_sites()
                 for line in site.out(["ss", "-f", "link", "-m", "-a", "-n", "-H"], 10).splitlines()]
        for site, line in lines:
            m = re.search(r"\*:(\S+)\s.*skmem:\(([^)]*)\)", line)
            if not m or m.group(1) not in self._ovs_set or self.site_of_device(m.group(1)) is not site:
                continue
            d = re.search(r"\bd(\d+)", m.group(2))
            out[m.group(1)] = out.get(m.group(1), 0) + (int(d.group(1)) if d else 0)
        if self.xsk_ports:
            from emulation.emulator.pmd import xsk_drops

            for dev, n in xsk_drops(self.xsk_ports).items():
                out[dev] = out.get(dev, 0) + n
        return out

    def _datapath(self) -> tuple[dict[str, int], int]:
        """Packets sent to (and dropped at) each of our bridges' own ports, and upcalls lost."""
        lost, sunk = 0, {}
        for site in self._all_sites():
            text = site.out(["ovs-appctl", "dpctl/show", "-s"], 10)
            m = re.search(r"lost:(\d+)", text)
            lost += int(m.group(1)) if m else 0
            for port, body in re.findall(r"port \d+: (\S+) \(tap\)\n((?:\s{4}.*\n?)*)", text):
                if port in self._bridges and self.site_of_device(port) is site:
                    tx = re.search(r"TX packets:(\d+)\D+\d+\D+dropped:(\d+)", body)
                    if tx:
                        sunk[port] = int(tx.group(1)) + int(tx.group(2))
        return sunk, lost

    def _hosts(self) -> tuple[int, int, int]:
        """Frames the GPUs sent and received on their injection links, and the received ones no
        protocol of theirs took (``/proc/net/dev``'s receive ``drop``: a wire probe, whose
        EtherType no GPU handles)."""
        tx = rx = unhandled = 0
        texts = {}
        for site, pids in self.by_site(str(p) for p in self.ports.hosts):
            texts.update({int(path.split("/")[2]): t for path, t in site.read([f"/proc/{p}/net/dev" for p in pids]).items()})
        for pid, intf in self.ports.hosts.items():
            for line in texts.get(pid, "").splitlines():
                name, _, rest = line.partition(":")
                if name.strip() == intf:
                    v = rest.split()
                    rx += int(v[1])
                    unhandled += int(v[3])
                    tx += int(v[9])
        return tx, rx, unhandled

    def _probes_sent(self) -> int:
        """Probes the GPUs sent: the packet count of every NIC's rule for its GPU's probes
        (``controllers.circuit_switch``, the probe rule matching the GPU's port). Open vSwitch
        credits a rule with its cached datapath flows' packets when they are revalidated: they are
        flushed first (on a quiet fabric nothing is lost by it)."""
        for site in self._all_sites():
            site.run(["ovs-appctl", "revalidator/purge"])
        sent = 0
        for br in self.ports.forwarding_bridges:
            if dpn.node_kind(br) == "n":
                flows = self.site_of_device(br).out(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br,
                                                     f"dl_type={dpn.PROBE_ETHERTYPE:#06x},in_port={dpn.NIC_HOST_PORT}"])
                sent += sum(int(n) for n in re.findall(r"n_packets=(\d+)", flows))
        return sent

    # ---- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Read every counter now."""
        tx, rx, unhandled = self._hosts()
        sunk, lost = self._datapath()
        return Snapshot(time.monotonic(), self._qdisc_drops(), self._veth_drops() + self._tunnel_drops(),
                        self._softnet_drops(),
                        self._ovs_socket_drops(), sunk, lost, tx, rx, unhandled)

    def quiet_snapshot(self, settle_s: float = 0.25, timeout_s: float = 5.0) -> Snapshot:
        """A snapshot once no GPU has sent or received a packet for ``settle_s`` (longer than
        TCP's delayed-ACK timer, so that nothing is in flight), or after ``timeout_s``. The wire
        probes of a captured run are paused meanwhile and their counts read with the rest."""
        import os
        import signal

        live = [p for p in self.probes if p.poll() is None]
        for p in live:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            snap = self._quiet_snapshot(settle_s, timeout_s)
        finally:
            for p in live:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGCONT)
        if live:  # the probes back on the wire before anything is timed: a reconfiguration right
            # after a pause would otherwise show the pause as part of its dark window
            sent = snap.probes_tx or 0
            poll_until(lambda: self._probes_sent() >= sent + 5 * len(live), 2.0, interval_s=0.01)
        return snap

    def _quiet_snapshot(self, settle_s: float, timeout_s: float) -> Snapshot:
        seen = {"hosts": self._hosts(), "since": time.monotonic()}

        def quiet() -> bool:
            now = self._hosts()
            if now != seen["hosts"]:
                seen.update(hosts=now, since=time.monotonic())
                return False
            return time.monotonic() - seen["since"] >= settle_s

        poll_until(quiet, timeout_s, interval_s=0.02)
        snap = self.snapshot()
        if self.probes:
            snap.probes_tx = self._probes_sent()
        return snap

    def drops(self, a: Snapshot, b: Snapshot, quiet: bool = False) -> dict:
        """Packets lost between ``a`` and ``b`` by category (module doc), with ``where``: the
        devices with artefact drops. With ``quiet`` (both snapshots taken with nothing in
        flight) also ``sent``, ``received`` and ``ovs_tx``."""
        fab = set(self.ports.fabric_tx)
        dq = {d: b.qdisc_drops.get(d, 0) - a.qdisc_drops.get(d, 0) for d in b.qdisc_drops}
        dsunk = {br: b.sunk.get(br, 0) - a.sunk.get(br, 0) for br in b.sunk}
        drx = {d: b.ovs_rx.get(d, 0) - a.ovs_rx.get(d, 0) for d in b.ovs_rx}
        dark_at = set(self.ports.ocs_bridges) | (set(self.ports.forwarding_bridges) if self.misdelivered_is_dark else set())
        out = {
            "congestion": sum(v for d, v in dq.items() if d in fab),
            "dark": sum(v for br, v in dsunk.items() if br in dark_at),
            "veth": b.veth_drops - a.veth_drops,
            "backlog": b.backlog - a.backlog,
            "ovs_rx": sum(drx.values()),
            "no_route": sum(v for br, v in dsunk.items() if br not in dark_at),
            "datapath": b.datapath_lost - a.datapath_lost,
        }
        where = {f"ovs_rx {d}": v for d, v in drx.items() if v}
        where.update({f"no_route {br}": v for br, v in dsunk.items() if v and br not in dark_at})
        if quiet:
            sent, received = b.host_tx - a.host_tx, b.host_rx - a.host_rx
            if None not in (a.probes_tx, b.probes_tx):  # the wire probes balance apart (module doc)
                sent -= b.probes_tx - a.probes_tx
                received -= b.host_rx_unhandled - a.host_rx_unhandled
            counted = sum(v for k, v in out.items() if k not in ("backlog",))
            out["ovs_tx"] = max(0, sent - received - counted)
            out["sent"], out["received"] = sent, received
        out["where"] = where
        return out


__all__ = ["DropCounters", "Ports", "Snapshot"]


def snmp_counters(text: str, groups: tuple[str, ...]) -> dict[str, int]:
    """The counters of ``groups`` (``"Tcp:"``, ``"TcpExt:"``, ``"Udp:"``...) in ``text``, the
    contents of ``/proc/net/snmp`` and/or ``/proc/net/netstat`` (a row of names, then a row of
    values, per group), by name; a group absent from ``text`` gives nothing."""
    out: dict[str, int] = {}
    rows = [r.split() for r in text.splitlines()]
    for names, values in zip(rows, rows[1:]):
        if names[:1] and names[0] in groups and values[:1] == names[:1] and not names[1].lstrip("-").isdigit():
            out.update({k: int(v) for k, v in zip(names[1:], values[1:]) if v.lstrip("-").isdigit()})
    return out
