"""ocslab as a Python library: what ``ocslab run`` does, as calls for a script or a notebook.

The package is ``emulation`` (``import ocslab`` is not a module; the command is). Five calls::

    from emulation import api

    sc = api.load("experiments/demo.yaml")             # any kind of scenario file
    env = api.run(sc, backend="flow")                   # the flow backend needs no root
    for r in env.result.runs:                            # a collective scenario's runs
        print(r.name, r.bytes, r.time_s)
    api.read(env_dir)                                    # a result.json written earlier

    # a sweep over R, the same scenario with one field changed each time
    for R in (1e-6, 1e-5, 1e-4):
        env = api.run(api.changed(sc, {"fabric.reconfiguration_delay_s": R}), backend="flow", out=None)

:func:`run` judges the run as the command does: ``env.failed_checks`` lists every check that
failed (empty when all held), and :func:`verdict` is the command's exit status (0 or 1). Results
are written into ``out`` (default ``runs/<scenario>-<time>``) exactly as by ``ocslab run``:
``result.json``, ``scenario.yaml``, ``summary.csv`` and the kind's own files. The packet backend
(``backend="packet"``) needs root, as on the command line. docs/api.md has more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulation import kinds
from emulation.envelope import ResultEnvelope

__all__ = ["changed", "from_dict", "kind_of", "load", "read", "run", "to_dict", "verdict"]


def load(path: str | Path):
    """The scenario in the YAML file ``path``, of whichever kind it is (a pydantic model; the
    kind's scenario class).

    :raises emulation.scenario.ScenarioError: one line, ``FILE: field: problem``."""
    return kinds.load(path)[1]


def from_dict(data: dict, name: str = "<dict>"):
    """The scenario of the mapping ``data`` (what a scenario file holds, as Python values),
    validated as the file would be; ``name`` stands for the file in messages.

    :raises emulation.scenario.ScenarioError: one line, ``NAME: field: problem``."""
    return kinds.from_mapping(data, name)


#: The scenario as the mapping its file held: the fields it set, defaults left out
#: (:func:`emulation.kinds.scenario_mapping`).
to_dict = kinds.scenario_mapping


def changed(sc, changes: dict[str, Any]):
    """A copy of scenario ``sc`` with the fields named by dotted keys changed
    (``{"fabric.reconfiguration_delay_s": 1e-5, "sizes": ["64MiB"]}``), validated anew
    (:func:`emulation.kinds.with_changes`, as ``ocslab run --set`` does).

    :raises emulation.scenario.ScenarioError: a key names no field, or a value is refused."""
    return kinds.with_changes(sc, changes)


def kind_of(sc) -> str:
    """The kind (``collective``, ``wan``, ``rails``, ``tenancy``, ``training``) of scenario
    ``sc``. :raises TypeError: not a scenario."""
    return kinds.kind_name_of(sc)


def run(sc, backend: str | None = None, out: str | Path | None = None, *, show: bool = False,
        **options) -> ResultEnvelope:
    """Run scenario ``sc`` on ``backend`` (``flow``, ``packet``; default the scenario's), judge
    it and write its results into ``out`` (default ``runs/<name>-<time>``; it must not exist or
    be empty); the result envelope (``env.result`` typed by the kind, ``env.failed_checks``).
    ``show`` prints the summary tables as the command does. ``options``: ``force``,
    ``controller``, ``apps``, ``pcap`` as ``ocslab run``'s flags.

    :raises emulation.output.Refused: a backend the kind does not run on, or ``out`` in use.
    :raises emulation.emulator.net.EmulationError: the packet backend could not run it.
    """
    from emulation.output import results_dir

    name = kind_of(sc)
    out = results_dir(Path(out) if out is not None else None, sc.name, flag="out=")
    return kinds.run_scenario(name, sc, out, backend, show=show, **options)


#: The result in a path (a ``result.json`` or its directory), typed by its kind
#: (:func:`emulation.kinds.read`; raises :class:`emulation.envelope.EnvelopeError`).
read = kinds.read


def verdict(env: ResultEnvelope) -> int:
    """The exit status ``ocslab run`` gives ``env``: 0 if every check held, 1 if one failed."""
    return 1 if env.failed_checks or not env.complete else 0
