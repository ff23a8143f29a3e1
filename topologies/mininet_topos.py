"""Mininet ``Topo`` adapter for ocslab fabrics, and a ``topos`` dict for ``mn --custom``.

Only the emulator (and ``mn``) import this module; it imports Mininet. Layout per GPU ``i``:
host ``g<i>`` --(veth, unshaped: the GPU's own path to its NIC)-- NIC bridge ``ocl-n<i>``; per
fabric port, to an OCS bridge ``ocl-o<k>``: a veth rate-limited at the NIC end (GPU -> OCS)
and an Open vSwitch patch port (OCS -> GPU); to an EPS bridge ``ocl-e<k>`` or another NIC
(static cable): a veth rate-limited at both ends. Every bridge and root-namespace interface
name starts with ``ocl-`` (:data:`emulation.dataplane.PREFIX`). See :mod:`emulation.dataplane`
for dpids, port numbers and addresses.

From the shell (start the controller first, ``python -m controllers --help``)::

    mn --custom topologies/mininet_topos.py --topo ocsstar,8,2 \\
       --switch ovs,datapath=user,failMode=secure,protocols=OpenFlow13 \\
       --controller remote,ip=127.0.0.1,port=6653 --link tc
"""

from __future__ import annotations

import os
import sys

if "emulation" not in sys.modules:  # `mn --custom` execs this file without our package path
    _here = globals().get("__file__") or sys._getframe().f_code.co_filename
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(_here))))

from mininet.link import OVSLink  # noqa: E402
from mininet.topo import Topo  # noqa: E402

from emulation import dataplane as dpn  # noqa: E402
from emulation.fabric import Fabric  # noqa: E402
from emulation.ocs_shards import OcsShards  # noqa: E402
from topologies.builders import eps_star, ocs_star, parallel_ocs, rack, rails, static_ring, static_torus  # noqa: E402
from topologies.torus_rack import TorusRack  # noqa: E402


#: Host link rate over the sum of the GPU's port rates: the injection link paces TCP bursts
#: into the NIC switch, but must not bind before the fabric ports do (it also carries the ACKs
#: of incoming flows), since the flow model has no such constraint.
HOST_LINK_HEADROOM = 1.1


class FabricTopo(Topo):
    """Mininet topology of a :class:`~emulation.fabric.Fabric`.

    :param link_mbps: HTB rate of every fabric port (Mbit/s, Mininet ``bw``), or None.
    :param delay: per-link propagation delay for netem (e.g. ``"2ms"``), or None.
    :param shards: servers every OCS is sharded over (:mod:`emulation.ocs_shards`): one bridge
        per server with its GPUs' OCS ports, joined by unshaped lanes; 1: one bridge per OCS.
    """

    def build(self, fabric: Fabric, link_mbps: float | None = None, delay: str | None = None, shards: int = 1):
        shaped = {}
        if link_mbps is not None:
            shaped["bw"] = link_mbps
        if delay is not None:
            shaped["delay"] = delay
        sw = {"failMode": "secure", "protocols": "OpenFlow13"}
        for g in range(fabric.gpus):
            self.addHost(dpn.host_name(g), ip=dpn.gpu_ip(g) + "/8", mac=dpn.gpu_mac(g))
            self.addSwitch(dpn.nic_name(g), dpid=dpn.dpid_hex(dpn.DPID_NIC + g), **sw)
            # Injection ~ all ports' rate: paces the host's TCP bursts into the switch, whose
            # socket buffers would otherwise overflow (a drop TCP pays for with timeouts).
            inject = {"bw": link_mbps * fabric.ports_per_gpu * HOST_LINK_HEADROOM} if link_mbps is not None else {}
            self.addLink(dpn.host_name(g), dpn.nic_name(g), port1=0, port2=dpn.NIC_HOST_PORT, **inject)
        split = OcsShards(fabric, shards)
        for k, ocs in enumerate(fabric.ocs):
            for j in split.shards(k):
                self.addSwitch(dpn.ocs_shard_name(k, j), dpid=dpn.dpid_hex(dpn.ocs_shard_dpid(k, j)), **sw)
            for m, ref in enumerate(ocs.ports, start=1):
                name = dpn.ocs_shard_name(k, split.shard(k, m))
                self.addLink(dpn.nic_name(ref.gpu), name, port1=dpn.nic_port(ref.port), port2=m, **shaped)
                self.addLink(name, dpn.nic_name(ref.gpu), port1=dpn.ocs_out_port(m),
                             port2=dpn.nic_rx_port(ref.port), cls=OVSLink)
            for a, b, lane in split.lane_links(k):  # a circuit's path between two shards: not shaped
                self.addLink(dpn.ocs_shard_name(k, a), dpn.ocs_shard_name(k, b), port1=dpn.ocs_lane_port(b, lane),
                             port2=dpn.ocs_lane_port(a, lane), intfName1=dpn.ocs_lane_name(k, b, lane),
                             intfName2=dpn.ocs_lane_name(k, a, lane))
        for k, eps in enumerate(fabric.eps):
            name = dpn.eps_name(k)
            self.addSwitch(name, dpid=dpn.dpid_hex(dpn.DPID_EPS + k), **sw)
            own = dict(shaped)
            if link_mbps is not None and eps.port_gbps is not None:  # a slower (or faster) electrical path
                own["bw"] = link_mbps * eps.port_gbps / fabric.port_gbps
            for m, ref in enumerate(eps.ports, start=1):
                self.addLink(dpn.nic_name(ref.gpu), name, port1=dpn.nic_port(ref.port), port2=m, **own)
        for c in fabric.cables:
            self.addLink(dpn.nic_name(c.a.gpu), dpn.nic_name(c.b.gpu),
                         port1=dpn.nic_port(c.a.port), port2=dpn.nic_port(c.b.port), **shaped)


def ocs_star_topo(gpus: int = 8, ports: int = 2, link_mbps: float | None = None) -> FabricTopo:
    """``--topo ocsstar[,GPUS[,PORTS[,MBPS]]]``: GPUs on one OCS, ring configuration."""
    return FabricTopo(ocs_star(gpus, ports), link_mbps=link_mbps)


def ring_topo(gpus: int = 8, link_mbps: float | None = None) -> FabricTopo:
    """``--topo ring[,GPUS[,MBPS]]``: a static ring of cables."""
    return FabricTopo(static_ring(gpus), link_mbps=link_mbps)


def torus_topo(gpus: int = 16, link_mbps: float | None = None) -> FabricTopo:
    """``--topo torus[,GPUS[,MBPS]]``: a static 2-D torus of cables (4 ports per GPU)."""
    return FabricTopo(static_torus(gpus), link_mbps=link_mbps)


def eps_topo(gpus: int = 8, link_mbps: float | None = None) -> FabricTopo:
    """``--topo eps[,GPUS[,MBPS]]``: GPUs on one packet switch."""
    return FabricTopo(eps_star(gpus), link_mbps=link_mbps)


def rack_topo(gpus: int = 4, spares: int = 2, link_mbps: float | None = None) -> FabricTopo:
    """``--topo rack[,GPUS[,SPARES[,MBPS]]]``: a rack with spare GPUs (:func:`topologies.builders.rack`)."""
    return FabricTopo(rack(gpus, spares), link_mbps=link_mbps)


def rails_topo(servers: int = 2, gpus_per_server: int = 4, rail: str = "ocs", link_mbps: float | None = None) -> FabricTopo:
    """``--topo rails[,SERVERS[,GPUS_PER_SERVER[,ocs|eps[,MBPS]]]]``: a rail-optimised fabric
    (:func:`topologies.builders.rails`), photonic or electrical rails."""
    return FabricTopo(rails(servers, gpus_per_server, rail=rail), link_mbps=link_mbps)


def parallel_ocs_topo(gpus: int = 8, switches: int = 2, link_mbps: float | None = None) -> FabricTopo:
    """``--topo parallelocs[,GPUS[,SWITCHES[,MBPS]]]``: GPUs with one port on each of SWITCHES
    parallel OCSes (:func:`topologies.builders.parallel_ocs`; Spectra, arXiv 2603.07373), no
    circuits."""
    return FabricTopo(parallel_ocs(gpus, switches), link_mbps=link_mbps)


def torus_rack_topo(x: int = 4, y: int = 4, z: int = 4, link_mbps: float | None = None) -> FabricTopo:
    """``--topo torusrack[,X[,Y[,Z[,MBPS]]]]``: the electrical 3-D torus of a multi-tenant rack
    (:meth:`topologies.torus_rack.TorusRack.fabric`, servers of 2x2x1), 6 ports per accelerator.

    :raises RackError: an axis not a multiple of the server's."""
    return FabricTopo(TorusRack((x, y, z)).fabric(), link_mbps=link_mbps)


topos = {"ocsstar": ocs_star_topo, "ring": ring_topo, "torus": torus_topo, "eps": eps_topo, "rack": rack_topo,
         "rails": rails_topo, "torusrack": torus_rack_topo, "parallelocs": parallel_ocs_topo}
