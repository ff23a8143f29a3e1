"""``ocslab up``: a scenario's fabric at Mininet's prompt with ocslab's commands, driven through
its standard input as a user would type them; the arguments its commands parse."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.emulator import census

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, stdin: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_console_arguments_parse_or_say_what_is_wrong():
    from emulation.console import SessionError, parse_matching, parse_time

    assert parse_time("10us", "R") == pytest.approx(10e-6) and parse_time("2.5ms", "R") == pytest.approx(2.5e-3)
    assert parse_time("0.5", "R") == 0.5 and parse_time("20µs", "R") == pytest.approx(20e-6)
    for bad in ("fast", "-1us", "10 parsecs", ""):
        with pytest.raises(SessionError, match="R: .* is not a time"):
            parse_time(bad, "R")
    assert parse_matching("0-4, g1-g5,2-6", 8) == [(0, 4), (1, 5), (2, 6)]
    with pytest.raises(SessionError, match="GPUs are 0..7"):
        parse_matching("0-8", 8)
    with pytest.raises(SessionError, match="not a GPU pair"):
        parse_matching("0:4", 8)


def test_up_refuses_a_fabric_without_an_ocs_in_one_line(tmp_path):
    path = tmp_path / "static.yaml"
    path.write_text((ROOT / "experiments" / "demo.yaml").read_text()
                    .replace("topology: ocs-star", "topology: ring").replace("  ports_per_gpu: 2\n", "")
                    .replace("  reconfiguration_delay_s: 10.0e-6   # R\n", "").replace("  initial: ring", "")
                    .replace("rhd-circuits, algorithm: rhd, planner: always", "rhd-circuits, algorithm: rhd"))
    r = _cli("up", str(path), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "has no OCS" in r.stderr and not (tmp_path / "out").exists()


#: What the test types at the prompt.
SESSION = """pingall
circuits
reconfigure matching 0-4,1-5,2-6,3-7
circuits
reconfigure ring
reconfigure nonsense
allreduce ring 25MiB
exit
"""


@pytest.mark.emulation
def test_a_scripted_session_pings_reconfigures_runs_a_ring_like_ocslab_run_and_leaves_nothing(run_dir):
    """``ocslab up experiments/demo.yaml`` with the session above on its standard input: every
    pair of GPUs pings (0% loss), the circuits are the ring's and then the matching's, each
    reconfiguration's dark window is measured and at least R, a bad command is one error line,
    and the Ring AllReduce takes what ``ocslab run`` measures for it (within 5%); on ``exit``
    nothing of the session is left on the machine."""
    before = census.take()
    out = run_dir / "session"
    r = _cli("up", "experiments/demo.yaml", "--out", str(out), stdin=SESSION)
    text = r.stdout + r.stderr
    print(text[-4000:])
    assert r.returncode == 0, text[-3000:]
    assert "Results: 0% dropped (56/56 received)" in text
    listings = re.findall(r"ocs0: (\d+) circuits joining (\d+) GPU pairs: ([0-9x -]+)", text)
    assert listings[0][:2] == ("8", "8") and "0-1 0-7 1-2" in listings[0][2]  # the demo's ring
    assert listings[1] == ("8", "4", "0-4x2 1-5x2 2-6x2 3-7x2")  # every port of a GPU on its partner
    darks = [(float(a), float(b)) for a, b in re.findall(r"rewired; dark window requested ([\d.]+) us, measured "
                                                         r"([\d.]+) us", text)]
    assert len(darks) == 2 and all(req == 10.0 and req <= meas < 3 * req for req, meas in darks), darks
    assert "*** reconfigure: ring | torus | empty | matching" in text  # the bad command: one line, session goes on
    session = json.loads((out / "result.json").read_text())["result"]
    (ring,) = session["runs"]
    assert ring["name"] == "ring" and ring["bytes"] == 25 * 2**20 and ring["checks"]["ok"]
    assert census.take().diff(before) == {}

    # the same collective under ocslab run, on the same machine
    scen = run_dir / "ring.yaml"
    scen.write_text((ROOT / "experiments" / "demo.yaml").read_text().replace("sizes: [25MiB, 1MiB]", "sizes: [25MiB]")
                    .replace("  - {name: rhd-static, algorithm: rhd, planner: none}\n", "")
                    .replace("  - {name: rhd-circuits, algorithm: rhd, planner: always}\n", ""))
    ran = _cli("run", str(scen), "--out", str(run_dir / "run"))
    assert ran.returncode == 0, ran.stderr[-2000:]
    (ref,) = json.loads((run_dir / "run" / "result.json").read_text())["result"]["runs"]
    print(f"ring 25MiB: ocslab up {ring['time_s'] * 1e3:.3f} ms, ocslab run {ref['time_s'] * 1e3:.3f} ms "
          f"({ring['time_s'] / ref['time_s'] - 1:+.1%})")
    assert abs(ring["time_s"] / ref["time_s"] - 1) < 0.05


def _session(out: Path, scen: Path) -> subprocess.Popen:
    """``ocslab up`` on ``scen`` with a standard input kept open, once its prompt is up."""
    import time

    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "up", str(scen), "--out", str(out)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    seen = ""
    while "ocslab> " not in seen:
        assert p.poll() is None and time.monotonic() < deadline, seen
        seen += os.read(p.stdout.fileno(), 4096).decode(errors="replace")
    return p


@pytest.mark.emulation
def test_a_session_ends_cleanly_on_sigterm_and_after_a_sigkill_ocslab_clean_removes_it(run_dir):
    """SIGTERM at the prompt tears the fabric down (exit 130, nothing left); a SIGKILLed session
    holds the run lock like a run: the next one is refused naming ``ocslab clean``, which removes
    what it left."""
    import signal

    scen = run_dir / "demo.yaml"
    scen.write_text((ROOT / "experiments" / "demo.yaml").read_text().replace("link_mbps: auto", "link_mbps: 10")
                    .replace("byte_scale: 0.1", "byte_scale: 0.1\n  headroom: skip"))
    def left() -> dict:  # the sessions are other processes: this one's descriptors are not theirs
        return {k: v for k, v in census.take().diff(before).items() if k != "fds"}

    before = census.take()
    p = _session(run_dir / "term", scen)
    p.send_signal(signal.SIGTERM)
    text = p.communicate(timeout=120)[0]
    assert p.returncode == 130, text[-2000:]
    assert left() == {}

    p = _session(run_dir / "kill", scen)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)
    p.stdin.close()
    p.stdout.close()
    assert "bridges" in left()
    again = _cli("up", str(scen), "--out", str(run_dir / "again"), stdin="exit\n", timeout=120)
    assert again.returncode == 2 and "ocslab clean" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    cleaned = _cli("clean", timeout=120)
    assert cleaned.returncode == 0 and "removed bridge ocl-o0" in cleaned.stdout, cleaned.stdout + cleaned.stderr
    assert left() == {}
