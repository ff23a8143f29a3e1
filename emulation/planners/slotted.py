"""Time-slotted plans: the rotor and the duplex BvN plan of a run's traffic (PipSwitch, arXiv
2501.18136; two-hop forwarding after RotorNet's RotorLB).

- ``rotor``: the round-robin matchings of K_n (:func:`emulation.workloads.matchings.round_robin_matchings`),
  every slot long enough for ``pair_bytes`` (default: the largest (src, dst) demand of any step,
  either way), or exactly ``slot_s`` real seconds;
- ``plan``: :func:`emulation.planners.bvn.duplex_plan` of the run's traffic matrix (the
  elementwise maximum of its steps' demand matrices), priced with the fabric's R.

Every slot carries ``headroom`` (fraction) more than it must, and hosts keep a guard band of
``guard_s`` at both ends of a slot. With ``forwarding: two-hop`` the excess of pairs that outgrow
their slot is relayed through intermediate GPUs (:func:`emulation.planners.relay.two_hop`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from emulation.fabric import Fabric
from emulation.planners.bvn import duplex_plan
from emulation.planners.relay import two_hop, window_bytes
from emulation.schedule import SlotSchedule, SlottedPlan, WeightedMatching, reconfiguration_delay
from emulation.units import bytes_per_s
from emulation.workloads.matchings import round_robin_matchings
from emulation.workloads.model import Workload


def traffic_matrix(workload: Workload) -> np.ndarray:
    """``(n, n)`` bytes: the elementwise maximum over the workload's steps of their demand
    matrices (what one slot schedule must carry per step)."""
    n = workload.ranks
    out = np.zeros((n, n))
    for st in workload.steps:
        out = np.maximum(out, st.demand(n))
    return out


def plan_slotted(kind: Literal["rotor", "plan"], fabric: Fabric, workload: Workload, *, slot_s: float | None = None,
                 pair_bytes: float | None = None, guard_s: float = 0.0, headroom: float = 0.0,
                 forwarding: Literal["direct", "two-hop"] = "direct") -> SlottedPlan:
    """The time-slotted plan of ``workload`` on ``fabric`` (module doc), in real seconds.

    :param slot_s: rotor only: every slot's length (s), guard bands included.
    :param pair_bytes: rotor only, without ``slot_s``: bytes each slot must carry per circuit.
    :raises ValueError: a slot no longer than its two guard bands, a guard band of half a slot,
        or a demand the schedule cannot carry.
    """
    rate = bytes_per_s(fabric.port_gbps)
    r = reconfiguration_delay(fabric)
    demand = traffic_matrix(workload)
    if kind == "rotor":
        if slot_s is not None:
            if slot_s <= 2 * guard_s:
                raise ValueError(f"slot_s: {slot_s:.3g} s does not exceed the two guard bands "
                                 f"(2 x guard_s = {2 * guard_s:.3g} s)")
            pair_bytes = (slot_s - 2 * guard_s) * rate / (1 + headroom)
        elif pair_bytes is None:
            pair_bytes = float(np.maximum(demand, demand.T).max())
        slots = [WeightedMatching(pair_bytes, m) for m in round_robin_matchings(workload.ranks)]
        method = "round-robin"
    else:
        slots, method = duplex_plan(demand, r * rate)
    sched = SlotSchedule.from_weighted(slots, fabric.port_gbps, r, guard_s, headroom)
    relay = None
    if forwarding == "two-hop":
        relay = two_hop(workload, sched.configs, window_bytes(sched.slots_s, guard_s, headroom, fabric.port_gbps))
    return SlottedPlan("slotted-" + kind, sched, method, workload, relay)
