"""Two-hop forwarding on a time-slotted OCS (RotorLB-style load balancing), planned per step.

Source: RotorNet (Mellette et al., SIGCOMM 2017), RotorLB ("agents send a transfer only
while a circuit to its destination is up, or forward through an intermediate GPU, two-hop, as an
option").

A rotor is oblivious: every pair gets the same window each turn whatever its demand, so a pair
whose demand exceeds its window waits whole turns while other circuits idle. Two-hop forwarding
sends such a pair's excess to an intermediate GPU m over the spare capacity of the src-m circuit;
m holds it and forwards it over the spare capacity of its m-dst circuit (store and forward: m
forwards a part once all of it has arrived).

The plan is made per step from the step's demand (an MoE layer exchanges its dispatch counts
before the data), turn by turn and slot by slot, from where the previous step's plan delivered
its last bytes: steps are round-synchronous while the rotor keeps turning, so a step starts in
the slot the previous one ended in, with the part of that slot's window it had not used. Every directed circuit a->b of a slot, whose
window carries c bytes, carries in order:

1. parts held at a for b (second hops; they have waited longest);
2. a's own demand for b (direct);
3. a's *excess* for every other destination d (what a cannot send directly in the rest of this
   turn: its demand for d minus the a->d windows still ahead), largest first, offloaded to b as
   far as a b->d window still ahead *in this turn* has room after b's own demand for d and what
   b already holds for d. A relayed part thus arrives in the turn it left, a turn before its
   direct path could carry it (RotorLB also forwards in later turns; for one step's completion
   time that only adds a hop).

Demand that fits its direct windows is never relayed, so uniform traffic on a rotor sized for it
stays direct. The backends send each GPU pair's parts one after another, in the order they become
ready (the direct part and first hops in transfer order, second hops when they have arrived), not
by this slot accounting; the plan's turn count is an estimate.
"""

from __future__ import annotations

import numpy as np

from emulation.schedule import Parts, RelayPlan
from emulation.workloads.model import Workload

#: Relayed amounts under this fraction of the smallest window stay direct.
MIN_PART_FRACTION = 1 / 64
#: Turns after which planning a step gives up (the schedule cannot carry the demand).
MAX_TURNS = 100_000


def window_bytes(slots_s, guard_s: float, headroom: float, port_gbps: float) -> np.ndarray:
    """Bytes one circuit direction is planned to carry in each slot: the slot minus its two
    guard bands, at ``port_gbps`` (Gbit/s), less the ``headroom`` fraction kept spare
    (the inverse of :meth:`emulation.schedule.SlotSchedule.from_weighted`). Shape (K,)."""
    return (np.asarray(slots_s, dtype=float) - 2 * guard_s) * port_gbps * 1e9 / 8 / (1 + headroom)


def two_hop(workload: Workload, configs, window: np.ndarray) -> RelayPlan:
    """Plan two-hop forwarding for ``workload`` on a rotor (module doc).

    :param configs: (K,) configurations, each directed ``(src, dst)`` circuits (a pair listed m
        times = m circuits), as :attr:`emulation.schedule.SlotSchedule.configs`.
    :param window: (K,) bytes one circuit is planned to carry per slot (:func:`window_bytes`:
        without the slot's headroom, which stays spare for timing error on both hops).
    :returns: the :class:`RelayPlan`.
    :raises ValueError: a window is not positive, or a step's demand joins GPUs the schedule
        never connects.
    """
    n = workload.ranks
    window = np.asarray(window, dtype=float)
    if len(window) != len(configs) or (window <= 0).any():
        raise ValueError("window: one positive byte count per configuration")
    cap = np.zeros((len(configs), n, n))
    for k, pairs in enumerate(configs):
        for a, b in pairs:
            cap[k, a, b] += window[k]
    connected = cap.sum(axis=0) > 0
    min_part = MIN_PART_FRACTION * window.min()
    all_parts, turns = [], []
    first, fill = 0, 0.0  # where a step is expected to start: slot, fraction of it already gone
    for i, step in enumerate(workload.steps):
        demand = step.demand(n)
        bad = np.argwhere((demand > 0) & ~connected)
        if len(bad):
            a, b = bad[0]
            raise ValueError(f"step {i}: GPUs {a} and {b} are never connected by the schedule")
        order = [(first + j) % len(configs) for j in range(len(configs))]
        relay, used, last, fill = _plan_step(demand, [configs[k] for k in order], cap[order], 1 - fill)
        all_parts.append(_split(step.transfers, relay, min_part))
        turns.append(used)
        first = order[last]
        if fill >= 1 - 1e-9:
            first, fill = (first + 1) % len(configs), 0.0
    return RelayPlan(tuple(all_parts), tuple(turns))


def _plan_step(demand, configs, cap, left: float) -> tuple[np.ndarray, int, int, float]:
    """Greedy of the module doc for one step whose turn starts with ``configs[0]``, of which only
    the fraction ``left`` remains: ``(relay[s, m, d] bytes, turns used, index of the last slot
    that delivered bytes, the largest fraction of a window that slot had used by then)``."""
    n = demand.shape[0]
    ahead = np.cumsum(cap[::-1], axis=0)[::-1] - cap  # what the windows after slot k carry this turn
    rem = demand.copy()
    held = np.zeros((n, n))  # held[m, d]: relayed bytes at m waiting for an m->d window
    relay = np.zeros((n, n, n))
    turn, last, last_fill = 0, 0, 0.0
    eps = 1e-6
    while rem.sum() + held.sum() > eps:
        turn += 1
        if turn > MAX_TURNS:
            raise ValueError("the schedule does not carry the demand")  # unreachable when connected
        for k, pairs in enumerate(configs):
            gone = 1 - left if turn == 1 and k == 0 else 0.0
            slot_fill = 0.0
            for a, b in set(pairs):
                full = cap[k, a, b]
                c = full * (1 - gone)
                x = min(c, held[a, b])
                y = min(c - x, rem[a, b])
                held[a, b] -= x
                rem[a, b] -= y
                c -= x + y
                if x + y > eps:
                    slot_fill = max(slot_fill, gone + (x + y) / full)
                if c <= eps:
                    continue
                excess = np.maximum(rem[a] - ahead[k, a], 0.0)
                room = np.maximum(ahead[k, b] - rem[b] - held[b], 0.0)
                offer = np.minimum(excess, room)
                offer[[a, b]] = 0.0
                for d in np.argsort(-offer, kind="stable"):
                    if c <= eps or offer[d] <= eps:
                        break
                    x = min(c, offer[d])
                    relay[a, b, d] += x
                    rem[a, d] -= x
                    held[b, d] += x
                    c -= x
            if slot_fill > 0:
                last, last_fill = k, slot_fill
    return relay, turn, last, last_fill


def _split(transfers, relay: np.ndarray, min_part: float) -> tuple[Parts, ...]:
    """Hand each (src, dst) pair's relayed bytes out to its transfers in order; the rest of
    every transfer goes direct. Amounts under ``min_part`` stay direct."""
    out: list[Parts] = []
    pending: dict[tuple[int, int], list[list[int]]] = {}
    for t in transfers:
        key = (t.src, t.dst)
        if key not in pending:
            vias = relay[t.src, :, t.dst] if t.src != t.dst else np.zeros(0)
            pending[key] = [[int(m), int(y)] for m, y in enumerate(vias) if y >= min_part]
        parts: list[tuple[int | None, int]] = []
        left = t.bytes
        queue = pending[key]
        while left and queue:
            m, y = queue[0]
            x = min(left, y)
            parts.append((m, x))
            left -= x
            queue[0][1] -= x
            if queue[0][1] <= 0:
                queue.pop(0)
        if left or not parts:
            parts.insert(0, (None, left))
        out.append(tuple(parts))
    return tuple(out)
