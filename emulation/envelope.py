"""The result envelope: one form of ``result.json`` for every scenario kind.

Every run of every kind writes ``result.json`` as a :class:`ResultEnvelope`: which scenario, of
which ``kind``, on which ``backend``, when (``created``, UTC), with which software
(``versions``), the envelope's ``schema_version``, the run's ``warnings`` (one line each),
whether it ran to its end (``complete``; else ``error`` says why and ``result`` holds what was
measured before), the checks it did not pass (``failed_checks``: a run that completed with a
failed check exits with status 1, :func:`emulation.output.verdict`), the kind's own typed
result in ``result``, and ``columns``: the file beside it that holds each run's per-step and
per-transfer records when there are more than :data:`LARGE_RESULT` (``runs.npz``,
:mod:`emulation.columns`; ``null``: they are in ``result.json``). One writer
(:func:`write_result`) and one reader (:func:`read_result`); the JSON Schema of a kind's
envelope comes from :meth:`ResultEnvelope.json_schema` (``ocslab schema KIND``), so a
``result.json`` can be validated outside ocslab.

The envelope knows no kind: a kind's result model is its type parameter, and the reader is
handed the model (the registry, :mod:`emulation.kinds`, knows which: :func:`emulation.kinds.read`).
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Generic, Literal, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emulation import __version__
from emulation.backends import EnvelopeBackend
from emulation.bulk import gc_paused

#: Version of the envelope's form; a reader refuses another one.
SCHEMA_VERSION = 1

R = TypeVar("R", bound=BaseModel)


class EnvelopeError(ValueError):
    """A file that is not a result envelope of this version, or not of the expected kind (one line)."""


class FailedCheck(BaseModel):
    """One check a run did not pass: the ``check``'s name (``link capacity``, ``dark window``,
    ``isolation``...), ``where`` it failed (a run and size, a recovery, a mode; empty: the whole
    result) and its ``detail``, one line with the numbers against the bound."""

    model_config = ConfigDict(extra="forbid")

    check: str
    where: str = ""
    detail: str

    def line(self) -> str:
        """``where: check: detail`` (one line)."""
        return f"{self.where + ': ' if self.where else ''}{self.check}: {self.detail}"

    @classmethod
    def of(cls, problem: str, where: str = "") -> "FailedCheck":
        """The failed check of a one-line ``problem`` written ``check: detail``."""
        name, sep, detail = problem.partition(": ")
        return cls(check=name, where=where, detail=detail) if sep else cls(check="check", where=where, detail=problem)


class ResultEnvelope(BaseModel, Generic[R]):
    """A whole ``result.json`` (module doc). ``backend`` is ``flow`` (the simulator),
    ``packet`` (real packets) or ``both`` (a kind that runs the two side by side)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: str
    scenario: str
    backend: EnvelopeBackend
    created: str
    versions: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    complete: bool = True
    error: Optional[str] = None
    failed_checks: list[FailedCheck] = Field(default_factory=list)
    columns: Optional[str] = None
    result: R

    def to_json(self) -> dict:
        """The plain data of ``result.json`` (:func:`dump`)."""
        return dump(self)

    @classmethod
    def json_schema(cls, result_model: type[BaseModel], kind: str) -> dict:
        """The JSON Schema (draft 2020-12) of an envelope holding ``result_model``, with
        ``kind`` fixed to ``kind``."""
        schema = cls[result_model].model_json_schema(mode="serialization")
        schema["properties"]["kind"] = {"const": kind, "title": "Kind", "type": "string"}
        schema["title"] = f"ocslab {kind} result"
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        return schema


def versions() -> dict[str, str]:
    """ocslab's, Python's and (where installed) OS-Ken's versions."""
    got = {"ocslab": __version__, "python": platform.python_version()}
    try:
        import os_ken

        got["os_ken"] = getattr(os_ken, "__version__", "unknown")
    except ImportError:
        got["os_ken"] = "absent"
    return got


def envelope(kind: str, scenario: str, backend: str, result: BaseModel, *, warnings: list[str] | None = None,
             complete: bool = True, error: str | None = None) -> ResultEnvelope:
    """A :class:`ResultEnvelope` of ``result``, created now with this machine's :func:`versions`."""
    from emulation.output import created_at

    return ResultEnvelope[type(result)](kind=kind, scenario=scenario, backend=backend, created=created_at(),
                                        versions=versions(), warnings=list(warnings or []), complete=complete,
                                        error=error, result=result)


def dump(env: ResultEnvelope) -> dict:
    """``env`` as the plain data of ``result.json`` (a field that does not apply is ``null``; an
    unfinished transfer's ``inf`` is written as JSON's ``Infinity``)."""
    return env.model_dump()


#: Steps and transfer records above which they are written as columns into ``runs.npz`` beside
#: ``result.json`` (:mod:`emulation.columns`): a 4,096-GPU demo holds about 400,000.
LARGE_RESULT = 100_000

#: The columnar file of a large result.
COLUMNS_FILE = "runs.npz"


def write_result(out: Path, env: ResultEnvelope, scenario_yaml: str | None = None) -> Path:
    """Write ``out/result.json`` (and ``out/scenario.yaml``, the scenario as resolved, when
    given, and ``out/runs.npz`` when the result holds more than :data:`LARGE_RESULT` step and
    transfer records); the path of ``result.json``. :raises OSError: ``out`` cannot be written."""
    out.mkdir(parents=True, exist_ok=True)
    if scenario_yaml is not None:
        (out / "scenario.yaml").write_text(scenario_yaml)
    path = out / "result.json"
    runs = getattr(env.result, "runs", None)
    large = isinstance(runs, list) and sum(len(getattr(r, "steps", ())) + len(getattr(r, "transfers", ()))
                                           for r in runs) > LARGE_RESULT
    with gc_paused():  # a large result is millions of small dicts and lists (emulation.bulk)
        data = dump(env)
        if large:
            from emulation import columns

            columns.save_runs(out / COLUMNS_FILE, data["result"]["runs"])
            data["columns"] = COLUMNS_FILE
        path.write_text(json.dumps(data, indent=1))
    return path


def read_result(path: Path, result_model: type[R], kind: str | None = None, records: bool = True) -> ResultEnvelope:
    """Read ``result.json`` at ``path`` (a file, or a results directory holding one).

    :param result_model: the kind's result model (:func:`emulation.kinds.read` looks it up by
        the file's ``kind``).
    :param kind: refuse a file of another kind.
    :param records: put a large result's per-step and per-transfer records back from its
        ``columns`` file; ``False``: leave them out (each run's ``steps`` and ``transfers``
        empty), which reads a 4,096-GPU result in a fraction of the time.
    :raises EnvelopeError: unreadable, not JSON, not an envelope of :data:`SCHEMA_VERSION`, of
        another kind, or its result does not validate (one line naming the first bad field).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise EnvelopeError(f"{path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise EnvelopeError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict) or "kind" not in data or "result" not in data:
        raise EnvelopeError(f"{path}: not an ocslab result (no kind and result: written by an older ocslab?)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise EnvelopeError(f"{path}: schema_version {data.get('schema_version')!r}, this ocslab reads "
                            f"{SCHEMA_VERSION}")
    if kind is not None and data["kind"] != kind:
        raise EnvelopeError(f"{path}: a {data['kind']} result, not a {kind} one")
    if records and data.get("columns"):
        from emulation import columns

        try:
            with gc_paused():
                columns.load_runs(path.parent / data["columns"], data["result"]["runs"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise EnvelopeError(f"{path}: columns: {data['columns']}: {getattr(e, 'strerror', None) or e}") from None
    try:
        return ResultEnvelope[result_model].model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise EnvelopeError(f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None


def summary_rows(result: BaseModel) -> list[dict]:
    """One row per run of ``result`` (its ``runs``: a list, or a mapping whose keys become the
    ``run`` column), each the run's scalar fields (numbers, strings, booleans, None; lists and
    sections left out): ``summary.csv``. Empty when the result has no runs."""
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else {}
    runs = data.get("runs")
    if isinstance(runs, dict):
        runs = [{"run": k, **v} for k, v in runs.items() if isinstance(v, dict)]
    if not isinstance(runs, list):
        return []
    return [{k: v for k, v in r.items() if v is None or isinstance(v, (int, float, str, bool))}
            for r in runs if isinstance(r, dict)]

