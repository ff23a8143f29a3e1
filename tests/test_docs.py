"""The documentation: the site builds with warnings as errors, its references list every field of
every kind, and every command line in README.md and docs/ parses against the real parsers."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from emulation import kinds
from emulation.cli import parser as ocslab_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")


def _fenced_lines(text: str) -> list[str]:
    """Lines of the shell code blocks (```sh, ```console, ``` without a language), with
    backslash continuations joined."""
    out, lang, buf = [], None, ""
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if m:
            lang = None if lang is not None else (m.group(1) or "text")
            continue
        if lang in ("sh", "bash", "console", "shell"):
            if line.rstrip().endswith("\\"):
                buf += line.rstrip()[:-1] + " "
                continue
            out.append(buf + line)
            buf = ""
    return out


def _commands(line: str) -> list[list[str]]:
    """The ocslab and script invocations of one shell line: prompts, ``sudo``, ``.venv/bin/``,
    environment assignments and comments dropped; ``&&`` and ``;`` split."""
    line = re.sub(r"(^|\s)#.*$", "", line.strip().removeprefix("$ "))
    found = []
    for part in re.split(r"&&|;|\|\||\|", line):
        part = re.split(r"\s\d?>", part)[0]  # a redirection ends the command
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        while words and (words[0] in ("sudo", "time", "timeout") or "=" in words[0] or words[0].isdigit()):
            words = words[1:]
        if not words:
            continue
        exe = words[0].removeprefix(".venv/bin/")
        if exe == "ocslab":
            found.append(["ocslab", *words[1:]])
        elif exe in ("python", "python3") and words[1:3] == ["-m", "emulation"]:
            found.append(["ocslab", *words[3:]])
        elif exe in ("python", "python3") and len(words) > 1 and words[1].startswith("scripts/") \
                and words[1].endswith(".py"):
            found.append([words[1], *words[2:]])
        elif exe.startswith("scripts/") and exe.endswith(".py"):
            found.append([exe, *words[1:]])
    return found


def _inline(text: str) -> list[list[str]]:
    """``ocslab ...`` inline code spans outside code blocks (fragments: flags are checked, not
    positionals)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for span in re.findall(r"`([^`\n]+)`", prose):
        s = span.strip().removeprefix(".venv/bin/")
        if s.startswith("ocslab ") or re.match(r"(python3? )?scripts/\w+\.py( |$)", s):
            out += _commands(s)
    return out


def _script_parser(path: str) -> argparse.ArgumentParser:
    spec = importlib.util.spec_from_file_location(f"_doc_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hasattr(module, "parser"), f"{path}: no parser() to check its documented flags against"
    return module.parser()


def _subparser(p: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The deepest subparser named by ``words`` and the words after its name."""
    while True:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not words or words[0] not in subs[0].choices:
            return p, words
        p, words = subs[0].choices[words[0]], words[1:]


def _flags(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


class _Refused(Exception):
    pass


def _parse(p: argparse.ArgumentParser, words: list[str]) -> None:
    def error(message):
        raise _Refused(message)

    for q in [p] + [c for a in p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices.values()]:
        q.error = error
        q.exit = lambda status=0, message=None: None
    p.parse_args(words)


def _check(cmd: list[str], whole: bool) -> str | None:
    """None if ``cmd`` parses (``whole``) or names only existing flags; else why not."""
    if cmd[0] != "ocslab" and not (ROOT / cmd[0]).exists():
        return "no such script"
    p = ocslab_parser() if cmd[0] == "ocslab" else _script_parser(cmd[0])
    words = cmd[1:]
    if whole:
        try:
            _parse(p, words)
        except _Refused as e:
            return str(e)
        return None
    sub, rest = _subparser(p, words)
    bad = [w.split("=")[0] for w in rest if w.startswith("-") and w.split("=")[0] not in _flags(sub) | {"-h"}]
    return f"unknown flag {bad[0]}" if bad else None


def _documented() -> list[tuple[str, list[str], bool]]:
    out = []
    for page in PAGES:
        text = page.read_text()
        rel = str(page.relative_to(ROOT))
        out += [(rel, c, True) for line in _fenced_lines(text) for c in _commands(line)]
        out += [(rel, c, False) for c in _inline(text)]
    return out


def test_every_documented_command_parses_against_the_real_parsers():
    cmds = _documented()
    assert len(cmds) >= 40, f"only {len(cmds)} command lines found: is the extraction broken?"
    wrong = [f"{page}: {' '.join(c)}: {why}" for page, c, whole in cmds if (why := _check(c, whole))]
    assert not wrong, "\n".join(wrong)


def test_a_made_up_flag_fails_the_check():
    assert _check(["ocslab", "run", "experiments/demo.yaml", "--no-such-flag"], True)
    assert _check(["ocslab", "run", "--no-such-flag"], False) == "unknown flag --no-such-flag"
    assert _check(["ocslab", "run", "experiments/demo.yaml", "--backend", "flow"], True) is None
    assert _commands("sudo .venv/bin/ocslab run x.yaml --backend flow  # note") == [
        ["ocslab", "run", "x.yaml", "--backend", "flow"]]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("site")
    # another interpreter: autodoc imports and inspects every model, which must not leak into the tests
    got = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(ROOT / "docs"), str(out)], capture_output=True, text=True, timeout=900)
    assert got.returncode == 0, f"the docs build has warnings:\n{got.stderr[-3000:]}"
    return out


def test_the_docs_build_without_warnings(site):
    assert (site / "index.html").exists() and (site / "reference" / "cli.html").exists()


def test_the_references_list_every_field_of_every_kind(site):
    import sys

    from emulation.planners.cost import CostModel
    from emulation.scenario.fields import section_fields
    from emulation.workloads.iteration import ParallelSpec
    from emulation.workloads.moe import MoELayer

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from ocslab_models import reachable

    scenarios = (site / "reference" / "scenarios.html").read_text()
    results = (site / "reference" / "results.html").read_text()
    missing, walked = [], set()
    for name, _, _ in kinds.REGISTRY:
        kind = kinds.get(name)
        for html, root in ((scenarios, kind.scenario), (results, kind.result)):
            for model in reachable(root):  # pydantic models and the dataclasses they use
                walked.add(model)
                for field in section_fields(model):
                    anchor = f'id="{model.__module__}.{model.__qualname__}.{field}"'
                    if anchor not in html:
                        missing.append(f"{name}: {model.__qualname__}.{field}")
    assert not missing, f"{len(missing)} fields missing, e.g. {missing[:5]}"
    assert {CostModel, MoELayer, ParallelSpec} <= walked  # the walk reaches dataclasses
    # a dataclass's field shows its description
    assert "Per-message latency alpha" in scenarios and "Tensor-parallel degree" in scenarios
    cli = (site / "reference" / "cli.html").read_text()
    for flag in ("--backend", "--controller", "--pcap", "--packet-result", "--recovery", "--tm"):
        assert flag in cli
