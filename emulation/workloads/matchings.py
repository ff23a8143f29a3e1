"""All-to-all as a cycle of matchings: the round-robin 1-factorisation of K_n.

Spec: ``docs/mechanisms.md`` (PipSwitch, arXiv 2501.18136: "the round-robin 1-factorisation of K_n (n-1 perfect
matchings for even n; n matchings with one idle port for odd n), verified to cover every pair
once"). An OCS whose state is a matching realises one matching per slot; cycling through them
(a *rotor*) connects every pair once per cycle.

Construction (the circle method): for even n, fix rank n-1 and place ranks 0..n-2 on a circle;
matching k pairs n-1 with k and ``(k - i) mod (n-1)`` with ``(k + i) mod (n-1)`` for
i = 1..n/2-1. For odd n, add a phantom rank n and drop its pairs: n matchings, each leaving one
rank idle.
"""

from __future__ import annotations

from dataclasses import replace

from emulation.workloads.allreduce import check_sizes
from emulation.workloads.model import Step, Workload

#: Undirected GPU pairs ``(a, b)``, ``a < b``, each GPU at most once (what an OCS of duplex
#: circuits holds in one configuration).
Matching = tuple[tuple[int, int], ...]


def round_robin_matchings(n: int) -> tuple[Matching, ...]:
    """The 1-factorisation of K_n (module doc): n-1 matchings for even n, n for odd n; every
    pair ``(a, b)``, ``a < b``, appears in exactly one.

    :raises ValueError: n < 2.
    """
    if n < 2:
        raise ValueError(f"ranks must be at least 2, got {n}")
    m = n if n % 2 == 0 else n + 1  # with a phantom rank for odd n
    out = []
    for k in range(m - 1):
        pairs = [(m - 1, k)] + [((k - i) % (m - 1), (k + i) % (m - 1)) for i in range(1, m // 2)]
        out.append(tuple(sorted((min(a, b), max(a, b)) for a, b in pairs if a < n and b < n)))
    return tuple(out)


def check_one_factorisation(n: int, matchings: tuple[Matching, ...]) -> None:
    """:raises ValueError: a matching uses a rank twice, or some pair of ``0..n-1`` is not
    covered exactly once."""
    seen: dict[tuple[int, int], int] = {}
    for k, m in enumerate(matchings):
        ranks = [r for p in m for r in p]
        if len(ranks) != len(set(ranks)):
            raise ValueError(f"matching {k} uses a rank twice: {m}")
        for a, b in m:
            key = (min(a, b), max(a, b))
            seen[key] = seen.get(key, 0) + 1
    want = {(a, b) for a in range(n) for b in range(a + 1, n)}
    missing = want - set(seen)
    if missing:
        raise ValueError(f"pairs never matched: {sorted(missing)[:5]}")
    twice = [p for p, c in seen.items() if c != 1 or p not in want]
    if twice:
        raise ValueError(f"pairs matched more than once or out of range: {sorted(twice)[:5]}")


def rotor_alltoall(ranks: int, nbytes: int) -> Workload:
    """AllToAll on a rotor: one step per round-robin matching, each matched pair swaps its
    blocks (s/n bytes each way, ``append``). Every step needs one circuit per GPU.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("alltoall", "rotor", n, nbytes, n)
    steps = tuple(Step("slot", tuple(t for a, b in m for t in (w.transfer(a, b, b, op="append"),
                                                                 w.transfer(b, a, a, op="append"))))
                  for m in round_robin_matchings(n))
    return replace(w, steps=steps)
