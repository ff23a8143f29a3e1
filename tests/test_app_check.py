"""Your controller app is checked before anything starts (controllers/app_check.py), and a dead
controller's cause is read out of its log (emulation/emulator/controller_log.py): each mistake is
one line naming the file and line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers.app_check import builtin_app_names, check_apps
from emulation.emulator.controller_log import exited, last_exception

ROOT = Path(__file__).resolve().parents[1]
HEAD = "from controllers.base import OcsLabApp\n\n\n"


def _app(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(HEAD + body)
    return str(path)


def test_the_examples_and_a_well_formed_app_pass():
    examples = sorted(str(p) for p in (ROOT / "controllers" / "examples").glob("*.py") if p.name != "__init__.py")
    assert len(examples) >= 2 and check_apps(examples) is None


@pytest.mark.parametrize("name, body, want", [
    ("broken.py", "class Broken(OcsLabApp)\n    pass\n", "broken.py:4: SyntaxError: expected ':'"),
    ("clash.py", "class Routing(OcsLabApp):\n    pass\n",
     "clash.py:4: class name Routing is taken by a built-in app"),
    ("two.py", "class A(OcsLabApp):\n    pass\n\n\nclass B(A):\n    pass\n",
     "defines 2 app classes, A (line 4), B (line 8); the framework loads only the first"),
    ("empty.py", "X = 1\n", "defines no app class"),
    ("json.py", "class Mine(OcsLabApp):\n    pass\n", "the file name json.py is the module json already"),
    ("my-app.py", "class Mine(OcsLabApp):\n    pass\n", "must be a Python module name"),
])
def test_each_app_mistake_is_one_line_naming_the_file(tmp_path, name, body, want):
    problem = check_apps([_app(tmp_path, name, body)])
    assert problem is not None and want in problem and "\n" not in problem, problem
    assert problem.startswith(str(tmp_path / name))


def test_two_apps_may_not_share_a_class_name_or_a_file_name(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _app(tmp_path / "a", "mine.py", "class Mine(OcsLabApp):\n    pass\n")
    same_class = _app(tmp_path, "other.py", "class Mine(OcsLabApp):\n    pass\n")
    same_file = _app(tmp_path / "b", "mine.py", "class Yours(OcsLabApp):\n    pass\n")
    assert "class name Mine is taken by another --app file" in check_apps([one, same_class])
    assert "another --app file has the name mine.py" in check_apps([one, same_file])
    assert check_apps([one]) is None
    # the built-in apps' classes are read from controllers/, not listed by hand
    assert {"CircuitSwitch", "Routing", "JsonApi", "FailoverApp", "OpusApp", "WanTe"} <= builtin_app_names()


def test_ocslab_run_refuses_a_broken_app_before_anything_starts(tmp_path):
    app = _app(tmp_path, "broken.py", "class Broken(OcsLabApp)\n    pass\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", "experiments/demo.yaml", "--app", app, "--out",
                        str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stderr.strip() == f"ocslab: --app: {app}:4: SyntaxError: expected ':'", r.stderr
    assert not out.exists()


LOG = """\
2026-11-28 10:00:00,000 ocslab.controller INFO loading apps
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/os_ken/utils.py", line 80, in _import_module_file
    return importlib.import_module(module_name)
  File "/tmp/apps/broken.py", line 4
    class Broken(OcsLabApp)
                           ^
SyntaxError: expected ':'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/controllers/__main__.py", line 94, in main
    manager.load_apps([...])
  File "/usr/lib/python3/dist-packages/os_ken/utils.py", line 100, in import_module
    return _import_module_file(modname)
ModuleNotFoundError: No module named '/tmp/apps/broken'
"""


def test_a_dead_controllers_cause_is_the_syntax_error_not_the_import_error_after_it(tmp_path):
    log = tmp_path / "controller.log"
    log.write_text(LOG)
    assert last_exception(log) == "SyntaxError: expected ':' (/tmp/apps/broken.py, line 4)"
    assert exited(log, 1) == f"the controller exited with 1: SyntaxError: expected ':' (/tmp/apps/broken.py, line 4) (log: {log})"
    log.write_text(LOG.split("During handling")[1].split("\n", 2)[2])
    assert last_exception(log) == ("ModuleNotFoundError: No module named '/tmp/apps/broken' "
                                   "(/usr/lib/python3/dist-packages/os_ken/utils.py, line 100)")
    log.write_text("2026-11-28 INFO nothing went wrong\n")
    assert last_exception(log) is None and exited(log, -9) == f"the controller exited with -9 (log: {log})"
    assert last_exception(tmp_path / "missing.log") is None


def test_the_controllers_own_command_line_refuses_an_app_file_as_ocslab_run_does(tmp_path):
    """``python -m controllers FILE.py`` checks an app file with the same check as ``ocslab run
    --app`` (one line, exit 2), before loading anything."""
    import subprocess
    import sys

    path = _app(tmp_path, "no_class.py", "X = 1\n")
    r = subprocess.run([sys.executable, "-m", "controllers", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"controllers: {check_apps([path])}\n"
    assert "defines no app class" in r.stderr
