"""Verdicts of the paper reproductions: each headline of a paper, our figure, a tolerance fixed
before the run, and *held* or *missed*.

Every ``scripts/reproduce_*.py`` measures its paper's headlines and hands each figure to a
:class:`Verdicts` under the headline's :class:`Claim` (the one table of claims and tolerances,
:data:`emulation.reproduce.claims.CLAIMS`, with the reason for each tolerance). The script ends
with the verdict table, writes it to ``verdicts.json`` in its results directory and exits with
the verdict: 0 when every judged headline held, 1 when one missed (or could not be measured).
``ocslab reproduce`` runs every script's flow-backend form (``--packet`` adds the packet parts)
and prints one table of all of them (:mod:`emulation.reproduce.suite`).

How a figure is judged (:attr:`emulation.reproduce.claim.Claim.rule`):

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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from pydantic import BaseModel, ConfigDict

from emulation.reproduce.claim import Claim, Outcome, Rule, fmt
from emulation.reproduce.claims import CLAIMS


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
        the exit status (:func:`verdict_status`)."""
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
        write_verdicts(out / "verdicts.json", rows)
        print_table(rows, f"{self.script}: verdicts against the paper")
        return verdict_status(rows)


def verdict_status(rows: list[Verdict]) -> int:
    """0 when no row ``missed`` or is an ``error``, else 1."""
    return 1 if any(r.verdict in ("missed", "error") for r in rows) else 0


def write_verdicts(path: Path, rows: list[Verdict]) -> None:
    """Write ``rows`` as ``verdicts.json``."""
    path.write_text(json.dumps([r.model_dump() for r in rows], indent=1) + "\n")


def read_verdicts(path: Path) -> list[Verdict]:
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


__all__ = ["CLAIMS", "Claim", "Outcome", "Rule", "Verdict", "Verdicts", "counts", "fmt", "print_table",
           "read_verdicts", "verdict_status", "write_verdicts"]
