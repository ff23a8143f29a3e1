"""A fabric spread over servers with Mininet's cluster edition (emulation/emulator/cluster.py),
on two lab servers of this machine (emulation/emulator/server_lab.py: a namespace, its own sshd
and its own Open vSwitch each, reached over ssh with a key made for the lab).

The unit tests check the placement, the remote command wrapping and the refusals of bad input;
the emulation tests run real collectives through the cluster edition, take every server's
census before and after, and SIGKILL a run to check that ``ocslab clean`` empties every server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulation.emulator import census, server_lab
from emulation.emulator.sites import Site, remote_env
from emulation.poll import poll_until
from emulation_probes import agents_running

ROOT = Path(__file__).resolve().parents[1]
#: The test's own lab servers (a user's lab servers are left alone).
NAMES = ["ta", "tb"]


def _ocslab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


# ---- without packets ---------------------------------------------------------------------------

def test_gpus_and_nics_are_placed_in_blocks_and_the_ocs_on_the_first_server():
    pytest.importorskip("mininet.examples.cluster")
    from emulation.emulator.cluster import FabricPlacer

    hosts = [f"g{i}" for i in range(8)]
    placer = FabricPlacer(servers=["a", "b", "c"], hosts=hosts)
    assert [placer.place(h) for h in hosts] == ["a", "a", "a", "b", "b", "b", "c", "c"]
    assert [placer.place(f"ocl-n{i}") for i in range(8)] == ["a", "a", "a", "b", "b", "b", "c", "c"]
    assert placer.place("ocl-o0") == "a" and placer.place("ocl-e0") == "a"


def test_a_command_wrapped_for_a_server_runs_in_its_directory_with_its_environment(tmp_path):
    # what ssh hands the server's shell: the words joined by spaces, parsed again there
    line = shlex.join(remote_env(["sh", "-c", 'pwd; echo "$GREETING"; echo "$0"', "x y"], str(tmp_path),
                                 {"GREETING": "hello world"}))
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == [str(tmp_path.resolve()), "hello world", "x y"]


def test_a_local_site_runs_and_reads_here(tmp_path):
    f = tmp_path / "f"
    f.write_text("42")
    site = Site("localhost")
    assert site.run(["sh", "-c", "echo hi; exit 3"]).returncode == 3
    assert site.read([str(f), str(tmp_path / "missing")]) == {str(f): "42"}


@pytest.mark.parametrize("servers, words", [("[a, a]", "named twice"), ("['-oProxyCommand=x']", "not an ssh destination")])
def test_bad_servers_are_refused_in_one_line_with_exit_2(run_dir, servers, words):
    scen = run_dir / "s.yaml"
    scen.write_text(f"""
name: bad
fabric: {{topology: ocs-star, gpus: 4, ports_per_gpu: 1, port_gbps: 400, initial: ring}}
sizes: [1MiB]
runs: [{{name: ring, algorithm: ring}}]
emulation: {{servers: {servers}}}
""")
    r = _ocslab("run", str(scen), "--out", str(run_dir / "out"), "--backend", "flow")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "emulation.servers" in r.stderr and words in r.stderr
    assert not (run_dir / "out").exists()


def test_a_bad_lab_server_name_is_refused_before_anything_is_made():
    with pytest.raises(server_lab.LabError, match="not a server name"):
        server_lab.lab_up(["Bad_Name"])
    with pytest.raises(server_lab.LabError, match="twice"):
        server_lab.lab_up(["x1", "x1"])


@pytest.mark.emulation  # serial: clean takes the machine's emulation lock
@pytest.mark.skipif(os.geteuid() != 0, reason="/run/ocslab is root's")
def test_ocslab_clean_removes_the_forwarded_sockets_a_dead_run_left_and_keeps_a_live_runs():
    """The aliases of agents' control sockets (``ctl-PID-n.sock``) and the servers' forwarded
    ovs-vswitchd control sockets (``ovs-PID-n.sock``) in /run/ocslab are named by their run's pid."""
    from emulation.emulator import registry

    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    left = [registry.REGISTRY_DIR / f"{kind}-{dead.pid}-0.sock" for kind in ("ctl", "ovs")]
    live = registry.REGISTRY_DIR / f"ovs-{os.getpid()}-7.sock"
    try:
        for path in [*left, live]:
            path.write_text("")
        done = registry.clean()
        assert not any(path.exists() for path in left) and live.exists(), done
        assert {f"control socket alias {path.name}" for path in left} <= set(done)
    finally:
        for path in [*left, live]:
            path.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="ocslab servers needs root")
@pytest.mark.parametrize("args, words", [(["up"], "name at least one server"), (["down", "x"], "takes no names"),
                                         (["up", "Bad"], "not a server name")])
def test_ocslab_servers_refuses_bad_arguments_in_one_line(args, words):
    r = _ocslab("servers", *args, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr


# ---- on packets, through the cluster edition ---------------------------------------------------

@pytest.fixture(scope="module")
def lab():
    """The test's two lab servers, up for the module; ended after it (if it made them)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    made = [n for n in NAMES if n not in {s.name for s in server_lab.lab_servers()}]
    servers = server_lab.lab_up(NAMES)
    yield servers
    server_lab.lab_down(made)


def _server_census(name: str) -> dict[str, list[str]]:
    """The census of server ``name`` (its bridges, ports, interfaces, qdiscs and run processes),
    taken there over ssh."""
    site = Site(name, server_lab.ssh_config())
    try:
        # ocslab is elsewhere there (the server's own files): site.module runs it from its root
        r = subprocess.run(server_lab.ssh_args(name) + [shlex.join(site.module("emulation.emulator.census"))],
                           capture_output=True, text=True, timeout=60)
    finally:
        site.close()
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    return {k: c[k] for k in ("bridges", "ports", "interfaces", "qdiscs", "processes")}


def _censuses() -> dict[str, dict[str, list[str]]]:
    return {n: _server_census(n) for n in NAMES}


def _strays() -> dict[str, list[int]]:
    """Processes living in each test server's namespace besides its three daemons (sshd
    sessions, lock holders, shells): none once a run is gone."""
    out = {}
    for s in server_lab.lab_servers():
        if s.name in NAMES:
            daemons = {s.pid(d) for d in ("sshd", "ovsdb-server", "ovs-vswitchd")}
            out[s.name] = [(p, census._cmdline(p)) for p in sorted(set(server_lab.processes_in(s.netns)) - daemons)]
    return out


def _scenario(path: Path, sizes: str, runs: str, emulation: str) -> None:
    path.write_text(f"""
name: cluster
fabric: {{topology: ocs-star, gpus: 8, ports_per_gpu: 2, port_gbps: 400, reconfiguration_delay_s: 10.0e-6, initial: ring}}
cost: {{alpha_s: 5.0e-6}}
sizes: [{sizes}]
runs: [{runs}]
emulation: {{byte_scale: 0.1, servers: [{', '.join(NAMES)}], {emulation}}}
""")


def _ring_and_rhd(run_dir: Path, emulation: str) -> tuple[dict, dict, dict, dict, census.Census]:
    """Ring and RHD with circuits at 25 MiB on the test's servers, on packets (which must exit 0)
    and on the flow backend: ``(result, packet runs by name, flow times by name, the servers'
    censuses and this machine's before the run)``."""
    scen = run_dir / "cluster.yaml"
    _scenario(scen, "25MiB", "{name: ring, algorithm: ring, planner: none}, "
              "{name: rhd-circuits, algorithm: rhd, planner: always}", f"link_mbps: 10, headroom: warn{emulation}")
    before, here = _censuses(), census.take()
    r = _ocslab("run", str(scen), "--out", str(run_dir / "out"))
    print(r.stdout[-1500:])
    assert r.returncode == 0, r.stderr
    flow = _ocslab("run", str(scen), "--out", str(run_dir / "flow"), "--backend", "flow")
    assert flow.returncode == 0, flow.stderr
    res = json.loads((run_dir / "out" / "result.json").read_text())["result"]
    model = {x["name"]: x["time_s"] for x in json.loads((run_dir / "flow" / "result.json").read_text())["result"]["runs"]}
    return res, {x["name"]: x for x in res["runs"]}, model, before, here


@pytest.mark.emulation
def test_a_fabric_spread_over_two_servers_runs_like_the_flow_model_and_leaves_every_server_empty(run_dir, lab):
    res, runs, model, before, here = _ring_and_rhd(run_dir, "")
    assert res["servers"] == NAMES
    # the probe ran on both servers' links (their GPUs sent), each measured apart
    assert set(res["calibration"]["probes"][0]["servers"]) == set(NAMES)
    assert all(x["checks"]["ok"] for x in runs.values()), [x["checks"] for x in runs.values()]
    # every server's clock is its own (a time namespace, 1000 s x its address's last number ahead):
    # each agent's offset was measured over the control channel, to within half a round trip
    ahead = {server_lab.clock_offset_s(s) for s in lab}
    paths = sorted((run_dir / "out" / "emulation").glob("*/clocks.json"))
    assert {p.parent.name for p in paths} >= {"ring-25MiB", "rhd-circuits-25MiB"}, paths
    for path in paths:
        clocks = json.loads(path.read_text()).values()
        assert len(clocks) == 8 and {round(c["offset_s"]) for c in clocks} == ahead, (path, clocks)
        assert all(abs(c["offset_s"] - round(c["offset_s"])) <= c["uncertainty_s"] + 1e-6 for c in clocks), clocks
    for name, x in runs.items():
        # two lab servers, the demo at 25 MiB (2 runs, 2026-11-27): Ring +1.4%, RHD +1.0 to +2.4%,
        # RHD with circuits +2.6 to +3.7% off the flow backend; one machine: 0.5-4.9%
        assert abs(x["time_s"] / model[name] - 1) < 0.10, (name, x["time_s"], model[name])
    # the OCS on the first server reconfigured under the controller before every step, and each
    # dark window is R and what the controller spent: R counted from the flush of every server's
    # Open vSwitch after the removal, then the new circuits' barrier. Two lab servers sharing 2
    # cores, 65 reconfigurations in 13 runs at R = 40 ms emulated (2026-11-27): flush 1.0-8.2 ms,
    # barrier 1.2-4.1 ms, R held 40.1-40.3 ms; the total 42.7-50.5 ms (10.7-12.6 us real), so a
    # fixed bound on the total (it was R + 20% + 2 ms) failed once in 18 runs.
    # R is held from the flush, never less; the controller's sleep wakes a little after it. Woken
    # late (held - R), R = 76.3 ms (2026-11-28): 0.11-0.83 ms in 25 reconfigurations of 5 runs,
    # each run's median 0.15-0.19 ms; one fresh-clone CI run had one wake-up 2.3 ms late (a busy
    # 2-core VM), so the bound is on the run's median: counting R from anything later than the
    # flush (the routes, 2.9-7.5 ms after it) moves every wake-up, not one.
    dark = [s["dark_window_measured_s"] for s in runs["rhd-circuits"]["steps"] if s["action"] == "reconfigure"]
    # the run's own TDF: its byte scale may be raised above the scenario's (its steps' wall clock)
    tdf = res["scale"]["tdf"] * runs["rhd-circuits"]["byte_scale"] / res["scale"]["byte_scale"]
    assert len(dark) == 5 and all(d >= 10e-6 for d in dark), dark
    events = [json.loads(line) for line in (run_dir / "out" / "emulation" / "events.jsonl").read_text().splitlines()]
    done = [e for e in events if e["kind"] == "reconfigured" and e["changed"]][-5:]
    assert sorted(e["dark_window_measured_s"] / tdf for e in done) == pytest.approx(sorted(dark), rel=1e-9)
    R = 10e-6 * tdf
    late = sorted(e["t_install"] - e["t_dark_flushed"] - R for e in done)
    assert late[0] >= 0, done  # every port dark at least R after the flush
    assert late[2] <= 0.001, late  # the median wake-up within 1 ms of R after the flush
    for e in done:
        assert e["t_dark"] <= e["t_dark_flushed"] <= e["t_dark"] + 0.5 * R, e  # the flush: 1-8 ms
        assert e["t_live"] - e["t_install"] <= 0.5 * R, e  # the new circuits' barrier: 1-4 ms
    assert _censuses() == before
    assert census.take().diff(here) == {}
    assert poll_until(lambda: not any(_strays().values()), 5.0), _strays()


@pytest.mark.emulation
def test_an_ocs_sharded_over_two_servers_carries_crossing_circuits_through_lanes_like_the_flow_model(run_dir, lab):
    """``emulation.ocs: sharded``: one OCS bridge per server holding its GPUs' ports; a circuit
    between the servers runs through a lane (a tunnel of its own), removed and installed on both
    shards together, so both sides are dark for at least R."""
    res, runs, model, before, here = _ring_and_rhd(run_dir, ", ocs: sharded")
    assert res["servers"] == NAMES and res["ocs"] == "sharded"
    assert all(x["checks"]["ok"] for x in runs.values()), [x["checks"] for x in runs.values()]
    events = [json.loads(line) for line in (run_dir / "out" / "emulation" / "events.jsonl").read_text().splitlines()]
    shards = {e["name"] for e in events if e["kind"] == "switch-connected" and e["name"].startswith("ocl-o")}
    assert shards == {"ocl-o0", "ocl-o0s1"}, shards
    # RHD on 8 GPUs in blocks of 4: the step at distance 4 joins every GPU to one on the other
    # server (all 8 circuits cross), the steps at distance 1 and 2 none
    done = [e for e in events if e["kind"] == "reconfigured" and e["changed"]][-5:]
    assert [e["added_crossing"] for e in done] == [0, 0, 8, 0, 0], [(e["added"], e["added_crossing"]) for e in done]
    assert res["cross_server_circuits"]["crossing"] >= 8
    # both shards' barriers are waited for before R starts and before the circuits count as live
    dark = [s["dark_window_measured_s"] for s in runs["rhd-circuits"]["steps"] if s["action"] == "reconfigure"]
    tdf = res["scale"]["tdf"] * runs["rhd-circuits"]["byte_scale"] / res["scale"]["byte_scale"]
    assert len(dark) == 5 and all(d >= 10e-6 for d in dark), dark
    assert all(e["t_install"] - e["t_dark_flushed"] >= 10e-6 * tdf for e in done), done
    for name, x in runs.items():
        # the same bound as the central OCS's above (two lab servers, the demo sharded, 3 runs,
        # 2026-11-29: Ring +0.5 to +1.8%, RHD with circuits +0.9 to +2.1%; this test 5 runs, pass)
        assert abs(x["time_s"] / model[name] - 1) < 0.10, (name, x["time_s"], model[name])
    assert _censuses() == before  # both shards and every lane gone from both servers
    assert census.take().diff(here) == {}
    assert poll_until(lambda: not any(_strays().values()), 5.0), _strays()


@pytest.mark.emulation
def test_a_rate_one_server_cannot_carry_is_refused_naming_the_slowest_server(run_dir, lab):
    scen = run_dir / "fast.yaml"
    _scenario(scen, "1MiB", "{name: ring, algorithm: ring}", "link_mbps: 400")
    before = _censuses()
    r = _ocslab("run", str(scen), "--out", str(run_dir / "out"))
    assert r.returncode == 2, r.stdout + r.stderr
    line = [x for x in r.stderr.strip().splitlines() if not x.startswith("ocslab: progress: ")]  # heartbeats
    assert len(line) == 1 and "emulation.link_mbps: 400 Mbit/s" in line[0] and "slowest server" in line[0], line
    assert _censuses() == before


@pytest.mark.emulation
def test_doctor_reads_each_lab_server_over_ssh(lab):
    """``ocslab doctor --server``: each lab server's cores, memory and Open vSwitch, read there."""
    r = _ocslab("doctor", "--no-probe", "--server", *NAMES)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in NAMES:
        assert re.search(rf"^ +{name} cores: \d+$", r.stdout, re.M), r.stdout
        assert re.search(rf"^ +{name} Open vSwitch: \d+\.\d+\.\d+, answering$", r.stdout, re.M), r.stdout


@pytest.mark.emulation
def test_a_sigkilled_cluster_run_is_removed_from_every_server_by_ocslab_clean(run_dir, lab):
    scen = run_dir / "long.yaml"
    _scenario(scen, "256MiB", "{name: ring, algorithm: ring}", "link_mbps: 10, headroom: skip")
    before, here = _censuses(), census.take()
    out = run_dir / "out"
    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "run", str(scen), "--out", str(out)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = out / "emulation" / "ring-256MiB" / "agent-g7.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and agents_running()):
        assert p.poll() is None, "the run ended before its agents started"
        assert time.monotonic() < deadline, "the run did not reach its agents"
        time.sleep(0.1)
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)
    left = {n: c for n, c in _censuses().items() if c != before[n]}
    assert set(left) == set(NAMES), left  # both servers hold bridges of the killed run
    assert any(b.startswith("ocl-o") for b in left[NAMES[0]]["bridges"])  # the OCS on the first

    cleaned = _ocslab("clean")
    print(cleaned.stdout)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"removed server {NAMES[0]}: bridge ocl-o0" in cleaned.stdout
    assert f"removed server {NAMES[1]}: bridge ocl-n7" in cleaned.stdout
    assert _censuses() == before
    assert census.take().diff(here) == {}
    assert poll_until(lambda: not any(_strays().values()), 5.0), _strays()
    assert _ocslab("clean").stdout.strip() == "clean: nothing of ocslab's was left behind"


@pytest.mark.emulation
def test_a_server_lock_is_held_for_the_life_of_the_runs_ssh_connection(lab, monkeypatch):
    """Each server's run lock (the abstract socket of its network namespace) is held by a process
    there for as long as the run's ssh connection lasts: a second holder is refused, and the lock
    is free again once the first connection closes."""
    monkeypatch.setenv("OCSLAB_RUN", "test-lock-1")
    first, second, other = (Site(n, server_lab.ssh_config()) for n in (NAMES[0], NAMES[0], NAMES[1]))
    try:
        assert first.hold_lock() is None
        refused = second.hold_lock()
        assert refused is not None and "another ocslab emulation holds it" in refused and NAMES[0] in refused
        assert other.hold_lock() is None  # the other server is free
        first.release_lock()
        assert second.hold_lock() is None
    finally:
        for site in (first, second, other):
            site.close()
    from emulation.emulator.registry import marked_processes

    left = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p, r in marked_processes().items() if r == "test-lock-1"}
    assert not left, left  # holders and ssh connections all ended
