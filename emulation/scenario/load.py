"""Loading scenario files: YAML in, a validated model out, or one line naming the bad field.

Every bad input is a :class:`~emulation.scenario.schema.ScenarioError` whose text is
``FILE: field.path: what is wrong``, followed, for a field of the schema, by ``; expected:`` and
the field's description; the CLI prints it and exits with status 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from emulation.scenario.fields import field_names_at, locate
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
    """``model.model_validate(data)``; a validation error becomes one line naming the field and
    saying what it expects: its description (:mod:`emulation.scenario.fields`).

    The location leaves out pydantic's union member tags (``emulation.link_mbps``, not
    ``emulation.link_mbps.float``); of the errors inside one union, the alternative that got
    furthest is reported, one that took the input's type before one that did not (a mapping given
    where a model is named or given field by field is checked as the model's fields).

    :raises ScenarioError: ``FILE: field.path: problem; expected: description``.
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        err = errors[0]
        if err["type"] == "missing":  # a misspelt key shows as the field missing and the key unknown
            typo = [x for x in errors if x["type"] == "extra_forbidden" and x["loc"][:-1] == err["loc"][:-1]]
            err = typo[0] if typo else err
        where, field, union = locate(model, err["loc"])
        if union is not None:
            inside = [x for x in errors if (got := locate(model, x["loc"]))[2] == union
                      and got[0][:union + 1] == where[:union + 1]]
            err = max(inside, key=lambda x: (len(x["loc"]), not x["type"].endswith("_type")))
            where, field, _ = locate(model, err["loc"])
        loc = ".".join(str(x) for x in where)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = "unknown field" + did_you_mean(str(err["loc"][-1]), field_names_at(model, tuple(err["loc"][:-1])))
        # model-level checks name their field at the start of the message
        named = re.match(r"([a-z_]+(?:\.[a-z_0-9]+)*): (.*)", msg)
        if named and err["type"] == "value_error":
            loc, msg = f"{loc}.{named.group(1)}" if loc else named.group(1), named.group(2)
            more = tuple(int(x) if x.isdigit() else x for x in named.group(1).split("."))
            field = locate(model, (*err["loc"], *more))[1]
        expected = _expected(field)
        if expected:
            msg = f"{msg}; expected: {expected}"
        raise ScenarioError(f"{path}: {loc}: {msg}" if loc else f"{path}: {msg}") from None


def _expected(field: FieldInfo | None) -> str:
    """A field's description as plain text on one line (reST roles and literals unwrapped), or ''."""
    text = " ".join((field.description or "").split()) if field is not None else ""
    text = re.sub(r":\w+:`~?([^`]*)`", lambda m: m.group(1).rpartition(".")[2], text)
    text = text.replace("``", "").rstrip(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text


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
    """Refuse a scenario whose largest run would not fit in memory (:mod:`emulation.flowsim.limits`),
    except a StragglAR job the flow backend can run in closed form instead
    (:meth:`Experiment.use_closed_form`)."""
    from emulation.flowsim.limits import check_memory, shape_of

    shapes = []
    for size, r in exp.jobs:
        def shape_at(k: int, r=r, size=size):
            w = exp.workload(r, size, k)
            return shape_of(w, 1 if r.planner == "none" and r.schedule == "none" else len(w.steps) + 1)

        try:
            shape_at(8)
        except ValueError:
            continue  # not buildable at the fitting sizes: planning itself will say what is wrong
        shapes.append((size, r, shape_at))
    n, sem = exp.fabric.gpus, exp.semantics
    msg = check_memory([s for *_, s in shapes], n, semantics=sem) if shapes else None
    if msg:  # a StragglAR job that does not fit as transfers runs in closed form
        rest = []
        for size, r, s in shapes:
            if exp.closed_form_refusal(r) is None and check_memory([s], n, semantics=sem):
                exp.use_closed_form(r, size)
            else:
                rest.append(s)
        msg = check_memory(rest, n, semantics=sem) if rest else None
    if msg:
        raise ScenarioError(msg)


def did_you_mean(word: str, names: list[str]) -> str:
    """``" (did you mean X?)"`` for the name in ``names`` closest to ``word`` (difflib, ratio at
    least 0.6), else ``" (known: a, b, ...)"`` when there are few, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (known: {', '.join(names)})" if 0 < len(names) <= 8 else ""

