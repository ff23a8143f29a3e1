"""The result of a WAN scenario (``result.json``), typed: one
:class:`emulation.te_intervals.Interval` per traffic matrix (from the flow backend,
:mod:`emulation.flowsim.wan`, and for the packet backend with what it measured,
:mod:`emulation.emulator.wan_replay`) and the settings that produced them."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from emulation.te_intervals import Interval

#: Links loaded below this fraction of capacity are left out of the relative error.
AGREEMENT_FLOOR = 0.1


class WanResult(BaseModel):
    """A WAN scenario's result (inside the envelope, :mod:`emulation.envelope`): the topology, TE,
    tunnels, slicing, divergence and traffic as run, one :class:`Interval` per matrix, the packet
    backend's settings (``packet``), and the derived :attr:`summary` and :attr:`agreement`."""

    model_config = ConfigDict(extra="forbid")

    topology: dict[str, Any]
    te: dict[str, Any]
    tunnels: dict[str, int]
    slicing: dict[str, Any]
    divergence: dict[str, Any]
    traffic: dict[str, Any]
    intervals: list[Interval]
    packet: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, d: Any) -> Any:
        """Read back from JSON: the derived summary and agreement are recomputed, not read."""
        return {k: v for k, v in d.items() if k not in ("summary", "agreement")} if isinstance(d, dict) else d

    @computed_field
    @property
    def summary(self) -> dict[str, float]:
        """Over the intervals: mean congestion, largest overload (fraction), mean delivered /
        offered, mean loss / carried."""
        iv = self.intervals
        return {"mean_congestion": float(np.mean([i.congestion for i in iv])),
                "max_overload": max((i.max_overload for i in iv), default=0.0),
                "delivered_over_offered": float(np.mean([i.delivered / i.offered for i in iv if i.offered > 0])),
                "loss_over_carried": float(np.mean([i.loss / i.carried for i in iv if i.carried > 0]))}

    @computed_field
    @property
    def agreement(self) -> Optional[dict[str, float]]:
        """:meth:`agreement_skipping` no interval."""
        return self.agreement_skipping(frozenset())

    def agreement_skipping(self, skip: set[int] = frozenset()) -> dict[str, float] | None:
        """Packet backend only (else None): measured vs computed link load over the intervals not
        in ``skip`` (indices into ``intervals``): the median and 95th percentile of the relative
        error on links loaded to at least :data:`AGREEMENT_FLOOR` of capacity, and of the error in
        utilisation points on every link; datagrams lost / sent; the longest reinstall between
        intervals (s)."""
        rel, pts, sent, lost, re = [], [], 0, 0, []
        for j, i in enumerate(self.intervals):
            m = i.measured
            if m is None:
                return None
            sent, lost = sent + m.sent, lost + m.lost
            if j > 0:  # the first install precedes the traffic and includes the solvers' start-up
                re += list(m.reinstall_s.values())
            if j in skip:
                continue
            cap = np.array(self.topology["capacity"])
            c, x = np.array(i.link_load), np.array(m.link_load)
            busy = c >= AGREEMENT_FLOOR * cap
            rel += list(np.abs(x[busy] - c[busy]) / c[busy])
            pts += list(np.abs(x - c) / cap)
        if not rel:
            return None
        return {"links": len(rel), "rel_error_median": float(np.median(rel)), "rel_error_p95": float(np.percentile(rel, 95)),
                "util_error_median": float(np.median(pts)), "util_error_p95": float(np.percentile(pts, 95)),
                "loss": lost / sent if sent else 0.0, "reinstall_max_s": max(re, default=0.0)}
