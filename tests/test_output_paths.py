"""Output paths: every command and script that writes refuses a place it cannot write in one line
(``--out PATH: cause``), exit status 2, no traceback, and leaves nothing it made behind: a file
where a directory should be (or in its path), /proc, a read-only file system, and a disk that
fills up while the results are written (a 64 KiB tmpfs mounted for the test). Flow backend
only: a packet command refuses its output path before it builds anything (checked in-process,
with the machine's claim replaced by a recorder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from emulation import cli
from emulation.torchjob.launch import torch_available

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"

#: The commands that write, with what they write into: ``(id, argv before the output flag, the
#: flag)``. ``{pkt}`` is a packet result of the demo (for ``compare``), ``{wan}`` a small WAN file.
COMMANDS = [
    ("run-collective", ["-m", "emulation.cli", "run", str(EXP / "demo.yaml"), "--backend", "flow"], "--out"),
    ("run-wan", ["-m", "emulation.cli", "run", "{wan}"], "--out"),
    ("run-rails", ["-m", "emulation.cli", "run", str(EXP / "rails_llama.yaml")], "--out"),
    ("run-tenancy", ["-m", "emulation.cli", "run", str(EXP / "tenancy_rack64.yaml")], "--out"),
    ("compare", ["-m", "emulation.cli", "compare", str(EXP / "demo.yaml"), "--packet-result", "{pkt}"], "--out"),
    ("train-training", ["-m", "emulation.cli", "train", str(EXP / "lumion.yaml")], "--out"),
    ("train-rails", ["-m", "emulation.cli", "train", str(EXP / "rails_torch.yaml")], "--out"),
    ("torch", ["-m", "emulation.cli", "torch", "allreduce-perf"], "--out"),
    ("fabric", ["-m", "emulation.cli", "fabric", str(EXP / "demo.yaml")], "-o"),
    ("up", ["-m", "emulation.cli", "up", str(EXP / "demo.yaml")], "--out"),
]
#: Every script that takes ``--out``, with the arguments it needs besides.
SCRIPTS = {
    "bench_packet_ceiling": [], "bench_rotor": [], "lab_app": [str(EXP / "lab.yaml")],
    "make_wan_data": ["abilene"], "reproduce_lumion": [], "reproduce_moe": [], "reproduce_morphlux": [],
    "reproduce_opus": [], "reproduce_pccl": [], "reproduce_shortcircuit": [], "reproduce_stragglar": [],
    "reproduce_spectra": [], "reproduce_swot": ["--no-packet"], "reproduce_symphony": [], "soak": ["--full", "1"],
}
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
#: ``ocslab train`` of a rails file asks for PyTorch before it looks at --out.
NEEDS_TORCH = {"train-rails": pytest.mark.skipif(not torch_available(), reason="PyTorch is not installed")}


def _params(cases: list[tuple]) -> list:
    return [pytest.param(c, id=c[0], marks=NEEDS_TORCH.get(c[0], ())) for c in cases]


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _one_line(r: subprocess.CompletedProcess, prefix: str, *needles: str) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, err[-1500:], r.stdout[-300:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(prefix), err
    for n in needles:
        assert n in err, (n, err)
    return err


def _tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.fixture
def tmpfs(tmp_path):
    """A mounter of small tmpfs file systems under ``tmp_path``: ``mount(name, size, ro)``; each
    is unmounted at teardown."""
    mounted: list[Path] = []

    def mount(name: str, size: str = "64k", ro: bool = False) -> Path:
        d = tmp_path / name
        d.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield mount
    for d in reversed(mounted):
        subprocess.run(["umount", str(d)], check=True)


def _fill(d: Path, leave: int) -> None:
    """Fill the tmpfs ``d`` but for about ``leave`` bytes."""
    free = os.statvfs(d).f_bavail * os.statvfs(d).f_frsize
    (d / "filler").write_bytes(b"\0" * (free - leave))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """``{wan}``: a WAN file of 2 matrices; ``{pkt}``: the demo's flow result relabelled packet."""
    import json

    d = tmp_path_factory.mktemp("inputs")
    wan = d / "wan.yaml"
    wan.write_text((EXP / "wan_b4.yaml").read_text().replace("scale: 0.8}", "scale: 0.8, count: 2}"))
    flow = d / "flow"
    r = _run(["-m", "emulation.cli", "run", str(EXP / "demo.yaml"), "--backend", "flow", "--out", str(flow)], ROOT)
    assert r.returncode == 0, r.stderr
    env = json.loads((flow / "result.json").read_text())
    env["backend"] = "packet"
    (d / "packet.json").write_text(json.dumps(env))
    return {"wan": str(wan), "pkt": str(d / "packet.json")}


def _argv(argv: list[str], inputs: dict) -> list[str]:
    return [a.format(**inputs) if "{" in a else a for a in argv]


def _places(tmp_path: Path, flag: str) -> list[tuple[str, Path, str]]:
    """``(name, path, what the line says)`` of the places nothing can be written to."""
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    places = [("proc", Path("/proc/ocslab-no/out"), "cannot write there: No such file or directory"),
              ("below-a-file", afile / "out", f"{afile} is a file, not a directory (in its path)")]
    if flag == "-o":  # an output file: a directory is what it cannot be
        (tmp_path / "adir").mkdir()
        places.append(("a-directory", tmp_path / "adir", "is a directory, not a file"))
    else:
        places.append(("a-file", afile, f"{afile} is a file, not a directory"))
    return places


@pytest.mark.parametrize("case", _params(COMMANDS))
def test_a_command_refuses_an_unwritable_output_path_in_one_line(tmp_path, inputs, case):
    _id, argv, flag = case
    work = tmp_path / "cwd"
    work.mkdir()
    for name, place, says in _places(tmp_path, flag):
        before = _tree(tmp_path)
        r = _run([*_argv(argv, inputs), flag, str(place)], work)
        _one_line(r, f"ocslab: {flag} {place}: ", says)
        assert _tree(tmp_path) == before, f"{name}: something was created"
        assert (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_script_refuses_an_unwritable_out_before_any_work(tmp_path, name):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    for place, says in ((afile / "out", f"{afile} is a file, not a directory (in its path)"),
                        (Path("/proc/ocslab-no/out"), "cannot write there: No such file or directory")):
        r = _run([str(ROOT / "scripts" / f"{name}.py"), *SCRIPTS[name], "--out", str(place)], tmp_path, timeout=120)
        _one_line(r, f"{name}: --out {place}: ", says)
    assert _tree(tmp_path) == ["afile"] and afile.read_text() == "mine\n"


@ROOT_ONLY
@pytest.mark.parametrize("case", _params(COMMANDS))
def test_a_command_refuses_a_read_only_file_system(tmpfs, inputs, case):
    _id, argv, flag = case
    ro = tmpfs("ro", ro=True)
    place = ro / ("out.json" if flag == "-o" else "out")
    r = _run([*_argv(argv, inputs), flag, str(place)], ro.parent)
    _one_line(r, f"ocslab: {flag} {place}: ", "Read-only file system")


#: The commands whose output is written after a run on the flow backend: the disk fills midway.
MIDWAY = [c for c in COMMANDS if c[0] in ("run-collective", "run-wan", "compare")]


@ROOT_ONLY
@pytest.mark.parametrize("case", _params(MIDWAY))
@pytest.mark.parametrize("existing", [False, True], ids=["new-dir", "empty-dir"])
def test_a_disk_that_fills_while_results_are_written_is_one_line_and_nothing_is_left(tmpfs, inputs, case, existing):
    _id, argv, flag = case
    full = tmpfs("full")
    out = full / "runs" / "x"
    if existing:
        out.mkdir(parents=True)
    _fill(full, 16 << 10)  # room for the probe and a little: the results (>100 KiB) do not fit
    before = _tree(full)
    r = _run([*_argv(argv, inputs), flag, str(out)], full.parent)
    _one_line(r, f"ocslab: {flag} {out}: No space left on device")
    assert _tree(full) == before  # the directory it made removed; an existing one emptied again


@ROOT_ONLY
def test_fabric_on_a_full_disk_leaves_the_old_file_whole(tmpfs):
    full = tmpfs("full")
    old = full / "fabric.json"
    old.write_text("{}\n")
    _fill(full, 8 << 10)  # a 1,024-GPU fabric is about 42 KiB
    r = _run(["-m", "emulation.cli", "fabric", str(EXP / "scale1024.yaml"), "-o", str(old)], full.parent)
    _one_line(r, f"ocslab: -o {old}: No space left on device")
    assert old.read_text() == "{}\n" and _tree(full) == ["fabric.json", "filler"]
    r = _run(["-m", "emulation.cli", "fabric", str(EXP / "scale1024.yaml"), "-o", str(full / "new" / "f.json")],
             full.parent)
    _one_line(r, f"ocslab: -o {full / 'new' / 'f.json'}: No space left on device")
    assert _tree(full) == ["fabric.json", "filler"]


@ROOT_ONLY
def test_a_script_on_a_full_disk_is_one_line_and_removes_what_it_made(tmpfs):
    full = tmpfs("full")
    out = full / "sc"
    _fill(full, 16 << 10)  # the CSV files fit, the plots do not
    r = _run([str(ROOT / "scripts" / "reproduce_shortcircuit.py"), "--gpus", "16", "--sizes", "4KiB", "1MiB",
              "--b-sizes", "1MiB", "--r-us", "1", "--out", str(out)], full.parent, timeout=120)
    _one_line(r, f"reproduce_shortcircuit: --out {out}: No space left on device")
    assert "n = 16" in r.stdout  # it had computed its tables when the disk ran out
    assert _tree(full) == ["filler"]


#: Packet commands, each with the output it refuses.
PACKET = [
    ["run", str(EXP / "demo.yaml"), "--backend", "packet"],
    ["run", str(EXP / "wan_abilene_packet.yaml")],
    ["run", str(EXP / "tenancy_packets.yaml")],
    ["train", str(EXP / "lumion.yaml")],
    ["train", str(EXP / "rails_torch.yaml")],
    ["compare", str(EXP / "demo.yaml")],
    ["torch", "allreduce-perf"],
    ["up", str(EXP / "demo.yaml")],
]


@pytest.mark.parametrize("argv", PACKET, ids=[" ".join(a[:2]).replace(str(EXP) + "/", "") for a in PACKET])
def test_a_packet_command_refuses_its_output_path_before_it_claims_the_machine(tmp_path, monkeypatch, capsys, argv):
    from emulation.emulator import net, wan_net

    claims = []

    def claim(run_dir):
        claims.append(run_dir)
        raise net.MachineBusy("test: the machine was claimed")

    monkeypatch.setattr(net, "claim_machine", claim)
    monkeypatch.setattr(wan_net, "claim_machine", claim)
    afile = tmp_path / "afile"
    afile.write_text("")
    assert cli.main([*argv, "--out", str(afile / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ocslab: --out {afile / 'out'}: {afile} is a file, not a directory (in its path)", err
    assert claims == [] and _tree(tmp_path) == ["afile"]


def test_write_error_names_the_output_for_its_own_files_and_for_a_full_disk_only(tmp_path):
    import errno

    from emulation.output import write_error

    out = Path("runs/x")
    assert write_error(OSError(errno.ENOSPC, "No space left on device"), out) == "--out runs/x: No space left on device"
    inside = FileNotFoundError(errno.ENOENT, "No such file or directory", os.path.abspath("runs/x/flow/a.json"))
    assert write_error(inside, out, "-o") == \
        f"-o runs/x: No such file or directory (writing {os.path.abspath('runs/x/flow/a.json')})"
    assert write_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "/etc/elsewhere"), out) is None
    assert write_error(OSError(errno.EINVAL, "Invalid argument"), out) is None  # not a storage fault: a bug
    assert write_error(ValueError("no"), out) is None and write_error(OSError(errno.ENOSPC, "x"), None) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root (CI runs as root)")
def test_a_torch_jobs_name_service_takes_a_results_directory_with_spaces_and_shell_characters():
    """The torch jobs' private /etc/hosts is bound from the results directory inside a shell
    script run as root: a directory named with a space and ``; touch PWNED`` is an argument of
    that script, never its text (the files are found, nothing else runs)."""
    from types import SimpleNamespace

    from emulation import dataplane as dpn
    from emulation.torchjob.launch import name_service

    d = ROOT / "runs" / "tests" / "name service; touch PWNED"
    if d.exists():
        shutil.rmtree(d)
    prefix = name_service(SimpleNamespace(fabric=SimpleNamespace(gpus=3)), d)
    r = subprocess.run([*prefix, "cat", "/etc/hosts", "/etc/resolv.conf"], capture_output=True, text=True, cwd=d,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert f"{dpn.gpu_ip(2)} {dpn.host_name(2)}" in r.stdout and "no name server" in r.stdout
    assert not any(p.name == "PWNED" for p in (*d.iterdir(), *d.parent.iterdir(), *ROOT.iterdir()))
    assert f"{dpn.host_name(2)}" not in Path("/etc/hosts").read_text()  # the machine's own file is untouched
