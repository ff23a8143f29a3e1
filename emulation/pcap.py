"""What the captured packets say (``ocslab pcap RUN_DIR``; :mod:`emulation.emulator.capture`
wrote them during ``ocslab run --pcap``), read with scapy.

- Dark windows on the wire: for every reconfiguration the controller recorded in its event file
  (``emulation/events.jsonl``, the same under OS-Ken and Ryu; checked against the reconfigurations
  its log mentions: ``t_dark`` when the old circuits were gone, ``t_live`` when the new ones
  carried traffic), the silence of the wire
  probes of every rewired GPU port across it (:func:`probe_windows`), next to the controller's
  measured window and the one requested; and on every captured fabric port the last data frame
  that entered it before ``t_dark``, the first at or after ``t_live``, and the frames that entered
  it while it was dark (lost at the OCS).
- TCP, per connection (both directions of a 4-tuple): retransmissions (a data segment or SYN
  carrying sequence space its port has carried before) and segments out of order (behind the
  highest sequence number, into space not seen there yet; :func:`sequence_kinds`), duplicate ACKs
  (a pure ACK repeating the previous one's number and window), and the largest silence between
  two of its frames; beside each, the agents' own count of the connection's retransmissions
  (TCP_INFO), and the total beside the runs' (``result.json``). Where segments enter the fabric
  (each sender's OCS input ports), the two kinds counted here and by a second reader,
  Wireshark's dissector (``tshark``, :data:`TSHARK_FILTER`), side by side with the agents'
  TCP_INFO total.
- Throughput of every captured port in :data:`BIN_S` bins (``pcap.png``), dark windows shaded.

Times are real seconds of the emulation (CLOCK_MONOTONIC, like the controller's); divide by the
run's time-dilation factor (``scale.tdf`` in ``result.json``) for real-equivalent ones.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
from pydantic import BaseModel, ConfigDict

from emulation import dataplane as dpn
from emulation.envelope import FailedCheck

#: Width of the throughput bins, seconds.
BIN_S = 0.01


class PcapError(ValueError):
    """A run directory without a capture, or one that cannot be read (one line)."""


#: A reconfiguration in a controller log, whatever the framework's line prefix (OS-Ken's
#: ``INFO ocslab.controller``, Ryu's bare message): the word at the start or after a blank, not
#: inside another event's name (``opus-reconfigured``).
_LOGGED = re.compile(r"(?:^|\s)reconfigured (\{.*\})\s*$")


def logged_reconfigurations(controller_log: Path) -> list[dict]:
    """The ``reconfigured`` events (with a change) a controller's log text holds, in order;
    :func:`reconfigurations` checks its structured event file against them."""
    out = []
    for line in Path(controller_log).read_text(errors="replace").splitlines():
        m = _LOGGED.search(line)
        if m:
            ev = json.loads(m.group(1))
            if ev.get("changed"):
                out.append(ev)
    return out


def reconfigurations(emulation_dir: Path) -> list[dict]:
    """The ``reconfigured`` events (with a change) of a run's controller, in order: from its
    structured event file (``events.jsonl``, :data:`emulation.dataplane.EVENTS_FILE`), or from
    its log text for a run made before the controller wrote one.

    :raises PcapError: the controller's log holds more reconfigurations than the events read
        (the analysis would miss some and report too few dark windows), or neither file exists.
    """
    emulation_dir = Path(emulation_dir)
    log_path, events_path = emulation_dir / "controller.log", emulation_dir / dpn.EVENTS_FILE
    if not log_path.exists() and not events_path.exists():
        raise PcapError(f"{emulation_dir}: no controller log or event file")
    logged = logged_reconfigurations(log_path) if log_path.exists() else []
    if not events_path.exists():
        return logged
    out = []
    for line in events_path.read_text(errors="replace").splitlines():
        if line.strip():
            ev = json.loads(line)
            if ev.get("kind") == "reconfigured" and ev.get("changed"):
                out.append(ev)
    if len(logged) > len(out):
        raise PcapError(f"{events_path}: holds {len(out)} reconfigurations, but the controller logged {len(logged)} "
                        f"in {log_path}: the analysis cannot see them all")
    return out


def in_capture(recon: list[dict], clock: dict) -> list[dict]:
    """The reconfigurations of ``recon`` made while the capture ran: requested after it started
    (``clock.json``'s ``t_start``, CLOCK_MONOTONIC) and live before it stopped (``t_stop``); all
    of them for a capture that did not record its window."""
    start, stop = clock.get("t_start"), clock.get("t_stop")
    return [ev for ev in recon if (start is None or ev.get("t_request", ev["t_dark"]) >= start)
            and (stop is None or ev["t_live"] <= stop)]


def capture_files(pcap_dir: Path, name: str) -> list[Path]:
    """The capture files of port ``name``: ``NAME.0.pcap``, ``NAME.1.pcap`` (and, in captures
    made before they were renamed, tcpdump's own ``NAME.pcap0``, ``NAME.pcap1``)."""
    return sorted([*pcap_dir.glob(f"{name}.[0-9]*.pcap"), *pcap_dir.glob(f"{name}.pcap*")])


def read_frames(pcap_dir: Path) -> dict[str, list[tuple]]:
    """Per captured port: ``(t, length, key, seq, ack, payload, flags, window)`` of every frame
    (``key`` the TCP 4-tuple ``(src, sport, dst, dport)``, or None for other frames), ``t`` in
    CLOCK_MONOTONIC seconds."""
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader

    clock = json.loads((pcap_dir / "clock.json").read_text())
    offset = clock["realtime_minus_monotonic_s"]
    out: dict[str, list[tuple]] = {}
    for dev in clock["devices"]:
        rows = []
        for path in capture_files(pcap_dir, dev):
            with PcapReader(str(path)) as reader:
                for pkt in reader:
                    t = float(pkt.time) - offset
                    length = int(getattr(pkt, "wirelen", None) or len(pkt))
                    if IP in pkt and TCP in pkt:
                        ip, tcp = pkt[IP], pkt[TCP]
                        payload = ip.len - 4 * ip.ihl - 4 * tcp.dataofs
                        rows.append((t, length, (ip.src, tcp.sport, ip.dst, tcp.dport), tcp.seq, tcp.ack, payload,
                                     int(tcp.flags), tcp.window))
                    else:
                        rows.append((t, length, None, 0, 0, 0, 0, 0))
        rows.sort(key=lambda r: r[0])
        out[dev] = rows
    return out


def read_probes(pcap_dir: Path) -> dict[tuple[int, int], np.ndarray]:
    """The wire probes (:mod:`emulation.emulator.probe`) that reached a GPU, by the sending GPU
    port ``(gpu, port)`` they left from (the port is in the destination address,
    :func:`emulation.dataplane.probe_mac`): an ``(n, 2)`` array of ``(sequence number, send time)``
    rows sorted by sequence number, the send time in CLOCK_MONOTONIC seconds as the probe carries
    it; empty without probe captures."""
    from scapy.utils import RawPcapReader

    from emulation.emulator.probe import PAYLOAD

    clock = json.loads((pcap_dir / "clock.json").read_text())
    got: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
    for dev in clock.get("probe_devices", []):
        for path in capture_files(pcap_dir, f"probe-{dev}"):
            for data, _meta in RawPcapReader(str(path)):
                if len(data) >= 14 + PAYLOAD.size:
                    gpu, seq, sent_ns = PAYLOAD.unpack_from(data, 14)
                    got[(gpu, data[5])][seq] = sent_ns * 1e-9
    return {k: np.array(sorted(v.items()), dtype=float) for k, v in got.items()}


def probe_windows(probes: dict[tuple[int, int], np.ndarray], recon: list[dict], frame_s: float) -> list[dict]:
    """Per reconfiguration: the dark window on the wire, from the probes.

    For every rewired GPU port (it lost its circuit and got another: the event's ``rewired``),
    the silence of its probes across ``[t_dark, t_live]``: the last probe that got through before
    (sent at ``a``) and the first after (sent at ``b``), ``k`` probes apart. The circuit went dark
    while the first lost probe was being sent, between ``a`` and ``a + step`` (``step = (b - a) /
    k``, the sending interval), and came back between ``b - step`` and ``b``: the window on the
    wire is ``b - a - step`` (the brackets' midpoints, within one step), at most the gap
    ``b - a``. Send times (carried by the probes) rather than arrival times, so that queueing on
    the way to the receiver does not blur the edges.

    The controller's timestamps bracket the data plane's window: the circuit cannot have gone dark
    before the request (``t_request``) nor stayed lit after the flush that followed the removal's
    barrier (``t_dark_flushed``); it cannot have come back before the new rules were sent
    (``t_install``) nor later than the flush after their barrier (``t_live_flushed``). So the
    window on the wire lies in ``[t_install - t_dark_flushed, t_live_flushed - t_request]``. The
    controller's own figure, ``t_live - t_dark`` (barrier to barrier), sits inside that bracket,
    but how far from the wire's depends on how late Open vSwitch answered each barrier and
    flushed its cached flows: on this 2-core machine kind the wire minus it ranged -4.8 to +2.5 ms
    (40 ms windows, 50 of them, OS-Ken and Ryu alike), and to -5.3 ms with a busy loop.

    :returns: per reconfiguration, the GPU ports it rewired (``rewired``; none when it only
        added circuits, e.g. the first), the median window over the ports (``wire_s``), its range, the
        smallest gap, the resolution (median ``step``), the controller's bracket (``bracket_s``:
        ``[low, high]``), and ``agrees``: the median lies in the bracket, widened by one frame time
        (``frame_s``) and one probe interval (the edges' resolution) on each side, and no port's gap
        is shorter than the requested window (none could have been dark for less)."""
    out = []
    for ev in recon:
        td, tl = ev["t_dark"], ev["t_live"]
        windows, gaps, steps = [], [], []
        for port in (tuple(p) for p in ev.get("rewired", [])):
            rows = probes.get(port)
            if rows is None or len(rows) < 2:
                continue
            seq, sent = rows[:, 0], rows[:, 1]
            over = np.flatnonzero((sent[1:] > td) & (sent[:-1] < tl))
            if not len(over):
                continue
            i = over[np.argmax(sent[over + 1] - sent[over])]
            gap = sent[i + 1] - sent[i]
            step = gap / (seq[i + 1] - seq[i])
            windows.append(float(gap - step))
            gaps.append(float(gap))
            steps.append(float(step))
        wire = float(np.median(windows)) if windows else None
        low = ev.get("t_install", tl) - ev.get("t_dark_flushed", td)
        high = ev.get("t_live_flushed", tl) - ev.get("t_request", td)
        slack = frame_s + (float(np.median(steps)) if steps else 0.0)
        r = ev["reconfiguration_delay_s"]
        agrees = wire is not None and low - slack <= wire <= high + slack and min(gaps) >= r
        out.append({"t_dark": td, "requested_s": r, "measured_s": ev["dark_window_measured_s"],
                    "rewired": len(ev.get("rewired", [])), "wire_s": wire, "wire_min_s": min(windows) if windows else None,
                    "wire_max_s": max(windows) if windows else None, "gap_min_s": min(gaps) if gaps else None,
                    "resolution_s": float(np.median(steps)) if steps else None, "ports": len(windows),
                    "bracket_s": [low, high], "agrees": agrees,
                    "judged": bool(ev.get("rewired")) and r > 0,
                    "why": _why(ev, wire, gaps, low, high, slack, agrees)})
    return out


def _why(ev: dict, wire: float | None, gaps: list[float], low: float, high: float, slack: float, agrees: bool) -> str:
    """Why a window agrees, disagrees or is not judged, in words (docs/capture.md lists each)."""
    r = ev["reconfiguration_delay_s"]
    if r <= 0:
        return "not judged: R = 0 (the emulator setting circuits up between steps, untimed)"
    if not ev.get("rewired"):
        return "not judged: no GPU port lost a circuit and got another (circuits only added or only removed)"
    if wire is None:
        return "no wire probe of its rewired ports crossed it (the capture missed those ports or that time)"
    if agrees:
        return "agrees: inside the controller's bracket, no port dark for less than R"
    if min(gaps) < r:
        return f"a port was silent only {min(gaps) * 1e3:.2f} ms, less than R = {r * 1e3:.2f} ms"
    side = "shorter" if wire < low - slack else "longer"
    return (f"the wire's {wire * 1e3:.2f} ms is {side} than the controller's timestamps allow "
            f"({low * 1e3:.2f}-{high * 1e3:.2f} ms, +- {slack * 1e3:.2f} ms)")


def dark_windows(frames: dict[str, list[tuple]], recon: list[dict]) -> list[dict]:
    """Per reconfiguration: requested and controller-measured window, and on the wire the
    smallest and median silence around it over the ports that carried frames on both sides, and
    the frames that entered a port while dark (module doc)."""
    times = {d: np.array([r[0] for r in rows]) for d, rows in frames.items()}
    out = []
    for ev in recon:
        td, tl = ev["t_dark"], ev["t_live"]
        gaps, in_dark = [], 0
        for t in times.values():
            before = t[t < td]
            after = t[t >= tl]
            in_dark += int(((t >= td) & (t < tl)).sum())
            if len(before) and len(after):
                gaps.append(float(after[0] - before[-1]))
        out.append({"t_dark": td, "requested_s": ev["reconfiguration_delay_s"], "measured_s": ev["dark_window_measured_s"],
                    "wire_gap_min_s": min(gaps) if gaps else None,
                    "wire_gap_median_s": float(np.median(gaps)) if gaps else None,
                    "ports": len(gaps), "frames_in_dark": in_dark})
    return out


#: TCP header flag bits (RFC 9293).
_SYN, _ACK, _FIN, _RST = 0x02, 0x10, 0x01, 0x04


class _Sequence:
    """The sequence space one direction of a connection has carried past a port: everything
    below ``top`` (unwrapped, RFC 9293 section 3.4 arithmetic relative to it) except ``holes``,
    disjoint ``[start, end)`` ranges not seen yet (the space below the first segment is one)."""

    def __init__(self, seq: int):
        self.top, self.top_wrapped, self.holes = seq, seq, [(-(1 << 62), seq)]

    def add(self, seq: int, length: int) -> str:
        """Carry ``length`` sequence numbers from ``seq``; what the segment was: ``"new"`` (it
        advances ``top`` over space not seen here), ``"resent"`` (some of it was already carried
        here) or ``"out of order"`` (behind ``top``, into space not seen here yet)."""
        start = self.top + ((seq - self.top_wrapped + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        end = start + length
        old = min(end, self.top)
        kind = "new"
        if start < old:
            unseen = any(a <= start and old <= b for a, b in self.holes)
            kind = "out of order" if unseen else "resent"
            self.holes = [(a2, b2) for a, b in self.holes
                          for a2, b2 in ((a, min(b, start)), (max(a, old), b)) if a2 < b2]
        if start > self.top:
            self.holes.append((self.top, start))
        if end > self.top:
            self.top, self.top_wrapped = end, (seq + length) & 0xFFFFFFFF
        return kind


def sequence_kinds(rows: list[tuple]) -> dict[tuple, dict[str, int]]:
    """Per direction (the TCP 4-tuple ``key``) among one port's frames (rows of
    :func:`read_frames`, in time order), the segments that go back in sequence, by kind:
    ``{"resent": n, "out of order": m}``. Only what a sender's TCP counts as a retransmission
    when it resends it is looked at: data segments and connecting SYNs (not a SYN-ACK: the
    listener counts those, and no agent reads the listener).

    - ``resent``: the segment carries sequence space this port has carried before, in whole or in
      part: a retransmission. Counting sequence space, not repeats of the same segment, counts a
      retransmission Linux merged from several small segments (``tcp_retrans_try_collapse``) or
      trimmed to its unacknowledged tail once, as ``tcpi_total_retrans`` counts it (one per
      segment sent, MSS-sized frames: offloads are off).
    - ``out of order``: it lies behind the highest sequence number seen but only fills space this
      port has not carried: reordered on its way here (two veths' per-CPU backlogs deliver a
      sender's consecutive frames out of order when the qdisc that sends them runs on different
      CPUs; a CI capture held one, 0.2 ms late), or a retransmission whose original was lost
      before this port. Which of the two, the port cannot tell; Wireshark's dissector guesses by
      time (its ``tcp.analysis.out_of_order``: within an RTT, or 3 ms, of the highest segment)."""
    seen: dict[tuple, _Sequence] = {}
    out: dict[tuple, dict[str, int]] = defaultdict(lambda: {"resent": 0, "out of order": 0})
    for _t, _len, key, seq, _ack, payload, flags, _win in rows:
        syn = flags & _SYN and not flags & _ACK
        if key is None or not (payload > 0 or syn):
            continue
        length = payload + bool(flags & _SYN)
        if key not in seen:
            seen[key] = _Sequence(seq)
        kind = seen[key].add(seq, length)
        if kind != "new":
            out[key][kind] += 1
    return dict(out)


def tcp_connections(frames: dict[str, list[tuple]]) -> list[dict]:
    """Per TCP connection: frames, data bytes, retransmitted and out-of-order segments
    (:func:`sequence_kinds`, each on the port that saw most of them: a segment lost after the
    first hop is resent through it too), duplicate ACKs, the largest silence (s) between two of
    its frames (on any port), first and last frame time."""
    retrans: dict[tuple, int] = defaultdict(int)
    reordered: dict[tuple, int] = defaultdict(int)
    last_ack: dict[tuple, tuple] = {}
    dup: dict[tuple, int] = defaultdict(int)
    when: dict[tuple, list[float]] = defaultdict(list)
    data: dict[tuple, int] = defaultdict(int)
    for dev, rows in frames.items():
        per_port: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        for key, k in sequence_kinds(rows).items():
            counts = per_port[min(key, (key[2], key[3], key[0], key[1]))]
            counts[0] += k["resent"]
            counts[1] += k["out of order"]
        for conn, (n, m) in per_port.items():
            retrans[conn], reordered[conn] = max(retrans[conn], n), max(reordered[conn], m)
        for t, _, key, seq, ack, payload, flags, window in rows:
            if key is None:
                continue
            conn = min(key, (key[2], key[3], key[0], key[1]))
            when[conn].append(t)
            if payload > 0:
                data[conn] += payload
            elif flags & _ACK and not flags & (_SYN | _FIN | _RST):  # a pure ACK
                prev = last_ack.get((dev, key))
                if prev == (ack, window):
                    dup[conn] += 1
                last_ack[dev, key] = (ack, window)
    out = []
    for conn, ts in when.items():
        ts.sort()
        gaps = np.diff(ts) if len(ts) > 1 else np.zeros(1)
        out.append({"connection": dpn.tcp_connection(*conn), "frames": len(ts), "data_bytes": data[conn],
                    "retransmissions": retrans[conn], "out_of_order": reordered[conn], "dup_acks": dup[conn], "largest_gap_s": float(gaps.max()),
                    "first_s": ts[0], "last_s": ts[-1]})
    return sorted(out, key=lambda c: c["first_s"])


def first_hop_ports(pcap_dir: Path) -> dict[str, str]:
    """``{captured OCS input port: the fabric IPv4 address of the GPU whose NIC feeds it}``
    (``clock.json``'s ``gpu_of_device``; empty for a capture made before it was recorded or of
    other ports). A connection's segments enter the fabric once, on a port of its sender's NIC:
    counted there, a retransmission is counted once, as the sender's TCP counts it."""
    clock = json.loads((Path(pcap_dir) / "clock.json").read_text())
    return {dev: dpn.gpu_ip(int(g)) for dev, g in clock.get("gpu_of_device", {}).items()}


def first_hop_complete(pcap_dir: Path) -> bool:
    """True when the capture holds every OCS input port (``clock.json``'s ``first_hop_complete``;
    False for a capture of some ports, or made before it was recorded): only then is every
    retransmitted segment on the wire where it entered the fabric."""
    return bool(json.loads((Path(pcap_dir) / "clock.json").read_text()).get("first_hop_complete"))


def first_hop_kinds(frames: dict[str, list[tuple]], first_hop: dict[str, str]) -> dict[str, int]:
    """TCP segments that went back in sequence where they entered the fabric, by kind
    (:func:`sequence_kinds`: ``{"resent": n, "out of order": m}``), on every port of
    ``first_hop`` (:func:`first_hop_ports`), sent by the port's own GPU."""
    out = {"resent": 0, "out of order": 0}
    for dev, ip in first_hop.items():
        for key, k in sequence_kinds(frames.get(dev, [])).items():
            if key[0] == ip:
                out["resent"] += k["resent"]
                out["out of order"] += k["out of order"]
    return out


def tcp_info_explained(resent: int, out_of_order: int, tcp_info: int) -> bool:
    """Whether the agents' TCP_INFO count of retransmissions (``tcp_info``) is what the wire
    allows: at least the segments ``resent`` on it, at most those plus the ones that came
    ``out_of_order`` (each of which may be a retransmission of a segment lost before the port,
    :func:`sequence_kinds`)."""
    return resent <= tcp_info <= resent + out_of_order


#: Wireshark's display filter of a segment that goes back in sequence (its TCP analysis: a data
#: segment or connecting SYN that does not advance the highest sequence number seen on its
#: stream), under any of the names it files one: retransmission, spurious (already
#: acknowledged) or out of order (within an RTT, or 3 ms, of the highest segment: a quick
#: retransmission or a reordered frame alike). It matches what :func:`sequence_kinds` finds
#: ``resent`` or ``out of order``. Pure ACKs, SYN-ACKs and keep-alives carry no data and do not
#: match.
TSHARK_FILTER = ("(tcp.analysis.retransmission || tcp.analysis.spurious_retransmission || tcp.analysis.out_of_order)"
                 " && (tcp.len > 0 || (tcp.flags.syn == 1 && tcp.flags.ack == 0))")


def tshark_back_in_sequence(pcap_dir: Path, first_hop: dict[str, str]) -> int | None:
    """Segments that went back in sequence as Wireshark's dissector finds them (``tshark``, a
    second reader of the same captures): frames matching :data:`TSHARK_FILTER` sent by the port's own GPU, over
    every port of ``first_hop`` and its capture files; None when ``tshark`` is not installed.

    :raises PcapError: tshark failed on a capture file.
    """
    import shutil
    import subprocess

    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    total = 0
    for dev, ip in sorted(first_hop.items()):
        for path in capture_files(Path(pcap_dir), dev):
            r = subprocess.run([tshark, "-n", "-r", str(path), "-Y", f"({TSHARK_FILTER}) && ip.src == {ip}",
                                "-T", "fields", "-e", "frame.number"], capture_output=True, text=True)
            if r.returncode != 0:
                raise PcapError(f"{path}: tshark failed: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
            total += sum(1 for line in r.stdout.splitlines() if line.strip())
    return total


def agents_retransmissions(emulation_dir: Path) -> dict[str, int]:
    """Retransmitted segments per TCP connection as the agents counted them (TCP_INFO), over
    every run of ``emulation_dir`` (``<run>/tcp_info.json``,
    :meth:`emulation.emulator.orchestrator.RunLedger.close`); a name two runs share is summed."""
    out: dict[str, int] = defaultdict(int)
    for path in sorted(Path(emulation_dir).glob("*/tcp_info.json")):
        for conn, n in json.loads(path.read_text())["retransmissions_by_connection"].items():
            out[conn] += int(n)
    return dict(out)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WireWindow(_Model):
    """One reconfiguration seen in the data frames on the captured ports (:func:`dark_windows`):
    when it went dark (controller clock, s), R requested and the controller's measured window
    (s), the smallest and median silence around it over the ``ports`` that carried frames on both
    sides (s), and the data frames sent into it."""

    t_dark: float
    requested_s: float
    measured_s: float
    wire_gap_min_s: Optional[float]
    wire_gap_median_s: Optional[float]
    ports: int
    frames_in_dark: int


class ProbeWindow(_Model):
    """One reconfiguration measured by the wire probes (:func:`probe_windows`), seconds."""

    t_dark: float
    requested_s: float
    measured_s: float
    #: GPU ports the reconfiguration rewired (0: it only added circuits; absent in older reports)
    rewired: int = 0
    wire_s: Optional[float]
    wire_min_s: Optional[float]
    wire_max_s: Optional[float]
    gap_min_s: Optional[float]
    resolution_s: Optional[float]
    ports: int
    #: ``[low, high]``: what the controller's timestamps allow the wire's window to be (absent in
    #: reports written before it was recorded)
    bracket_s: Optional[list[float]] = None
    agrees: bool
    #: whether the window is held to the checks (R > 0 and a GPU port rewired; absent: older reports)
    judged: bool = True
    #: why it agrees, disagrees or is not judged, in words (docs/capture.md)
    why: str = ""


class Connection(_Model):
    """One TCP connection on the wire (:func:`tcp_connections`) and its retransmissions as its
    agent's TCP_INFO counted them."""

    connection: str
    frames: int
    data_bytes: int
    retransmissions: int
    out_of_order: int = 0
    dup_acks: int
    largest_gap_s: float
    first_s: float
    last_s: float
    retransmissions_tcp_info: int = 0


class TcpSummary(_Model):
    """Every connection's totals: retransmitted segments on the wire and by TCP_INFO (the
    agents'; None without a ``result.json``), the connections where the two disagree
    (:func:`tcp_info_explained`), duplicate ACKs, the largest silence (s), and each connection.
    Where segments enter the fabric (the senders' OCS input ports, :func:`first_hop_ports`), the
    segments this analysis finds resent (``retransmissions_first_hop``) and out of order
    (``out_of_order_first_hop``, :func:`sequence_kinds`), and those Wireshark's dissector finds
    going back in sequence (``back_in_sequence_tshark``, the sum of the two; None without
    tshark), beside the agents' TCP_INFO total; all None when the capture does not hold every
    sender's OCS input port (``first_hop_complete`` false: some ports only, or a capture made
    before ocslab recorded them), since a count over part of the senders cannot be held against
    the agents' whole one."""

    connections: int
    retransmissions: int
    retransmissions_tcp_info: Optional[int]
    retransmissions_first_hop: Optional[int] = None
    out_of_order_first_hop: Optional[int] = None
    back_in_sequence_tshark: Optional[int] = None
    connections_disagreeing: list[str]
    dup_acks: int
    largest_gap_s: float
    per_connection: list[Connection]


class PcapReport(_Model):
    """``pcap.json``: frames per captured port, the dark windows in the data frames and by the
    probes, the frame time (s), the TCP summary (module doc) and the checks that failed
    (:func:`capture_checks`)."""

    ports: dict[str, int]
    dark_windows: list[WireWindow]
    frame_s: float
    probe_windows: list[ProbeWindow]
    tcp: TcpSummary
    failed_checks: list[FailedCheck] = []


def capture_checks(probe: list[ProbeWindow], tcp: TcpSummary) -> list[FailedCheck]:
    """The checks a capture holds the run to, those that failed:

    - ``dark window``: every reconfiguration the controller recorded that rewired GPU ports with
      a dark window (R > 0) was seen by the wire probes of those ports, inside the controller's
      bracket and no shorter than R on any port (:func:`probe_windows`' ``agrees``); one the
      probes never crossed fails too;
    - ``retransmissions``: where the capture holds every sender's OCS input port, the agents'
      TCP_INFO count is what the segments entering the fabric allow (:func:`tcp_info_explained`:
      at least those resent, at most those plus the ones out of order), and Wireshark's dissector
      (when installed) finds as many going back in sequence as this analysis.

    A capture with no reconfiguration has no dark window to check (:func:`summary_lines` says so)."""
    out = []
    for p in (p for p in probe if p.judged and p.rewired and p.requested_s > 0):
        where = f"reconfiguration at {p.t_dark:.3f} s"
        if p.wire_s is None:
            out.append(FailedCheck(check="dark window", where=where,
                                   detail=f"no wire probe of its rewired ports crossed it (R {p.requested_s * 1e3:.2f} ms)"))
        elif not p.agrees:
            bracket = "" if p.bracket_s is None else (f", the controller's bracket {p.bracket_s[0] * 1e3:.2f}-"
                                                      f"{p.bracket_s[1] * 1e3:.2f} ms")
            out.append(FailedCheck(check="dark window", where=where,
                                   detail=f"wire {p.wire_s * 1e3:.2f} ms (shortest gap {p.gap_min_s * 1e3:.2f} ms), "
                                          f"requested {p.requested_s * 1e3:.2f} ms{bracket}"))
    resent, reordered = tcp.retransmissions_first_hop, tcp.out_of_order_first_hop
    if resent is None or reordered is None:
        return out
    if tcp.retransmissions_tcp_info is not None and not tcp_info_explained(resent, reordered,
                                                                           tcp.retransmissions_tcp_info):
        out.append(FailedCheck(check="retransmissions", detail=f"{resent} resent and {reordered} out of order on the "
                               f"wire where segments enter the fabric, {tcp.retransmissions_tcp_info} "
                               f"retransmitted by the agents' TCP_INFO"))
    if tcp.back_in_sequence_tshark is not None and tcp.back_in_sequence_tshark != resent + reordered:
        out.append(FailedCheck(check="retransmissions", detail=f"tshark (emulation.pcap.TSHARK_FILTER) finds "
                               f"{tcp.back_in_sequence_tshark} segments going back in sequence where segments "
                               f"enter the fabric, this analysis {resent + reordered} ({resent} resent, "
                               f"{reordered} out of order)"))
    return out


def analyse(run_dir: Path, png: Path | None = None) -> PcapReport:
    """The whole analysis of ``run_dir`` (``pcap.json``'s content; module doc); with ``png``,
    also the throughput plot (:func:`plot`) from the same frames.

    :raises PcapError: no capture in ``run_dir``, or files that cannot be read.
    """
    run_dir = Path(run_dir)
    pcap_dir = run_dir / "emulation" / "pcap"
    if not (pcap_dir / "clock.json").exists():
        raise PcapError(f"{run_dir}: no capture (run with ocslab run --pcap)")
    try:
        frames = read_frames(pcap_dir)
        recon = in_capture(reconfigurations(run_dir / "emulation"), json.loads((pcap_dir / "clock.json").read_text()))
    except (OSError, ValueError, KeyError) as e:
        raise PcapError(f"{pcap_dir}: {e}") from None
    conns = tcp_connections(frames)
    agents, frame_s = None, 0.0
    result = run_dir / "result.json"
    if result.exists():
        res = json.loads(result.read_text()).get("result", {})
        agents = sum(s.get("retransmissions") or 0 for r in res.get("runs", []) for s in r.get("steps", []))
        frame_s = dpn.frame_bytes(res.get("mtu", dpn.MTU)) * 8 / ((res.get("scale") or {}).get("link_mbps", 10.0) * 1e6)
    tcp_info = agents_retransmissions(run_dir / "emulation")
    for c in conns:
        c["retransmissions_tcp_info"] = tcp_info.pop(c["connection"], 0)
    disagree = [c["connection"] for c in conns
                if not tcp_info_explained(c["retransmissions"], c["out_of_order"], c["retransmissions_tcp_info"])]
    disagree += sorted(k for k, n in tcp_info.items() if n)  # retransmitted, yet not on the wire
    first_hop = first_hop_ports(pcap_dir) if first_hop_complete(pcap_dir) else {}
    kinds = first_hop_kinds(frames, first_hop)
    report = {"ports": {d: len(rows) for d, rows in frames.items()}, "dark_windows": dark_windows(frames, recon),
              "frame_s": frame_s, "probe_windows": probe_windows(read_probes(pcap_dir), recon, frame_s),
              "tcp": {"connections": len(conns), "retransmissions": sum(c["retransmissions"] for c in conns),
                      "retransmissions_tcp_info": agents, "connections_disagreeing": disagree,
                      "retransmissions_first_hop": kinds["resent"] if first_hop else None,
                      "out_of_order_first_hop": kinds["out of order"] if first_hop else None,
                      "back_in_sequence_tshark": tshark_back_in_sequence(pcap_dir, first_hop) if first_hop else None,
                      "dup_acks": sum(c["dup_acks"] for c in conns),
                      "largest_gap_s": max((c["largest_gap_s"] for c in conns), default=0.0), "per_connection": conns}}
    if png is not None:
        plot(frames, report, png, run_dir.name)
    rep = PcapReport.model_validate(report)
    rep.failed_checks = capture_checks(rep.probe_windows, rep.tcp)
    return rep


def summary_lines(rep: PcapReport) -> list[str]:
    """What ``ocslab pcap`` prints of a :class:`PcapReport`: a line per dark window (requested,
    the controller's, the wire probes'), the TCP totals, and the retransmissions where segments
    enter the fabric by this analysis, tshark and the agents' TCP_INFO."""
    out = []
    for w, p in zip(rep.dark_windows, rep.probe_windows):
        wire = "-" if p.wire_s is None else (f"{p.wire_s * 1e3:.2f} ms ({p.wire_min_s * 1e3:.2f}-{p.wire_max_s * 1e3:.2f} "
                                             f"over {p.ports} rewired ports, +-{p.resolution_s * 1e3 / 2:.2f} ms)")
        bracket = "" if p.bracket_s is None else (f" (the controller's bracket {p.bracket_s[0] * 1e3:.2f}-"
                                                  f"{p.bracket_s[1] * 1e3:.2f} ms, +- frame time {rep.frame_s * 1e3:.2f} ms"
                                                  f" and a probe interval)")
        if not p.judged:
            out.append(f"reconfiguration at {w.t_dark:.3f}: {p.why}")
            continue
        verdict = ", agrees" if p.agrees else f", DISAGREES ({p.why})"
        out.append(f"dark window at {w.t_dark:.3f}: requested {w.requested_s * 1e3:.2f} ms, controller "
                   f"{w.measured_s * 1e3:.2f} ms, wire (probes) {wire}{verdict}"
                   f"{bracket}; {w.frames_in_dark} data frames sent into it")
    if not rep.probe_windows:
        out.append("no reconfiguration during the capture: no dark window to check")
    t = rep.tcp
    out.append(f"TCP: {t.connections} connections, {t.retransmissions} retransmitted segments on the wire (agents' "
               f"TCP_INFO: {t.retransmissions_tcp_info}), {t.dup_acks} duplicate ACKs, largest silence "
               f"{t.largest_gap_s * 1e3:.1f} ms; per connection, the wire and TCP_INFO agree on "
               f"{t.connections - len(t.connections_disagreeing)} of {t.connections}"
               + (f" (not on {', '.join(t.connections_disagreeing[:4])})" if t.connections_disagreeing else ""))
    if t.retransmissions_first_hop is None:
        out.append("retransmitted segments where they enter the fabric: not counted (the capture does not hold every "
                   "sender's OCS input port, or was made before ocslab recorded them), so not held against TCP_INFO")
    else:
        tshark = "not installed" if t.back_in_sequence_tshark is None else t.back_in_sequence_tshark
        out.append(f"segments going back in sequence where they enter the fabric (the senders' OCS inputs): "
                   f"scapy {t.retransmissions_first_hop} resent + {t.out_of_order_first_hop} out of order, tshark "
                   f"{tshark}; retransmitted by the agents' TCP_INFO {t.retransmissions_tcp_info}")
    return out


def plot(frames: dict[str, list[tuple]], report: dict, path: Path, title: str) -> None:
    """Per-port throughput of ``frames`` (:func:`read_frames`) in :data:`BIN_S` bins, the dark
    windows of ``report`` shaded. A legend only when some port carried frames (matplotlib warns
    on the console of a legend with nothing in it)."""
    from emulation.figures import figure

    t0 = min((rows[0][0] for rows in frames.values() if rows), default=0.0)
    with figure(path, size=(11, 4)) as (_fig, axes):
        ax = axes[0, 0]
        lines = 0
        for dev, rows in sorted(frames.items()):
            if not rows:
                continue
            t = np.array([r[0] for r in rows]) - t0
            b = np.array([r[1] for r in rows], dtype=float)
            bins = np.arange(0, t.max() + BIN_S, BIN_S)
            mbps = np.histogram(t, bins=bins, weights=b)[0] * 8 / BIN_S / 1e6
            ax.plot(bins[:-1], mbps, lw=0.6, label=dev)
            lines += 1
        for w in report["dark_windows"]:
            ax.axvspan(w["t_dark"] - t0, w["t_dark"] - t0 + w["measured_s"], color="black", alpha=0.3, lw=0)
        ax.set_xlabel("time since the first captured frame (s, emulation)")
        ax.set_ylabel("Mbit/s into the OCS port")
        ax.set_title(f"{title}: throughput per captured port; shaded = dark windows (controller)")
        if 0 < lines <= 16:
            ax.legend(fontsize=5, ncol=4)
