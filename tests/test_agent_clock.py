"""The agents' control channel: each agent is handed its schedule and the offset of its clock as
it connects (emulation/emulator/agent.py, control protocol), a connection that is not an agent of
the run is refused in one line, and a run whose agents' clocks are known too loosely for its
shortest step stops."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from emulation.emulator.errors import EmulationError
from emulation.emulator.orchestrator import CLOCK_ERROR_FRACTION, CLOCK_ROUNDS, _Coordinator, check_clocks


def _fake_agent(path: str, rank: int, ahead_s: float, delay_s: float, got: dict) -> None:
    """An agent whose CLOCK_MONOTONIC runs ``ahead_s`` ahead, answering each clock question
    ``delay_s`` late (before reading its clock, as a slow channel would)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("r")
    s.sendall((json.dumps({"hello": rank}) + "\n").encode())
    while True:
        msg = json.loads(f.readline())
        if "sync" not in msg:
            break
        time.sleep(delay_s)
        s.sendall((json.dumps({"clock": time.monotonic() + ahead_s}) + "\n").encode())
    got[rank] = msg
    s.sendall((json.dumps({"listening": rank}) + "\n").encode())
    f.readline()  # until the coordinator closes


def test_each_agent_gets_its_schedule_and_its_clock_offset_within_half_a_round_trip(tmp_path):
    schedules = [{"rank": 0, "steps": []}, {"rank": 1, "steps": [{"send": []}]}]
    coord = _Coordinator(tmp_path / "ctl.sock", schedules)
    got: dict = {}
    agents = [threading.Thread(target=_fake_agent, args=(str(tmp_path / "ctl.sock"), r, ahead, delay, got), daemon=True)
              for r, ahead, delay in ((0, 1000.0, 0.0), (1, -250.5, 0.002))]
    for a in agents:
        a.start()
    try:
        coord.accept_all(10, lambda: None)
    finally:
        coord.close()
    for a in agents:
        a.join(5)
    assert [got[r]["schedule"] for r in (0, 1)] == schedules
    for r, ahead in ((0, 1000.0), (1, -250.5)):
        c = coord.clocks[r]
        assert got[r]["clock_offset_s"] == c["offset_s"]
        # the offset is right to within half the round trip it was measured in
        assert abs(c["offset_s"] - ahead) <= c["uncertainty_s"] + 1e-6, (r, c)
    # an answer 2 ms late makes every round trip at least 2 ms long: the uncertainty says so
    assert coord.clocks[1]["uncertainty_s"] >= 0.001
    assert CLOCK_ROUNDS >= 5


def _agent(tmp_path: Path) -> subprocess.Popen:
    """A real agent of rank 0, started in ``tmp_path`` on its control socket ``ctl.sock``."""
    return subprocess.Popen([sys.executable, "-m", "emulation.emulator.agent", "ctl.sock", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_real_agent_takes_its_schedule_and_its_clock_on_the_control_channel(tmp_path):
    with socket.socket() as s:  # a free port on loopback for its receiver
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sched = {"rank": 0, "ips": ["127.0.0.1"], "port": port, "alpha_s": 0.0, "steps": [{"send": [], "recv": []}]}
    coord = _Coordinator(tmp_path / "ctl.sock", [sched], measure={0})
    p = _agent(tmp_path)
    try:
        coord.accept_all(30, lambda: None)
        coord.broadcast({"connect": True})
        ready = coord.gather("ready", 30, lambda: None)
        coord.broadcast({"exit": True})
        assert p.wait(30) == 0, p.stdout.read()
    finally:
        coord.close()
        if p.poll() is None:
            p.kill()
        p.wait()
    assert ready[0]["ready"] == 0
    c = coord.clocks[0]  # one machine, one clock: the offset measured is 0 within its bound
    assert abs(c["offset_s"]) <= c["uncertainty_s"] + 1e-6 and c["uncertainty_s"] < 0.05, c


def test_an_agent_whose_control_channel_closes_before_its_schedule_exits_with_an_error(tmp_path):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(tmp_path / "ctl.sock"))
    srv.listen(1)
    p = _agent(tmp_path)
    try:
        srv.settimeout(30)
        conn, _ = srv.accept()
        assert json.loads(conn.makefile("r").readline()) == {"hello": 0}
        conn.close()  # refused, as a stranger would be
        out, _ = p.communicate(timeout=30)
    finally:
        srv.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1 and "agent of GPU 0: the control channel closed before the schedule came" in out, out


def test_a_connection_that_is_not_an_agent_of_the_run_is_refused_in_one_line_and_the_run_goes_on(tmp_path, caplog):
    path = str(tmp_path / "ctl.sock")
    coord = _Coordinator(tmp_path / "ctl.sock", [{"rank": 0, "steps": []}])
    strangers = []
    for first in (b"GET / HTTP/1.0\r\n\r\n", b'{"hello": 7}\n'):  # queued before the agent
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(first)
        strangers.append(s)
    got: dict = {}
    agent = threading.Thread(target=_fake_agent, args=(path, 0, 0.0, 0.0, got), daemon=True)
    agent.start()
    try:
        coord.accept_all(10, lambda: None)
        answers = [s.recv(100) for s in strangers]  # b"": closed without a word
    finally:
        coord.close()
        for s in strangers:
            s.close()
    agent.join(5)
    assert answers == [b"", b""] and got[0]["schedule"] == {"rank": 0, "steps": []}
    refusals = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert len(refusals) == 2 and "hello 7" in refusals[1], refusals


def test_a_run_whose_clocks_are_known_too_loosely_for_its_shortest_step_stops_naming_the_agent():
    clocks = {0: {"offset_s": 1000.0, "uncertainty_s": 20e-6}, 3: {"offset_s": 2000.0, "uncertainty_s": 0.004}}
    assert CLOCK_ERROR_FRACTION == 0.01
    check_clocks(clocks, 0.5)  # 4 ms is within 1% of a 500 ms step
    check_clocks({}, 0.001)
    with pytest.raises(EmulationError, match=r"GPU 3's agent is known to within 4 ms .* shortest step \(250 ms"):
        check_clocks(clocks, 0.25)
