"""Opus (arXiv 2507.08119): the rule that decides when a parallelism phase's circuits are granted
on a photonic rail. Pure Python, no clock, no OS-Ken or Mininet: the flow replay of a training
iteration (:mod:`emulation.flowsim.iteration`) drives it in virtual time, the controller app
(:mod:`controllers.opus`) from its socket's requests.

**Words.** A *group* is a process group of ranks whose circuits occupy some rail *ports* (its
segment). Groups with the same circuits share a *configuration* (their ``key``); two groups
*conflict* when they share a port under different configurations. Every port belongs to the
configuration last granted on it (none at first, or the one found in place). A rank *holds* a
group from the answer to its request until it is answered for a conflicting one; it is *inside*
a group's phase while it holds or has asked for the group and has asked for nothing conflicting
since.

**The rule.** A rank asks for a group's configuration before its first op of a phase (on demand)
or, speculatively, as soon as an op ends whose group conflicts with its next comm op's
(:meth:`OpusRule.asks_ahead`). When a request reaches the controller:

1. a group whose configuration owns all its ports is granted at once (nothing changes);
2. otherwise the group waits for the check-in of its members: it is decided when every member
   has asked for it or holds it; with ``preempt`` (the idealised speculative mode) a speculative
   request is acted on at once;
3. a grant that would take ports from a rank still inside another phase is *deferred* (never with
   ``preempt``), and tried again at every later request, until no such rank is left;
4. a grant gives the group's configuration every port it needs: the groups that had circuits
   there are lost to their holders, and every pending request of the group is answered.

When a rank is answered it holds the group and drops the groups that conflict with it; the
group's newer requests, if they were waiting for this member, are decided again (2, 3).
Cutting circuits under a rank inside its phase would strand a collective in flight on a real
fabric, so the controller app never preempts; the replay's ``speculative`` mode does, which is
what makes speculation slower than on demand for interleaved MoE phases (the paper's reversal).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Grant:
    """A group's configuration granted: ``changed`` the ports it took (in the group's port order;
    empty: already in place), ``lost`` the groups that had circuits on them (in the order of those
    ports), ``ranks`` the ranks whose pending requests it answers, ``speculative`` whether a
    speculative request caused it."""

    group: str
    speculative: bool
    changed: tuple[Hashable, ...]
    lost: tuple[str, ...]
    ranks: tuple[int, ...]


class OpusRule:
    """The state of one Opus controller (arXiv 2507.08119, module doc): groups, port ownership,
    who holds and who asked for what. Ranks are ints; ports and configuration keys any hashable
    values. ``on_grant(grant)`` is called for every :class:`Grant`, in decision order, from inside
    :meth:`request` and :meth:`answer`; it must not call back into the rule. Methods taking a
    group id raise KeyError for one not registered.

    :param preempt: act on the first speculative request and take ports from ranks inside their
        phase (the idealised speculative mode of the replay); False: the on-demand rule for every
        request (on-demand and speculative-deferred, the controller app).
    """

    def __init__(self, on_grant: Callable[[Grant], None], preempt: bool = False):
        self.on_grant = on_grant
        self.preempt = preempt
        self._members: dict[str, tuple[int, ...]] = {}
        self._ports: dict[str, tuple[Hashable, ...]] = {}
        self._key: dict[str, Hashable] = {}
        self._by_key: dict[Hashable, list[str]] = {}
        self._port_groups: dict[Hashable, list[str]] = {}
        self._conflicts: dict[str, set[str]] = {}
        self._owner: dict[Hashable, Hashable] = {}
        self._pending: dict[str, set[int]] = {}
        self._deferred: dict[str, bool] = {}  # group -> asked speculatively
        self._holds: dict[int, set[str]] = {}
        self._asked: dict[int, set[str]] = {}

    # ---- groups ------------------------------------------------------------------------------
    def add_group(self, gid: str, members: Iterable[int], ports: Iterable[Hashable], key: Hashable,
                  in_place: bool = False) -> None:
        """Register group ``gid``: its ranks, the ports its circuits occupy, its configuration's
        ``key``; ``in_place``: its circuits are already there (its ports that belong to no
        configuration yet become its).

        :raises ValueError: ``gid`` is registered already.
        """
        if gid in self._members:
            raise ValueError(f"group {gid} is registered already")
        self._members[gid] = tuple(members)
        self._ports[gid] = tuple(ports)
        self._key[gid] = key
        self._by_key.setdefault(key, []).append(gid)
        self._conflicts[gid] = set()
        for p in self._ports[gid]:
            for h in self._port_groups.setdefault(p, []):
                if self._key[h] != key:
                    self._conflicts[gid].add(h)
                    self._conflicts[h].add(gid)
            self._port_groups[p].append(gid)
            if in_place:
                self._owner.setdefault(p, key)

    def conflicts(self, gid: str) -> frozenset[str]:
        """The groups that share a port with ``gid`` under another configuration."""
        return frozenset(self._conflicts[gid])

    def in_place(self, gid: str) -> bool:
        """True if ``gid``'s configuration owns every port it needs (granted, not taken since)."""
        k = self._key[gid]
        return all(self._owner.get(p) == k for p in self._ports[gid])

    def holds(self, rank: int, gid: str) -> bool:
        """True if ``rank`` holds ``gid`` (module doc)."""
        return gid in self._holds.get(rank, ())

    def has_asked(self, rank: int, gid: str) -> bool:
        """True if ``rank`` asked for ``gid`` and has not had the answer."""
        return gid in self._asked.get(rank, ())

    def missing(self, gid: str) -> list[int]:
        """The members of ``gid`` that neither asked for it nor hold it (the check-in waits for them)."""
        want = self._pending.get(gid, ())
        return [m for m in self._members[gid] if m not in want and not self.holds(m, gid)]

    # ---- what ranks do -----------------------------------------------------------------------
    def asks_ahead(self, rank: int, done: str, upcoming: str) -> bool:
        """Speculation: True if ``rank``, whose op on group ``done`` just ended and whose next comm
        op is on ``upcoming`` (``""``: none), should ask for ``upcoming`` now: it starts a new
        phase (conflicts with ``done``) and the rank neither holds it nor has asked for it."""
        return bool(upcoming) and upcoming in self._conflicts[done] and not self.holds(rank, upcoming) \
            and not self.has_asked(rank, upcoming)

    def ask(self, rank: int, gid: str) -> None:
        """``rank`` sends a request for ``gid``: from now on it is no longer inside the phases that
        conflict with ``gid``."""
        self._asked.setdefault(rank, set()).add(gid)

    def drop(self, rank: int, gid: str) -> None:
        """``rank`` no longer holds ``gid`` (it found the circuits gone)."""
        self._holds.get(rank, set()).discard(gid)

    # ---- what the controller does ------------------------------------------------------------
    def request(self, rank: int, gid: str, speculative: bool = False) -> None:
        """``rank``'s request for ``gid`` reaches the controller (after :meth:`ask`): decide it
        (module doc, 1-3), then try the deferred grants again."""
        self._pending.setdefault(gid, set()).add(rank)
        self._decide(gid, speculative)
        for h, spec in list(self._deferred.items()):
            if h in self._deferred and h in self._pending and not self._in_use(h) and self._all_asked(h):
                del self._deferred[h]
                self._grant(h, spec)

    def answer(self, rank: int, gid: str) -> None:
        """``rank`` has the answer for ``gid``: it holds ``gid`` and drops the conflicting groups;
        ``gid``'s newer requests are decided again if they waited for this member."""
        self._asked.get(rank, set()).discard(gid)
        held = self._holds.setdefault(rank, set())
        held.add(gid)
        held -= self._conflicts[gid]
        if self._pending.get(gid) and self._all_asked(gid):
            self._decide(gid, False)

    def withdraw(self, rank: int, gid: str) -> None:
        """``rank`` gives its pending request for ``gid`` up (the controller timed it out)."""
        self._asked.get(rank, set()).discard(gid)
        want = self._pending.get(gid)
        if want is not None:
            want.discard(rank)
            if not want:
                del self._pending[gid]
                self._deferred.pop(gid, None)

    # ---- the rule ----------------------------------------------------------------------------
    def _decide(self, gid: str, speculative: bool) -> None:
        if self.in_place(gid):
            self._grant(gid, speculative)
        elif self._all_asked(gid) or (speculative and self.preempt):
            if self.preempt or not self._in_use(gid):
                self._deferred.pop(gid, None)
                self._grant(gid, speculative)
            else:
                self._deferred[gid] = speculative

    def _all_asked(self, gid: str) -> bool:
        """Every member of ``gid`` has asked for it or holds it."""
        want = self._pending.get(gid, ())
        return all(m in want or self.holds(m, gid) for m in self._members[gid])

    def _in_use(self, gid: str) -> bool:
        """True if a port ``gid`` needs belongs to a configuration some rank is still inside."""
        k = self._key[gid]
        for p in self._ports[gid]:
            o = self._owner.get(p)
            if o is None or o == k:
                continue
            for h in self._by_key[o]:
                for m in self._members[h]:
                    asked = self._asked.get(m, set())
                    if (self.holds(m, h) or h in asked) and not (asked & self._conflicts[h]):
                        return True
        return False

    def _grant(self, gid: str, speculative: bool) -> None:
        k = self._key[gid]
        changed = tuple(p for p in self._ports[gid] if self._owner.get(p) != k)
        lost = tuple(dict.fromkeys(h for p in changed if p in self._owner for h in self._by_key[self._owner[p]]))
        for p in changed:
            self._owner[p] = k
        for h in lost:
            for m in self._members[h]:
                self._holds.get(m, set()).discard(h)
        self.on_grant(Grant(gid, speculative, changed, lost, tuple(self._pending.pop(gid, ()))))
