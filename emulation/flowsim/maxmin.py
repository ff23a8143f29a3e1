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


def _sparse_min(values: np.ndarray, levels: int) -> list[np.ndarray]:
    """``table[j][i] = min(values[i:i + 2^j])`` for j < ``levels`` (shorter at the end)."""
    table = [values]
    for j in range(1, levels):
        prev, h = table[-1], 1 << (j - 1)
        table.append(np.minimum(prev[:-h], prev[h:]) if prev.size > h else prev[:0])
    return table


def _range_min(table: list[np.ndarray], start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """min(values[start[i]:start[i] + length[i]]) from :func:`_sparse_min` (lengths >= 1)."""
    j = np.log2(length).astype(np.int64)  # exact for the lengths of a path
    out = np.empty(start.size)
    for lv in np.unique(j):
        sel = np.flatnonzero(j == lv)
        t = table[lv]
        out[sel] = np.minimum(t[start[sel]], t[start[sel] + length[sel] - (1 << lv)])
    return out


def _range_cover_min(size: int, start: np.ndarray, length: np.ndarray, value: np.ndarray, levels: int) -> np.ndarray:
    """(size,) at every position, the smallest ``value[i]`` of the ranges covering it (inf: none)."""
    j = np.log2(length).astype(np.int64)
    table = [np.full(max(size - (1 << lv) + 1, 0), np.inf) for lv in range(levels)]
    for lv in np.unique(j):
        sel = np.flatnonzero(j == lv)
        np.minimum.at(table[lv], start[sel], value[sel])
        np.minimum.at(table[lv], start[sel] + length[sel] - (1 << lv), value[sel])
    for lv in range(levels - 1, 0, -1):  # a block of 2^lv is two blocks of 2^(lv-1)
        t, h = table[lv], 1 << (lv - 1)
        if t.size:
            below = table[lv - 1]
            np.minimum(below[:t.size], t, out=below[:t.size])
            np.minimum(below[h:h + t.size], t, out=below[h:h + t.size])
    return table[0]


def max_min_rates_runs(run_flow: np.ndarray, run_start: np.ndarray, run_length: np.ndarray, lane: np.ndarray,
                       capacity: np.ndarray, flows: int) -> np.ndarray:
    """:func:`max_min_rates` for flows whose paths are runs of lanes (module doc; a ring's
    paths, :class:`~emulation.routing.LinkRuns`): flow ``run_flow[i]`` crosses the links
    ``lane[run_start[i]:run_start[i] + run_length[i]]``. The same rounds, each O(runs + lanes x
    log lanes): link counts and the links' freed capacity by prefix sums over the lanes, a
    flow's smallest share by a range-minimum table, a link's smallest flow share by the
    converse.

    :param run_flow: (R,) flow (0..flows-1) of each run. :param run_start: (R,) first lane.
    :param run_length: (R,) lanes in the run (>= 1). :param lane: (P,) link of each lane, each
        link at most once. :param capacity: (L,) link capacities (0: dark). :param flows: F.
    :returns: (F,) rates in the unit of ``capacity``.
    :raises ValueError: a flow crosses no link.
    """
    rate = np.zeros(flows)
    if flows == 0:
        return rate
    run_flow = np.asarray(run_flow, dtype=np.int64)
    if np.bincount(run_flow, minlength=flows).min() == 0:
        raise ValueError("every flow must cross at least one link")
    links, lanes = capacity.size, lane.size
    left = capacity.astype(float).copy()
    order = np.argsort(run_flow, kind="stable")
    rf, rs, rl = run_flow[order], np.asarray(run_start, dtype=np.int64)[order], np.asarray(run_length, dtype=np.int64)[order]
    levels = int(np.log2(max(int(rl.max()), 1))) + 1
    while rf.size:
        edge = np.bincount(rs, minlength=lanes + 1) - np.bincount(rs + rl, minlength=lanes + 1)
        count = np.zeros(links, dtype=np.int64)
        count[lane] = np.cumsum(edge)[:lanes]
        used = count > 0
        share = np.full(links, np.inf)
        np.divide(left, count, out=share, where=used)
        np.maximum(share, 0.0, out=share)
        rmin = _range_min(_sparse_min(share[lane], levels), rs, rl)
        first = np.flatnonzero(np.concatenate([[True], rf[1:] != rf[:-1]]))
        per_flow = np.diff(np.append(first, rf.size))
        fmin = np.minimum.reduceat(rmin, first)
        rval = np.repeat(fmin, per_flow)
        lowest = np.full(links, np.inf)
        lowest[lane] = _range_cover_min(lanes, rs, rl, rval, levels)
        bottleneck = used & (share <= lowest * (1 + FULL))
        hit = np.concatenate([[0], np.cumsum(bottleneck[lane])])
        freeze = np.maximum.reduceat(hit[rs + rl] - hit[rs] > 0, first)
        rate[rf[first[freeze]]] = fmin[freeze]
        frozen = np.repeat(freeze, per_flow)
        w = rval[frozen]
        freed = np.bincount(rs[frozen], weights=w, minlength=lanes + 1) - np.bincount(
            rs[frozen] + rl[frozen], weights=w, minlength=lanes + 1)
        left[lane] -= np.cumsum(freed)[:lanes]
        rf, rs, rl = rf[~frozen], rs[~frozen], rl[~frozen]
    return rate
