"""A fabric spread over servers with Mininet's cluster edition (``mininet.examples.cluster``).

``emulation.servers: [a, b]`` (or ``--servers a,b``) names ssh destinations; the emulated fabric
(:class:`emulation.emulator.net.EmulatedFabric`) then builds itself with :class:`FabricCluster`,
a ``MininetCluster``:

- **Placement** (:class:`FabricPlacer`, a cluster-edition ``Placer``): GPU ``i`` and its NIC
  bridge go to server ``floor(i S / N)`` (N GPUs, S servers: contiguous blocks, so a Ring's
  neighbours share a server), every EPS to the first server, and every OCS there too unless it
  is sharded (``emulation.ocs: sharded``, :mod:`emulation.ocs_shards`): then shard ``j`` goes to
  server ``j``, and its lanes to the other shards are tunnels like the links below.
- **Nodes**: hosts are ``RemoteHost`` and bridges ``RemoteOVSSwitch`` (userspace datapath, one
  batch of ``ovs-vsctl`` per server), driven over ssh with the cluster's ssh configuration.
- **Links**: within a server as on one machine (veths; the OCS-to-NIC direction an Open vSwitch
  patch port). Between servers, every fibre direction is a tunnel: ``VxlanLink``, a
  ``RemoteLink`` that follows the cluster edition's ``RemoteGRELink`` with a VXLAN device in
  place of ``gretap`` (this kernel has the ``vxlan`` driver and not ``ip_gre``), one VNI per
  tunnel, the fabric MTU carried whole (the underlay must take MTU + 50 bytes). A tunnel is
  shaped as the link it replaces: the NIC-to-OCS direction at its NIC end, at the port rate;
  the OCS-to-NIC direction (a patch port on one machine) not at its OCS end.
- **Controller**: one, on this machine, listening on the address this machine reaches the
  servers from (:attr:`Cluster.controller_ip`); every server's bridges connect to it.
- **Commands per server** (:class:`Site`): shaping, drop counters, health checks, datapath
  flushes, socket sizing, leftovers and the run lock go to the server that holds the devices,
  over one multiplexed ssh connection per server.

The cluster edition's own cleanup (which would sweep every switch and process of Mininet on a
server) is never called: ocslab removes only what its run made, by name and pid. Each
server's run lock is held by a process on that server for as long as the run's ssh connection
lasts (:meth:`Site.hold_lock`).

The servers share neither files nor a clock with this machine: an agent there reaches the
orchestrator's control socket through the run's ssh connection
(:meth:`emulation.emulator.server_run.ServerRun.reach`), runs from ocslab's directory there
(:attr:`emulation.emulator.sites.Site.root`) and measures its clock's offset
(:mod:`emulation.emulator.agent`, control protocol); the lab's servers
(:mod:`emulation.emulator.server_lab`) are made that way.
Docs: docs/cluster.md.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.sites import LOCAL, MARKER, ClusterError, Site
from emulation.ocs_shards import server_of_gpu

#: UDP port of every VXLAN tunnel (IANA's).
VXLAN_PORT = 4789


class Cluster:
    """The servers a fabric is spread over.

    :param servers: ssh destinations (host names or aliases of ``ssh_config``), at least one;
        ``localhost`` stands for this machine without ssh.
    :param ssh_config: ssh client configuration for them (``ssh -F``); None: the user's own.
    :raises ClusterError: a server is named twice, or ssh cannot resolve or reach one.
    """

    def __init__(self, servers: list[str], ssh_config: Path | None = None):
        if not servers:
            raise ClusterError("servers: name at least one server")
        if len(set(servers)) != len(servers):
            raise ClusterError("servers: a server is named twice")
        if "localhost" in servers and len(servers) > 1:
            raise ClusterError("servers: localhost cannot be mixed with other servers (its tunnels and the "
                               "controller need an address the others reach); name this machine by that address")
        self.servers = list(servers)
        self.ssh_config = Path(ssh_config) if ssh_config else None
        self.sites = {s: Site(s, self.ssh_config) if s != "localhost" else LOCAL for s in self.servers}
        self.ips = {s: self._ip(s) for s in self.servers}
        self.controller_ip = self._route_source(next(iter(self.ips.values())))

    def _ip(self, server: str) -> str:
        if server == "localhost":
            return "127.0.0.1"
        try:
            r = subprocess.run(["ssh", *(["-F", str(self.ssh_config)] if self.ssh_config else []), "-G", server],
                               capture_output=True, text=True, timeout=10)
            host = next((line.split()[1] for line in r.stdout.splitlines() if line.startswith("hostname ")), server)
            r = subprocess.run(["getent", "ahostsv4", host], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"servers: resolving {server!r} took over 10 s") from None
        if not r.stdout.split():
            raise ClusterError(f"servers: {server!r} does not resolve to an IPv4 address (ssh -G gives {host!r})")
        return r.stdout.split()[0]

    @staticmethod
    def _route_source(ip: str) -> str:
        """This machine's address on the route toward ``ip`` (where the controller listens)."""
        if ip.startswith("127."):
            return "127.0.0.1"
        out = subprocess.run(["ip", "route", "get", ip], capture_output=True, text=True, timeout=10).stdout.split()
        if "src" not in out:
            raise ClusterError(f"servers: no route from this machine to {ip}")
        return out[out.index("src") + 1]

    def check(self) -> None:
        """Every server answers over ssh, runs as root and has mnexec and Open vSwitch.

        :raises ClusterError: naming the first server that does not.
        """
        for s, site in self.sites.items():
            if not site.remote:
                continue
            r = site.run(["sh", "-c", "id -u; command -v mnexec; ovs-vsctl --timeout=5 show >/dev/null && echo ovs"], timeout=20)
            lines = r.stdout.split()
            if not lines or lines[0] != "0":
                raise ClusterError(f"server {s}: ssh must log in as root (got uid {lines[0] if lines else '?'})")
            if not any(x.endswith("mnexec") for x in lines):
                raise ClusterError(f"server {s}: mnexec not found (install Mininet there)")
            if "ovs" not in lines:
                raise ClusterError(f"server {s}: Open vSwitch does not answer (ovs-vsctl show)")

    def server_of(self, node_name: str, gpus: int) -> str:
        """The server of a node (a GPU host, NIC, OCS or EPS bridge) of a ``gpus``-GPU fabric
        (:func:`place_node`)."""
        return place_node(node_name, self.servers, gpus)

    def close(self) -> None:
        """End every site's ssh connection and lock holder."""
        for site in self.sites.values():
            site.close()


def _mininet_cluster():
    """The cluster edition's classes (imported only when a cluster is built: it needs Mininet)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # its distutils import
        from mininet.examples import cluster
    return cluster


def place_node(node: str, servers: list[str], gpus: int) -> str:
    """The placement rule (module doc): GPU ``i`` (host ``g<i>``, NIC bridge ``ocl-n<i>``) on
    ``servers[floor(i S / N)]`` of ``gpus`` = N GPUs (:func:`emulation.ocs_shards.server_of_gpu`),
    shard ``j`` of a sharded OCS on ``servers[j]``, every other bridge on ``servers[0]``."""
    kind = dpn.node_kind(node)
    if kind in ("g", "n"):
        return servers[server_of_gpu(dpn.node_index(node), gpus, len(servers))]
    return servers[dpn.node_shard(node)]


def FabricPlacer(servers: list[str], hosts: list[str], **kwargs):
    """:func:`place_node` as a cluster-edition ``Placer`` (``hosts``: the GPU hosts' names)."""
    cluster = _mininet_cluster()

    class _FabricPlacer(cluster.Placer):
        """:func:`place_node` behind the cluster edition's ``Placer`` interface."""

        def place(self, node: str) -> str:
            """The server of ``node`` (a GPU host or an ``ocl-`` bridge name)."""
            return place_node(node, self.servers, len(self.hosts))

    return _FabricPlacer(servers=servers, hosts=hosts, **kwargs)


def remote_classes(cluster: Cluster, datapath: str, mtu: int):
    """``(host, switch, link)`` classes of the cluster edition that reach the servers with
    ``cluster``'s ssh configuration; the switch on ``datapath``, tunnels carrying ``mtu``."""
    mc = _mininet_cluster()
    base = ["ssh", "-q", *(["-F", str(cluster.ssh_config)] if cluster.ssh_config else []),
            "-o", "BatchMode=yes", "-o", f"SendEnv={MARKER}", "-tt"]
    ips = cluster.ips

    class Host(mc.RemoteHost):
        """A GPU host on its server."""

        sshbase = base

    class Switch(mc.RemoteOVSSwitch):
        """A bridge (NIC, OCS or EPS) on its server's Open vSwitch."""

        sshbase = base

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("datapath", datapath)
            super().__init__(*args, **kwargs)

        @classmethod
        def batchStartup(cls, switches, **_kwargs):  # noqa: N802 - Mininet's name
            """Each server's bridges in ``ovs-vsctl`` batches run over ssh as a command, not
            typed into a node's terminal (which cuts a line at 4095 characters)."""
            for server in dict.fromkeys(s.server for s in switches):
                site = cluster.sites[server]

                def run(cmd, site=site, **_kw):
                    r = site.run(["sh", "-c", cmd], timeout=120)
                    if r.returncode:
                        raise ClusterError(f"server {site.name}: ovs-vsctl: {(r.stderr or r.stdout).strip()[:200]}")
                    return r.stdout

                mc.OVSSwitch.batchStartup([s for s in switches if s.server == server], run=run)
            return switches

    class VxlanLink(mc.RemoteLink):
        """A link that is a veth pair within a server and a VXLAN tunnel between servers: the
        cluster edition's ``RemoteGRELink`` (whose ``makeTunnel`` and ``stop`` this follows)
        with a ``vxlan`` device in place of ``gretap`` (module doc).

        :raises ClusterError: a server refused the tunnel device.
        """

        VNI = itertools.count(1)

        def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                         deleteIntfs=True):
            node1 = self.node1 if node1 is None else node1
            node2 = self.node2 if node2 is None else node2
            if node1.server == node2.server:
                return mc.Link.makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs=deleteIntfs)
            vni = next(VxlanLink.VNI)
            for node, name, addr, local, remote in ((node1, intfname1, addr1, ips[node1.server], ips[node2.server]),
                                                     (node2, intfname2, addr2, ips[node2.server], ips[node1.server])):
                out = node.rcmd(f"ip link add {name}" + (f" address {addr}" if addr else "") + f" mtu {mtu} type vxlan "
                                f"id {vni} local {local} remote {remote} dstport {VXLAN_PORT} nolearning")
                if out.strip():
                    raise ClusterError(f"server {node.server}: VXLAN tunnel {name}: {out.strip()[:160]}")
                node.rcmd(f"ip link set {name} up")
                self.moveIntf(name, node)
            self.tunnel = True
            return None

        def stop(self):
            if self.tunnel:
                self.intf1.delete()
                self.intf2.delete()
                self.tunnel = None
            else:
                mc.Link.stop(self)

    for cls in (Host, Switch):
        cls.__qualname__ = cls.__name__
    return Host, Switch, VxlanLink


def fabric_cluster(cluster: Cluster, topo, **kwargs):
    """A ``MininetCluster`` of ``topo`` (:class:`topologies.mininet_topos.FabricTopo`) placed by
    :class:`FabricPlacer`; every link between servers (the OCS-to-NIC patch ports included)
    becomes a :class:`VxlanLink` tunnel. ``kwargs`` go to ``MininetCluster`` (``switch``,
    ``link``...)."""
    mc = _mininet_cluster()
    hosts = topo.hosts()
    placer = FabricPlacer(servers=cluster.servers, hosts=hosts)
    where = {n: placer.place(n) for n in topo.nodes()}
    for n in topo.nodes():
        topo.nodeInfo(n)["server"] = where[n]
        if cluster.sites[where[n]].remote:  # the server's one multiplexed ssh connection
            topo.nodeInfo(n)["controlPath"] = cluster.sites[where[n]].control_path
    link_cls = kwargs["link"]
    for a, b, info in topo.links(withKeys=False, withInfo=True):
        if where[a] != where[b]:
            info["cls"] = link_cls

    class FabricCluster(mc.MininetCluster):
        """``MininetCluster`` whose controller already listens where the servers reach it."""

        def addController(self, *args, **kw):  # noqa: N802 - Mininet's name
            return mc.Mininet.addController(self, *args, **kw)  # ours listens on the underlay already

    return FabricCluster(topo=topo, servers=cluster.servers, serverIP=cluster.ips, user="root", precheck=False,
                         **kwargs)


__all__ = ["Cluster", "FabricPlacer", "fabric_cluster", "place_node", "remote_classes", "VXLAN_PORT"]
