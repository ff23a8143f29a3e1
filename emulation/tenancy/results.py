"""The results of a tenancy scenario (``result.json``, inside the envelope), typed: a trace's
replays on the flow backend (:class:`TenancyResult`, of the flow layer's
:class:`~emulation.flowsim.rack_sweep.TenancyRun` records). Morphlux arXiv 2508.03674, Propius
arXiv 2510.19617."""

from __future__ import annotations

from pydantic import BaseModel

from emulation.flowsim.rack_sweep import TenancyRun


class TenancyResult(BaseModel):
    """A tenancy trace's replays (inside the envelope, :mod:`emulation.envelope`): the rack and
    trace as run, every replay."""

    rack: dict
    trace: dict
    runs: list[TenancyRun]

    def run(self, allocator: str, scheduler: str) -> TenancyRun:
        """The replay of that allocator and scheduler. :raises KeyError: none."""
        for r in self.runs:
            if r.allocator == allocator and r.scheduler == scheduler:
                return r
        raise KeyError(f"{allocator}/{scheduler}")
