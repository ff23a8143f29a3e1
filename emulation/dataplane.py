"""How a :class:`~emulation.fabric.Fabric` maps onto OpenFlow datapaths and host addresses.

Shared by the Mininet topology adapter (which builds the bridges) and the controller apps
(which program them), so both agree on names, dpids, port numbers and addresses.

- Every name ocslab gives a bridge or a root-namespace interface starts with :data:`PREFIX`
  (``ocl-``), which no other tool uses: ``ocslab clean`` removes exactly those.
- GPU ``i`` is Mininet host ``g<i>`` with one interface ``g<i>-eth0`` (inside its own network
  namespace) to its NIC bridge.
- NIC bridge ``ocl-n<i>`` (the GPU's forwarding element): port 1 is the host, port ``2 + j`` is
  the transmit side of fabric port ``j``. The routing app programs it; transit traffic never
  enters the host.
- OCS ``k`` is bridge ``ocl-o<k>``. Like a real OCS port (a fibre pair), OCS port ``m`` (1-based,
  ``ocs.ports[m-1]``) has an input, OpenFlow port ``m``: a veth from the NIC whose NIC end is
  rate-limited (HTB), so it carries the directed link's capacity; and an output, OpenFlow port
  ``m + OCS_OUT_OFFSET``: an Open vSwitch patch port to the NIC's port ``NIC_RX_BASE + j``.
  Patch ports cost nothing in the userspace datapath, so a circuit hop costs one packet
  receive in ovs-vswitchd instead of two (the switch's CPU, not the links, is the limit of a
  small machine).
- A sharded OCS (a fabric spread over servers, :mod:`emulation.ocs_shards`) is one bridge per
  server holding the ports of that server's GPUs: shard ``j`` of OCS ``k`` is ``ocl-o<k>s<j>``
  (shard 0 keeps ``ocl-o<k>``), dpid ``DPID_OCS + k + (j << 16)``, its ports numbered as on the
  whole OCS; lane ``l`` to shard ``p`` is OpenFlow port ``OCS_LANE_BASE + p * OCS_LANE_STRIDE + l``.
- EPS ``k`` is bridge ``ocl-e<k>``; switch port ``m`` is ``eps.ports[m-1]``.
- Traffic on channel ``c`` (one TCP connection per channel, like NCCL channels) carries IP DSCP
  ``c``; the routing app forwards on (destination address, DSCP).
"""

from __future__ import annotations

NIC_HOST_PORT = 1
NIC_RX_BASE = 100
OCS_OUT_OFFSET = 32768
#: OpenFlow port numbers of a sharded OCS's lanes (module doc), below :data:`OCS_OUT_OFFSET`:
#: at most :data:`MAX_OCS_SHARDS` shards of at most :data:`OCS_LANE_STRIDE` lanes each way.
OCS_LANE_BASE = 16384
OCS_LANE_STRIDE = 1024
MAX_OCS_SHARDS = (OCS_OUT_OFFSET - OCS_LANE_BASE) // OCS_LANE_STRIDE
DPID_NIC = 0x0001_0000_0000
DPID_OCS = 0x0002_0000_0000
DPID_EPS = 0x0003_0000_0000
AGENT_PORT = 5001
#: TCP congestion control the agents set on every GPU connection (``TCP_CONGESTION``), or None:
#: the host's default, bbr on Debian 12 (a network namespace may only choose, by sysctl, what
#: ``net.ipv4.tcp_allowed_congestion_control`` lists, ``reno bbr`` there; a root process may set
#: any loaded one on its own sockets). ``"cubic"`` brings the demo within -0.5..-3.6% of the flow
#: backend, but with it the captured lab run lost upcalls in Open vSwitch (``datapath`` drops) in
#: 2 of 9 idle runs, so the default stays until that is understood. Every packet result
#: records what its connections ran (``tcp_congestion``).
TCP_CONGESTION: str | None = None
#: OpenFlow cookies of the lowest-priority drop rules the controller installs: on an OCS they
#: count packets that reached a port with no circuit (dark), on a NIC or EPS bridge packets with
#: no route (:mod:`emulation.emulator.counters`).
#: EtherType of the wire probes of a captured run (IEEE local experimental; ``ocslab run --pcap``).
PROBE_ETHERTYPE = 0x88B5
COOKIE_DARK = 0xDA4C
COOKIE_NO_ROUTE = 0x40DE

#: Callers of the controller's ``CircuitSwitch.apply``/``rewire`` that may reconfigure whoever owns
#: the circuits (``by=``): the emulator's REST calls (run set-up and the planner's steps), the
#: rotor it starts, failover and Opus once the emulator armed them. Any other ``by`` is a user
#: app (and a run's checks name it when its changes broke a step, :mod:`emulation.checks`).
PRIVILEGED = ("emulator", "rotor", "failover", "opus")

#: MTU (bytes) of every fabric interface unless a run asks for jumbo frames.
MTU = 1500
#: Largest MTU a run may ask for (jumbo frames; veth and Open vSwitch's userspace datapath carry it).
MAX_MTU = 9000
#: Ethernet header (bytes) a frame adds to its IP packet.
ETH_HEADER = 14
#: IPv4 + TCP headers with timestamps (bytes) a full segment adds to its payload.
TCP_IP_HEADERS = 52


def frame_bytes(mtu: int = MTU) -> int:
    """Bytes of a full frame on the wire at ``mtu`` (1514 at 1500)."""
    return mtu + ETH_HEADER


def mss(mtu: int = MTU) -> int:
    """TCP payload bytes of a full segment at ``mtu`` (1448 at 1500, with timestamps)."""
    return mtu - TCP_IP_HEADERS


def wire_per_payload(mtu: int = MTU) -> float:
    """Wire bytes per TCP payload byte of a full frame: 1514/1448 at MTU 1500, 9014/8948 at 9000.
    HTB counts wire bytes, the scale model's emulated rate B_e is a payload rate (as B is in the
    alpha-beta model), so ports are shaped at B_e x this factor. ACKs of a reverse flow (66 bytes
    per two segments) are not compensated (at most ~2%)."""
    return frame_bytes(mtu) / mss(mtu)


#: First characters of every bridge and root-namespace interface ocslab creates.
PREFIX = "ocl-"

#: The controller's structured event log, in the directory of its ``controller.log``: one JSON
#: object per line, ``{"seq", "t" (CLOCK_MONOTONIC s), "kind", ...}``, written the same way under
#: OS-Ken and Ryu (``--ocslab-events``; ``controllers.state.FabricState.log_event``).
EVENTS_FILE = "events.jsonl"


def host_name(gpu: int) -> str:
    """Mininet host name of GPU ``gpu`` (its interfaces live in its own namespace)."""
    return f"g{gpu}"


def nic_name(gpu: int) -> str:
    """Bridge name of GPU ``gpu``'s NIC."""
    return f"{PREFIX}n{gpu}"


def ocs_name(k: int) -> str:
    """Bridge name of OCS number ``k``."""
    return f"{PREFIX}o{k}"


def ocs_shard_name(k: int, shard: int) -> str:
    """Bridge name of shard ``shard`` of OCS ``k`` (shard 0 is :func:`ocs_name`)."""
    return ocs_name(k) if shard == 0 else f"{PREFIX}o{k}s{shard}"


def ocs_shard_dpid(k: int, shard: int) -> int:
    """Datapath id of shard ``shard`` of OCS ``k`` (shard 0: ``DPID_OCS + k``)."""
    return DPID_OCS + k + (shard << 16)


def ocs_lane_port(peer: int, lane: int) -> int:
    """OpenFlow port number, on a shard of a sharded OCS, of its lane ``lane`` (0-based) to shard
    ``peer``."""
    return OCS_LANE_BASE + peer * OCS_LANE_STRIDE + lane


def ocs_lane_name(k: int, peer: int, lane: int) -> str:
    """Interface name of lane ``lane`` of OCS ``k`` toward shard ``peer``, on the server of the
    shard it leaves from (one shard of an OCS per server, so the name is unique there; at most 15
    characters for fewer than 100 OCSes, :data:`MAX_OCS_SHARDS` shards and 10,000 lanes)."""
    return f"{PREFIX}x{k}-{peer}-{lane}"


def eps_name(k: int) -> str:
    """Bridge name of EPS number ``k``."""
    return f"{PREFIX}e{k}"


def node_kind(name: str) -> str:
    """Kind of a Mininet node from its name: ``"g"`` (GPU host), ``"n"`` (NIC), ``"o"`` (OCS),
    ``"e"`` (EPS), or ``""`` for a node that is not ours (e.g. the controller ``c0``)."""
    if name.startswith(PREFIX):
        return name[len(PREFIX)]
    return "g" if name[:1] == "g" and name[1:].isdigit() else ""


def node_index(name: str) -> int:
    """Index of a node of ours (``ocl-o3`` -> 3, ``ocl-o3s1`` -> 3, ``g7`` -> 7).

    :raises ValueError: not a name of ours.
    """
    kind = node_kind(name)
    if not kind:
        raise ValueError(f"{name!r} is not an ocslab node name")
    return int(name[len(PREFIX) + 1:].split("s")[0] if kind != "g" else name[1:])


def node_shard(name: str) -> int:
    """Shard of an OCS bridge's name (``ocl-o3s1`` -> 1, ``ocl-o3`` -> 0); 0 for any other node."""
    rest = name[len(PREFIX) + 1:] if node_kind(name) == "o" else ""
    return int(rest.split("s")[1]) if "s" in rest else 0


def nic_port(fabric_port: int) -> int:
    """OpenFlow port number of fabric port ``fabric_port`` on a NIC bridge."""
    return 2 + fabric_port


def nic_rx_port(fabric_port: int) -> int:
    """OpenFlow port number of the receive (patch) side of fabric port ``fabric_port``."""
    return NIC_RX_BASE + fabric_port


def ocs_out_port(ocs_port: int) -> int:
    """OpenFlow port number of the output (patch) side of OCS port ``ocs_port`` (1-based)."""
    return ocs_port + OCS_OUT_OFFSET


def dpid_hex(dpid: int) -> str:
    """16-hex-digit dpid string as Mininet and Open vSwitch want it."""
    return f"{dpid:016x}"


def gpu_ip(gpu: int) -> str:
    """Fabric IPv4 address of GPU ``gpu`` (10.0.0.0/8, inside the emulation's namespaces)."""
    x = gpu + 1
    return f"10.{(x >> 16) & 255}.{(x >> 8) & 255}.{x & 255}"


def tcp_connection(src: str, sport: int, dst: str, dport: int) -> str:
    """The name of the TCP connection between ``src:sport`` and ``dst:dport``, the same from
    either end: ``"ip:port-ip:port"``, the smaller endpoint first (the agents' TCP_INFO counts
    and the capture analysis meet on it)."""
    a, b = sorted([(src, int(sport)), (dst, int(dport))])
    return f"{a[0]}:{a[1]}-{b[0]}:{b[1]}"


def probe_mac(fabric_port: int) -> str:
    """Destination MAC a NIC writes on the wire probes it sends out of fabric port
    ``fabric_port`` (a locally administered multicast address ending in the port number), so that
    a capture tells which of the sender's ports, hence which circuit, a probe crossed."""
    return f"03:6f:63:00:00:{fabric_port:02x}"


def gpu_mac(gpu: int) -> str:
    """MAC address of GPU ``gpu``'s fabric interface."""
    x = gpu + 1
    return "02:0c:" + ":".join(f"{(x >> s) & 255:02x}" for s in (24, 16, 8, 0))
