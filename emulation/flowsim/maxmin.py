"""Max-min fair rates by progressive filling.

Every unfrozen flow's rate rises at the same speed; when a link fills, the flows crossing it
freeze at their current rate. The result is the unique max-min fair allocation: no flow can get
more without taking from a flow that has no more than it (Bertsekas & Gallager, *Data
Networks*, sec. 6.5.2). Each round saturates at least one link, so the rounds are at most the
number of distinct bottleneck levels, and each round is a few vectorised passes over the
(flow, link) pairs.

Spec: ``docs/architecture.md`` (flow-level backend), ``docs/mechanisms.md`` (common cost model:
on a link shared by k flows each gets B/k).
"""

from __future__ import annotations

import numpy as np

#: Relative tolerance under which a link counts as full.
FULL = 1e-12


def max_min_rates(pair_flow: np.ndarray, pair_link: np.ndarray, capacity: np.ndarray,
                  flows: int) -> np.ndarray:
    """Max-min fair rate of every flow.

    :param pair_flow: (N,) flow index (0..flows-1) of each (flow, link) pair.
    :param pair_link: (N,) link index of each pair (into ``capacity``).
    :param capacity: (L,) link capacities (any unit, e.g. bytes/s); 0 for a dark link.
    :param flows: number of flows F; every flow must cross at least one link.
    :returns: (F,) rates in the unit of ``capacity``. A flow crossing a dark link gets 0.
    :raises ValueError: a flow crosses no link (its rate would be unbounded).
    """
    rate = np.zeros(flows)
    if flows == 0:
        return rate
    if np.bincount(pair_flow, minlength=flows).min() == 0:
        raise ValueError("every flow must cross at least one link")
    links = capacity.size
    left = capacity.astype(float).copy()
    frozen = np.zeros(flows, dtype=bool)
    pf, pl = pair_flow, pair_link
    while pf.size:
        count = np.bincount(pl, minlength=links)
        used = count > 0
        share = np.full(links, np.inf)
        share[used] = left[used] / count[used]
        s = share.min()
        rate[~frozen] += s
        left[used] -= s * count[used]
        full = used & (left <= FULL * capacity + 1e-300)
        full |= used & (share <= s * (1 + FULL))
        newly = np.zeros(flows, dtype=bool)
        newly[pf[full[pl]]] = True
        frozen |= newly
        keep = ~frozen[pf]
        pf, pl = pf[keep], pl[keep]
    return rate
