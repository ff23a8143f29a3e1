"""The schedules the agents execute, compiled in one place for both ways the packet backend runs
a workload: per-step plans (:mod:`emulation.emulator.orchestrator`) and time-slotted rotors
(:mod:`emulation.emulator.slotted`). The file format is documented in
:mod:`emulation.emulator.agent`; times here are emulated seconds, bytes emulated bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from emulation import dataplane as dpn


class AgentSchedules:
    """One schedule per rank of an ``ranks``-GPU run (:attr:`ranks`, JSON-ready dicts).

    :param alpha_s: emulated per-message latency every agent waits before a transfer.
    :param arrivals_s: emulated arrival of every rank after the run's start (stragglers).
    :param rotor: ``(cycle_s, rate_Bps, windows)`` for a time-slotted run: the rotor's turn,
        the rate a gated sender drains, and per rank ``{dst: [[on, off], ...]}`` (its gates), or
        ``{(dst, channel): [[on, off], ...]}`` (a gate per connection: parallel OCSes).
    :param pooled: every channel of a transfer draws from one pool of its bytes (parallel OCSes).
    :param fan_in: peers a GPU receives from at once in a time-slotted run (its receive window).
    """

    def __init__(self, ranks: int, alpha_s: float, *, arrivals_s: list[float] | None = None,
                 rotor: tuple[float, float, list[dict[int, list[list[float]]]]] | None = None,
                 pooled: bool = False, fan_in: int = 1):
        ips = [dpn.gpu_ip(g) for g in range(ranks)]
        self.ranks: list[dict] = []
        for r in range(ranks):
            sched = {"rank": r, "ips": ips, "port": dpn.AGENT_PORT, "alpha_s": alpha_s,
                     "steps": []}
            if arrivals_s is not None:
                sched["arrival_s"] = arrivals_s[r]
            if rotor is not None:
                cycle_s, rate, windows = rotor
                sched["rotor"] = {"cycle_s": cycle_s, "rate_Bps": rate, "pooled": pooled, "fan_in": fan_in,
                                  "windows": {str(d) if isinstance(d, int) else f"{d[0]}:{d[1]}": w
                                              for d, w in windows[r].items()}}
            self.ranks.append(sched)
        self._relays = rotor is not None

    def add_step(self) -> int:
        """Open the next step on every rank; its index."""
        for sched in self.ranks:
            sched["steps"].append({"send": [], "recv": [], **({"relay": []} if self._relays else {})})
        return len(self.ranks[0]["steps"]) - 1

    def transfer(self, step: int, hop: int, src: int, dst: int, parts: list[list[int]]) -> None:
        """``src`` sends ``hop`` to ``dst`` as ``parts`` ``[[channel, bytes], ...]`` (empty parts
        left out); ``dst`` expects their sum."""
        self.ranks[src]["steps"][step]["send"].append([hop, dst, [p for p in parts if p[1]]])
        self.ranks[dst]["steps"][step]["recv"].append([hop, src, sum(b for _c, b in parts)])

    def relay(self, step: int, hop_in: int, hop_out: int, via: int, dst: int, nbytes: int) -> None:
        """``via`` forwards ``hop_in`` (once all of it arrived) to ``dst`` as ``hop_out``."""
        self.ranks[via]["steps"][step]["relay"].append([hop_in, hop_out, dst, nbytes])
        self.ranks[dst]["steps"][step]["recv"].append([hop_out, via, nbytes])

    def drain(self, step: int) -> None:
        """Agents wait at the end of ``step`` until their data is acknowledged (the next step
        reconfigures the fabric)."""
        for sched in self.ranks:
            sched["steps"][step]["drain"] = True

    def later(self, connections: Iterable[tuple[int, int, int]]) -> None:
        """``(rank, dst, channel)`` connections the initial configuration cannot carry: opened
        before the timed run, under a configuration that routes them."""
        connections = set(connections)
        for sched in self.ranks:
            sched["later"] = sorted([d, c] for r, d, c in connections if r == sched["rank"])

    def dependency_driven(self, epochs: list[tuple[int, int]], reconfigures: list[bool],
                          deps: dict[int, list[int]], live: dict[int, list[int]]) -> None:
        """Execute the steps dependency-driven, in ``epochs`` (``(first step, end step)``;
        ``reconfigures[e]``: epoch e waits for a ``live`` message): transfer ``tid`` starts once
        the transfers ``deps[tid]`` have arrived at its source, its parts on the channels
        ``live[tid]`` once their new circuits are up."""
        for sched in self.ranks:
            sched["epochs"] = [list(e) for e in epochs]
            sched["reconfigures"] = list(reconfigures)
            for st in sched["steps"]:
                st["deps"] = [deps.get(tid, []) for tid, _d, _p in st["send"]]
                st["live"] = [live.get(tid, []) for tid, _d, _p in st["send"]]

    def timeout(self, step_timeout_s: float) -> None:
        """Every agent gives up on a step after ``step_timeout_s`` wall seconds."""
        for sched in self.ranks:
            sched["step_timeout_s"] = step_timeout_s
