"""Packet capture on fabric ports (``ocslab run --pcap``): one ``tcpdump`` per port, writing
``<dir>/<port>.0.pcap`` (and ``.1.pcap`` when the first fills; snap length :data:`SNAPLEN` bytes, at most :data:`FILE_MB` MB per file and
:data:`FILES` files per port, oldest overwritten), frames entering the port's bridge only
(``-Q in``: at an OCS input, what the NIC put on the fibre), wire probes left out. ``clock.json`` records the offset
between the capture's clock (CLOCK_REALTIME) and the controller's (CLOCK_MONOTONIC), so that
:mod:`emulation.pcap` can line frames up with the controller's reconfiguration timestamps.

tcpdump runs in immediate mode: by default libpcap hands frames over in blocks that a low-rate port
fills slowly, and the block in hand when tcpdump is ended is lost (about the last second of every
port's capture: measured, half of a probe capture's last 0.3 s).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from emulation.dataplane import PROBE_ETHERTYPE
from emulation.poll import wait_until

SNAPLEN = 128
FILE_MB = 100
FILES = 2


class CaptureError(RuntimeError):
    """tcpdump is missing or did not start on a port."""


class Capture:
    """tcpdump on ``devices`` (root-namespace interface names) into ``out_dir`` (module doc),
    and on ``probe_devices`` (``(interface, pid)``: each GPU's own interface, in the network
    namespace of process ``pid``, frames arriving at the GPU) the wire probes
    (:mod:`emulation.emulator.probe`) only, into ``probe-<interface>.pcap``. The probes are
    captured where the GPU receives them, inside its namespace: an AF_XDP port
    (:mod:`emulation.emulator.pmd`) hands frames to the GPU past any capture at the NIC's end. :meth:`start` and
    :meth:`stop`; the processes are ours, ended by pid. ``filters`` narrows what a device keeps to
    the frames that also match its pcap-filter expression (tcpdump syntax, e.g. the foreign-traffic
    filter of :func:`emulation.emulator.tenants.foreign_filter`). ``gpu_of`` names, for an OCS
    input port, the GPU whose NIC feeds it (recorded in ``clock.json``, with whether every one of
    them is captured, ``first_hop_complete``: the analysis counts a connection's retransmissions
    where its segments enter the fabric)."""

    def __init__(self, devices: list[str], out_dir: Path, probe_devices: list[tuple[str, int]] = (),
                 filters: dict[str, str] | None = None, gpu_of: dict[str, int] | None = None):
        self.gpu_of = {d: g for d, g in (gpu_of or {}).items() if d in devices}
        #: every OCS input port of ``gpu_of`` is captured: every segment is seen where it enters
        #: the fabric, so the wire's retransmissions can be held against the agents' count
        self.first_hop_complete = bool(gpu_of) and len(self.gpu_of) == len(gpu_of)
        self.devices = list(devices)
        self.filters = dict(filters or {})
        self.probe_devices = list(probe_devices)
        self.out_dir = Path(out_dir)
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        """Start every tcpdump and wait until each has opened its port.

        :raises CaptureError: tcpdump is not installed, or one exited or did not start in 10 s.
        """
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            raise CaptureError("--pcap: tcpdump is not installed (make setup installs it)")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        probe = ["ether", "proto", f"{PROBE_ETHERTYPE:#06x}"]
        jobs = [(dev, None, dev, ["not", *probe] + (["and", "(", self.filters[dev], ")"] if dev in self.filters else []))
                for dev in self.devices]
        jobs += [(dev, pid, f"probe-{dev}", probe) for dev, pid in self.probe_devices]
        for dev, pid, name, bpf in jobs:
            log = open(self.out_dir / f"{name}.log", "w")
            enter = ["nsenter", f"--net=/proc/{pid}/ns/net"] if pid is not None else []
            self.procs.append(subprocess.Popen(
                [*enter, tcpdump, "-i", dev, "-Q", "in", "-s", str(SNAPLEN), "-n", "-U", "--immediate-mode",
                 "-Z", "root", "--time-stamp-precision=micro", "-C", str(FILE_MB), "-W", str(FILES),
                 "-w", str(self.out_dir / f"{name}.pcap"), *bpf],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        names = [name for _, _, name, _ in jobs]

        def listening() -> bool:
            for name, p in zip(names, self.procs):
                if p.poll() is not None:
                    raise CaptureError(f"--pcap: tcpdump {name} exited: {(self.out_dir / f'{name}.log').read_text()[-200:]}")
            return all("listening on" in (self.out_dir / f"{n}.log").read_text() for n in names)

        wait_until(listening, 10, lambda: CaptureError("--pcap: tcpdump did not start listening in 10 s"))
        offsets = []
        for _ in range(5):  # realtime - monotonic, read back to back (the smallest gap)
            a = time.monotonic()
            r = time.time()
            b = time.monotonic()
            offsets.append((b - a, r - (a + b) / 2))
        self.t_start = time.monotonic()
        (self.out_dir / "clock.json").write_text(json.dumps({"realtime_minus_monotonic_s": min(offsets)[1],
                                                              "t_start": self.t_start,
                                                              "devices": self.devices,
                                                              "probe_devices": [d for d, _ in self.probe_devices],
                                                              "gpu_of_device": self.gpu_of,
                                                              "first_hop_complete": self.first_hop_complete}))

    def stop(self) -> None:
        """End every tcpdump (SIGTERM: it flushes its file), by pid."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs.clear()
        clock = self.out_dir / "clock.json"
        if clock.exists():  # the capture's window: what analyses of it look at
            clock.write_text(json.dumps({**json.loads(clock.read_text()), "t_stop": time.monotonic()}))
        for path in self.out_dir.glob("*.pcap[0-9]*"):  # tcpdump -W numbers its files name.pcap0, .pcap1
            index = path.suffix.removeprefix(".pcap")
            if index.isdigit():
                path.rename(path.with_name(f"{path.name[:-len(path.suffix)]}.{index}.pcap"))
