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
    assert got.err == "" and "results:" in got.out
    assert main(["-vv", "run", str(DEMO), "--backend", "flow", "--out", str(tmp_path / "vv")]) == 0
    assert "ocslab: debug emulation.output: collective on flow: ring 25MiB" in capsys.readouterr().err
    main(["kinds"])  # back to the default level for the tests after this one
