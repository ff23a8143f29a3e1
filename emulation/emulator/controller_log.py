"""Why a controller died, in one line, from its log (``controller.log``: the framework's log
records with the process's stderr, tracebacks included).

A dead controller's log can hold several tracebacks, chained ones among them: OS-Ken loading an
app file with a syntax error ends in ``ModuleNotFoundError`` thirty lines below the
``SyntaxError`` that caused it. :func:`last_exception` gives the cause: a ``SyntaxError`` (or
``IndentationError``) wherever it is, else the last traceback's exception, each with the file and
line it names.
"""

from __future__ import annotations

import re
from pathlib import Path

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|AssertionError)(?::\s*(.*))?$")


def tracebacks(text: str) -> list[tuple[str, str | None, int | None]]:
    """Every traceback in ``text`` as ``(exception line, file, line)``: the exception's last line
    (``SyntaxError: expected ':'``) and the last frame printed above it (None if none)."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            i += 1
            continue
        where: tuple[str | None, int | None] = (None, None)
        i += 1
        while i < len(lines):
            m = _FRAME.match(lines[i])
            if m:
                where = (m.group(1), int(m.group(2)))
            elif lines[i] and not lines[i][0].isspace() and _EXCEPTION.match(lines[i].strip()):
                found.append((lines[i].strip(), *where))
                break
            elif lines[i].startswith("Traceback"):
                break
            i += 1
        i += 1
    return found


def last_exception(log: Path, max_bytes: int = 1 << 20) -> str | None:
    """The exception that ended the controller whose log is ``log``, as ``"Type: message (FILE,
    line N)"``, or None when the log (its last ``max_bytes``) holds no traceback or is missing.
    A ``SyntaxError``/``IndentationError`` anywhere wins over a later traceback (its import
    failing is what the later ones report)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    tbs = tracebacks(text)
    if not tbs:
        return None
    syntax = [t for t in tbs if t[0].startswith(("SyntaxError", "IndentationError", "TabError"))]
    line, path, lineno = (syntax or tbs)[-1]
    return line + (f" ({path}, line {lineno})" if path else "")


def exited(log: Path, returncode: int | None = None) -> str:
    """One line for a controller that exited: its exit status, the cause (:func:`last_exception`)
    when its log has one, and where the log is."""
    status = f" with {returncode}" if returncode is not None else ""
    cause = last_exception(log)
    return f"the controller exited{status}" + (f": {cause}" if cause else "") + f" (log: {log})"
