"""Packet captures (``ocslab run --pcap``) and their analysis with scapy (``emulation.pcap``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numpy as np

from emulation.pcap import (PcapError, dark_windows, first_hop_kinds, probe_windows, reconfigurations, read_frames,
                            tcp_connections, tcp_info_explained, tshark_back_in_sequence)

ROOT = Path(__file__).resolve().parents[1]
A, B = ("10.0.0.1", 40000, "10.0.0.2", 5001), ("10.0.0.2", 5001, "10.0.0.1", 40000)


def _f(t, key, seq=0, ack=0, payload=0, flags=0x10, window=100):
    return (t, 100 + payload, key, seq, ack, payload, flags, window)


def test_retransmissions_dup_acks_and_silences_are_counted_per_connection():
    frames = {
        "p1": [_f(0.0, A, 1, payload=1000), _f(0.1, A, 1001, payload=1000), _f(0.5, A, 1001, payload=1000),  # resent
               _f(0.6, A, 2001, payload=1000)],
        "p2": [_f(0.05, B, ack=1001), _f(0.15, B, ack=1001), _f(0.16, B, ack=1001),  # two duplicate ACKs
               _f(0.55, B, ack=2001, window=200), _f(0.56, B, ack=2001, window=300)],  # window update: not a dup
        "p3": [_f(0.1, A, 1001, payload=1000)],  # the same segment on the next hop is not a retransmission
    }
    (c,) = tcp_connections(frames)
    assert c["retransmissions"] == 1 and c["dup_acks"] == 2 and c["data_bytes"] == 5000
    assert c["largest_gap_s"] == pytest.approx(0.34) and c["frames"] == 10


def test_the_throughput_plot_of_a_capture_whose_ports_stayed_silent_warns_nothing(tmp_path):
    """``capture stop`` on ports that carried no frame drew a legend with nothing in it, and
    matplotlib's warning reached the console."""
    import warnings

    from emulation.pcap import plot

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot({"ocl-o0-p1": [], "ocl-o0-p2": []}, {"dark_windows": [{"t_dark": 0.1, "measured_s": 0.01}]},
             tmp_path / "silent.png", "silent")
        plot({"ocl-o0-p1": [(0.0, 100), (0.2, 1500)]}, {"dark_windows": []}, tmp_path / "busy.png", "busy")
    assert (tmp_path / "silent.png").stat().st_size > 0 and (tmp_path / "busy.png").stat().st_size > 0


def test_a_dark_window_is_bounded_by_the_silence_around_it():
    frames = {"p1": [_f(t, A, int(t * 1e4), payload=100) for t in (0.0, 0.9, 1.3, 1.4)],
              "p2": [_f(t, A, int(t * 1e4), payload=100) for t in (0.95, 1.02, 1.2)]}  # 1.02: sent into the dark
    (w,) = dark_windows(frames, [{"t_dark": 1.0, "t_live": 1.1, "reconfiguration_delay_s": 0.09,
                                  "dark_window_measured_s": 0.1}])
    assert w["wire_gap_min_s"] == pytest.approx(0.25) and w["wire_gap_median_s"] == pytest.approx(0.325)
    assert w["frames_in_dark"] == 1 and w["ports"] == 2


def test_a_probe_window_is_the_midpoints_of_the_lost_probes_brackets():
    """Probes of port (0, 1) sent every 1 ms; those sent in [1.0005, 1.0405) s were lost: the
    circuit went dark while the first lost one was sent and came back while the last was."""
    sent = np.arange(0.9, 1.2, 1e-3)
    kept = (sent < 1.0005) | (sent >= 1.0405)
    probes = {(0, 1): np.column_stack([np.flatnonzero(kept), sent[kept]])}
    ev = {"t_dark": 1.001, "t_live": 1.041, "reconfiguration_delay_s": 0.039, "dark_window_measured_s": 0.040,
          "rewired": [[0, 1], [3, 0]]}  # (3, 0) sent no probe: not counted
    (w,) = probe_windows(probes, [ev], frame_s=1.2e-3)
    assert w["ports"] == 1 and w["resolution_s"] == pytest.approx(1e-3)
    assert w["gap_min_s"] == pytest.approx(0.041) and w["wire_s"] == pytest.approx(0.040)
    assert w["agrees"]
    (w,) = probe_windows(probes, [{**ev, "reconfiguration_delay_s": 0.045}], frame_s=1.2e-3)
    assert not w["agrees"]  # the wire shows less than the requested window: undercut
    # the controller's timestamps bracket the wire's window: [install - dark flushed, live flushed - request]
    full = {**ev, "t_request": 0.999, "t_dark_flushed": 1.003, "t_install": 1.042, "t_live_flushed": 1.046}
    (w,) = probe_windows(probes, [full], frame_s=1.2e-3)
    assert w["bracket_s"] == pytest.approx([0.039, 0.047]) and w["agrees"]
    (w,) = probe_windows(probes, [{**full, "t_install": 1.0445}], frame_s=1.2e-3)  # bracket from 41.5 ms
    assert w["agrees"]  # 40 ms: within a frame (1.2 ms) and a probe interval (1 ms) of it
    (w,) = probe_windows(probes, [{**full, "t_install": 1.0465, "t_live_flushed": 1.05}], frame_s=1.2e-3)
    assert not w["agrees"]  # 40 ms on the wire, the controller sent the new rules 43.5 ms after the flush


def _reconfigured(seq: int, changed: bool = True) -> dict:
    return {"seq": seq, "t": 1.0 + seq, "kind": "reconfigured", "changed": changed, "t_dark": 1.0 + seq,
            "t_live": 1.01 + seq, "reconfiguration_delay_s": 0.01, "dark_window_measured_s": 0.0101, "rewired": []}


def test_reconfigurations_come_from_the_event_file_whatever_the_log_format_and_a_shortfall_fails(tmp_path):
    """The event file (the same under OS-Ken and Ryu) is what the analysis reads; the log is the
    check. Ryu's log lines carry no OS-Ken prefix: the bare ``reconfigured {...}`` counts too, an
    Opus ``opus-reconfigured`` does not; a log that mentions more than the file holds fails."""
    evs = [_reconfigured(0), _reconfigured(1, changed=False), _reconfigured(2),
           {"seq": 3, "t": 4.0, "kind": "opus-reconfigured", "changed": True}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    fields = lambda e: json.dumps({k: v for k, v in e.items() if k not in ("seq", "t", "kind")})  # noqa: E731
    ryu = [f"reconfigured {fields(e)}" for e in evs[:3]] + [f"opus-reconfigured {fields(evs[3])}"]
    (tmp_path / "controller.log").write_text("\n".join(["loading app controllers.circuit_switch", *ryu]) + "\n")
    assert [e["seq"] for e in reconfigurations(tmp_path)] == [0, 2]
    osken = [f"2026-11-26 03:00:00,000 INFO ocslab.controller reconfigured {fields(e)}" for e in evs[:3]]
    (tmp_path / "controller.log").write_text("\n".join(osken + ryu[:1]) + "\n")  # one more than the file
    with pytest.raises(PcapError, match="holds 2 reconfigurations, but the controller logged 3"):
        reconfigurations(tmp_path)
    (tmp_path / "events.jsonl").unlink()  # a run from before the event file: its log is read
    assert len(reconfigurations(tmp_path)) == 3


def _capture(tmp_path: Path) -> Path:
    """A capture of two OCS inputs: ``p1`` fed by GPU 0, ``p2`` by GPU 1, each port carrying its
    GPU's segments out and what comes back to it. GPU 0 retransmits six times, each as Linux
    does: segment 1001 resent as it was; two small segments (3001+100, 3101+200) resent merged
    into one (``tcp_retrans_try_collapse``); the unacknowledged tail (3801+500) of a partly
    acknowledged segment; 3301 after its ACK came (Wireshark: spurious); 4301 within 3 ms of the
    highest segment (Wireshark: out of order); and its SYN of a second connection. It also sends
    7301 before 6301 (reordered before the port: not a retransmission). GPU 2's
    segments cross p1 in transit, one seen twice (a transit repeat is not where it entered the
    fabric), and GPU 1 resends a SYN-ACK (its listener counts that, not an agent)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    from emulation.dataplane import gpu_ip

    def seg(t, src, dst, sport, dport, seq, ack, n, flags="A"):
        pkt = Ether() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags,
                                                   window=500) / (b"x" * n)
        pkt.time = t
        return pkt

    g0, g1, g2 = gpu_ip(0), gpu_ip(1), gpu_ip(2)
    out = lambda t, seq, n: seg(t, g0, g1, 40000, 5001, seq, 1, n)  # noqa: E731
    back = lambda t, ack: seg(t, g1, g0, 5001, 40000, 1, ack, 0)  # noqa: E731
    p1 = [out(1.0, 1, 1000), out(1.1, 1001, 1000), back(1.15, 1001), out(1.2, 2001, 1000),
          out(1.5, 1001, 1000),  # resent as it was
          out(1.8, 3001, 100), out(1.81, 3101, 200), back(1.9, 3001), out(2.3, 3001, 300),  # merged
          out(2.4, 3301, 1000), back(2.45, 3801), out(2.6, 3801, 500),  # its unacknowledged tail
          back(2.7, 4301), out(2.8, 3301, 1000),  # already acknowledged
          out(2.9, 4301, 1000), out(2.901, 5301, 1000), out(2.902, 4301, 1000),  # 1 ms after the highest
          out(2.95, 7301, 1000), out(2.9502, 6301, 1000),  # reordered: space not seen before
          seg(3.0, g0, g1, 40001, 5001, 9000, 0, 0, "S"), seg(4.0, g0, g1, 40001, 5001, 9000, 0, 0, "S"),
          seg(1.6, g2, g1, 41000, 5001, 1, 1, 800), seg(1.7, g2, g1, 41000, 5001, 1, 1, 800)]
    p2 = [seg(1.05, g1, g0, 5001, 40000, 1, 1001, 0), seg(1.15, g1, g0, 5001, 40000, 1, 1001, 0),
          seg(4.01, g1, g0, 5001, 40001, 7000, 9001, 0, "SA"), seg(5.0, g1, g0, 5001, 40001, 7000, 9001, 0, "SA")]
    d = tmp_path / "pcap"
    d.mkdir()
    wrpcap(str(d / "p1.pcap0"), sorted(p1, key=lambda p: p.time))
    wrpcap(str(d / "p2.pcap0"), p2)
    (d / "clock.json").write_text(json.dumps({"realtime_minus_monotonic_s": 0.0, "devices": ["p1", "p2"],
                                              "probe_devices": [], "gpu_of_device": {"p1": 0, "p2": 1}}))
    return d


def test_retransmissions_where_segments_enter_the_fabric_count_each_segment_linux_resends(tmp_path):
    """Sequence space, not repeats of a segment: a merged or trimmed retransmission counts, as
    ``tcpi_total_retrans`` counts it (one CI run's capture held 1 exact repeat and 3 such), and a
    segment that only fills space the port has not seen is out of order, not resent (a CI
    capture held one such, 0.2 ms behind its successor, which TCP never retransmitted)."""
    d = _capture(tmp_path)
    first_hop = {"p1": "10.0.0.1", "p2": "10.0.0.2"}
    assert first_hop_kinds(read_frames(d), first_hop) == {"resent": 6, "out of order": 1}
    by_conn = {c["connection"]: (c["retransmissions"], c["out_of_order"]) for c in tcp_connections(read_frames(d))}
    assert by_conn == {"10.0.0.1:40000-10.0.0.2:5001": (5, 1), "10.0.0.1:40001-10.0.0.2:5001": (1, 0),
                       "10.0.0.2:5001-10.0.0.3:41000": (1, 0)}  # the transit repeat, on the wire


def test_tcp_info_may_count_an_out_of_order_segment_as_a_retransmission_but_no_more():
    """A segment out of order at the port is a reordered frame or a retransmission of one lost
    before the port: TCP_INFO lies between the segments resent and those plus the out of order."""
    assert tcp_info_explained(2, 0, 2) and tcp_info_explained(2, 1, 2) and tcp_info_explained(2, 1, 3)
    assert not tcp_info_explained(2, 1, 1) and not tcp_info_explained(2, 1, 4) and not tcp_info_explained(0, 0, 1)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (make test installs it)")
def test_wiresharks_dissector_counts_the_same_retransmissions_as_the_analysis(tmp_path):
    """A second reader of the same capture: Wireshark's TCP analysis on the senders' ports finds
    GPU 0's six retransmissions (two of them under its spurious and out-of-order names) and the
    reordered segment (out of order) going back in sequence, and nothing else."""
    d = _capture(tmp_path)
    first_hop = {"p1": "10.0.0.1", "p2": "10.0.0.2"}
    assert tshark_back_in_sequence(d, first_hop) == sum(first_hop_kinds(read_frames(d), first_hop).values()) == 7
    assert tshark_back_in_sequence(d, {}) == 0


@pytest.mark.emulation
@pytest.mark.parametrize("controller", ["os-ken", "ryu"])
def test_a_captured_run_shows_every_dark_window_and_the_agents_retransmissions(run_dir, controller):
    """``experiments/lab.yaml`` (4 GPUs, RHD with a reconfiguration per step) with ``--pcap``,
    under either framework: every reconfiguration the controller made has a silence on the wire at
    least as long as the controller's measured window (itself at least the requested one), nothing
    is sent into a dark circuit, and the wire's retransmissions equal the agents' TCP_INFO count,
    counted by this analysis and by Wireshark's dissector alike."""
    from emulation.emulator.net import ryu_unavailable

    if controller == "ryu" and ryu_unavailable():
        pytest.skip(f"Ryu: {ryu_unavailable()}")
    out = run_dir / "lab-pcap"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", "experiments/lab.yaml", "--pcap", "--out", str(out),
                        "--controller", controller], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-1500:])
    print(r.stdout[-2500:])
    events = [json.loads(x) for x in (out / "emulation" / "events.jsonl").read_text().splitlines()]
    logged = (out / "emulation" / "controller.log").read_text()
    made = [e for e in events if e["kind"] == "reconfigured" and e["changed"]]
    assert len(made) >= 2 and logged.count("reconfigured {") >= len(made)
    rep = json.loads((out / "pcap.json").read_text())
    res = json.loads((out / "result.json").read_text())["result"]
    steps = [s for run in res["runs"] for s in run["steps"] if s["action"] == "reconfigure"]
    windows = [w for w in rep["dark_windows"] if w["requested_s"] > 0]
    assert len(windows) == len(steps) >= 2
    assert len(rep["ports"]) == 4 and all(n > 100 for n in rep["ports"].values())
    for w in windows:
        assert w["frames_in_dark"] == 0
        assert w["requested_s"] <= w["measured_s"] <= w["wire_gap_min_s"], w
    # the wire probes balance apart in the drop accounting: the runs' checks hold (no emulator drops)
    assert all(run["checks"]["ok"] for run in res["runs"]), [run["checks"] for run in res["runs"]]
    # every reconfiguration with a dark window, as the controller recorded it, is analysed on the wire
    assert len(windows) == len([e for e in made if e["reconfiguration_delay_s"] > 0])
    # no drop before the OCS inputs (the runs' checks): every retransmission TCP_INFO counted was
    # resent on the wire where it entered the fabric, and nothing else was resent there
    tcp = rep["tcp"]
    assert tcp["retransmissions"] == tcp["retransmissions_first_hop"] == tcp["retransmissions_tcp_info"], tcp
    assert tcp["back_in_sequence_tshark"] == tcp["retransmissions_first_hop"] + tcp["out_of_order_first_hop"], tcp
    assert tcp["connections_disagreeing"] == [] and rep["failed_checks"] == []  # per connection too
    assert sum(c["retransmissions_tcp_info"] for c in rep["tcp"]["per_connection"]) == rep["tcp"]["retransmissions"]
    assert (out / "pcap.png").stat().st_size > 10_000
    # wire probes: every rewired port's probes fall silent across each reconfiguration, never for
    # less than R, and the window they show lies in the bracket of the controller's timestamps
    # (emulation.pcap.probe_windows). Wire minus the controller's barrier-to-barrier figure, measured
    # on lab.yaml (40 ms windows): -4.8..+2.5 ms over 50 windows on an idle machine (one CI run
    # +2.3 ms), so that figure is not what is checked against the wire; the bracket held for all.
    # (the first window of the lab starts from no circuits: no port is rewired)
    probes = [p for p in rep["probe_windows"] if p["requested_s"] > 0 and p["ports"]]
    assert len(probes) >= len(windows) - 1 >= 1
    for p in probes:
        assert p["agrees"], p
        assert p["gap_min_s"] >= p["requested_s"] and 0.8e-3 <= p["resolution_s"] <= 1.2e-3, p
