"""The WAN replay's traffic generator and sink: one process per site, inside the site's host
(``python -m emulation.emulator.wan_traffic PLAN.json``).

The plan gives the site, the start ``t0`` (CLOCK_MONOTONIC s, shared by every namespace), the
interval length, and per interval the rate toward every other site (bit/s of Ethernet frames as
they cross the WAN's links, tunnel label included). Each demand is sent as ``flows`` paced UDP
flows of equal rate, flow f from the plan's source address f (the routers' select groups hash
addresses, not UDP ports, so the flows of one demand spread over its tunnels as the split ratios
say).
Every datagram carries ``(magic, source site, flow, sequence number, send time)``.

Counts are kept per peer site and per :data:`BIN_S` bin of send time: the sender counts what it
sent, the sink what arrived (by the datagram's send time, so a datagram still queued at an
interval boundary counts in the bin it was sent in), plus datagrams that arrived after a later
one of the same flow (reordered). Written as JSON to the plan's ``out`` when the run ends (the
sink keeps listening ``drain_s`` after the last interval).
"""

from __future__ import annotations

import heapq
import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path

MAGIC = 0x5741
HEADER = struct.Struct("!HHHId")  # magic, source site, flow, sequence, send time (s)
PORT = 5001
#: Width of the count bins, seconds of send time.
BIN_S = 0.1
#: Ethernet + IPv4 + UDP headers and the tunnel's VLAN label on the WAN's links, bytes.
OVERHEAD = 14 + 20 + 8 + 4


def _receive(sock: socket.socket, t0: float, until: float, got: dict, reordered: dict) -> None:
    last: dict[tuple[int, int], int] = {}
    sock.settimeout(0.2)
    while time.monotonic() < until:
        try:
            data = sock.recv(65535)
        except socket.timeout:
            continue
        if len(data) < HEADER.size:
            continue
        magic, src, flow, seq, sent = HEADER.unpack_from(data)
        if magic != MAGIC:
            continue
        b = int((sent - t0) // BIN_S)
        row = got.setdefault(src, {})
        row[b] = row.get(b, 0) + 1
        key = (src, flow)
        if seq < last.get(key, -1):
            late = reordered.setdefault(src, {})
            late[b] = late.get(b, 0) + 1
        else:
            last[key] = seq


def run_generator(plan: dict) -> dict:
    """Send and receive as ``plan`` says (module doc); the counts."""
    site, t0, interval_s = plan["site"], plan["t0"], plan["interval_s"]
    payload, flows = plan["payload"], plan["flows"]
    rates = plan["rates"]  # [interval][peer] bit/s of frames
    frame_bits = (payload + OVERHEAD) * 8
    end = t0 + interval_s * len(rates)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind(("0.0.0.0", PORT))
    got: dict[int, dict[int, int]] = {}
    reordered: dict[int, dict[int, int]] = {}
    sink = threading.Thread(target=_receive, args=(rx, t0, end + plan["drain_s"], got, reordered), daemon=True)
    sink.start()
    socks = []
    for addr in plan["sources"]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((addr, 0))
        socks.append(s)
    dst_ip = plan["peers_ip"]
    sent: dict[int, dict[int, int]] = {}
    seq: dict[tuple[int, int], int] = {}
    pad = b"\0" * (payload - HEADER.size)
    for i, row in enumerate(rates):
        start, stop = t0 + i * interval_s, t0 + (i + 1) * interval_s
        heap = []
        for peer, bps in enumerate(row):
            if bps > 0 and peer != site:
                gap = frame_bits * flows / bps
                for f in range(flows):  # flows start staggered over one gap
                    heapq.heappush(heap, (start + gap * (f + 0.5) / flows, peer, f, gap))
        while heap:
            t, peer, f, gap = heapq.heappop(heap)
            if t >= stop:
                continue
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            k = (peer, f)
            n = seq.get(k, 0)
            seq[k] = n + 1
            now = time.monotonic()
            try:
                socks[f].sendto(HEADER.pack(MAGIC, site, f, n, now) + pad, (dst_ip[peer], PORT))
            except OSError:  # e.g. ENOBUFS: counted as sent, the network lost it
                pass
            b = int((now - t0) // BIN_S)
            r = sent.setdefault(peer, {})
            r[b] = r.get(b, 0) + 1
            heapq.heappush(heap, (t + gap, peer, f, gap))
    sink.join()
    return {"site": site, "bin_s": BIN_S, "frame_bytes": payload + OVERHEAD,
            "sent": {str(p): {str(b): c for b, c in r.items()} for p, r in sent.items()},
            "received": {str(p): {str(b): c for b, c in r.items()} for p, r in got.items()},
            "reordered": {str(p): {str(b): c for b, c in r.items()} for p, r in reordered.items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    plan = json.loads(Path(argv[0]).read_text())
    counts = run_generator(plan)
    tmp = Path(plan["out"] + ".tmp")
    tmp.write_text(json.dumps(counts))
    tmp.replace(plan["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
