"""What a simulation of one (Workload, Plan) records while it runs, and the
:class:`~emulation.results.RunResult` it becomes: every step's start, end and busiest link,
optionally every transfer's release and delivery, and the bytes every directed link carried.

Link bytes are added per distinct step outcome with its multiplicity, at the end, so a run of
many equal steps costs one addition per distinct step, not one per step.
"""

from __future__ import annotations

import numpy as np

from emulation.flowsim.links import LinkSpace
from emulation.results import RunResult, StepResult, TransferResult
from emulation.schedule import Plan
from emulation.workloads.model import Workload


#: Distinct step outcomes whose loads are counted before they are added up.
PENDING = 64


class RunAccount:
    """The records of one run of ``workload`` under ``plan`` over the links of ``space``.

    :param record: keep one :class:`~emulation.results.TransferResult` per transfer.
    """

    def __init__(self, space: LinkSpace, workload: Workload, plan: Plan, record: bool):
        self.space, self.workload, self.plan, self.record = space, workload, plan, record
        self.steps: list[StepResult] = []
        self.transfers: list[TransferResult] = []
        self.delivered = 0.0
        self._dense = np.zeros(0)  # bytes per global link, added one step at a time
        self._counted: dict[int, list] = {}  # id(outcome) -> [outcome, times it occurred]

    def add_step(self, index: int, start_s: float, end_s: float, max_link_bytes: float, opens_dark: bool) -> None:
        """Step ``index`` ran from ``start_s`` to ``end_s`` (s) with ``max_link_bytes`` on its
        busiest link; ``opens_dark``: it opened a reconfiguration (R on the record)."""
        st, sp = self.workload.steps[index], self.plan.steps[index]
        rec = StepResult.model_construct(index=index, phase=st.phase, start_s=start_s, end_s=end_s, action=sp.action,
                                         reconfiguration_delay_s=None, dark_window_measured_s=None,
                                         max_link_bytes=max_link_bytes, retransmissions=None, drops=None, timing=None,
                                         stalls=None)
        if opens_dark:
            rec.reconfiguration_delay_s = rec.dark_window_measured_s = self.plan.reconfiguration_delay_s
        self.steps.append(rec)

    def add_loads(self, link_ids: np.ndarray, link_bytes: np.ndarray) -> None:
        """Add ``link_bytes`` bytes to the global links ``link_ids`` ((K,) each, distinct ids)."""
        if link_ids.size:
            if self._dense.size < self.space.count:
                self._dense = np.concatenate([self._dense, np.zeros(self.space.count - self._dense.size)])
            self._dense[link_ids] += link_bytes

    def add_outcome_loads(self, outcome) -> None:
        """Add the loads of a step outcome (an object with ``link_ids`` and ``link_bytes``, as
        :class:`~emulation.flowsim.steps.StepOutcome`); a repeated outcome is counted and added
        once with its count (the counts are flushed every :data:`PENDING` distinct outcomes)."""
        got = self._counted.get(id(outcome))
        if got is not None and got[0] is outcome:
            got[1] += 1
            return
        if len(self._counted) >= PENDING:
            self._flush()
        self._counted[id(outcome)] = [outcome, 1]

    def _flush(self) -> None:
        for outcome, times in self._counted.values():
            self.add_loads(outcome.link_ids, outcome.link_bytes * times)
        self._counted.clear()

    def add_transfers(self, index: int, release: np.ndarray, deliver: np.ndarray) -> None:
        """Record step ``index``'s transfers released at ``release`` and delivered at ``deliver``
        ((T,) s each), if this run records transfers."""
        if not self.record:
            return
        st = self.workload.steps[index]
        self.transfers.extend(TransferResult.of(index, s, d, b, a, e) for s, d, b, a, e in zip(
            st.src.tolist(), st.dst.tolist(), st.bytes.tolist(), release.tolist(), deliver.tolist()))

    def link_totals(self) -> np.ndarray:
        """(L,) bytes every global link carried over the run."""
        self._flush()
        total = np.zeros(self.space.count)
        total[:self._dense.size] += self._dense
        return total

    def result(self, name: str, semantics: str) -> RunResult:
        """The run's :class:`~emulation.results.RunResult` (``backend="flow"``)."""
        w = self.workload
        totals = self.link_totals()
        nz = np.flatnonzero(totals > 0)
        links = np.concatenate([self.space.rows[nz].astype(float), totals[nz, None]], axis=1).tolist()
        # built from checked parts (StepResult and TransferResult records, floats): not validated
        # again, which would cost seconds for the 9 M links of a 131,072-GPU run on 35 configurations
        return RunResult.model_construct(
            name=name, collective=w.collective, algorithm=w.algorithm, planner=self.plan.planner,
            ranks=w.ranks, bytes=w.bytes, backend="flow",
            time_s=max((s.end_s for s in self.steps), default=0.0), steps=self.steps,
            transfers=self.transfers, bytes_sent=w.bytes_sent, bytes_delivered=round(self.delivered),
            semantics=semantics, transfers_omitted=0 if self.record else w.transfer_count,
            link_bytes=links, checks=None, predicted_s=None, iteration=0, straggler_delay_s=0.0, slots=None,
            padding_bytes=0, drops={},
        )
