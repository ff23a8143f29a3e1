"""Per-step records as columns: a large result's ``steps``, ``transfers`` and ``link_bytes``
in ``runs.npz`` beside a small ``result.json``.

A 4,096-GPU scenario of three runs and two sizes holds about 100,000 step records and 300,000
transfer records. Written into ``result.json`` they made it 56 MB, which took seconds to read
back even for a summary. Above :data:`emulation.envelope.LARGE_RESULT` records, the writer
(:func:`emulation.envelope.write_result`) moves these lists into a NumPy ``.npz`` archive, one
array per field, and ``result.json`` names it in ``columns``. The reader
(:func:`emulation.envelope.read_result`) puts them back, so the typed result is the same; and
``numpy.load`` reads a column without ocslab.

Array names are ``RUN.LIST.FIELD``: ``RUN`` the run's index in ``result.runs`` (``0``, ``1``,
...), ``LIST`` one of :data:`LISTS`, ``FIELD`` a record field (``start_s``, ``end_s``,
``phase``...). A column is ``int64``, ``float64``, ``bool`` or a Unicode string; a field whose
value is a mapping or list (a step's ``drops``) is a column of JSON strings. A numeric column
with missing values has a companion ``RUN.LIST.FIELD.null`` (``bool``: the record's value is
``null``); a column of JSON strings is named ``RUN.LIST.FIELD.json``. A field that is ``null``
in every record has no array. ``link_bytes`` is one 2-D array
``RUN.link_bytes`` of ``[u, up, v, vp, bytes]`` rows.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

#: The per-record lists of a run that go into columns.
LISTS = ("steps", "transfers")

_NULL = ".null"
_JSON = ".json"


def _column(values: list) -> dict[str, np.ndarray]:
    """Arrays of one field's ``values`` (suffix -> array; ``""`` the values themselves)."""
    present = [v for v in values if v is not None]
    if not present:
        return {}
    whole = len(present) == len(values)
    if whole and all(isinstance(v, bool) for v in present):
        return {"": np.array(values, dtype=bool)}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if whole:
            return {"": np.array(values, dtype=np.int64 if all(isinstance(v, int) for v in values) else np.float64)}
        return {"": np.array([0 if v is None else v for v in values], dtype=np.float64),
                _NULL: np.array([v is None for v in values])}
    if whole and all(isinstance(v, str) for v in present):
        return {"": np.array(values, dtype=str)}
    return {_JSON: np.array([json.dumps(v) for v in values], dtype=str)}


def to_columns(records: list[dict]) -> dict[str, np.ndarray]:
    """The columns of ``records`` (dicts with the same keys: a model's ``model_dump``), by field
    name (with the ``FIELD.null`` and ``FIELD.json`` forms of the module doc)."""
    out: dict[str, np.ndarray] = {}
    for field in (records[0] if records else ()):
        for suffix, arr in _column([r[field] for r in records]).items():
            out[field + suffix] = arr
    return out


def from_columns(columns: dict[str, np.ndarray]) -> list[dict]:
    """The records of :func:`to_columns`' output: the inverse of it, except that a field
    ``null`` in every record is left out (a model's default, ``None``, fills it)."""
    lists: dict[str, list] = {}
    for key, arr in columns.items():
        if key.endswith(_NULL):
            continue
        if key.endswith(_JSON):
            lists[key[:-len(_JSON)]] = [json.loads(v) for v in arr.tolist()]
            continue
        values = arr.tolist()
        null = columns.get(key + _NULL)
        if null is not None:
            values = [None if m else v for v, m in zip(values, null.tolist())]
        lists[key] = values
    fields = list(lists)
    return [dict(zip(fields, row)) for row in zip(*lists.values())]


def save_runs(path: Path, runs: list[dict]) -> None:
    """Move each run's :data:`LISTS` and ``link_bytes`` out of ``runs`` (the run dicts of
    ``result.json``, changed in place: the lists left empty) into the ``.npz`` at ``path``.

    :raises OSError: ``path`` cannot be written."""
    arrays: dict[str, np.ndarray] = {}
    for i, run in enumerate(runs):
        for name in LISTS:
            for field, arr in to_columns(run.get(name) or []).items():
                arrays[f"{i}.{name}.{field}"] = arr
            if name in run:
                run[name] = []
        if run.get("link_bytes"):
            arrays[f"{i}.link_bytes"] = np.array(run["link_bytes"], dtype=np.float64)
            run["link_bytes"] = []
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def load_runs(path: Path, runs: list[dict]) -> None:
    """Put back into ``runs`` (the run dicts of ``result.json``, changed in place) what
    :func:`save_runs` took out, from the ``.npz`` at ``path``.

    :raises OSError: ``path`` cannot be read.
    :raises ValueError: ``path`` is not a NumPy archive."""
    if not zipfile.is_zipfile(path):
        open(path, "rb").close()  # a missing or unreadable file: its OSError
        raise ValueError("not a NumPy archive")
    archive = np.load(path, allow_pickle=False)
    by_run: dict[str, dict[str, np.ndarray]] = {}
    with archive:
        for key in archive.files:
            run, _, rest = key.partition(".")
            by_run.setdefault(run, {})[rest] = archive[key]
    for i, run in enumerate(runs):
        got = by_run.get(str(i), {})
        for name in LISTS:
            prefix = name + "."
            cols = {k[len(prefix):]: v for k, v in got.items() if k.startswith(prefix)}
            if cols:
                run[name] = from_columns(cols)
        if "link_bytes" in got:
            run["link_bytes"] = got["link_bytes"].tolist()
