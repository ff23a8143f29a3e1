"""Wire probes of a captured run (``ocslab run --pcap``), run inside a GPU's host:
``python -m emulation.emulator.probe IFACE GPU INTERVAL_S``.

Every ``INTERVAL_S`` seconds the GPU sends one broadcast Ethernet frame of EtherType
:data:`emulation.dataplane.PROBE_ETHERTYPE` carrying ``(gpu, sequence number, send time)`` (:data:`PAYLOAD`; the send time in CLOCK_MONOTONIC
nanoseconds, a clock every network namespace shares); its NIC floods it
to every fabric port, so it crosses whatever circuits the GPU's ports have at that moment and is
handed to the GPUs at their other ends (the controller's probe rules). A capture on the GPUs' host
links then shows, per sender, the silence a reconfiguration causes on the wire
(:mod:`emulation.pcap`). Runs until ended (SIGTERM).
"""

from __future__ import annotations

import socket
import struct
import sys
import time

from emulation import dataplane as dpn

#: The probe's payload after the Ethernet header: sending GPU, sequence number, send time (ns).
PAYLOAD = struct.Struct("!HIQ")


def main(argv: list[str] | None = None) -> int:
    iface, gpu, interval = (argv or sys.argv[1:])[:3]
    gpu, interval = int(gpu), float(interval)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    head = b"\xff" * 6 + bytes.fromhex(dpn.gpu_mac(gpu).replace(":", "")) + struct.pack("!H", dpn.PROBE_ETHERTYPE)
    seq, t = 0, time.monotonic()
    while True:
        s.send((head + PAYLOAD.pack(gpu, seq, time.monotonic_ns())).ljust(60, b"\0"))
        if seq == 0:
            print(f"probing: GPU {gpu} on {iface} every {interval * 1e3:g} ms", flush=True)  # start_capture waits for it
        seq += 1
        t += interval
        delay = t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -interval:  # paused (SIGSTOP) or starved: go on from now, no burst to catch up
            t = time.monotonic()


if __name__ == "__main__":
    sys.exit(main())
