"""Emulation tests: real Open vSwitch bridges, the OS-Ken controller, Mininet hosts, packets.

They need root and a running Open vSwitch (CI has both); see conftest.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from emulation import dataplane as dpn
from emulation.emulator.session import PacketSession
from emulation.emulator.net import EmulatedFabric
from emulation.emulator.execute import step_scale
from emulation.emulator.orchestrator import run_workload
from emulation.fabric import assign_ports
from emulation.planners import make_plan
from emulation.collective.report import ring_alpha_beta_s
from emulation.scale import Scale
from emulation.scenario.schema import EmulationSpec
from emulation.workloads import build
from topologies import ocs_star

pytestmark = pytest.mark.emulation
ROOT = Path(__file__).resolve().parents[1]


def _ping_ok(emu, a: int, b: int) -> bool:
    out = emu.host(a).cmd(f"ping -c 3 -i 0.05 -W 1 {dpn.gpu_ip(b)}")
    return " 0% packet loss" in out


def _rule_packets(bridge: str, dst: int) -> int:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge, f"ip,nw_dst={dpn.gpu_ip(dst)}"],
                         capture_output=True, text=True).stdout
    return sum(int(m) for m in re.findall(r"n_packets=(\d+)", out))


def test_circuits_installed_and_multihop_forwarding(run_dir):
    f = ocs_star(6, 2, 400, 0.0, "ring")
    with EmulatedFabric(f, run_dir, link_mbps=20) as emu:
        flows = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", dpn.ocs_name(0)],
                               capture_output=True, text=True).stdout
        assert len(re.findall(r"priority=100,in_port", flows)) == 2 * 6  # 6 circuits, 2 directions
        assert _ping_ok(emu, 0, 1)  # one hop
        assert _ping_ok(emu, 0, 3)  # three hops, through two GPUs' NICs
        before = _rule_packets(dpn.nic_name(1), 2)
        assert _ping_ok(emu, 0, 2)  # two hops: 0 -> 1 -> 2
        # transit forwarded by GPU 1's NIC rules (OVS pushes datapath counters every ~0.5 s)
        deadline = time.monotonic() + 5
        while _rule_packets(dpn.nic_name(1), 2) < before + 3:
            assert time.monotonic() < deadline, "GPU 1's NIC did not forward the transit packets"
            time.sleep(0.1)


def test_reconfiguration_dark_window_is_enforced_and_measured(run_dir):
    f = ocs_star(4, 2, 400, 0.0, "ring")
    new = assign_ports(f, "ocs0", [(0, 2), (1, 3)], fill=True, keep=f.initial["ocs0"])
    dark = 0.3
    with EmulatedFabric(f, run_dir, link_mbps=20) as emu:
        g0 = emu.host(0)
        ping = g0.popen(["ping", "-D", "-n", "-i", "0.01", "-w", "3", dpn.gpu_ip(2)], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # let the ping run on the old circuits first
        res = emu.client.apply(new, dark)
        out, _ = ping.communicate(timeout=10)
        assert "bytes from" in out, out[-500:]
        stamps = [float(x) for x in re.findall(r"^\[(\d+\.\d+)\].*bytes from", out, re.M)]
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        assert res["changed"] and res["removed"] == 4 and res["added"] == 4
        measured = res["dark_window_measured_s"]
        print(f"dark window: requested {dark * 1e3:.1f} ms, measured {measured * 1e3:.2f} ms, longest ping gap "
              f"{max(gaps) * 1e3:.1f} ms")
        # measured 301.2-302.0 ms for 300 ms; longest ping gap 301.7-324.3 ms (15 soak runs, 2026-11)
        assert dark <= measured <= 1.2 * dark + 0.002
        # the data plane really went dark: the longest silence covers the window
        assert max(gaps) >= dark - 0.02, max(gaps)
        assert max(gaps) <= measured + 0.1
        assert _ping_ok(emu, 0, 2) and _ping_ok(emu, 1, 3)  # now direct circuits
        assert emu.client.circuits() == new


def test_ring_allreduce_is_link_bound_and_delivers_every_byte(run_dir):
    n, size = 4, 8 << 20
    f = ocs_star(n, 2, 400, 0.0, "ring")
    alpha = 5e-6
    w = build("ring", n, size)
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        r = run_workload(emu, "ring", w, make_plan("none", f, w), scale, alpha, run_dir / "ring")
    assert r.bytes_delivered == r.bytes_sent == w.bytes_sent
    assert len(emu.tcp_congestion) == 1  # every connection runs the same, and it is recorded
    assert dpn.TCP_CONGESTION is None or emu.tcp_congestion == {dpn.TCP_CONGESTION}
    assert len(r.steps) == 2 * (n - 1)
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in zip(r.steps, r.steps[1:]))  # round-synchronous
    pred = ring_alpha_beta_s(n, size, alpha, 400)
    print(f"ring: packet {r.time_s * 1e3:.4f} ms, alpha-beta {pred * 1e3:.4f} ms, error {(r.time_s - pred) / pred:+.2%}")
    assert abs(r.time_s - pred) / pred < 0.05, (r.time_s, pred)  # measured -0.42..-0.07% (15 soak runs, 2026-11)


def _ocs_input_counts(emu) -> tuple[int, int]:
    """(frames, bytes) received by every OCS input port so far (the root-namespace devices)."""
    frames = octets = 0
    for dev in emu.ocs_input_ports():
        base = Path("/sys/class/net") / dev / "statistics"
        frames += int((base / "rx_packets").read_text())
        octets += int((base / "rx_bytes").read_text())
    return frames, octets


def test_jumbo_frames_carry_a_ring_in_a_sixth_of_the_frames_and_stay_link_bound(run_dir):
    n, size, mtu = 4, 8 << 20, 9000
    f = ocs_star(n, 2, 400, 0.0, "ring")
    alpha = 5e-6
    w = build("ring", n, size)
    with EmulatedFabric(f, run_dir, link_mbps=40.0, mtu=mtu) as emu:
        mtus = {emu.host(g).cmd(f"cat /sys/class/net/g{g}-eth0/mtu").strip() for g in range(n)}
        assert mtus == {str(mtu)}
        scale = Scale(40.0, 0.1, f.port_gbps)
        frames0, bytes0 = _ocs_input_counts(emu)
        r = run_workload(emu, "ring", w, make_plan("none", f, w), scale, alpha, run_dir / "ring")
        frames1, bytes1 = _ocs_input_counts(emu)
    assert r.bytes_delivered == r.bytes_sent == w.bytes_sent
    payload = scale.emulated_bytes(w.bytes_sent)
    frames = frames1 - frames0
    full = payload / dpn.mss(mtu)  # data frames, if every segment is full
    pred = ring_alpha_beta_s(n, size, alpha, 400)
    print(f"jumbo ring: {frames} frames ({full:.0f} full data frames; {full * dpn.mss(mtu) / dpn.mss():.0f} "
          f"at MTU 1500), {(bytes1 - bytes0) / frames:.0f} bytes per frame; packet {r.time_s * 1e3:.4f} ms, "
          f"alpha-beta {pred * 1e3:.4f} ms, error {(r.time_s - pred) / pred:+.2%}")
    # Data frames plus ACKs (at most one per data frame): nowhere near the ~6x more of MTU 1500.
    # Measured 951-954 frames for 562 full data frames (3 runs, 2026-11).
    assert full <= frames <= 2.2 * full, (frames, full)
    # 23 frames per transfer: each ends about a frame early. Measured -2.73..-1.96% (3 runs, 2026-11).
    assert abs(r.time_s - pred) / pred < 0.05, (r.time_s, pred)


def test_planned_reconfigurations_measure_their_dark_windows(run_dir):
    n = 4
    f = ocs_star(n, 2, 400, 10e-6, "ring")
    scale = Scale(10.0, 0.1, 400)  # TDF 4000: R = 10 us -> 40 ms emulated
    w = build("rhd", n, 2 << 20)
    plan = make_plan("always", f, w)
    with EmulatedFabric(f, run_dir, link_mbps=scale.link_mbps) as emu:
        r = run_workload(emu, "rhd", w, plan, scale, 5e-6, run_dir / "rhd")
    recon = [s for s in r.steps if s.action == "reconfigure"]
    assert len(recon) == plan.reconfigurations >= 2
    print(f"dark windows (emulated ms): {[round(s.dark_window_measured_s * scale.tdf * 1e3, 2) for s in recon]}")
    for s in recon:
        req, meas = s.reconfiguration_delay_s, s.dark_window_measured_s
        assert req == pytest.approx(10e-6)
        # 20% + 2 ms emulated; measured 40.9-42.8 ms emulated for 40 ms (45 windows, 15 soak runs, 2026-11)
        assert req <= meas <= 1.2 * req + 0.002 / scale.tdf
        assert s.end_s - s.start_s >= meas  # the step waited for the circuits
    assert r.bytes_delivered == w.bytes_sent


def test_flow_and_packet_backends_agree_and_pass_the_sanity_checks(run_dir):
    """The flow backend predicts the packet backend: a 4-GPU Ring and RHD with a reconfiguration
    per step, 8 MiB, at the calibrated link rate."""
    from emulation.checks import check_run
    from emulation.flowsim import simulate

    n, size, alpha = 4, 8 << 20, 5e-6
    f = ocs_star(n, 2, 400, 10e-6, "ring")
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        for alg, planner in (("ring", "none"), ("rhd", "always")):
            w = build(alg, n, size)
            plan = make_plan(planner, f, w)
            pkt = run_workload(emu, alg, w, plan, scale, alpha, run_dir / alg)
            flow = simulate(f, w, plan, alpha_s=alpha)
            err = (flow.time_s - pkt.time_s) / pkt.time_s
            print(f"{alg}: packet {pkt.time_s * 1e3:.4f} ms, flow {flow.time_s * 1e3:.4f} ms, error {err:+.1%}")
            # measured: ring -3.0..+0.4%, rhd -3.5..-0.9% (25 soak runs on a 2-core machine, 2026-11)
            assert abs(err) < 0.08, (alg, pkt.time_s, flow.time_s)
            checks = check_run(pkt, f)
            print(f"{alg}: max link utilisation {checks.max_link_utilisation:.3f}")
            assert checks.ok, checks.problems
            assert 0.7 < checks.max_link_utilisation <= 1.01


#: The agreement of the demo's packet runs with the flow backend that README.md states, by
#: buffer size (|flow - packet| / packet). Measured over 9 runs of ``ocslab compare
#: experiments/demo.yaml`` on 2-core machines (2026-11-28, each step at least 250 ms of wall
#: clock where the byte scale allows: the 1 MiB runs stop at its cap, 42 ms steps at 10 Mbit/s):
#: 25 MiB 0.2-3.2% idle, 4.1% beside a busy loop (``yes``) on one core; 1 MiB 0.1-2.3% idle in
#: 7 runs, 6.9% in one (a fresh clone's suite), 4.0% beside the busy loop (docs/emulator.md).
DEMO_AGREEMENT = {25 << 20: 0.06, 1 << 20: 0.10}


def test_the_demo_on_packets_agrees_with_the_flow_backend_within_the_readme_bound(run_dir):
    """``ocslab compare experiments/demo.yaml``: every run of the embedded default scenario,
    calibrated on this machine, within the README's bound of the flow backend for its size, and
    every check of both backends held (exit 0); the README states the same bounds."""
    out = run_dir / "demo"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "compare", "experiments/demo.yaml", "--quiet-steps",
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    print(r.stdout[-1500:])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import json

    cmp = json.loads((out / "compare.json").read_text())
    assert len(cmp["runs"]) == 6 and cmp["failed_checks"] == []
    for run in cmp["runs"]:
        assert abs(run["error"]) <= DEMO_AGREEMENT[run["bytes"]], run
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (f"agree within {DEMO_AGREEMENT[25 << 20]:.0%} at 25 MiB and {DEMO_AGREEMENT[1 << 20]:.0%} at 1 MiB"
            in readme)


def test_a_straggler_delays_the_packet_run_like_the_flow_run(run_dir):
    from emulation.flowsim import simulate

    n, size, alpha, d = 4, 4 << 20, 5e-6, 200e-6
    f = ocs_star(n, 2, 400, 0.0, "ring")
    w = build("ring", n, size)
    plan = make_plan("none", f, w)
    arrivals = [0.0, 0.0, d, 0.0]
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        pkt = run_workload(emu, "ring", w, plan, scale, alpha, run_dir / "late", arrivals_s=arrivals)
    flow = simulate(f, w, plan, alpha_s=alpha, arrivals_s=arrivals)
    assert flow.time_s == pytest.approx(d + ring_alpha_beta_s(n, size, alpha, 400), rel=1e-9)
    late = [t for t in pkt.transfers if t.src == 2 and t.step == 0][0]
    print(f"straggler: packet {pkt.time_s * 1e3:.4f} ms, flow {flow.time_s * 1e3:.4f} ms, error "
          f"{(pkt.time_s - flow.time_s) / flow.time_s:+.2%}; late start {late.start_s / d - 1:+.2%} of D")
    assert abs(pkt.time_s - flow.time_s) / flow.time_s < 0.05, (pkt.time_s, flow.time_s)  # -0.2..+0.2% (15 runs)
    assert late.start_s == pytest.approx(d, rel=0.05)  # released when its rank arrived


def test_dp_plan_mixing_keep_and_reconfigure_runs_on_packets_like_the_flow_model(run_dir):
    """the packet backend executes a dp plan (8 GPUs, RHD on a ring base, R such that the
    plan keeps some steps and reconfigures others) within 5% of the flow backend."""
    from emulation.flowsim import simulate
    from emulation.planners import CostModel

    n, size, alpha, r = 8, 4 << 20, 5e-6, 25e-6
    f = ocs_star(n, 2, 400, r, "ring")
    plan = make_plan("dp", f, build("rhd", n, size), CostModel(alpha, 0.0))
    actions = [s.action for s in plan.steps]
    assert actions == ["keep", "reconfigure", "reconfigure", "keep", "reconfigure", "reconfigure"], actions
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu = session.emu
        # at the byte scale `ocslab run` gives these steps (0.8: each at least 250 ms on the wire);
        # at the session's 0.1 the shortest step lasted 41 ms of wall clock, a few ms of the
        # agents' start and the switch's flush were 5% of the run, and a busy CI machine's 11%
        scale = step_scale(plan.workload, session.scale, emu.mtu, f.ports_per_gpu)
        pkt = run_workload(emu, "rhd-dp", plan.workload, plan, scale, alpha, run_dir / "dp")
        assert emu.client.circuits() == plan.steps[-1].configuration
    flow = simulate(f, plan.workload, plan, alpha_s=alpha)
    assert flow.time_s == pytest.approx(plan.predicted_s, rel=1e-9)
    err = (flow.time_s - pkt.time_s) / pkt.time_s
    print(f"dp: packet {pkt.time_s * 1e3:.4f} ms, flow {flow.time_s * 1e3:.4f} ms, error {err:+.1%}")
    # measured -1.5..-0.65% (7 runs, 3 of them beside two busy loops, 2026-11-28); at byte scale
    # 0.1 it was -5.5..-2.2% idle (29 runs) and -11.2% once in CI
    assert abs(err) < 0.05, (pkt.time_s, flow.time_s)
    for st in pkt.steps:
        if st.action == "reconfigure":
            assert st.dark_window_measured_s >= r  # the circuits were dark at least R (real-equivalent)


def test_dependency_driven_runs_traffic_through_dark_windows_like_the_flow_model(run_dir):
    """8 GPUs x 2 ports, R = 100 us, RHD of 4 MiB, dependency-driven (SWOT, arXiv 2510.19322):
    under the overlap plan every epoch's first step runs on kept circuits, inside the dark window
    of the ports being rewired; under always every step waits for its new circuits. Both within
    5% of the flow backend, no frame lost in a dark window, every dark window at least R."""
    from emulation.checks import check_run
    from emulation.emulator.dependency import run_dependency_driven
    from emulation.flowsim import simulate

    n, size, alpha, r = 8, 4 << 20, 5e-6, 100e-6
    f = ocs_star(n, 2, 400, r, "ring")
    w = build("rhd", n, size)
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        got = {}
        for planner in ("overlap", "always"):
            plan = make_plan(planner, f, w)
            pkt = run_dependency_driven(emu, planner, plan.workload, plan, scale, alpha, run_dir / planner)
            flow = simulate(f, plan.workload, plan, alpha_s=alpha, semantics="dependency-driven")
            err = (pkt.time_s - flow.time_s) / flow.time_s
            print(f"{planner}: packet {pkt.time_s * 1e6:.1f} us, flow {flow.time_s * 1e6:.1f} us, error {err:+.2%}, "
                  f"drops {pkt.drops}")
            # measured on a 2-core machine (2026-11): overlap +0.1..+0.6%, always +0.8..+1.3% idle (3 runs);
            # beside two busy loops overlap +0.6..+2.3%, always +2.1..+3.1% (3 runs). Before the agents
            # started at release + R (they started when told the circuits were live), always beside the
            # busy loops took +4.4..+5.6% (3 runs) and +5.3% failed this bound in CI.
            assert abs(err) < 0.05, (planner, pkt.time_s, flow.time_s)
            assert pkt.semantics == "dependency-driven" and pkt.bytes_delivered == pkt.bytes_sent
            assert not pkt.drops.get("dark") and sum(st.retransmissions or 0 for st in pkt.steps) == 0, pkt.drops
            assert check_run(pkt, f).ok
            reconf = [st for st in pkt.steps if st.action == "reconfigure"]
            assert len(reconf) == plan.reconfigurations and all(st.dark_window_measured_s >= r for st in reconf)
            got[planner] = (pkt, flow)
    pkt, _ = got["overlap"]
    for st in pkt.steps:
        if st.action == "reconfigure":  # its transfers moved, and arrived, while the other ports were dark
            ends = [t.end_s for t in pkt.transfers if t.step == st.index]
            assert max(ends) < st.start_s + r, (st.index, st.start_s, max(ends))
    assert got["overlap"][0].time_s < 0.85 * got["always"][0].time_s


def test_a_spectra_scenario_runs_on_packets_beside_the_flow_backend(run_dir):
    """Spectra (arXiv 2603.07373) on 2 parallel OCSes with real packets: ``ocslab compare`` on
    experiments/spectra_moe.yaml's Spectra run, an MoE layer's dispatch and combine on 8 GPUs,
    each step on its own schedule, step after step (delta = 100 us). The controller runs each
    OCS's slots on its own timeline; every transfer moves on whichever OCSes join its GPUs. Both
    steps deliver every byte, no more than 1% of frames die in a dark window, every slot ran and
    went dark for at least delta, the run is within 3% of the flow backend on the same guarded
    schedules, and the result records each step's planned makespan and lower bound."""
    import json

    import yaml

    data = yaml.safe_load((ROOT / "experiments" / "spectra_moe.yaml").read_text())
    data["runs"] = data["runs"][:1]
    path = run_dir / "spectra.yaml"
    path.write_text(yaml.safe_dump(data))
    out = run_dir / "cmp"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "compare", str(path), "--quiet-steps", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cmp = json.loads((out / "compare.json").read_text())["runs"][0]
    pkt = json.loads((out / "packet" / "result.json").read_text())["result"]["runs"][0]
    print(f"spectra scenario: packet {cmp['packet_s'] * 1e6:.1f} us, flow {cmp['flow_s'] * 1e6:.1f} us, "
          f"error {cmp['error']:+.2%}, slots {pkt['slots']}")
    # measured: -0.78% (2026-11-26); the function-level run of the dispatch alone gave +0.8..+1.6%
    # over 4 idle runs and 1 beside a busy loop
    assert abs(cmp["error"]) < 0.03, cmp
    assert pkt["drops"].get("dark", 0) <= 0.01 * pkt["drops"]["sent"], pkt["drops"]
    assert pkt["planner"] == "parallel-spectra" and [s["phase"] for s in pkt["steps"]] == ["dispatch", "combine"]
    assert pkt["bytes_delivered"] == pkt["bytes_sent"] > 0 and pkt["checks"]["ok"], pkt["checks"]
    slots = pkt["slots"]
    assert slots["slots_run"] == slots["slots_per_turn"] == 16
    assert 100e-6 <= slots["dark_window_measured_s"] < 110e-6
    assert len(slots["planned_makespan_s"]) == len(slots["lower_bound_s"]) == 2
    assert all(lb <= m for lb, m in zip(slots["lower_bound_s"], slots["planned_makespan_s"]))


def test_stragglar_on_packets_matches_the_flow_ratio_and_crossover(run_dir):
    """8 GPUs on an EPS, alpha 3 us, 450 GiB/s, 1 GiB. Post-barrier (the straggler
    2 x Phase A late) the packet Ring/StragglAR ratio is within 15% of the flow backend's; the
    crossover D implied by the runs at 0.5 x Phase A (D1 + StragglAR(D1) - Ring(D1), where the
    difference falls with slope -1) is within 25% of the flow prediction."""
    from emulation.flowsim import simulate
    from topologies import eps_star

    n, size, alpha = 8, 1 << 30, 3e-6
    gbps = 450 * 8 * 2**30 / 1e9
    f = eps_star(n, gbps)
    a = (n - 2) * alpha + (n - 2) / (n - 1) * size / f.port_bytes_per_s
    got: dict = {}
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=1 / 1024)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        for k in (2.0, 0.5):
            arr = [0.0] * n
            arr[-1] = k * a
            for alg in ("stragglar", "ring"):
                w = build(alg, n, size)
                plan = make_plan("none", f, w)
                pkt = run_workload(emu, alg, w, plan, scale, alpha, run_dir / f"{alg}-{k}", arrivals_s=arr)
                assert pkt.bytes_delivered == w.bytes_sent
                got[k, alg, "packet"] = pkt.time_s
                got[k, alg, "flow"] = simulate(f, w, plan, alpha_s=alpha, arrivals_s=arr).time_s
                # what a failure needs to be explained (a retransmission lengthens a run by an RTO)
                print(f"{alg} D={k:g}A: packet {pkt.time_s * 1e3:.3f} ms, flow {got[k, alg, 'flow'] * 1e3:.3f} ms, "
                      f"retransmissions {sum(s.retransmissions or 0 for s in pkt.steps)}, drops {pkt.drops}")
    ratio = {b: (got[2.0, "ring", b] - 2 * a) / (got[2.0, "stragglar", b] - 2 * a) for b in ("packet", "flow")}
    cross = {b: 0.5 * a + got[0.5, "stragglar", b] - got[0.5, "ring", b] for b in ("packet", "flow")}
    print(f"post-barrier Ring/StragglAR: packet {ratio['packet']:.3f}, flow {ratio['flow']:.3f}; "
          f"crossover D: packet {cross['packet'] * 1e3:.3f} ms, flow {cross['flow'] * 1e3:.3f} ms")
    assert ratio["flow"] == pytest.approx(1.36, rel=0.01)
    assert abs(ratio["packet"] - ratio["flow"]) / ratio["flow"] < 0.05  # measured -0.6..+1.2% (25 soak runs)
    assert cross["flow"] == pytest.approx(0.876e-3, rel=0.01)
    # a difference of two run times, so noisier: measured -12.9..+5.1% (25 soak runs, 2026-11)
    assert abs(cross["packet"] - cross["flow"]) / cross["flow"] < 0.25


def test_scenario_iterations_and_a_relabelled_straggler_run_on_packets(run_dir):
    """The runner repeats each run per iteration with that iteration's D; StragglAR moved to the
    scenario's straggler rank runs on the packet backend and its late rank starts at D. The
    results directory holds a space and a shell command: every path that reaches a shell (the
    controller's, the agents', their logs) is quoted or passed as an argument."""
    scen = run_dir / "it.yaml"
    scen.write_text("""
name: it
fabric: {topology: eps, gpus: 4, port_gbps: 400}
cost: {alpha_s: 5.0e-6}
sizes: [2MiB]
runs: [{name: stragglar, algorithm: stragglar}, {name: ring, algorithm: ring}]
straggler: {rank: 1, delay_s: 1.0e-4, jitter_s: 1.0e-4, seed: 3}
iterations: 2
emulation: {link_mbps: 10, byte_scale: 0.1, headroom: skip}
""")
    out = run_dir / "out dir; touch PWNED"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", str(scen), "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert not any(p.name == "PWNED" for d in (ROOT, run_dir, out) for p in d.iterdir())
    import json

    res = json.loads((out / "result.json").read_text())["result"]
    assert [(x["name"], x["iteration"]) for x in res["runs"]] == [
        ("stragglar", 0), ("stragglar", 1), ("ring", 0), ("ring", 1)]
    ds = [row[1] for row in res["arrivals_s"]]
    assert ds[0] != ds[1] and all(1e-4 <= d < 2e-4 for d in ds)
    for x in res["runs"]:
        assert x["checks"]["ok"], x["checks"]
        assert x["straggler_delay_s"] == ds[x["iteration"]]
        late = [t for t in x["transfers"] if t["src"] == 1]
        assert min(t["start_s"] for t in late) >= 0.95 * x["straggler_delay_s"]
        if x["name"] == "stragglar":  # rank 1 sits out Phase A
            phase_a = {s["index"] for s in x["steps"] if s["phase"] == "A"}
            assert phase_a and not [t for t in x["transfers"] if t["step"] in phase_a and 1 in (t["src"], t["dst"])]
    assert "per-iteration collective time" in r.stdout


def test_rotor_cycles_the_matchings_on_the_controller_clock(run_dir):
    """the controller's time-slotted mode cycles the round-robin matchings of K_8
    autonomously, logs every slot's planned and measured start, and leaves the last matching."""
    from emulation.fabric import assign_ports
    from emulation.workloads.matchings import round_robin_matchings

    f = ocs_star(8, 1, 400, 0.0, "empty")
    configs = [assign_ports(f, "ocs0", m) for m in round_robin_matchings(8)]
    slots, slot, dark = 30, 0.02, 0.002
    with EmulatedFabric(f, run_dir, link_mbps=10) as emu:
        since = len(emu.client.events())
        emu.client.start_rotor(configs, [slot] * len(configs), dark, slots)
        deadline = time.monotonic() + 30
        events: list[dict] = []
        while not any(e["kind"] == "rotor-done" for e in events):
            assert time.monotonic() < deadline, "the rotor did not finish"
            time.sleep(0.05)
            new = emu.client.events(since)
            since += len(new)
            events += new
        assert emu.client.circuits() == configs[(slots - 1) % len(configs)]
        assert _ping_ok(emu, *sorted(next(iter(round_robin_matchings(8)[(slots - 1) % 7]))))
    got = [e for e in events if e["kind"] == "rotor-slot"]
    assert [e["slot"] for e in got] == list(range(slots))
    assert [e["config"] for e in got] == [i % 7 for i in range(slots)]
    starts = [e["planned_start"] for e in got]
    assert np.allclose(np.diff(starts), slot + dark)  # one clock origin: no accumulated drift
    err = np.abs([e["start_error_s"] for e in got])
    print(f"rotor: |start error| median {np.median(err) * 1e3:.3f} ms, max {err.max() * 1e3:.3f} ms")
    assert all(e["t_live"] > e["t_dark"] for e in got)
    assert np.median(err) < 0.1 * slot  # median measured 0.09-0.58 ms (25 soak runs, 2026-11)


def test_moe_layer_on_the_rotor_matches_the_flow_model(run_dir):
    """an 8-GPU MoE layer (16 experts, top-2, CF 1.0, Zipf 1.2) on the time-slotted OCS
    driven by the controller's clock: agents send only inside their circuits' windows; the
    round-robin rotor and the duplex BvN plan agree with the flow backend within 15%, the plan is
    no later than the rotor (flow), and payload-efficient dispatch sends fewer bytes than padded."""
    from emulation.collective import runner
    from emulation.scenario import load_scenario, resolve

    sc = load_scenario(Path(__file__).resolve().parents[1] / "experiments" / "moe_ocs.yaml")
    runs = [r for r in sc.runs if r.algorithm == "payload"]
    sc = sc.model_copy(update={"runs": runs})
    flow = {r["name"]: r for r in runner.run(sc, "flow", run_dir / "flow").to_json()["result"]["runs"]}
    packet = {r["name"]: r for r in runner.run(sc, "packet", run_dir / "mn").to_json()["result"]["runs"]}
    for name, f in flow.items():
        p = packet[name]
        print(f"{name}: packet {p['time_s'] * 1e3:.3f} ms, flow {f['time_s'] * 1e3:.3f} ms, slot utilisation "
              f"{p['slots']['slot_utilisation']:.2f} / {f['slots']['slot_utilisation']:.2f}, retransmissions "
              f"{[s['retransmissions'] for s in p['steps']]}")
        assert p["checks"]["bytes_conserved"]
        assert abs(p["time_s"] / f["time_s"] - 1) < 0.05  # measured -0.19..+0.39% (25 soak runs, 2026-11)
        assert p["slots"]["slots_run"] >= p["slots"]["slots_per_turn"]  # the rotor really turned
    assert flow["plan-payload"]["time_s"] <= flow["rotor-payload"]["time_s"] * (1 + 1e-9)
    padded = next(r for r in load_scenario(Path(__file__).resolve().parents[1] / "experiments" / "moe_ocs.yaml").runs
                  if r.algorithm == "padded")
    pad = resolve(sc).resolve(padded, 0)
    assert flow["rotor-payload"]["bytes_sent"] < pad.workload.bytes_sent
    assert flow["rotor-payload"]["padding_bytes"] < pad.padding_bytes


def test_two_hop_forwarding_on_the_rotor_relays_through_agents_and_matches_the_flow_model(run_dir):
    """with per-GPU expert affinity the hot (src, dst) pairs outgrow a 300 us rotor slot;
    relaying their excess through intermediate GPUs' agents (store and forward, gated to the
    intermediate's own windows) finishes the layer sooner than sending direct, on real packets
    as in the flow model, and the two backends agree within 15%."""
    from emulation.collective import runner
    from emulation.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[1] / "experiments" / "moe_twohop.yaml")
    sc = sc.model_copy(update={"runs": [r for r in sc.runs if r.name in ("rotor-direct", "rotor-two-hop")]})
    flow = {r["name"]: r for r in runner.run(sc, "flow", run_dir / "flow").to_json()["result"]["runs"]}
    packet = {r["name"]: r for r in runner.run(sc, "packet", run_dir / "mn").to_json()["result"]["runs"]}
    for name, f in flow.items():
        p = packet[name]
        print(f"{name}: packet {p['time_s'] * 1e3:.3f} ms, flow {f['time_s'] * 1e3:.3f} ms, relayed "
              f"{p['slots']['relayed_bytes'] / 2**20:.1f} MiB, retransmissions {[s['retransmissions'] for s in p['steps']]}")
        assert p["checks"]["bytes_conserved"] and p["bytes_delivered"] == f["bytes_delivered"]
        # measured: direct -0.03..+3.5%, two-hop -0.04% (25 soak runs, 2026-11)
        assert abs(p["time_s"] / f["time_s"] - 1) < 0.10
    assert packet["rotor-two-hop"]["slots"]["relayed_bytes"] > 0
    assert packet["rotor-two-hop"]["time_s"] < 0.8 * packet["rotor-direct"]["time_s"]
