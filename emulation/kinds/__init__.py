"""Scenario kinds: the registry.

A scenario file is of one *kind*; each kind is one module of this package that declares, in a
:class:`Kind`, its scenario model (the file's schema), its result model (what ``result.json``
holds inside the envelope, :mod:`emulation.envelope`), the backends it runs on, its checks past
the schema, its run, summary and write functions, and the extra commands it answers. Kinds
declare, layers compute, reports present: a kind's run calls the layer that computes (a sweep,
a replay, a backend) and returns the layer's result, which the registry puts in the envelope;
its package holds the report. The command line parses a file once,
finds its kind here (:func:`kind_of`: the file's ``kind:`` key, else the section that marks it)
and goes down one path; a command a kind does not answer is refused in one line naming the kind
and the commands that do apply.

==============  ===============  ==========================================================
kind            marked by        what it runs
==============  ===============  ==========================================================
``collective``  (the default)    collectives on an OCS fabric, planned per step or slotted
``training``    ``failure:``     a real data-parallel torch job, a GPU failure and its
                                 recoveries (LUMION)
``wan``         ``wan:``         WAN traffic engineering over sliced controllers (Symphony)
``rails``       ``rails:``       a training iteration on photonic rails (Opus)
``tenancy``     ``tenancy:``     many tenants on one rack (Morphlux, Lumorph, Propius)
==============  ===============  ==========================================================

Kind modules import the core (scenario models, planners, both backends, the output layer and the
envelope); the core never imports a kind, and a kind module is imported only when a file of its
kind is read (:func:`get`), so a flow-only command never loads Mininet.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

from pydantic import BaseModel

from emulation.envelope import FailedCheck, ResultEnvelope, envelope, read_result
from emulation.output import Progress
from emulation.scenario.load import read_yaml, validate
from emulation.scenario.schema import ScenarioError
from emulation.sections import SectionError

log = logging.getLogger(__name__)

#: ``(kind, the top-level sections that mark a file of it, its module)``; the first kind, with
#: no section, is the default.
REGISTRY: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("collective", (), "emulation.kinds.collective"),
    ("training", ("job", "failure", "recovery"), "emulation.kinds.training"),
    ("wan", ("wan",), "emulation.kinds.wan"),
    ("rails", ("rails",), "emulation.kinds.rails"),
    ("tenancy", ("tenancy",), "emulation.kinds.tenancy"),
)

NAMES = tuple(name for name, _, _ in REGISTRY)

#: The commands that take a scenario file; every kind answers ``run``.
FILE_COMMANDS = ("run", "compare", "plan", "te", "train", "up", "fabric")


@dataclass(frozen=True)
class RunRequest:
    """What ``ocslab run`` (or a kind's command) asks of a kind's run: the loaded ``scenario``,
    the ``backend`` (checked against :attr:`Kind.backends`), the results directory ``out`` (fresh,
    not yet created), the packet-backend options (``force``: run past a failed headroom probe;
    ``controller``: ``os-ken`` or ``ryu``; ``apps``: your own controller apps; ``pcap``: ports to
    capture) and a ``progress`` callback."""

    scenario: Any
    backend: str
    out: Path
    progress: Progress | None = None
    force: bool = False
    controller: str | None = None
    apps: tuple[str, ...] = ()
    pcap: list[str] | None = None


#: A report function, or one per result model (a kind with two results: its run's and a
#: command's), chosen by the result's type.
ByResult = Union[Callable, Mapping[type, Callable]]


def _by_result(f: ByResult, result: BaseModel) -> Callable:
    if callable(f):
        return f
    for t, g in f.items():
        if isinstance(result, t):
            return g
    raise TypeError(f"no report for a {type(result).__name__}")


@dataclass(frozen=True)
class Kind:
    """One scenario kind (module doc).

    :param name: the kind's name (``result.json``'s ``kind``).
    :param scenario: the pydantic model of a whole scenario file of this kind.
    :param result: the pydantic model of its result, inside the envelope (a ``Union`` of two
        when a command gives another result than ``run``).
    :param backends: the backends its ``run`` takes (``flow``, ``packet``).
    :param run: ``run(request) -> result`` (wrapped in an envelope on ``request.backend``) or
        ``-> ResultEnvelope``. Raises :class:`emulation.output.Refused` (or a backend's refusal)
        before anything was measured, a backend's failure after.
    :param show: print the result's summary on the terminal: ``show(envelope)``, or one such
        function per result model.
    :param write: write the files beside ``result.json`` (tables, plots) into the results
        directory and return their names: ``write(envelope, out)``, or one per result model.
    :param deep: ``deep(scenario)``: what the schema alone cannot check (that the fabric builds,
        the matrices exist...), run when a file is loaded. :raises SectionError: one line
        naming the field.
    :param data_errors: the exceptions reading the scenario's data files may raise, each turned
        into a one-line :class:`ScenarioError` naming the file.
    :param options: which of ``ocslab run``'s packet options (``controller``, ``apps``, ``pcap``,
        ``force``) the kind takes.
    :param commands: the extra commands it answers, ``name -> handler(scenario, args, path) ->
        exit status``.
    :param backend_of: the backend a scenario names (default: its ``backend`` field).
    :param checks: ``checks(result) -> [FailedCheck]``, the checks of a result that failed
        (empty: every check held), or one such function per result model; none: the kind's
        results carry no checks. Its failures go into the envelope (:meth:`judge`) and make
        the command exit with status 1.
    """

    name: str
    scenario: type[BaseModel]
    result: Any
    backends: tuple[str, ...]
    run: Callable[[RunRequest], Any]
    show: ByResult
    write: ByResult
    deep: Callable[[Any], None] | None = None
    data_errors: tuple[type[Exception], ...] = ()
    options: frozenset[str] = frozenset()
    commands: dict[str, Callable[[Any, Any, Path], int]] = field(default_factory=dict)
    backend_of: Callable[[Any], str] = lambda sc: sc.backend
    checks: ByResult | None = None

    def load(self, path: Path, data: dict):
        """The scenario of the file ``path`` holding ``data``: validated against
        :attr:`scenario`, then :attr:`deep`. :raises ScenarioError: ``FILE: field: problem``."""
        try:
            return validated(self.scenario, data, path, self.deep)
        except self.data_errors as e:
            raise ScenarioError(f"{path}: {e}") from None

    def run_envelope(self, req: RunRequest) -> ResultEnvelope:
        """:attr:`run` of ``req``, its result in an envelope on ``req.backend``."""
        got = self.run(req)
        return got if isinstance(got, ResultEnvelope) else envelope(self.name, req.scenario.name, req.backend, got)

    def judge(self, env: ResultEnvelope) -> ResultEnvelope:
        """``env`` with ``failed_checks`` set to what :attr:`checks` finds failed in its result
        (an incomplete result is judged on what it holds)."""
        env.failed_checks = list(_by_result(self.checks, env.result)(env.result)) if self.checks else []
        return env

    def shown(self, env: ResultEnvelope) -> None:
        """Print ``env``'s summary (:attr:`show`)."""
        _by_result(self.show, env.result)(env)

    def written(self, env: ResultEnvelope, out: Path) -> list[str]:
        """Write ``env``'s files into ``out`` (:attr:`write`); their names."""
        return _by_result(self.write, env.result)(env, out)

    def backend_refusal(self, backend: str) -> str | None:
        """The one line refusing ``backend`` for this kind, or None if it runs there."""
        if backend in self.backends:
            return None
        return f"--backend: a {self.name} scenario runs on {' or '.join(self.backends)}, not {backend}"

    def answers(self, command: str) -> bool:
        """True if ``command`` (``run`` or an extra one) applies to this kind."""
        return command == "run" or command in self.commands


def with_controller(emulation, controller: str | None = None, apps: tuple[str, ...] = (), packets: bool = True):
    """``emulation`` (an :class:`~emulation.scenario.schema.EmulationSpec`) with ``--controller``
    and ``--app`` applied.

    :raises Refused: Ryu asked for (by the flag or the scenario) on the packet backend where its
        environment is missing."""
    from emulation.output import Refused

    if controller or apps:
        emulation = emulation.model_copy(update={"controller": controller or emulation.controller,
                                                 "apps": tuple(emulation.apps) + tuple(apps)})
    if packets and emulation.controller == "ryu":
        from emulation.emulator.net import ryu_unavailable

        why = ryu_unavailable()
        if why:
            raise Refused(f"--controller: ryu is unavailable here: {why}")
    return emulation


def get(name: str) -> Kind:
    """The registered kind ``name``. :raises KeyError: unknown kind."""
    for n, _, module in REGISTRY:
        if n == name:
            return importlib.import_module(module).KIND
    raise KeyError(name)


def kind_of(data: dict, path: Path | str = "") -> str:
    """The kind of a scenario file's mapping: its ``kind:`` key, else the one kind whose marking
    section it holds, else ``collective``.

    :raises ScenarioError: an unknown ``kind:``, or sections of two kinds.
    """
    if "kind" in data:
        k = data["kind"]
        if k not in NAMES:
            raise ScenarioError(f"{path}: kind: unknown kind {k!r} (known: {', '.join(NAMES)})")
        return k
    marked = [(n, next(x for x in s if x in data)) for n, s, _ in REGISTRY if any(x in data for x in s)]
    if len(marked) > 1:
        raise ScenarioError(f"{path}: {marked[1][1]}: a {marked[0][0]} scenario (it has {marked[0][1]}:) cannot "
                            f"also be a {marked[1][0]} one")
    return marked[0][0] if marked else NAMES[0]


def load(path: Path | str) -> tuple[Kind, Any]:
    """Read the scenario file at ``path`` once, find its kind, move renamed keys to their new
    places (:func:`emulation.scenario.legacy.migrate`, a warning on stderr for each) and load it.

    :returns: ``(kind, scenario)``.
    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    from emulation.scenario.legacy import migrate

    path = Path(path)
    data = read_yaml(path)
    kind = get(kind_of(data, path))
    data, notes = migrate(kind.name, {k: v for k, v in data.items() if k != "kind"}, path)
    for note in notes:
        log.warning("%s (the old key still loads)", note)
    log.info("%s: a %s scenario", path, kind.name)
    return kind, kind.load(path, data)


def load_as(path: Path | str, name: str):
    """The scenario at ``path``, which must be of kind ``name``.

    :raises ScenarioError: one line, naming the file's kind when it is another."""
    kind, sc = load(path)
    if kind.name != name:
        raise ScenarioError(f"{path}: a {kind.name} scenario, not a {name} one")
    return sc


def validated(model: type[BaseModel], data: dict, path: Path | str, deep: Callable[[Any], None] | None = None):
    """Validate ``data`` as ``model`` and run ``deep(scenario)``, whose one-line
    :class:`SectionError` (:class:`ScenarioError` is one) gets the file's name in front; the
    scenario.

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    sc = validate(model, data, path)
    if deep is not None:
        try:
            deep(sc)
        except SectionError as e:
            raise ScenarioError(f"{path}: {e}") from None
    return sc


def read(path: Path | str, records: bool = True) -> ResultEnvelope:
    """A ``result.json`` (or a results directory) of any kind, its result typed by that kind's
    model; ``records=False`` leaves a large result's per-step and per-transfer records in its
    ``runs.npz`` (:func:`emulation.envelope.read_result`).

    :raises emulation.envelope.EnvelopeError: see :func:`emulation.envelope.read_result`."""
    import json

    from emulation.envelope import EnvelopeError

    p = Path(path)
    p = p / "result.json" if p.is_dir() else p
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return read_result(p, BaseModel)  # raises the reader's one line (unreadable, not JSON)
    name = data.get("kind") if isinstance(data, dict) else None
    if name not in NAMES:
        raise EnvelopeError(f"{p}: not an ocslab result of a known kind (kind: {name!r})")
    return read_result(p, get(name).result, records=records)


def command_job(kind: Kind, sc, out: Path | None, label: str, total: int,
                produce: Callable[[Path, Progress], ResultEnvelope],
                after: Callable[[Path], list[FailedCheck]] | None = None) -> int:
    """The one path of a command that runs a scenario (``ocslab run``, ``ocslab train``): a
    fresh results directory (``out``, or ``runs/<scenario>-<UTC time>``), ``produce(out,
    progress)`` under a progress bar (``label``, ``total`` steps), the result judged
    (:meth:`Kind.judge`), then ``result.json``, ``scenario.yaml`` and the kind's files written
    and its summary shown (:func:`write_and_show`), then ``after(out)`` if given (a further
    analysis of the written run, e.g. its capture), whose failed checks join the envelope's; what
    raises on the way is mapped to the exit statuses of :func:`emulation.output.guarded`.

    :returns: the exit status: 0 every check held, 1 a check failed (:func:`emulation.output.verdict`),
        or :func:`~emulation.output.guarded`'s.
    """
    from emulation.envelope import write_result
    from emulation.output import Interrupted, Refused, fail, guarded, progress_bar, results_dir, verdict

    try:
        out = results_dir(out, sc.name)
    except Refused as e:
        return fail(str(e))

    def job() -> int:
        try:
            with progress_bar(label, total) as progress:
                env = kind.judge(produce(out, progress))
        except Interrupted as e:  # keep the runs that finished, marked incomplete
            if e.partial is not None:
                write_result(out, e.partial, scenario_yaml(sc))
            raise
        write_and_show(kind, sc, env, out)
        if after is not None:
            more = after(out)
            if more:
                env.failed_checks += more
                write_result(out, env)
        return verdict(env.failed_checks)

    return guarded(out, job)


def run_scenario(kind: Kind | str, sc, out: Path, backend: str | None = None, *, progress: Progress | None = None,
                 show: bool = True, **options) -> ResultEnvelope:
    """``ocslab run`` as a function (scripts, tests): run ``sc`` (a scenario of ``kind``) on
    ``backend`` (default: the scenario's), judge it (:meth:`Kind.judge`: its ``failed_checks``),
    write ``result.json``, ``scenario.yaml`` and the kind's files into ``out`` and, with
    ``show``, print the summary; the envelope. ``options``: :class:`RunRequest`'s ``force``,
    ``controller``, ``apps``, ``pcap``.

    :raises emulation.output.Refused: ``backend`` is not one the kind runs on; and whatever the
        kind's run raises.
    """
    from emulation.output import Refused

    kind = get(kind) if isinstance(kind, str) else kind
    backend = backend or kind.backend_of(sc)
    refusal = kind.backend_refusal(backend)
    if refusal:
        raise Refused(refusal)
    env = kind.judge(kind.run_envelope(RunRequest(sc, backend, Path(out), progress, **options)))
    write_and_show(kind, sc, env, Path(out), show=show)
    return env


def write_and_show(kind: Kind, sc, env: ResultEnvelope, out: Path, show: bool = True) -> None:
    """Write a run's ``result.json`` and ``scenario.yaml`` (:func:`emulation.envelope.write_result`)
    and the kind's files into ``out``; with ``show``, print its summary and where the results
    are."""
    from rich.console import Console

    from emulation.envelope import COLUMNS_FILE, summary_rows, write_result
    from emulation.figures import write_csv
    from emulation.output import quiet

    write_result(out, env, scenario_yaml(sc))
    files = kind.written(env, out)
    if (out / COLUMNS_FILE).exists():
        files = [COLUMNS_FILE, *files]
    rows = summary_rows(env.result)
    if rows:
        write_csv(out / "summary.csv", rows)
        files = ["summary.csv", *files]
    if not show:
        return
    if not quiet():  # -q: only where the results are
        kind.shown(env)
    Console(soft_wrap=True).print(f"results: {out}/result.json{''.join(', ' + f for f in files)}")  # one line to copy


def kind_name_of(sc) -> str:
    """The registered kind whose scenario model ``sc`` is. :raises TypeError: none is."""
    for name in NAMES:
        if isinstance(sc, get(name).scenario):
            return name
    raise TypeError(f"not an ocslab scenario: {type(sc).__name__}")


def from_mapping(data: dict, path: Path | str = "<dict>"):
    """The scenario of the mapping ``data`` (what a scenario file holds), its kind found and
    renamed keys moved as :func:`load` does; ``path`` names it in messages.

    :raises ScenarioError: one line, ``PATH: field: problem``."""
    from emulation.scenario.legacy import migrate

    kind = get(kind_of(data, path))
    data, _ = migrate(kind.name, {k: v for k, v in data.items() if k != "kind"}, path)
    return kind.load(Path(path), data)


def scenario_mapping(sc) -> dict:
    """Scenario ``sc`` as the mapping its file held: the fields it set, defaults left out
    (``scenario.yaml`` of a run, :func:`scenario_yaml`, has them filled in)."""
    return sc.model_dump(mode="json", exclude_unset=True, by_alias=True)


def with_changes(sc, changes: dict[str, Any], label: str | None = None):
    """A copy of scenario ``sc`` with the fields named by dotted keys set to new values
    (``{"fabric.reconfiguration_delay_s": 1e-5, "sizes": ["64MiB"]}``; ``ocslab ... --set``,
    ``--sizes``), validated anew as a file would be; ``label`` names it in messages.

    :raises ScenarioError: a key whose section is not one (``KEY: X is not a section``), a field
        the section does not have (with "did you mean"), or a value the field refuses."""
    data = scenario_mapping(sc)
    for key, value in changes.items():
        node, parts = data, key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                raise ScenarioError(f"{key}: {part} is not a section of this scenario")
            node = node[part]
        node[parts[-1]] = value
    label = label or f"{getattr(sc, 'name', 'scenario')} with {', '.join(changes)}"
    return from_mapping({"kind": kind_name_of(sc), **data}, label)


def scenario_yaml(sc) -> str:
    """The scenario as resolved (defaults filled in), YAML: ``scenario.yaml`` of a run."""
    import yaml

    if hasattr(sc, "to_yaml"):
        return sc.to_yaml()
    return yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False)


def refuse_command(kind: Kind, command: str) -> str:
    """The one line refusing ``command`` for ``kind``: what applies to the kind instead."""
    others = [f"ocslab {c}" for c in ("run", *kind.commands)]
    which = [n for n in NAMES if get(n).answers(command)]
    return (f"{command}: a {kind.name} scenario has no {command} (it applies to {', '.join(which)} scenarios); "
            f"for {kind.name}: {', '.join(others)}")
