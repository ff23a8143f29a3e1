"""Verdicts of the paper reproductions: each headline of a paper, our figure, a tolerance fixed
before the run, and *held* or *missed*.

Every ``scripts/reproduce_*.py`` measures its paper's headlines and hands each figure to a
:class:`Verdicts` under the headline's :class:`Claim` (the one table of claims and tolerances,
:data:`emulation.reproduce.claims.CLAIMS`, with the reason for each tolerance). The script ends
with the verdict table, writes it to ``verdicts.json`` in its results directory and exits with
the verdict: 0 when every judged headline held, 1 when one missed (or could not be measured).
``ocslab reproduce`` runs every script's flow-backend form (``--packet`` adds the packet parts)
and prints one table of all of them (:mod:`emulation.reproduce.suite`).

How a figure is judged (:attr:`Claim.rule`):

==============  ==================================================================================
``within``      ``|ours - paper| <= tol x |paper|``; for a range ``[low, high]``: inside it widened
                by ``tol`` (relative). A gain (``+66%``) is judged as the gain, not as the ratio.
``factor``      ``paper / tol <= ours <= paper x tol`` (the order of magnitude)
``at_least``    ``ours >= paper`` (a claim of "over", "at least"); ``tol`` unused
``at_most``     ``ours <= paper`` (a claim of "under", "within")
``exact``       ``|ours - paper| <= tol`` (an absolute slack: rounding of the paper's figure)
``holds``       a property of the paper's claim holds (``ours`` is True or False)
``direction``   ``ours > 1``: only the sign of the paper's effect carries over to our setting
``calibrated``  an input of ours was fitted to this figure: shown, never judged
``not modelled`` what ocslab does not model (a GPU kernel, an end-to-end job it does not run)
==============  ==================================================================================

A figure fitted to a paper never checks anything; no tolerance compares against a figure of
this code's own earlier output; a miss stays a miss, explained on the paper's page
(``docs/papers/``).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict

Rule = Literal["within", "factor", "at_least", "at_most", "exact", "holds", "direction", "calibrated", "not modelled"]
#: Verdicts: ``held``, ``missed``, ``calibrated`` (shown only), ``not modelled``, ``not run``
#: (a packet part left out), ``error`` (the script failed before measuring it).
Outcome = Literal["held", "missed", "calibrated", "not modelled", "not run", "error"]


@dataclass(frozen=True)
class Claim:
    """One headline of a paper and how ocslab's figure for it is judged (module doc).

    :param id: ``script.headline`` (the script: ``pccl`` for ``scripts/reproduce_pccl.py``).
    :param paper: the paper's short name; :param arxiv: its arXiv id.
    :param headline: what the figure is, in the paper's terms and our setting.
    :param paper_text: the paper's figure as it states it (``up to 3x``, ``+66%``).
    :param value: the paper's figure as a number in :attr:`unit` (a gain, ratio, seconds...); a
        ``(low, high)`` range; None for ``holds``, ``calibrated``, ``not modelled``.
    :param rule: how ours is judged (:data:`Rule`); :param tol: its tolerance.
    :param reason: why this tolerance (fixed before the run).
    :param unit: ``x`` (a ratio), ``%`` (a fraction shown as a percentage), ``s``, ``ms``, or
        empty (a count).
    :param part: ``flow`` (no root) or ``packet`` (real packets: root, Open vSwitch).
    :param gain: judge a ratio by its gain over 1 (``1.4x`` as ``+40%``): a tolerance on a
        factor near 1 would accept no effect at all.
    """

    id: str
    paper: str
    arxiv: str
    headline: str
    paper_text: str
    value: Union[float, tuple[float, float], None]
    rule: Rule
    tol: float
    reason: str
    unit: str = "x"
    part: Literal["flow", "packet"] = "flow"
    gain: bool = False

    @property
    def script(self) -> str:
        """The reproduction script's name (``pccl``)."""
        return self.id.split(".", 1)[0]

    def tolerance_text(self) -> str:
        """The tolerance as the verdict table shows it."""
        r = self.rule
        if r == "within":
            return f"+-{self.tol:.0%}" + (" of the gain" if self.gain else "")
        if r == "factor":
            return f"x/{self.tol:g}"
        if r == "exact":
            return "exact" if self.tol == 0 else f"+-{fmt(self.tol, self.unit)}"
        if r in ("at_least", "at_most"):
            return f"{'>=' if r == 'at_least' else '<='} {fmt(self.value, self.unit)}"
        return {"holds": "must hold", "direction": "> 1x", "calibrated": "(fitted)", "not modelled": "-"}[r]

    def judge(self, ours: float | bool | None) -> Outcome:
        """``held`` or ``missed`` for ``ours`` (None: ``error``); ``calibrated`` and ``not
        modelled`` claims are never judged.

        :raises TypeError: a ``holds`` claim given a number, or another given a bool."""
        if self.rule in ("calibrated", "not modelled"):
            return self.rule
        if ours is None or (isinstance(ours, float) and math.isnan(ours)):
            return "error"
        if self.rule == "holds":
            if not isinstance(ours, bool):
                raise TypeError(f"{self.id}: a property is True or False, got {ours!r}")
            return "held" if ours else "missed"
        if isinstance(ours, bool):
            raise TypeError(f"{self.id}: a {self.rule} claim takes a number, got {ours!r}")
        lo, hi = self.value if isinstance(self.value, tuple) else (self.value, self.value)
        if self.gain:
            lo, hi, ours = lo - 1, hi - 1, ours - 1
        ok = {"within": lambda: lo - self.tol * abs(lo) <= ours <= hi + self.tol * abs(hi),
              "factor": lambda: lo / self.tol <= ours <= hi * self.tol,
              "at_least": lambda: ours >= lo,
              "at_most": lambda: ours <= hi,
              "exact": lambda: lo - self.tol <= ours <= hi + self.tol,
              "direction": lambda: ours > 1.0}[self.rule]()
        return "held" if ok else "missed"


def fmt(x: float | bool | None, unit: str) -> str:
    """A figure for the table: ``1.36x``, ``+66%``, ``0.95 s``."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if unit == "%":
        return f"{x:+.1%}" if x < 0 else f"{x:.1%}"
    if unit == "x":
        return f"{x:.3f}x" if 0.9 < x < 1.1 else f"{x:.3g}x"
    if unit in ("s", "ms", "us"):
        scale = {"s": 1, "ms": 1e3, "us": 1e6}[unit]
        return f"{x * scale:.3g} {unit}"
    return f"{x:g}"


class Verdict(BaseModel):
    """One row of a verdict table (``verdicts.json``): the claim's fields as shown, ours, the
    verdict and a note (what ours was measured on, or why it is missing)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    paper: str
    arxiv: str
    headline: str
    paper_text: str
    ours: Optional[Union[bool, float]]
    ours_text: str
    tolerance: str
    verdict: Outcome
    part: str
    note: str = ""


@dataclass
class Verdicts:
    """The verdicts of one reproduction script (``script``: ``pccl``): :meth:`judge` each of its
    claims as it measures them, then :meth:`finish`."""

    script: str
    rows: list[Verdict] = field(default_factory=list)

    def claims(self) -> list[Claim]:
        """The script's claims, in the table's order."""
        from emulation.reproduce.claims import CLAIMS

        return [c for c in CLAIMS if c.script == self.script]

    def judge(self, claim_id: str, ours: float | bool | None, note: str = "") -> Outcome:
        """Judge ``ours`` for the claim ``claim_id`` (:meth:`Claim.judge`), print its line and
        keep its row; the verdict.

        :raises KeyError: no claim of this script has that id."""
        c = {c.id: c for c in self.claims()}[f"{self.script}.{claim_id}"]
        verdict = c.judge(ours)
        row = Verdict(id=c.id, paper=c.paper, arxiv=c.arxiv, headline=c.headline, paper_text=c.paper_text,
                      ours=ours if isinstance(ours, (bool, type(None))) else float(ours), ours_text=fmt(ours, c.unit),
                      tolerance=c.tolerance_text(), verdict=verdict, part=c.part, note=note)
        self.rows = [r for r in self.rows if r.id != c.id] + [row]
        print(f"    [{verdict}] {c.headline}: ours {row.ours_text}, paper {c.paper_text} ({row.tolerance})"
              + (f"; {note}" if note else ""), flush=True)
        return verdict

    def skip(self, claim_id: str, note: str) -> None:
        """Record the claim ``claim_id`` as ``not run`` (this run's options leave out, or change,
        the setting it is judged at; ``note`` says which).

        :raises KeyError: no claim of this script has that id."""
        c = {c.id: c for c in self.claims()}[f"{self.script}.{claim_id}"]
        self.rows = [r for r in self.rows if r.id != c.id] + [Verdict(
            id=c.id, paper=c.paper, arxiv=c.arxiv, headline=c.headline, paper_text=c.paper_text, ours=None,
            ours_text="-", tolerance=c.tolerance_text(), verdict="not run", part=c.part, note=note)]

    def finish(self, out: Path, packet: bool = True) -> int:
        """The rows of every claim (those not judged: ``calibrated`` and ``not modelled`` as
        they are, a flow claim ``error``, a packet claim ``not run`` without ``packet`` or
        ``error`` with it), printed as the verdict table and written to ``out/verdicts.json``;
        the exit status (:func:`status`)."""
        got = {r.id: r for r in self.rows}
        rows = []
        for c in self.claims():
            if c.id in got:
                rows.append(got[c.id])
                continue
            missing: Outcome = c.rule if c.rule in ("calibrated", "not modelled") else (
                "not run" if c.part == "packet" and not packet else "error")
            rows.append(Verdict(id=c.id, paper=c.paper, arxiv=c.arxiv, headline=c.headline, paper_text=c.paper_text,
                                ours=None, ours_text="-", tolerance=c.tolerance_text(), verdict=missing, part=c.part,
                                note=c.reason if missing in ("calibrated", "not modelled") else ""))
        self.rows = rows
        out.mkdir(parents=True, exist_ok=True)
        write(out / "verdicts.json", rows)
        print_table(rows, f"{self.script}: verdicts against the paper")
        return status(rows)


def status(rows: list[Verdict]) -> int:
    """0 when no row ``missed`` or is an ``error``, else 1."""
    return 1 if any(r.verdict in ("missed", "error") for r in rows) else 0


def write(path: Path, rows: list[Verdict]) -> None:
    """Write ``rows`` as ``verdicts.json``."""
    path.write_text(json.dumps([r.model_dump() for r in rows], indent=1) + "\n")


def read(path: Path) -> list[Verdict]:
    """The rows of a ``verdicts.json``. :raises OSError, ValueError: unreadable or not verdicts."""
    return [Verdict.model_validate(d) for d in json.loads(Path(path).read_text())]


def counts(rows: list[Verdict]) -> str:
    """``12 held, 3 missed, 1 calibrated, ...`` (the outcomes that occur)."""
    order = ("held", "missed", "error", "not run", "calibrated", "not modelled")
    return ", ".join(f"{sum(r.verdict == o for r in rows)} {o}" for o in order if any(r.verdict == o for r in rows))


def print_table(rows: list[Verdict], title: str, file=None) -> None:
    """The verdict table: paper, headline, the paper's figure, ours, the tolerance, the verdict."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for c in ("paper", "headline", "paper's", "ours", "tolerance", "verdict"):
        t.add_column(c, justify="right" if c in ("paper's", "ours", "tolerance") else "left",
                     overflow="fold")
    style = {"held": "green", "missed": "bold red", "error": "bold red"}
    for r in rows:
        v = f"[{style[r.verdict]}]{r.verdict}[/]" if r.verdict in style else r.verdict
        t.add_row(r.paper if r.arxiv == "-" else f"{r.paper} ({r.arxiv})", r.headline + (" [packet]" if r.part == "packet" else ""), r.paper_text,
                  r.ours_text, r.tolerance, v)
    Console(file=file or sys.stdout, width=max(160, Console().width)).print(t)
    print(f"{title}: {counts(rows)}", file=file or sys.stdout)
