"""The result of a WAN scenario (``result.json``), typed: one :class:`Interval` per traffic
matrix and the settings that produced them (:mod:`emulation.wan.run`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict


class Interval(BaseModel):
    """One traffic matrix (demand units of the topology): offered, carried by the controllers'
    splits, delivered after proportional sharing on overloaded links, lost there, the MLU, the
    congestion (sum of overload), the worst link's overload (fraction) and every link's load."""

    model_config = ConfigDict(extra="forbid")

    index: int
    offered: float
    carried: float
    delivered: float
    loss: float
    mlu: float
    congestion: float
    max_overload: float
    link_load: list[float]


class WanResult(BaseModel):
    """A WAN scenario's ``result.json``."""

    model_config = ConfigDict(extra="forbid")

    scenario: str
    backend: str
    created: str
    versions: dict[str, str]
    topology: dict[str, Any]
    te: dict[str, Any]
    tunnels: dict[str, int]
    slicing: dict[str, Any]
    divergence: dict[str, Any]
    traffic: dict[str, Any]
    intervals: list[Interval]

    def summary(self) -> dict[str, float]:
        """Over the intervals: mean congestion, largest overload (fraction), mean delivered /
        offered, mean loss / carried."""
        iv = self.intervals
        return {"mean_congestion": float(np.mean([i.congestion for i in iv])),
                "max_overload": max((i.max_overload for i in iv), default=0.0),
                "delivered_over_offered": float(np.mean([i.delivered / i.offered for i in iv if i.offered > 0])),
                "loss_over_carried": float(np.mean([i.loss / i.carried for i in iv if i.carried > 0]))}

    def to_json(self) -> dict:
        """The plain dict written as ``result.json`` (with the summary)."""
        return {**self.model_dump(), "summary": self.summary()}
