"""Round-synchronous execution (what the packet emulator executes): step i is released when
step i-1 is delivered; a step marked ``reconfigure`` first waits R (the fabric is dark while
the circuits change) and its transfers then run on the new configuration. A rank that arrives
late releases no transfer before it arrives.

Every step runs alone on the fabric, so a step whose content equals an earlier one's takes that
simulation shifted in time (:class:`~emulation.flowsim.steps.StepSimulator`); a step released
after every rank has arrived costs a dictionary look-up, whatever its size.

Spec: ``docs/flow-backend.md``, ``docs/mechanisms.md`` (execution semantics).
"""

from __future__ import annotations

import numpy as np

from emulation.flowsim.account import RunAccount
from emulation.flowsim.steps import StepSimulator


def run_round_synchronous(account: RunAccount, sim: StepSimulator, arrivals: np.ndarray) -> None:
    """Execute ``account``'s workload and plan round by round, recording into ``account``.

    :param arrivals: (ranks,) when each rank arrives, s.
    :raises SimulationError: a transfer is unroutable or a flow never finishes.
    """
    plan, workload = account.plan, account.workload
    delay = plan.reconfiguration_delay_s
    last_arrival = float(arrivals.max()) if arrivals.size else 0.0
    prev_end = 0.0
    for i, (step, sp) in enumerate(zip(workload.steps, plan.steps)):
        start = prev_end
        reconf = sp.action == "reconfigure"
        release = start + (delay if reconf else 0.0)
        end, busiest = release, None
        if len(step):
            offsets = None
            if release < last_arrival:
                late = np.maximum(arrivals[step.src] - release, 0.0)
                offsets = late if late.any() else None
            out = sim.run(sp.configuration, step.src, step.dst, step.bytes, offsets)
            end = release + out.end
            busiest = out.max_link_bytes
            account.add_outcome_loads(out)
            account.delivered += out.bytes
            if account.record:
                account.add_transfers(i, release + (0.0 if offsets is None else offsets) + np.zeros(len(step)),
                                      release + out.deliver)
        account.add_step(i, start, end, busiest, reconf)
        prev_end = end
