"""A WAN emulated with real packets: every router an Open vSwitch bridge, every site a Mininet
host, one OS-Ken TE controller process per slice (:mod:`controllers.wan_te`).

``with WanNet(topo, tunnels, slicing, te, run_dir, link_mbps=8) as net:`` registers the run
(one emulation per machine), starts one controller per slice (each its own OpenFlow and API port),
builds the bridges (userspace datapath, secure fail mode: a bridge whose controller is gone keeps
its rules), connects every bridge only to its slice's controller, shapes every link end at its
capacity (the largest capacity is ``link_mbps`` Mbit/s of Ethernet frames; HTB, a queue of
:data:`QUEUE_S` of the link's rate) and waits until every controller has programmed its routers.
On exit (normal, error, Ctrl-C or SIGTERM) everything is ended by pid and deleted by name.

Router i is bridge ``ocl-w<i>``: port 1 is its site's host ``w<i>`` (address ``10.<i>.0.1``
and, for the generator's flows, :func:`flow_ip`), port ``2 + j`` leads to its j-th neighbour (in
ascending order).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emulation import dataplane as dpn
from emulation.emulator import registry, shaper
from emulation.emulator.capabilities import detect
from emulation.emulator.controller_client import ControllerClient, ControllerError
from emulation.emulator.lifecycle import Lifecycle
from emulation.emulator.net import (EmulationError, claim_machine, controller_command, disable_offloads, free_port,
                                    keep_qdiscs, project_root, stop_net, stop_pid, sysctl)
from emulation.poll import wait_until
from emulation.planners.slicing import Slicing
from emulation.planners.tunnels import Tunnels
from topologies.wan import WanTopology

#: First datapath id of the WAN routers (router i is DPID_WAN + i).
DPID_WAN = 0x0004_0000_0000
HOST_PORT = 1
#: Queue of every shaped link end, in seconds of its rate (a WAN router's buffer).
QUEUE_S = 0.05
#: Ethernet + IPv4 + UDP headers of the generator's frames, and the tunnel label, bytes.
HEADERS, LABEL = 42, 4


def router_name(i: int) -> str:
    """Bridge of router i."""
    return f"{dpn.PREFIX}w{i}"


def site_host(i: int) -> str:
    """Host of site i."""
    return f"w{i}"


def host_ip(i: int) -> str:
    """Address traffic to site i is sent to."""
    return f"10.{i}.0.1"


def flow_ip(i: int, f: int) -> str:
    """Source address of site i's flow f (1 <= f <= 1000): ``10.<i>.<1 + (f - 1) // 250>.<1 + (f - 1) % 250>``."""
    return f"10.{i}.{1 + (f - 1) // 250}.{1 + (f - 1) % 250}"


def host_mac(i: int) -> str:
    return f"02:57:00:00:{i >> 8:02x}:{i & 0xff:02x}"


@dataclass(frozen=True)
class _Controller:
    """What Mininet's OVSSwitch.start needs of a controller (the process is ours)."""

    name: str
    port: int
    protocol: str = "tcp"

    def IP(self) -> str:  # noqa: N802 - Mininet's API
        return "127.0.0.1"


class WanNet(Lifecycle):
    """A running WAN emulation (module doc).

    :param link_mbps: the rate of the largest-capacity link (Mbit/s of Ethernet frames, <= 1000).
    :param controller: the framework of the slice controllers, ``os-ken`` or ``ryu``
        (:func:`emulation.emulator.net.controller_command`).
    :raises MachineBusy: another emulation holds the machine, or a killed run left state behind.
    :raises EmulationError: not root, Open vSwitch not running, a controller did not start or did
        not program its routers within 60 s.
    """

    def __init__(self, topo: WanTopology, tunnels: Tunnels, slicing: Slicing, te: dict, run_dir: Path, *,
                 link_mbps: float, controller: str = "os-ken"):
        if not 0 < link_mbps <= 1000:
            raise EmulationError(f"link_mbps: must be in (0, 1000] Mbit/s, got {link_mbps}")
        self.topo, self.tunnels, self.slicing, self.te = topo, tunnels, slicing, te
        self.run_dir = Path(run_dir).resolve()
        self.link_mbps = link_mbps
        self.runtime = controller
        self.mbps_per_unit = link_mbps / max(topo.capacity)
        self.net = None
        self.controllers: dict[int, subprocess.Popen] = {}
        self.clients: dict[int, ControllerClient] = {}
        self.registration: registry.Registration | None = None
        self.ports: dict[tuple[int, int], int] = {}  # (router, neighbour) -> port

    # ---- life cycle -----------------------------------------------------------------------
    def _teardown(self) -> None:
        if self.net is not None:
            stop_net(self.net)
            self.net = None
        if self.registration is not None:
            for i in range(self.topo.routers):
                subprocess.run(["ovs-vsctl", "--if-exists", "del-br", router_name(i)], capture_output=True)
        for p in self.controllers.values():
            stop_pid(p)
        self.controllers.clear()

    def _start(self) -> None:
        self.registration = claim_machine(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._number_ports()
        ofp_ports = {}
        for k in range(self.slicing.count):
            if k in self.slicing.slice_of:
                ofp_ports[k] = self._start_controller(k)
        self._build(ofp_ports)
        for k, client in self.clients.items():
            try:
                client.wait_ready(timeout=60)
            except ControllerError as e:
                raise EmulationError(f"slice {k}'s controller: {e}") from None

    def _number_ports(self) -> None:
        for u in range(self.topo.routers):
            nbrs = sorted({v for a, v in self.topo.links if a == u} | {a for a, v in self.topo.links if v == u})
            for j, v in enumerate(nbrs):
                self.ports[(u, v)] = 2 + j

    def slice_config(self, k: int) -> dict:
        """The JSON :class:`controllers.wan_te.SliceConfig` reads for slice ``k``."""
        t = self.tunnels
        return {"slice": k, "routers": list(self.topo.names),
                "mine": [i for i, s in enumerate(self.slicing.slice_of) if s == k],
                "dpid": [DPID_WAN + i for i in range(self.topo.routers)],
                "links": [list(l) for l in self.topo.links], "capacity": list(self.topo.capacity),
                "port": [[self.ports[(u, v)], self.ports[(v, u)]] for u, v in self.topo.links],
                "host_port": HOST_PORT, "host_ip": [host_ip(i) for i in range(self.topo.routers)],
                "demands": [list(d) for d in t.demands], "paths": [list(p) for p in t.paths],
                "demand_of": [int(x) for x in t.demand_of], "te": self.te}

    def _start_controller(self, k: int) -> int:
        conf = self.run_dir / f"slice-{k}.json"
        conf.write_text(json.dumps(self.slice_config(k)))
        ofp, api = free_port(), free_port()
        log = self.run_dir / f"controller-{k}.log"
        cmd, env = controller_command(self.runtime, ["wan_te"], [
            "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(ofp), "--ocslab-wan", str(conf),
            "--ocslab-api-port", str(api), "--log-file", str(log)])
        with open(log, "w") as fh:
            self.controllers[k] = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                                   cwd=project_root(), start_new_session=True)
        self.clients[k] = client = ControllerClient(api, timeout=60)
        proc = self.controllers[k]

        def up() -> bool:
            if proc.poll() is not None:
                raise EmulationError(f"slice {k}'s controller exited (see {log})")
            return client.alive()

        wait_until(up, 60, lambda: EmulationError(f"slice {k}'s controller API did not come up in 60 s"))
        return ofp

    def _build(self, ofp_ports: dict[int, int]) -> None:
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch
        from mininet.topo import Topo

        topo, ports = self.topo, self.ports
        mn = Topo()
        for i in range(topo.routers):
            mn.addSwitch(router_name(i), dpid=f"{DPID_WAN + i:016x}", failMode="secure", protocols="OpenFlow13",
                         datapath="user" if not detect().ovs_kernel_datapath else "kernel")
            mn.addHost(site_host(i), ip=f"{host_ip(i)}/8", mac=host_mac(i))
            mn.addLink(site_host(i), router_name(i), port2=HOST_PORT)
        done = set()
        for u, v in topo.links:
            if (v, u) in done:
                continue
            done.add((u, v))
            mn.addLink(router_name(u), router_name(v), port1=ports[(u, v)], port2=ports[(v, u)])
        setLogLevel("warning")
        self.net = Mininet(topo=mn, build=False, controller=None, autoSetMacs=False, autoStaticArp=False,
                           switch=OVSSwitch)
        setLogLevel("critical")
        try:
            self.net.build()
        finally:
            setLogLevel("warning")
        for link in self.net.links:
            for intf in (link.intf1, link.intf2):
                disable_offloads(intf)
                if intf.node.name.startswith(dpn.PREFIX):
                    sysctl(f"net/ipv6/conf/{intf.name}/disable_ipv6", "1")
        for i in range(topo.routers):
            h = self.net.get(site_host(i))
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
            for j in range(topo.routers):
                if j != i:
                    h.cmd(f"ip neigh replace {host_ip(j)} lladdr {host_mac(j)} dev {h.defaultIntf().name}")
        for i, sw in enumerate(self.net.switches):
            k = self.slicing.slice_of[int(sw.name[len(dpn.PREFIX) + 1:])]
            sw.batch = False  # Mininet.build() sets batch start-up, which only net.start() completes
            sw.start([_Controller(f"c{k}", ofp_ports[k])])
        keep_qdiscs([intf.name for sw in self.net.switches for intf in sw.intfList() if intf.name != "lo"])
        try:
            rates = {e: self.link_rate_mbps(e) for e in range(len(topo.links))}
            slowest = min(rates.values())
            queue = max(16, int(QUEUE_S * slowest * 1e6 / 8 / dpn.frame_bytes()))
            shaper.apply([shaper.Shaped(self.link_device(e), rates[e] / dpn.wire_per_payload())
                          for e in range(len(topo.links))], self.run_dir / "tc", queue)
        except shaper.ShapingError as e:
            raise EmulationError(str(e)) from None

    # ---- use ------------------------------------------------------------------------------
    def link_rate_mbps(self, e: int) -> float:
        """Shaped rate of link e (Mbit/s of Ethernet frames)."""
        return self.topo.capacity[e] * self.mbps_per_unit

    def link_device(self, e: int) -> str:
        """Root-namespace device whose egress is link e = (u, v): u's port toward v."""
        u, v = self.topo.links[e]
        return f"{router_name(u)}-eth{self.ports[(u, v)]}"

    def host(self, i: int):
        """The Mininet host of site i."""
        return self.net.get(site_host(i))

    def add_flow_addresses(self, flows: int) -> None:
        """Give every site's host the source addresses of its ``flows`` flows (``ip -batch``:
        a shell command line is cut at 4095 characters).

        :raises EmulationError: ip refused.
        """
        for i in range(self.topo.routers):
            h = self.host(i)
            path = self.run_dir / f"addresses-{i}.batch"
            path.write_text("".join(f"address add {flow_ip(i, f + 1)}/32 dev {h.defaultIntf().name}\n"
                                    for f in range(flows)))
            out = h.cmd(f"ip -batch {shlex.quote(str(path))} && echo ok")  # the results directory may hold spaces
            if not out.strip().endswith("ok"):
                raise EmulationError(f"host {site_host(i)}: ip -batch {path}: {out.strip()[-200:]}")

    def kill_controller(self, k: int) -> float:
        """SIGKILL slice k's controller (its routers keep their rules); the CLOCK_MONOTONIC time."""
        p = self.controllers[k]
        p.kill()
        p.wait(10)
        self.clients.pop(k, None)
        return time.monotonic()

    def set_link(self, e: int, up: bool) -> None:
        """Take both directions of link e's cable down (or up again): both root-namespace ends."""
        u, v = self.topo.links[e]
        for a, b in ((u, v), (v, u)):
            subprocess.run(["ip", "link", "set", "dev", f"{router_name(a)}-eth{self.ports[(a, b)]}",
                            "up" if up else "down"], capture_output=True, check=True)

    def port_bytes(self) -> "PortSnapshot":
        """Every link's byte counters now, as a :class:`PortSnapshot`: bytes sent into link
        (u, v) by router u's port and received from it by router v's port (OpenFlow port
        counters, ``ovs-ofctl dump-ports``, the routers read concurrently), each with the
        switch's own time of that reading (the port's ``duration``, ms resolution), so that a
        rate between two snapshots does not depend on how long the readings took; and the
        CLOCK_MONOTONIC times the first reading began and the last one ended."""
        from concurrent.futures import ThreadPoolExecutor

        def read(i):
            out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", router_name(i)],
                                 capture_output=True, text=True, timeout=10).stdout
            return _parse_ports(out)

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:
            stats = dict(enumerate(pool.map(read, range(self.topo.routers))))
        t1 = time.monotonic()

        def col(router_port, k):
            return np.array([stats[r].get(q, (0, 0, 0.0))[k] for r, q in router_port], dtype=float)

        out_ports = [(u, self.ports[(u, v)]) for u, v in self.topo.links]
        in_ports = [(v, self.ports[(v, u)]) for u, v in self.topo.links]
        return PortSnapshot(tx=col(out_ports, 1), tx_s=col(out_ports, 2), rx=col(in_ports, 0), rx_s=col(in_ports, 2),
                            began=t0, ended=t1)

    def group_weights(self, i: int) -> dict[int, dict[int, int]]:
        """``{group: {tunnel label: weight}}`` installed on router i now (``ovs-ofctl
        dump-groups``; a bucket without a label is label 0: dropped)."""
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", router_name(i)],
                             capture_output=True, text=True, timeout=10).stdout
        return _parse_groups(out)


@dataclass(frozen=True)
class PortSnapshot:
    """One reading of every link's port counters (:meth:`WanNet.port_bytes`): per link, bytes
    sent (``tx``, the source router's port) and received (``rx``, the destination's) and the
    switch's time of each reading (``tx_s``, ``rx_s``: seconds since the port was created);
    ``began``/``ended``: CLOCK_MONOTONIC s bracketing the whole reading."""

    tx: np.ndarray
    tx_s: np.ndarray
    rx: np.ndarray
    rx_s: np.ndarray
    began: float
    ended: float

    def rates(self, earlier: "PortSnapshot") -> tuple[np.ndarray, np.ndarray]:
        """``(sent, received)`` bytes/s per link between ``earlier`` and this reading, each
        over its own port's interval.

        :raises ValueError: a port was not read later here than in ``earlier``."""
        dt, dr = self.tx_s - earlier.tx_s, self.rx_s - earlier.rx_s
        if (dt <= 0).any() or (dr <= 0).any():
            raise ValueError("a port's counters were not read later than in the earlier reading")
        return (self.tx - earlier.tx) / dt, (self.rx - earlier.rx) / dr


def _parse_ports(text: str) -> dict[int, tuple[int, int, float]]:
    """``{port: (rx_bytes, tx_bytes, duration_s)}`` from ``ovs-ofctl -O OpenFlow13 dump-ports``
    output (``duration``: the port's age when the switch read it)."""
    import re

    out = {}
    pattern = r"port\s+(\w+):\s*rx pkts=\d+, bytes=(\d+).*?\n\s*tx pkts=\d+, bytes=(\d+).*?duration=([\d.]+)s"
    for m in re.finditer(pattern, text, re.S):
        if m.group(1).isdigit():
            out[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), float(m.group(4)))
    return out


def _parse_groups(text: str) -> dict[int, dict[int, int]]:
    import re

    out = {}
    for line in text.splitlines():
        g = re.search(r"group_id=(\d+)", line)
        if not g:
            continue
        buckets = {}
        for b in line.split("bucket=")[1:]:
            w = re.search(r"weight:(\d+)", b)
            vid = re.search(r"set_field:(\d+)->vlan_vid", b)
            label = (int(vid.group(1)) & 0xFFF) if vid else 0
            buckets[label] = buckets.get(label, 0) + (int(w.group(1)) if w else 0)
        out[int(g.group(1))] = buckets
    return out
