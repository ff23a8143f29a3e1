"""The result of a WAN scenario (``result.json``), typed: one
:class:`emulation.te_intervals.Interval` per traffic matrix (from the flow backend,
:mod:`emulation.flowsim.wan`, and for the packet backend with what it measured,
:mod:`emulation.emulator.wan_replay`) and the settings that produced them."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from emulation.te_intervals import Interval, agreement, summary


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
        """:func:`emulation.te_intervals.summary` of the intervals."""
        return summary(self.intervals)

    @computed_field
    @property
    def agreement(self) -> Optional[dict[str, float]]:
        """:meth:`agreement_skipping` no interval."""
        return self.agreement_skipping(frozenset())

    def agreement_skipping(self, skip: set[int] = frozenset()) -> dict[str, float] | None:
        """Packet backend only (else None): :func:`emulation.te_intervals.agreement` of the
        intervals not in ``skip`` (indices into ``intervals``)."""
        return agreement(self.intervals, self.topology["capacity"], skip)
