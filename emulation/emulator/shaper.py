"""Egress shaping of the emulated links (Linux tc: HTB with two classes per link end).

Each shaped link end gets::

    root htb (default: payload)
      payload class  rate = link rate x frame/MSS (1514/1448), burst one frame    -> pfifo limit L (or netem)
      ack class      rate = 10% of that, served first (prio 0)          -> pfifo limit L (or netem)
    u32 filter: TCP's pure ACKs (IPv4, shorter than 128 bytes, flags ACK only) -> ack class

Why two classes. The scale model's link rate B_e is a *payload* rate, as B is in the
alpha-beta model, so the payload class is shaped at B_e x 1514/1448 (Ethernet frame over TCP
payload per full segment). TCP's acknowledgements are the emulator's transport overhead: an RDMA
fabric at 400 Gbit/s acknowledges in a few bytes per message, but at 10 Mbit/s a pure ACK waiting
behind the reverse direction's full frames delays its sender by the whole queue. With data
flowing both ways on a duplex circuit (every recursive-halving step) that two-way coupling makes
the queues oscillate out of phase and leaves one direction idle for tens of milliseconds at a
time (Zhang, Shenker and Clark, SIGCOMM 1991): measured here, a 0 <-> 1 exchange of 2 MB each way
took 4-12% longer than one way, and more the longer the queues. In their own class ACKs neither
wait behind data nor take the payload's rate.

The burst is one full frame (not Mininet's 15 kB, a 12 ms head start at 10 Mbit/s): after an
idle period a link sends at most two frames back to back (HTB sends while its tokens are not
negative), then one per frame time.
``L`` (packets) bounds each queue; drops there are modelled congestion, counted by
:mod:`emulation.drops`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from emulation import dataplane as dpn

#: Rate of the ACK class as a fraction of the payload class.
ACK_SHARE = 0.1
#: Queue limit of each class (packets).
QUEUE_PACKETS = 1000


class ShapingError(RuntimeError):
    """tc refused a shaping command (the message has tc's answer)."""


@dataclass(frozen=True)
class Shaped:
    """One link end to shape: ``device`` egress at ``mbps`` (payload Mbit/s), in the network
    namespace of ``pid`` (None: the root namespace), with ``delay_ms`` of netem delay (0: none),
    carrying frames of an ``mtu``-byte MTU (the payload-to-wire factor, burst and quantum follow it)."""

    device: str
    mbps: float
    pid: int | None = None
    delay_ms: float = 0.0
    mtu: int = dpn.MTU


def tc_commands(link: Shaped, queue_packets: int = QUEUE_PACKETS, change: bool = False) -> list[str]:
    """``tc -batch`` lines that shape ``link`` (module doc); with ``change``, lines that only set
    the rates of a link shaped before."""
    wire = link.mbps * dpn.wire_per_payload(link.mtu)
    ack = wire * ACK_SHARE
    burst = frame = dpn.frame_bytes(link.mtu)
    dev = link.device
    if change:
        lines = [f"class change dev {dev} parent 1: classid 1:{c} htb rate {r:.6f}mbit ceil {r:.6f}mbit "
                 f"burst {burst} cburst {burst} quantum {frame} prio {p}" for c, r, p in (("10", wire, 1), ("20", ack, 0))]
        if link.delay_ms > 0:
            lines += [f"qdisc change dev {dev} parent 1:{c} handle {c}: netem delay {link.delay_ms:.3f}ms "
                      f"limit {queue_packets}" for c in ("10", "20")]
        return lines
    leaf = (f"netem delay {link.delay_ms:.3f}ms limit {queue_packets}" if link.delay_ms > 0
            else f"pfifo limit {queue_packets}")
    return [
        f"qdisc replace dev {dev} root handle 1: htb default 10",
        f"class add dev {dev} parent 1: classid 1:10 htb rate {wire:.6f}mbit ceil {wire:.6f}mbit "
        f"burst {burst} cburst {burst} quantum {frame} prio 1",
        f"class add dev {dev} parent 1: classid 1:20 htb rate {ack:.6f}mbit ceil {ack:.6f}mbit "
        f"burst {burst} cburst {burst} quantum {frame} prio 0",
        f"qdisc add dev {dev} parent 1:10 handle 10: {leaf}",
        f"qdisc add dev {dev} parent 1:20 handle 20: {leaf}",
        # IPv4 + TCP, total length < 128, flags exactly ACK (IP header without options: the TCP
        # flags are byte 33). A short data segment carries PSH and stays in order with the data.
        f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff "
        f"match u16 0x0000 0xff80 at 2 match u8 0x10 0xff at 33 flowid 1:20",
    ]


def apply(links: list[Shaped], work_dir: Path, queue_packets: int = QUEUE_PACKETS, change: bool = False,
          site_of=None) -> None:
    """Shape every link end of ``links`` (``change``: set new rates on links shaped before): one
    ``tc -batch`` per network namespace. ``site_of(device)`` gives the
    :class:`~emulation.emulator.cluster.Site` holding a root-namespace device (a fabric spread over
    servers: one batch per server, run there); None: this machine.

    :raises ShapingError: tc failed (its message is included).
    """
    by_ns: dict[int | None, list[str]] = {}
    by_site: dict[int, tuple[object, list[str]]] = {}
    for link in links:
        if link.pid is None and site_of is not None:
            site = site_of(link.device)
            by_site.setdefault(id(site), (site, []))[1].extend(tc_commands(link, queue_packets, change))
        else:
            by_ns.setdefault(link.pid, []).extend(tc_commands(link, queue_packets, change))
    work_dir.mkdir(parents=True, exist_ok=True)
    for site, lines in by_site.values():
        r = site.run(["tc", "-batch", "-"], timeout=60, input="\n".join(lines) + "\n")
        if r.returncode:
            raise ShapingError(f"tc -batch on server {site.name}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    for pid, lines in by_ns.items():
        path = work_dir / f"tc-{pid or 'root'}.batch"
        path.write_text("\n".join(lines) + "\n")
        cmd = ["tc", "-batch", str(path)]
        if pid is not None:
            cmd = ["nsenter", f"--net=/proc/{pid}/ns/net", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise ShapingError(f"tc -batch {path}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
