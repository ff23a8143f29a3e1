"""The command line's conventions: ``--version``, ``python -m emulation``, ``-v`` and ``-q``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from emulation import __version__
from emulation.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "experiments" / "demo.yaml"


def test_version_prints_the_package_version(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"ocslab {__version__}"


def test_python_m_emulation_is_the_same_command_line():
    out = subprocess.run([sys.executable, "-m", "emulation", "--version"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"ocslab {__version__}"
    bad = subprocess.run([sys.executable, "-m", "emulation", "run", str(DEMO), "--backend", "nope"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--backend" in bad.stderr and "Traceback" not in bad.stderr


def test_verbose_says_each_phase_and_quiet_says_nothing_on_stderr(tmp_path, capsys):
    assert main(["-v", "run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "v")]) == 0
    err = capsys.readouterr().err
    assert "ocslab: info: " in err and "a collective scenario" in err
    assert main(["-q", "run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "q")]) == 0
    got = capsys.readouterr()
    assert got.err == "" and got.out.startswith("results:") and "time (ms)" not in got.out, got.out  # no table
    assert main(["run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "q2"), "-q"]) == 0  # after the command
    got = capsys.readouterr()
    assert got.err == "" and got.out.startswith("results:") and "time (ms)" not in got.out, got.out
    assert main(["-vv", "run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "vv")]) == 0
    assert "ocslab: debug emulation.output: collective on flow: ring 25MiB" in capsys.readouterr().err
    main(["kinds"])  # back to the default level for the tests after this one


def test_a_long_job_off_a_terminal_prints_a_heartbeat_with_what_is_left(capsys):
    """stderr not a terminal (nohup, a notebook, a log): one line every HEARTBEAT_S with the
    job's state and an estimate of the time left; nothing for a job that ends sooner."""
    import time

    from emulation.output import _Heartbeat, progress_bar

    with progress_bar("collective on flow", 4) as progress:  # a quick job: silent
        progress("ring 25MiB", 1, 4)
    assert capsys.readouterr().err == ""
    with _Heartbeat("collective on flow", 4, every_s=0.05) as beat:
        beat.update("eps-payload 64MiB", 2, 4)
        time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert len(err) >= 2, err
    assert all(l.startswith("ocslab: progress: collective on flow: eps-payload 64MiB (2/4, ") and "s left)" in l for l in err), err



def test_ctrl_c_is_one_line_exit_130_and_keeps_the_runs_that_finished(tmp_path, capsys, monkeypatch):
    """Ctrl-C in the middle of a flow run (here raised in the third run's simulation): one line,
    exit 130, and ``result.json`` holds the two runs that finished, ``complete: false``; Ctrl-C
    while the scenario is loaded is the same one line."""
    import json

    import emulation.flowsim as flowsim
    from emulation import kinds

    real, calls = flowsim.execute, []

    def interrupted_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(flowsim, "execute", interrupted_third)
    out = tmp_path / "int"
    assert main(["run", str(DEMO), "--backend", "flow", "--out", str(out)]) == 130
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"ocslab: interrupted; what finished is in {out}/result.json (complete: false)"], lines
    d = json.loads((out / "result.json").read_text())
    assert d["complete"] is False and d["error"] == "interrupted"
    assert [(r["name"], r["bytes"]) for r in d["result"]["runs"]] == [("ring", 25 << 20), ("rhd-static", 25 << 20)]

    def interrupt_loading(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(kinds, "load", interrupt_loading)
    assert main(["run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "load")]) == 130
    assert capsys.readouterr().err.splitlines() == ["ocslab: interrupted"]
    assert not (tmp_path / "load").exists()


def test_a_refusal_loads_neither_scipy_nor_networkx():
    """A scenario file's refusal (every bad-input line) is answered before the solvers load:
    the command line and every kind import SciPy and networkx only where a run needs them
    (they were 0.4 of the 0.85 s a refusal took)."""
    probe = ("import sys\nfrom emulation.cli import main\n"
             "try:\n    code = main(['run', sys.argv[1]])\nexcept SystemExit as e:\n    code = e.code\n"
             "print(code, sorted(m for m in ('scipy', 'networkx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe, "/nonexistent/scenario.yaml"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split("\n")[-2:] == ["2 []", ""], (out.stdout, out.stderr)
    assert "cannot read" in out.stderr
