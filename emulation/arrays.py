"""Array helpers shared by the workloads, the routing and the flow simulator.

:func:`unique` is :func:`numpy.unique` by sorting: numpy 2.4 answers integer arrays with a hash
table that is an order of magnitude slower than a sort on millions of values (24 s against 1 s
for 8 M int64 on this project's test machine), and the simulator calls it on that many.
"""

from __future__ import annotations

import numpy as np


def unique(values: np.ndarray, return_inverse: bool = False, return_counts: bool = False):
    """The sorted distinct values of a 1-D array, as :func:`numpy.unique` gives them.

    :param values: (N,) array (any sortable dtype).
    :param return_inverse: also return (N,) int64: the index in the result of every value.
    :param return_counts: also return the number of times each distinct value occurs.
    :returns: the (U,) distinct values, or a tuple with the arrays asked for, in numpy's order.
    """
    values = np.asarray(values).ravel()
    order = np.argsort(values, kind="stable") if return_inverse else None
    s = values[order] if order is not None else np.sort(values)
    first = np.empty(s.size, dtype=bool)
    first[:1] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    out = [s[first]]
    if return_inverse:
        inv = np.empty(s.size, dtype=np.int64)
        inv[order] = np.cumsum(first) - 1
        out.append(inv)
    if return_counts:
        starts = np.flatnonzero(first)
        out.append(np.diff(np.append(starts, s.size)))
    return out[0] if len(out) == 1 else tuple(out)
