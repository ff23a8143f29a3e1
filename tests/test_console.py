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
    from emulation.collective.console import SessionError, parse_matching, parse_time

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
    darks = [(float(a), float(b)) for a, b in re.findall(r"added; dark window requested ([\d.]+) us, measured "
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


def _session(out: Path, scen: Path, sigint_ignored: bool = False) -> subprocess.Popen:
    """``ocslab up`` on ``scen`` with a standard input kept open, once its prompt is up;
    ``sigint_ignored``: started with SIGINT ignored, as a shell without job control (a script,
    ``cmd &``) starts its children."""
    import signal
    import time

    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "up", str(scen), "--out", str(out)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=ignore)
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


class _Prompt:
    """A live ``ocslab up`` session (:func:`_session`) answering one command at a time."""

    def __init__(self, p: subprocess.Popen):
        self.p, self.fd = p, p.stdout.fileno()

    def read_to_prompt(self, timeout: float = 120) -> str:
        import select
        import time

        seen, deadline = "", time.monotonic() + timeout
        while not seen.endswith("ocslab> "):
            assert self.p.poll() is None, f"the session ended: {seen[-2000:]}"
            assert time.monotonic() < deadline, f"no prompt within {timeout} s: {seen[-2000:]}"
            if select.select([self.fd], [], [], 0.5)[0]:
                seen += os.read(self.fd, 65536).decode(errors="replace")
        return seen[: -len("ocslab> ")]

    def send(self, line: str) -> None:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def ask(self, line: str, timeout: float = 120) -> str:
        self.send(line)
        return self.read_to_prompt(timeout)


#: Commands a session cannot do, each with what its one line must say.
HOSTILE = [
    ("allreduce nonesuch 1MiB", "unknown allreduce algorithm 'nonesuch'"),
    ("allreduce ring 64GiB", "min of wall clock at this scale"),
    ("reconfigure matching 0-4,1-5", None),  # leaves GPUs 2, 3, 6, 7 without a circuit
    ("allreduce ring 1MiB", "allreduce ring 1MiB: no path from GPU"),
    ("reconfigure rotor 50us 1", None),  # the last matching: GPU 0 reaches only one GPU
    ("allreduce rhd 1MiB", "no path from GPU"),
    ("allreduce ring twelve", "SIZE: not a byte size"),
    ("allreduce ring 1MiB always extra", "allreduce ALGORITHM SIZE [PLANNER]"),
    ("allreduce ring 0", "SIZE: byte size must be positive"),
    ("reconfigure ring R=soon", "R: 'soon' is not a time"),
    ("reconfigure matching 0-99", "GPUs are 0..7"),
    ("reconfigure rotor 0us", "SLOT: must be longer than 0"),
    ("capture stop", "not capturing"),
    ("capture start nosuchport", None),
    ("iperf g0 g99", "no host 'g99'"),
    ("iperf g3 g3", "two different GPUs"),
    ("nonsense", "Unknown command"),
]


@pytest.mark.emulation
def test_hostile_commands_get_one_line_each_and_the_session_goes_on(run_dir):
    """``ocslab up`` fed every kind of command it cannot do (:data:`HOSTILE`: circuits that
    cannot carry a collective, an unknown algorithm, sizes that are not sizes or would run for
    ten minutes, bad times and GPU numbers, a capture on a port that does not exist, Mininet's
    own unknown command), then a collective interrupted with Ctrl-C half-way and a controller
    killed under it: each answers in one line, and the session goes on: a Ring AllReduce after
    them delivers every byte, iperf measures the link rate, and on exit nothing is left."""
    import signal
    import time

    from emulation.emulator.census import descendants
    from emulation_probes import agents_running

    scen = run_dir / "demo.yaml"
    scen.write_text((ROOT / "experiments" / "demo.yaml").read_text().replace("link_mbps: auto", "link_mbps: 10")
                    .replace("byte_scale: 0.1", "byte_scale: 0.1\n  headroom: skip"))
    before = census.take()
    p = _session(run_dir / "s", scen, sigint_ignored=True)
    s = _Prompt(p)
    try:
        answers = {}
        for line, want in HOSTILE:
            got = s.ask(line).strip()
            answers[line] = got
            print(f"ocslab> {line}\n{got}")
            assert len(got.splitlines()) == 1, (line, got)
            if want is not None:
                assert got.startswith("*** ") and want in got, (line, got)
        assert re.match(r"\d+ circuits removed, \d+ added; dark window requested 10.0 us",
                        answers["reconfigure matching 0-4,1-5"])
        assert answers["capture start nosuchport"].startswith("*** ")
        assert "removed, " in s.ask("reconfigure ring")
        ring = s.ask("allreduce ring 1MiB")
        assert re.search(r"│ ring\s+│\s+1MiB .* ok │", ring), ring
        # Ctrl-C half-way through a collective (about 8 s of wall clock): the collective stops,
        # the prompt stays, although the session was started with SIGINT ignored (as a script's
        # background job is: the console then ran every collective to its end, seen in CI). Its
        # start is read from its own files (its agents' schedules).
        s.send("allreduce ring 25MiB")
        t_sent = time.monotonic()
        while not list((run_dir / "s" / "emulation").glob("ring-25MiB-*/agent-g7.json")):
            assert time.monotonic() < t_sent + 60, "the collective's agents never started"
            time.sleep(0.05)
        time.sleep(1.0)
        t_int = time.monotonic()
        p.send_signal(signal.SIGINT)
        interrupted = s.read_to_prompt()
        print(f"ocslab> allreduce ring 25MiB ^C ({t_int - t_sent:.2f} s after the command, answered "
              f"{time.monotonic() - t_int:.2f} s later)\n{interrupted}")
        assert "Interrupt" in interrupted and "Traceback" not in interrupted, (
            f"SIGINT {t_int - t_sent:.2f} s after the command", interrupted)
        assert not agents_running()
        again = s.ask("allreduce ring 1MiB")
        assert re.search(r"│ ring\s+│\s+1MiB .* ok │", again), again
        iperf = s.ask("iperf g0 g1 2")
        print(f"ocslab> iperf g0 g1 2\n{iperf}")
        delivered = float(re.search(r"([\d.]+) Mbit/s delivered, emulated", iperf).group(1))
        assert re.search(r"g0's client wrote \d+ bytes over [\d.-]+ s \([\d.]+ Mbit/s\), g1 received \d+ bytes", iperf)
        assert re.search(r"g0 retransmitted \d+ segments, \d+ on a timeout", iperf), iperf
        # One TCP flow on a 10 Mbit/s link, measured where it is delivered: the server's bytes over
        # its connection's life (9.99-10.01 Mbit/s in 17 runs here). The client's figure counts the
        # bytes written into its socket (its per-second rows read 12.6-15.7 Mbit/s on this link) over
        # an interval that ends with iperf's own close handshake: 9.87-10.00 in 80 runs here, but
        # 7.04 and 7.05 in two CI runs with no segment retransmitted; it is printed, not judged.
        assert 8.0 < delivered <= 10.5, iperf
        # the controller killed under the session: every ocslab command says so in one line
        def argv(pid: int) -> list[bytes]:
            try:
                return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:  # a short-lived child (ovs-vsctl, ip) ended meanwhile
                return []

        ctl = [pid for pid in descendants(p.pid) if argv(pid)[1:3] == [b"-m", b"controllers"]]
        assert len(ctl) == 1, ctl
        os.kill(ctl[0], signal.SIGKILL)
        first = s.ask("circuits").strip()
        then = s.ask("reconfigure ring").strip()
        print(f"ocslab> circuits\n{first}\nocslab> reconfigure ring\n{then}")
        assert len(first.splitlines()) == 1 and "the controller exited with -9" in first and "controller.log" in first
        assert then == "*** the controller is not running: leave with exit"
        s.send("exit")
        text = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=120)
    assert p.returncode == 0, text[-2000:]
    session = json.loads((run_dir / "s" / "result.json").read_text())["result"]
    assert [r["bytes"] for r in session["runs"]] == [2**20, 2**20] and all(r["checks"]["ok"] for r in session["runs"])
    assert {k: v for k, v in census.take().diff(before).items() if k != "fds"} == {}
