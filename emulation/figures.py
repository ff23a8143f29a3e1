"""Figures and tables every kind's report draws with: a matplotlib figure saved to a PNG
(:func:`figure`), a Gantt chart of lanes and its legend (:func:`lanes`, :func:`legend`), a rich
table (:func:`table`), a wide console (:func:`console`) and a CSV file (:func:`write_csv`). Nothing here knows a kind; the reports (``emulation/collective/report.py`` and each
kind's ``report.py``) say what goes in them."""

from __future__ import annotations

import csv
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from rich.console import Console
from rich.table import Table


@contextmanager
def figure(path: Path, rows: int = 1, cols: int = 1, size: tuple[float, float] = (10, 4), dpi: int = 110,
           rect: tuple[float, float, float, float] | None = None) -> Iterator[tuple[object, object]]:
    """A matplotlib figure of ``rows`` x ``cols`` axes (a 2-D array, ``squeeze=False``) of ``size``
    inches, drawn on the Agg backend; on leaving the block it is laid out (``rect``: the part of
    the figure the axes fill), saved to ``path`` at ``dpi`` and closed. Yields ``(fig, axes)``.

    :raises OSError: ``path`` cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False)
    try:
        yield fig, axes
        fig.tight_layout(**({"rect": rect} if rect else {}))
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)


def lanes(ax, spans: Iterable[tuple[int, float, float, str]], colours: dict[str, object] | None = None,
          height: float = 0.8, edges: bool = False) -> dict[str, object]:
    """Draw a Gantt chart on ``ax``: each span ``(lane, start, width, category)`` a bar on lane
    ``lane`` (y = lane, ``height`` high), coloured by ``colours[category]``; a category missing
    from ``colours`` (default: none given) takes the next tab10 colour, and is added to it. With
    ``edges``, a thin white line separates adjacent spans (left out above 200 spans in a lane,
    where it would hide them). One artist per (lane, colour), so a lane of thousands of spans
    stays cheap.

    :returns: the colours by category (for :func:`legend`).
    """
    from matplotlib import colormaps

    colours = {} if colours is None else colours
    palette = colormaps["tab10"]
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for lane, start, width, category in spans:
        bars.setdefault((lane, category), []).append((start, width))
    for (lane, category), xs in bars.items():
        colour = colours.setdefault(category, palette(len(colours) % 10))
        ax.broken_barh(xs, (lane - height / 2, height), facecolors=colour, edgecolors="white",
                       linewidth=0.5 if edges and len(xs) < 200 else 0)
    return colours


def legend(where, colours: dict[str, object], leave_out: Iterable[str] = (), **kwargs) -> None:
    """A legend of coloured patches, one per category of ``colours`` but ``leave_out``, on
    ``where`` (axes or figure; ``kwargs`` to its ``legend``)."""
    from matplotlib.patches import Patch

    leave_out = set(leave_out)
    where.legend(handles=[Patch(color=c, label=k) for k, c in colours.items() if k not in leave_out], **kwargs)


def console(width: int = 110) -> Console:
    """A rich console at least ``width`` characters wide (a terminal's own width if wider)."""
    return Console(width=max(Console().width, width))


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]], left: Iterable[str] = ()) -> Table:
    """A rich table: ``columns`` right-justified except those named in ``left``, one row per item
    of ``rows`` (each cell printed with ``str``)."""
    left = set(left)
    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify="left" if c in left else "right")
    for row in rows:
        t.add_row(*(str(x) for x in row))
    return t


def formatted(values, formats: Iterable[tuple[str, str]]) -> list[str]:
    """``format(values[key], spec)`` for each ``(key, spec)`` of ``formats`` (a row's cells from
    a mapping of figures, e.g. ``(("utilisation", ".1%"), ("jct_mean_s", ".0f"))``)."""
    return [format(values[k], f) for k, f in formats]


def write_csv(path: Path, rows: Iterable[Sequence[object]] | Sequence[dict], header: Sequence[str] | None = None) -> None:
    """``path``: a CSV file with a header line. ``rows`` are sequences under ``header``, or dicts
    (the header is the first one's keys; a key another lacks is an empty cell).

    :raises OSError: ``path`` cannot be written.
    """
    rows = list(rows)
    if header is None:
        header = list(rows[0]) if rows else []
        rows = [[r.get(k) for k in header] for r in rows]  # a key a row lacks: an empty cell
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
