"""Max-min fair rates by progressive filling, every local bottleneck at once.

Progressive filling raises every unfrozen flow's rate at the same speed; when a link fills, the
flows crossing it freeze at their current rate. The result is the unique max-min fair
allocation: no flow can get more without taking from a flow that has no more than it
(Bertsekas & Gallager, *Data Networks*, sec. 6.5.2).

The filling is done in rounds, and a round freezes every *local* bottleneck, not only the
global one: a link whose fair share ``left / unfrozen flows`` is no larger than the share of
any link that one of its flows crosses fills at exactly that share whatever happens elsewhere
(a link's filling level never falls below its current share, as the flows freezing elsewhere
take at most their own share from it), so its flows freeze at that share. Independent parts of
the network (a step whose transfers are disjoint matchings, several expert-parallel groups) are
then solved in the same round instead of one distinct share level per round; each round is a
few vectorised passes over the (flow, link) pairs.

Spec: ``docs/architecture.md`` (flow-level backend), ``docs/mechanisms.md`` (common cost model:
on a link shared by k flows each gets B/k).
"""

from __future__ import annotations

import numpy as np

#: Relative tolerance under which two shares count as equal.
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
    pair_flow = np.asarray(pair_flow, dtype=np.int64)
    if np.bincount(pair_flow, minlength=flows).min() == 0:
        raise ValueError("every flow must cross at least one link")
    links = capacity.size
    left = capacity.astype(float).copy()
    if pair_flow.size > 1 and (pair_flow[1:] < pair_flow[:-1]).any():
        order = np.argsort(pair_flow, kind="stable")
        pf, pl = pair_flow[order], np.asarray(pair_link, dtype=np.int64)[order]
    else:
        pf, pl = pair_flow, np.asarray(pair_link, dtype=np.int64)
    while pf.size:
        count = np.bincount(pl, minlength=links)
        used = count > 0
        share = np.full(links, np.inf)
        np.divide(left, count, out=share, where=used)
        np.maximum(share, 0.0, out=share)
        ps = share[pl]
        first = np.flatnonzero(np.concatenate([[True], pf[1:] != pf[:-1]]))
        per_flow = np.diff(np.append(first, pf.size))
        fmin = np.minimum.reduceat(ps, first)  # each flow's smallest share
        pmin = np.repeat(fmin, per_flow)
        lowest = np.full(links, np.inf)  # per link: the smallest share any of its flows sees
        np.minimum.at(lowest, pl, pmin)
        bottleneck = used & (share <= lowest * (1 + FULL))
        freeze = np.maximum.reduceat(bottleneck[pl], first)  # flows crossing a local bottleneck
        fid = pf[first[freeze]]
        rate[fid] = fmin[freeze]
        frozen_pair = np.repeat(freeze, per_flow)
        left -= np.bincount(pl[frozen_pair], weights=pmin[frozen_pair], minlength=links)
        pf, pl = pf[~frozen_pair], pl[~frozen_pair]
    return rate
