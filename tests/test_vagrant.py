"""The lab VMs: both machine definitions of the Vagrantfile validate (``vagrant validate``, no
provider needed; skipped, with the reason, where vagrant is not installed: ``make test`` installs
it on Debian), and a broken copy does not. Their provisioning (``scripts/vagrant-provision.sh``),
run against a copy of the checkout holding a host's unusable ``.venv``, makes the machine's own
environments outside the checkout and leaves the host's alone; the set-up, the Makefile and the
Ryu look-up follow ``OCSLAB_VENV``; and the scripts keep LF line endings on a Windows host."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
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
    assert "bento/ubuntu-24.04" in text and "bento/ubuntu-20.04" in text
    assert "bash /home/vagrant/ocslab/scripts/vagrant-provision.sh #{name}" in text
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "Vagrantfile").write_text(text.replace("m.vm.box = box", ""))  # machines without a box
    r = _validate(bad)
    assert r.returncode != 0 and "box must be specified" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


# --- Provisioning (scripts/vagrant-provision.sh): the VM's environments are its own ---------------

HOST_PYTHON = "/opt/host-python/3.12.4/bin/python3.12"  # the host's interpreter: absent here
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".venv-ryu", "runs", "__pycache__", "*.egg-info",
                                     ".pytest_cache", ".vagrant", "_build")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="scripts/setup.sh runs as root (it installs Debian packages)")


def _checkout_with_a_host_venv(tmp_path: Path) -> Path:
    """A copy of the checkout holding the .venv and .venv-ryu a host made: their scripts' shebangs
    name the host's interpreters, which do not exist here, and their set-up stamps say done."""
    checkout = tmp_path / "ocslab"
    shutil.copytree(ROOT, checkout, ignore=COPY_IGNORE)
    for venv, python in ((".venv", HOST_PYTHON), (".venv-ryu", "/opt/host-python/3.9.18/bin/python3.9")):
        bin_ = checkout / venv / "bin"
        bin_.mkdir(parents=True)
        (checkout / venv / "pyvenv.cfg").write_text(
            f"home = {Path(python).parent}\ninclude-system-site-packages = true\n")
        shebang = f"#!/home/host/ocslab/{venv}/bin/python\n"
        scripts = {"python": f"#!{python}\n", "ocslab": shebang + "from emulation.cli import main\nmain()\n",
                   "ryu-manager": shebang + "from ryu.cmd.manager import main\nmain()\n"}
        for name, text in scripts.items():
            (bin_ / name).write_text(text)
            (bin_ / name).chmod(0o755)
        (checkout / venv / ".ocslab-installed").touch()  # newer than pyproject.toml: "installed"
    return checkout


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every file and link under ``root``: mode, size, mtime (ns), and content or link target."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        body = os.readlink(p) if p.is_symlink() else (p.read_bytes() if p.is_file() else None)
        out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, body)
    return out


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points Python at an environment (the
    tests may run with PYTHONPATH set to the repository)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OCSLAB_VENV", "OCSLAB_RYU_VENV", "OCSLAB_EXTRAS", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {**env, **extra}


def _provision(checkout: Path, machine: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(checkout / "scripts" / "vagrant-provision.sh"), machine], cwd=checkout.parent,
                       capture_output=True, text=True, timeout=600, env=env)
    return r, time.monotonic() - t0


@needs_root
@pytest.mark.long
def test_provisioning_makes_the_vms_own_environments_and_leaves_the_hosts_venv_alone(tmp_path, request):
    checkout = _checkout_with_a_host_venv(tmp_path)
    host = {v: _snapshot(checkout / v) for v in (".venv", ".venv-ryu")}
    top = {p.name for p in checkout.iterdir()}
    with pytest.raises(OSError):  # the host's venv does not run here: using it would fail
        subprocess.run([str(checkout / ".venv" / "bin" / "ocslab"), "--version"], capture_output=True, timeout=30)

    venvs, sysroot = tmp_path / "venvs", tmp_path / "sysroot"
    request.addfinalizer(lambda: shutil.rmtree(venvs, ignore_errors=True))  # about 850 MB with Ryu
    env = _clean_env(OCSLAB_VENVS=str(venvs), OCSLAB_PROVISION_ROOT=str(sysroot), OCSLAB_PROVISION_SMOKE="0")
    r, first_s = _provision(checkout, "ocslab-ryu", env)  # the machine's own extras: ryu
    print(f"first provisioning: {first_s:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    venv, ryu = venvs / "ocslab-ryu" / "venv", venvs / "ocslab-ryu" / "venv-ryu"

    # The environment is outside the checkout, runs ocslab from the checkout, and finds its Ryu
    # environment by itself (no OCSLAB_RYU_VENV: sudo drops it).
    probe = ("import emulation, json, sys; from emulation.emulator.net import RYU_VENV, ryu_unavailable; "
             "print(json.dumps([emulation.__file__, sys.prefix, str(RYU_VENV), ryu_unavailable()]))")
    p = subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=_clean_env())
    assert p.returncode == 0, p.stderr
    module, prefix, ryu_found, why = json.loads(p.stdout)
    assert Path(module) == checkout / "emulation" / "__init__.py"
    assert Path(prefix) == venv and not Path(prefix).is_relative_to(checkout)
    assert Path(ryu_found) == ryu
    version = "ocslab " + re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    for exe in (venv / "bin" / "ocslab", sysroot / "usr" / "local" / "bin" / "ocslab"):
        v = subprocess.run([str(exe), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           env=_clean_env())
        assert (v.returncode, v.stdout.strip()) == (0, version), v.stderr
    # The Ryu environment was made there too, or says there why not (no Python 3.9 on the machine).
    print(f"Ryu environment: {'made' if why is None else why}")
    if why is None:
        assert (ryu / ".ocslab-installed").exists() and (ryu / "bin" / "ryu-manager").exists()
    else:
        assert (ryu / "UNAVAILABLE").read_text().strip() == why and "Python 3.9" in why

    # Login shells and sudo get the same paths.
    sh = subprocess.run(["bash", "-c", f". {sysroot}/etc/profile.d/ocslab.sh; echo $OCSLAB_VENV $OCSLAB_RYU_VENV"],
                        capture_output=True, text=True, timeout=30, env=_clean_env())
    assert sh.stdout.split() == [str(venv), str(ryu)]
    sudoers = sysroot / "etc" / "sudoers.d" / "ocslab"
    assert sudoers.read_text() == 'Defaults env_keep += "OCSLAB_VENV OCSLAB_RYU_VENV"\n'
    assert sudoers.stat().st_mode & 0o777 == 0o440

    # The host's environments were neither used nor modified; the checkout only gained the
    # editable install's metadata.
    assert {v: _snapshot(checkout / v) for v in (".venv", ".venv-ryu")} == host
    assert {p.name for p in checkout.iterdir()} - top <= {"ocslab.egg-info"}

    # Idempotent: a second run installs nothing and leaves the environment as it was.
    stamp = (venv / ".ocslab-installed").stat().st_mtime_ns
    python = (venv / "bin" / "python").lstat().st_ino
    r, second_s = _provision(checkout, "ocslab-ryu", env)
    print(f"second provisioning: {second_s:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "installing" not in r.stdout + r.stderr
    assert (venv / ".ocslab-installed").stat().st_mtime_ns == stamp
    assert (venv / "bin" / "python").lstat().st_ino == python
    assert {v: _snapshot(checkout / v) for v in (".venv", ".venv-ryu")} == host


@needs_root
def test_setup_refuses_a_venv_made_elsewhere_and_provisioning_refuses_bad_input(tmp_path):
    checkout = _checkout_with_a_host_venv(tmp_path)
    host = _snapshot(checkout / ".venv")
    # Without OCSLAB_VENV, set-up stops at the host's .venv in one line instead of trusting its stamp.
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=checkout, capture_output=True, text=True, timeout=300,
                       env=_clean_env())
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        "setup: .venv/bin/python does not run on this machine (a virtual environment made on another one?): "
        "remove .venv, or set OCSLAB_VENV to a path of this machine"]
    assert _snapshot(checkout / ".venv") == host
    # Bad input to the provisioning: one line naming what is wrong, exit 2, nothing created.
    venvs = tmp_path / "venvs"
    cases = (("ocslab-nope", str(venvs), "MACHINE must be ocslab or ocslab-ryu, not 'ocslab-nope'"),
             ("ocslab", "venvs", "OCSLAB_VENVS must be an absolute path, not 'venvs'"),
             ("ocslab", str(checkout / "venvs"), "is inside the checkout shared with the host"))
    for machine, venvs_path, wrong in cases:
        r, _ = _provision(checkout, machine,
                          _clean_env(OCSLAB_VENVS=venvs_path, OCSLAB_PROVISION_ROOT=str(tmp_path / "sysroot")))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and wrong in r.stderr, r.stderr
        assert not venvs.exists() and not (checkout / "venvs").exists() and not (tmp_path / "sysroot").exists()


def test_the_ryu_environment_is_found_from_the_variable_the_running_venv_or_the_checkout(tmp_path):
    from emulation.emulator.net import ryu_venv

    root = ROOT.resolve()
    assert ryu_venv({"OCSLAB_RYU_VENV": "/srv/r"}, "/srv/v", "/usr") == Path("/srv/r")
    assert ryu_venv({"OCSLAB_RYU_VENV": "envs/r"}, "/srv/v", "/usr") == root / "envs" / "r"
    vm = "/home/vagrant/venvs/ocslab-ryu/venv"
    assert ryu_venv({}, vm, "/usr") == Path(vm + "-ryu")
    assert ryu_venv({}, str(root / ".venv"), "/usr") == root / ".venv-ryu"  # today's default
    assert ryu_venv({}, "/usr", "/usr") == root / ".venv-ryu"  # not in a virtual environment


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed (scripts/setup.sh installs it)")
def test_the_makefile_runs_the_venv_in_ocslab_venv_and_dot_venv_without_it():
    def dry(*args: str, **env: str) -> list[str]:
        r = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env=_clean_env(**env))
        assert r.returncode == 0, r.stderr
        return [line for line in r.stdout.splitlines() if "/bin/" in line]

    assert dry("demo", "test") == [".venv/bin/ocslab run experiments/demo.yaml",
                                   '.venv/bin/python -m pytest -q -n auto -m "not emulation" --dist worksteal --durations=10 tests  || a=$?; \\',
                                   ".venv/bin/python -m pytest -q -m emulation --durations=10 tests  || b=$?; \\"]
    assert dry("demo", OCSLAB_VENV="/home/vagrant/venvs/ocslab/venv") == [
        "/home/vagrant/venvs/ocslab/venv/bin/ocslab run experiments/demo.yaml"]
    assert dry("demo", "OCSLAB_VENV=/srv/v") == ["/srv/v/bin/ocslab run experiments/demo.yaml"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_scripts_keep_lf_line_endings_on_a_windows_style_checkout(tmp_path):
    """Every file with a #! line, the Makefile and the Vagrantfile are checked out with LF even
    with core.autocrlf=true (a Windows host), and an ordinary text file is not (the check works)."""
    names = {"Makefile", "Vagrantfile"}
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not COPY_IGNORE(d, [x])]
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                if fh.read(2) == b"#!":
                    names.add(os.path.relpath(os.path.join(d, f), ROOT))
    names = sorted(names)
    assert {"scripts/setup.sh", "scripts/vagrant-provision.sh", ".ci/run"} <= set(names)
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "core.autocrlf=true", "-c", "core.safecrlf=false",
           "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    for name in [*names, ".gitattributes", "README.md"]:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    subprocess.run([*git, "add", "-A"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True, timeout=60)
    for name in [*names, "README.md"]:
        (repo / name).unlink()
    subprocess.run([*git, "checkout", "-q", "--", "."], check=True, timeout=60)
    crlf = [n for n in names if b"\r\n" in (repo / n).read_bytes()]
    assert crlf == [], f"checked out with CRLF on a Windows host: {crlf}"
    assert b"\r\n" in (repo / "README.md").read_bytes()  # autocrlf applies to what .gitattributes leaves
