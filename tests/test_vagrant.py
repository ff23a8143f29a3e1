"""The lab VMs' Vagrantfile: both machine definitions validate (``vagrant validate``, no
provider needed), and a broken copy does not. Skipped, with the reason, where vagrant is not
installed (``make test`` installs it on Debian)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _validate(where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "VAGRANT_DOTFILE_PATH": str(where / ".vagrant"), "VAGRANT_CHECKPOINT_DISABLE": "1"}
    return subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=where, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.skipif(shutil.which("vagrant") is None, reason="vagrant is not installed (make test installs it on Debian)")
def test_both_lab_machines_validate_and_a_broken_file_does_not(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(ROOT / "Vagrantfile", good / "Vagrantfile")
    r = _validate(good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "validated successfully" in r.stdout
    assert "ocslab:" in r.stdout and "ocslab-ryu:" in r.stdout  # both machines were read
    text = (ROOT / "Vagrantfile").read_text()
    assert "bento/ubuntu-24.04" in text and "bento/ubuntu-20.04" in text and "bash scripts/setup.sh" in text
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "Vagrantfile").write_text(text.replace("m.vm.box = box", ""))  # machines without a box
    r = _validate(bad)
    assert r.returncode != 0 and "box must be specified" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
