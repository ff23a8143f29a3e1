"""A paper's headline and how ocslab's figure for it is judged (:class:`Claim`; the rules are in
:mod:`emulation.reproduce`'s doc, the table of claims in :mod:`emulation.reproduce.claims`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

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
