"""The packet backend's check that Mininet can start a host here (``mnexec``), before it claims
the machine: under a chroot whose root is not a mount point Mininet waited for a host's prompt
forever. A stand-in ``mnexec`` on the PATH plays each failure; the real one passes."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from emulation.emulator.net import mnexec_problem


def _fake(tmp_path: Path, body: str) -> None:
    path = tmp_path / "mnexec"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("body, says", [
    ('echo "remount: Invalid argument" >&2; exit 1', "cannot make a host's namespaces here (mnexec -n: remount: "
                                                     "Invalid argument)"),
    ('case "$1" in -cdnp) printf "\\0011234\\n"; exec sleep 5;; *) echo "setns: lost" >&2; exit 1;; esac',
     "cannot enter a host's namespaces here (mnexec -a: setns: lost)"),
])
def test_a_machine_where_mininet_cannot_start_a_host_is_named_in_one_line(tmp_path, monkeypatch, body, says):
    _fake(tmp_path, body)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    problem = mnexec_problem()
    assert problem is not None and says in problem and "\n" not in problem


@pytest.mark.skipif(shutil.which("mnexec") is None or os.geteuid() != 0, reason="needs Mininet's mnexec, as root")
def test_the_real_mnexec_starts_and_enters_a_host():
    assert mnexec_problem() is None
