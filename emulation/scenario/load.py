"""Loading scenario files: YAML in, a validated model out, or one line naming the bad field.

Every bad input is a :class:`~emulation.scenario.schema.ScenarioError` whose text is
``FILE: field.path: what is wrong``; the CLI prints it and exits with status 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from emulation.scenario.resolve import Experiment, RunError, resolve
from emulation.scenario.schema import Scenario, ScenarioError


def read_yaml(path: str | Path) -> dict:
    """The mapping in YAML file ``path``. :raises ScenarioError: unreadable, not YAML, not a mapping."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: must be a mapping of sections (fabric, ...)")
    return data


def validate(model: type[BaseModel], data: dict, path: str | Path):
    """``model.model_validate(data)``; a validation error becomes one line naming the field.

    :raises ScenarioError: ``FILE: field.path: problem``.
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = "unknown field"
        # model-level checks name their field at the start of the message
        field = re.match(r"([a-z_]+(?:\.[a-z_0-9]+)*): (.*)", msg)
        if loc and field and err["type"] == "value_error":
            loc, msg = f"{loc}.{field.group(1)}", field.group(2)
        elif not loc and field and err["type"] == "value_error":
            loc, msg = field.group(1), field.group(2)
        raise ScenarioError(f"{path}: {loc}: {msg}" if loc else f"{path}: {msg}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a collective scenario file (:func:`load_experiment`); the scenario.

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    return load_experiment(path)[0]


def load_experiment(path: str | Path) -> tuple[Scenario, Experiment]:
    """Read and validate a collective scenario file and check it (:func:`check_experiment`); the
    scenario and its :class:`Experiment`. (``ocslab`` reads files of every kind through
    :func:`emulation.kinds.load`.)

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    sc = validate(Scenario, read_yaml(path), path)
    try:
        return sc, check_experiment(sc)
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None


def check_experiment(sc: Scenario) -> Experiment:
    """Check that the fabric of ``sc`` builds, its workloads fit in memory and every run can be
    planned (:meth:`Experiment.check`, which keeps the small resolved runs for the backend); the
    :class:`Experiment`, also kept as ``sc.experiment``.

    :raises ScenarioError: one line, ``field: problem``.
    """
    exp = resolve(sc)
    _check_memory(exp)
    try:
        exp.check()
    except RunError as e:
        raise ScenarioError(str(e)) from None
    sc.keep_experiment(exp)
    return exp


def _check_memory(exp: Experiment) -> None:
    """Refuse a scenario whose largest workload would not fit in memory (:mod:`emulation.flowsim.limits`)."""
    from emulation.flowsim.limits import check_memory

    counters = []
    for size, r in exp.jobs:
        def count_at(k: int, r=r, size=size) -> int:
            return exp.workload(r, size, k).transfer_count

        try:
            count_at(8)
        except ValueError:
            continue  # not buildable at the fitting sizes: planning itself will say what is wrong
        counters.append(count_at)
    msg = check_memory(counters, exp.fabric.gpus) if counters else None
    if msg:
        raise ScenarioError(msg)
