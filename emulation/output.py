"""Where a command's results go, and how its failures end: the output layer every scenario kind
shares.

- :func:`results_dir` and :func:`check_dir`: a fresh results directory (``--out``, or
  ``runs/<scenario>-<UTC time>``), refused in one line (``--out DIR: cause``) when it is not
  empty, is a file or below one, or cannot be written;
- :func:`progress_bar` and :func:`phase`: a transient progress bar (or spinner) on a terminal,
  a heartbeat line every :data:`HEARTBEAT_S` seconds otherwise, and :data:`Progress`, the
  callback type that runs report through;
- :func:`guarded`: runs a job and maps what it raises to the one set of exit statuses
  (:data:`EXIT_BAD_INPUT` 2: bad input, refused before anything was measured, or the results
  could not be written (a full disk): what the job made removed; :data:`EXIT_FAILED` 1: the
  run failed, its logs kept; :data:`EXIT_INTERRUPTED` 130: Ctrl-C, one line, the runs that
  finished kept in ``result.json`` with ``complete: false``);
- :func:`verdict`: the exit status of a run that completed: 0 when every check held, 1
  (:data:`EXIT_FAILED`) when one failed, with one line naming it;
- :func:`writing`: the same for a failure to write, around a script's body;
- :func:`check_file` and :func:`write_file`: one output file (``ocslab fabric -o``), checked
  before and written whole or not at all;
- :class:`Refused` and :class:`Failed`: what kinds raise to say which of the two it was.

Nothing here imports a backend: the backends' own errors are classified by name
(:data:`REFUSALS`, :data:`FAILURES`) so that a flow-only install never imports Mininet.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

#: ``progress(text, done, total)``: what a long job reports as it goes.
Progress = Callable[[str, int, int], None]

log = logging.getLogger(__name__)


class Refused(ValueError):
    """The job was refused before anything was measured (bad input, a machine that cannot
    emulate it faithfully, another emulation holding the machine): exit status 2. ``str()`` is
    one line."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) in the middle of a job that had finished some of its runs:
    ``partial`` is the result envelope of those (``complete`` false), written before the job
    exits with status 130; None when none had finished."""

    def __init__(self, partial=None):
        super().__init__("interrupted")
        self.partial = partial


class Failed(RuntimeError):
    """The job started and failed (an agent or controller died, a solver failed): exit status 1.
    ``str()`` is one line; the logs stay in the results directory."""


#: Exceptions of the backends (by class name, anywhere in the MRO) that refuse a job before it
#: measured anything: exit status 2.
REFUSALS = ("Refused", "ScenarioError", "BackendError", "HeadroomError", "MachineBusy", "MachineUnfit",
            "Busy", "CompareError")
#: Exceptions of the backends that end a started job: exit status 1.
FAILURES = ("Failed", "EmulationError", "ControllerError", "SimulationError", "TeError", "SolverError", "ClusterError")


def _named(e: BaseException, names: tuple[str, ...]) -> bool:
    return any(c.__name__ in names for c in type(e).__mro__)


def fail(message: str, status: int = EXIT_BAD_INPUT) -> int:
    """Print ``ocslab: message`` (one line) on stderr; return ``status``."""
    print(f"ocslab: {message}", file=sys.stderr)
    return status


def verdict(failed: list) -> int:
    """The exit status of a run that completed: 0 when ``failed`` (its
    :class:`~emulation.envelope.FailedCheck` list) is empty; else 1 (:data:`EXIT_FAILED`), after
    one line on stderr naming the first failed check and its numbers, and how many more the
    result names."""
    if not failed:
        return EXIT_OK
    more = f" (and {len(failed) - 1} more: failed_checks in result.json)" if len(failed) > 1 else ""
    return fail(f"check failed: {failed[0].line()}{more}", EXIT_FAILED)


def stamp() -> str:
    """The UTC time as ``YYYYmmdd-HHMMSS`` (names default results directories)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def created_at() -> str:
    """The UTC time in ISO 8601 to the second (a result's ``created``)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_dir(name: str, suffix: str = "") -> Path:
    """``runs/<name>[-suffix]-<UTC time>`` (relative to the working directory), or the first of
    ``...-2``, ``...-3``... that is free when a job of the same second took it (flow runs of a
    sweep take less than a second each)."""
    base = Path("runs") / f"{name}{'-' + suffix if suffix else ''}-{stamp()}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def check_dir(out: Path, flag: str = "--out", fresh: bool = True, shown: Path | None = None) -> None:
    """Refuse a results directory that cannot hold a command's files, before anything runs.

    ``out`` may exist (an empty directory, or any directory when ``fresh`` is false: a script
    rewriting its own earlier outputs) or not (it is made and removed again here: nothing is
    left behind by the check).

    :param shown: the path the line names (default ``out``; an output file's, when ``out`` is
        its directory).
    :raises Refused: one line ``FLAG OUT: cause``: it (or a directory in its path) is a file,
        it exists and is not empty (``fresh``), or it cannot be created or written (a read-only
        or pseudo file system, ``/proc``; a full disk that cannot take a probe file).
    """
    out = Path(out)
    shown = out if shown is None else Path(shown)
    blocker = next((p for p in [out, *out.parents] if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        where = "" if blocker == shown else " (in its path)"
        raise Refused(f"{flag} {shown}: {blocker} is a file, not a directory{where}")
    if fresh and out.is_dir() and any(out.iterdir()):
        raise Refused(f"{flag} {shown}: exists and is not empty")
    first_new = _first_new(out)
    probe = out / ".ocslab-write-probe"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text("ocslab")
    except OSError as e:
        raise Refused(f"{flag} {shown}: cannot write there: {e.strerror or e}") from None
    finally:  # leave nothing this check made
        if first_new is not None:
            shutil.rmtree(first_new, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                probe.unlink()


def results_dir(out: Path | None, name: str, suffix: str = "", flag: str = "--out") -> Path:
    """The results directory of a job: ``out``, or :func:`default_dir`; checked
    (:func:`check_dir`, which must find it empty) but not created here.

    :raises Refused: ``--out DIR: ...`` (``flag``) when it exists and is not empty, is a file or
        below one, or cannot be created or written.
    """
    out = Path(out) if out is not None else default_dir(name, suffix)
    check_dir(out, flag, fresh=True)
    return out


def check_file(path: Path, flag: str = "-o") -> None:
    """Refuse an output file that cannot be written, before anything is computed: ``path`` is a
    directory, a directory of its path is a file, or its directory cannot be created or written
    (:func:`check_dir`; nothing is left behind by the check). An existing file is overwritten.

    :raises Refused: one line ``FLAG PATH: cause``.
    """
    path = Path(path)
    if path.is_dir():
        raise Refused(f"{flag} {path}: is a directory, not a file")
    check_dir(path.parent, flag, fresh=False, shown=path)


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file beside it, renamed
    over ``path`` once complete (a full disk leaves ``path`` as it was). Its directory is made
    if missing.

    :raises OSError: the write failed (the temporary file is removed).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.ocslab-partial")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _first_new(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet (what making ``path``
    creates first), None if ``path`` exists."""
    return next((p for p in reversed([path, *path.parents]) if not p.exists()), None)


#: ``errno`` values of a write that failed for want of room or a storage fault. Such an error
#: often carries no file name (``f.write`` on a full disk): it is taken to be about the results
#: directory the command was writing.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def write_error(e: BaseException, out: Path | None, flag: str = "--out") -> str | None:
    """The one line for ``e`` if it is a failure to write into ``out``: ``FLAG OUT: cause``
    (``(writing FILE)`` added when the error names a file), else None.

    It is one when ``e`` is an :class:`OSError` naming a file under ``out``, or naming no file
    with an errno of :data:`STORAGE_ERRNOS` (a full disk, a quota, a read-only remount, an I/O
    error)."""
    if out is None or not isinstance(e, OSError):
        return None
    name = None if e.filename is None else Path(os.path.abspath(os.fsdecode(e.filename)))
    top = Path(os.path.abspath(out))
    under = name is not None and (name == top or top in name.parents)
    if not under and not (name is None and e.errno in STORAGE_ERRNOS):
        return None
    cause = e.strerror or type(e).__name__
    return f"{flag} {out}: {cause}" + (f" (writing {os.fsdecode(e.filename)})" if under and name != top else "")


class _Made:
    """What a command creates under ``out``: the outermost directory it makes, or (``out``
    existed) the entries that were not there before; :meth:`remove` takes them away."""

    def __init__(self, out: Path | None):
        self.out = out
        self.first_new = None if out is None else _first_new(out)
        self.before = set(out.rglob("*")) if out is not None and self.first_new is None and out.is_dir() else None

    def remove(self) -> None:
        """Remove what the command made (files it rewrote that existed before are left)."""
        if self.first_new is not None:
            if self.first_new.is_dir() and not self.first_new.is_symlink():
                shutil.rmtree(self.first_new, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.first_new.unlink()
        elif self.before is not None and self.out.is_dir():
            made = [p for p in self.out.rglob("*") if p not in self.before]
            for p in sorted(made, key=lambda p: len(p.parts)):  # outermost first
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()


@contextlib.contextmanager
def writing(out: Path, flag: str = "--out", clear: bool = False, prog: str | None = None) -> Iterator[None]:
    """Around a script's body that writes into ``out`` (its ``--out``, which may hold the
    script's earlier outputs): first :func:`check_dir` (``out`` a file or below one, or not
    writable: one line, exit 2, before anything runs); with ``clear``, ``out`` is then emptied
    (the script's earlier outputs). On a failure to write there (:func:`write_error`, e.g. a
    full disk) what the block made is removed (:class:`_Made`), the one line printed and the
    process exits with status 2 (:data:`EXIT_BAD_INPUT`); anything else propagates. Lines begin
    ``prog:`` (default: the script's file name without ``.py``).

    :raises SystemExit: status 2, on a refused ``out`` or a write failure.
    """
    out = Path(out)
    prog = prog or Path(sys.argv[0]).stem or "ocslab"

    def refuse(line: str) -> SystemExit:
        print(f"{prog}: {line}", file=sys.stderr)
        return SystemExit(EXIT_BAD_INPUT)

    try:
        check_dir(out, flag, fresh=False)
    except Refused as e:
        raise refuse(str(e)) from None
    if clear and out.is_dir():
        shutil.rmtree(out)
    made = _Made(out)
    try:
        yield
    except OSError as e:
        line = write_error(e, out, flag)
        if line is None:
            raise
        made.remove()
        raise refuse(line) from None


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record is emitted."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _LineFormatter(logging.Formatter):
    """``ocslab: warning: text`` (``-vv`` adds the module)."""

    def format(self, record: logging.LogRecord) -> str:
        where = f" {record.name}" if record.levelno < logging.INFO else ""
        return f"ocslab: {record.levelname.lower()}{where}: {record.getMessage()}"


def configure_logging(verbose: int = 0, quiet: bool = False) -> None:
    """Send the ``emulation`` and ``controllers`` loggers to stderr: warnings by default, each
    phase of a run with ``verbose`` 1 (INFO), every detail with 2 (DEBUG), errors only with
    ``quiet`` (which also hides the progress bars, :func:`progress_bar`)."""
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    handler = _Stderr()
    handler.setFormatter(_LineFormatter())
    for name in ("emulation", "controllers"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


#: Seconds between the lines a long job prints when stderr is not a terminal (a log file, a
#: notebook, nohup); a job shorter than this prints none.
HEARTBEAT_S = 10.0


class _Heartbeat:
    """Where stderr is not a terminal: one line ``ocslab: progress: LABEL: TEXT (DONE/TOTAL, N s,
    about M s left)`` every :data:`HEARTBEAT_S` seconds while the job runs, from a daemon thread
    (``progress:`` tells them from a refusal's or a failed check's one line)."""

    def __init__(self, label: str, total: int, every_s: float = HEARTBEAT_S):
        import threading
        import time

        self.label, self.total, self.every_s = label, total, every_s
        self.text, self.done = "", 0
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def update(self, text: str, done: int, total: int) -> None:
        """The job's state now (what the next line says)."""
        self.text, self.done, self.total = text, done, total

    def line(self) -> str:
        """The line for the state now."""
        import time

        elapsed = time.monotonic() - self.t0
        left = ""
        if 0 < self.done < self.total:
            left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left"
        what = f": {self.text}" if self.text else ""
        count = f"{self.done}/{self.total}, " if self.total > 1 else ""
        return f"ocslab: progress: {self.label}{what} ({count}{elapsed:.0f} s{left})"

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            print(self.line(), file=sys.stderr, flush=True)


def quiet() -> bool:
    """``-q`` is in force (the ``emulation`` logger above WARNING): errors only."""
    return logging.getLogger("emulation").getEffectiveLevel() > logging.WARNING


@contextlib.contextmanager
def phase(label: str) -> Iterator[None]:
    """A long phase without steps (loading and validating a scenario, planning): a spinner on a
    terminal, a heartbeat line every :data:`HEARTBEAT_S` s otherwise, nothing under ``-q`` or
    when it ends sooner."""
    if quiet():
        yield
        return
    if not sys.stderr.isatty():
        with _Heartbeat(label, 1):
            yield
        return
    from rich.console import Console

    with Console(stderr=True).status(label):
        yield


@contextlib.contextmanager
def progress_bar(label: str, total: int = 1) -> Iterator[Progress]:
    """A transient progress bar on stderr, with the time elapsed and an estimate of the time
    left; yields a :data:`Progress` that shows ``label: text`` at ``done`` of ``total`` (and logs
    it at DEBUG). Where stderr is not a terminal, a heartbeat line every :data:`HEARTBEAT_S`
    seconds instead (:class:`_Heartbeat`). Under ``-q`` (the ``emulation`` logger above WARNING)
    nothing is drawn."""
    if quiet():
        yield lambda text, done, total: log.debug("%s: %s (%d/%d)", label, text, done, total)
        return
    if not sys.stderr.isatty():
        with _Heartbeat(label, total) as beat:
            def beating(text: str, done: int, total: int) -> None:
                log.debug("%s: %s (%d/%d)", label, text, done, total)
                beat.update(text, done, total)

            yield beating
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Bar(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
             TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True),
             transient=True) as bar:
        task = bar.add_task(label, total=total)

        def progress(text: str, done: int, total: int) -> None:
            log.debug("%s: %s (%d/%d)", label, text, done, total)
            bar.update(task, description=f"{label}: {text}", completed=done, total=total)

        yield progress


def guarded(out: Path | None, job: Callable[[], int], flag: str = "--out") -> int:
    """Run ``job()`` (which returns an exit status) and map what it raises to one line and the
    exit statuses of the module doc. ``out``: the results directory the job writes into
    (``flag`` names it in messages).

    - a refusal: exit 2, and what the job made under ``out`` is removed (the directory if it
      did not exist before, else the entries it added: nothing is left half-created);
    - a failure to write into ``out`` (:func:`write_error`: a full disk, a file where a
      directory should be, a read-only file system): ``FLAG OUT: cause``, exit 2, and what the
      job made is removed as for a refusal (a results directory is never left as if complete);
    - a failure of the run: exit 1, ``out`` kept (its logs, a partial ``result.json``);
    - Ctrl-C: exit 130.

    Exceptions neither of these propagate (a bug: a traceback)."""
    made = _Made(out)
    try:
        return job()
    except KeyboardInterrupt:
        kept = out is not None and (out / "result.json").exists()
        where = (f"; what finished is in {out}/result.json (complete: false)" if kept
                 else f" (logs in {out})" if out is not None and out.exists() and any(out.iterdir()) else "")
        print(f"ocslab: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # classified below; anything else is re-raised
        text = " ".join(str(e).split("\n")[:1]) or type(e).__name__
        if _named(e, REFUSALS):
            made.remove()
            return fail(text, EXIT_BAD_INPUT)
        if _named(e, FAILURES):
            where = ""
            if out is not None and out.exists():
                partial = " and partial results (result.json, complete: false)" if (out / "result.json").exists() else ""
                where = f" (logs{partial} in {out})"
            return fail(f"{text}{where}", EXIT_FAILED)
        line = write_error(e, out, flag)
        if line is not None:
            made.remove()
            return fail(line, EXIT_BAD_INPUT)
        raise
