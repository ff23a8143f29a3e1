"""Where a command's results go, and how its failures end: the output layer every scenario kind
shares.

- :func:`results_dir`: a fresh results directory (``--out``, or ``runs/<scenario>-<UTC time>``),
  refused in one line when it is not empty or cannot be written;
- :func:`progress_bar`: a transient progress bar on stderr, and :data:`Progress`, the callback
  type that runs report through;
- :func:`guarded`: runs a job and maps what it raises to the one set of exit statuses
  (:data:`EXIT_BAD_INPUT` 2: bad input or refused before anything was measured, the results
  directory removed if this call made it; :data:`EXIT_FAILED` 1: the run failed, its logs kept;
  :data:`EXIT_INTERRUPTED` 130: Ctrl-C, the emulation torn down);
- :class:`Refused` and :class:`Failed`: what kinds raise to say which of the two it was.

Nothing here imports a backend: the backends' own errors are classified by name
(:data:`REFUSALS`, :data:`FAILURES`) so that a flow-only install never imports Mininet.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
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


class Failed(RuntimeError):
    """The job started and failed (an agent or controller died, a solver failed): exit status 1.
    ``str()`` is one line; the logs stay in the results directory."""


#: Exceptions of the backends (by class name, anywhere in the MRO) that refuse a job before it
#: measured anything: exit status 2.
REFUSALS = ("Refused", "ScenarioError", "BackendError", "HeadroomError", "MachineBusy", "MachineUnfit",
            "Busy", "CompareError")
#: Exceptions of the backends that end a started job: exit status 1.
FAILURES = ("Failed", "EmulationError", "ControllerError", "SimulationError", "TeError", "SolverError")


def _named(e: BaseException, names: tuple[str, ...]) -> bool:
    return any(c.__name__ in names for c in type(e).__mro__)


def fail(message: str, status: int = EXIT_BAD_INPUT) -> int:
    """Print ``ocslab: message`` (one line) on stderr; return ``status``."""
    print(f"ocslab: {message}", file=sys.stderr)
    return status


def stamp() -> str:
    """The UTC time as ``YYYYmmdd-HHMMSS`` (names default results directories)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def created_at() -> str:
    """The UTC time in ISO 8601 to the second (a result's ``created``)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_dir(name: str, suffix: str = "") -> Path:
    """``runs/<name>[-suffix]-<UTC time>`` (relative to the working directory)."""
    return Path("runs") / f"{name}{'-' + suffix if suffix else ''}-{stamp()}"


def results_dir(out: Path | None, name: str, suffix: str = "") -> Path:
    """The results directory of a job: ``out``, or :func:`default_dir`. It is not created here.

    :raises Refused: ``--out: ...`` when it exists and is not empty, is a file, or cannot be
        created or written (checked by making and removing it, or writing a probe file into it).
    """
    out = Path(out) if out is not None else default_dir(name, suffix)
    if out.exists() and not out.is_dir():
        raise Refused(f"--out: {out} is a file, not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise Refused(f"--out: {out} exists and is not empty")
    first_new = next((p for p in reversed([out, *out.parents]) if not p.exists()), None)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".ocslab-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise Refused(f"--out: cannot write {out}: {e.strerror or e}") from None
    finally:
        if first_new is not None:  # leave nothing this check made
            shutil.rmtree(first_new, ignore_errors=True)
    return out


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


@contextlib.contextmanager
def progress_bar(label: str, total: int = 1) -> Iterator[Progress]:
    """A transient progress bar on stderr; yields a :data:`Progress` that shows ``label: text``
    at ``done`` of ``total`` (and logs it at DEBUG). Under ``-q`` (the ``emulation`` logger above
    WARNING) no bar is drawn."""
    if logging.getLogger("emulation").getEffectiveLevel() > logging.WARNING:
        yield lambda text, done, total: log.debug("%s: %s (%d/%d)", label, text, done, total)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    with Bar(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
             TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def progress(text: str, done: int, total: int) -> None:
            log.debug("%s: %s (%d/%d)", label, text, done, total)
            bar.update(task, description=f"{label}: {text}", completed=done, total=total)

        yield progress


def guarded(out: Path | None, job: Callable[[], int]) -> int:
    """Run ``job()`` (which returns an exit status) and map what it raises to one line and the
    exit statuses of the module doc. ``out``: the results directory the job writes into; it is
    removed on a refusal if it did not exist before (nothing half-created is left), kept on a
    failure (its logs). Exceptions neither refusals nor failures propagate (a bug: a traceback)."""
    first_new = None if out is None else next((p for p in reversed([out, *out.parents]) if not p.exists()), None)

    def remove() -> None:
        if first_new is not None and first_new.exists():
            shutil.rmtree(first_new, ignore_errors=True)

    try:
        return job()
    except KeyboardInterrupt:
        print(f"interrupted: emulation torn down{f' (logs in {out})' if out and out.exists() else ''}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # classified below; anything else is re-raised
        text = " ".join(str(e).split("\n")[:1]) or type(e).__name__
        if _named(e, REFUSALS):
            remove()
            return fail(text, EXIT_BAD_INPUT)
        if _named(e, FAILURES):
            where = ""
            if out is not None and out.exists():
                partial = " and partial results (result.json, complete: false)" if (out / "result.json").exists() else ""
                where = f" (logs{partial} in {out})"
            return fail(f"{text}{where}", EXIT_FAILED)
        if isinstance(e, OSError) and out is not None and e.filename and str(e.filename).startswith(str(out)):
            remove()
            return fail(f"--out: cannot write {e.filename}: {e.strerror or e}", EXIT_BAD_INPUT)
        raise
