"""Parallel OCSes: one slot sequence per OCS, each on its own timeline from one clock origin
(Spectra, arXiv 2603.07373; :class:`emulation.schedule.ParallelSchedule`), as one app of the
controller (:class:`controllers.timing.TimingEngine`).

``POST /rotor`` with ``sequences`` (:mod:`controllers.api`) starts it; every slot is logged
(``ocs-slot``) and ``sequences-done`` closes the run.

Spec: ``docs/controllers.md`` (parallel OCSes), ``docs/mechanisms.md`` (Spectra).
"""

from __future__ import annotations

import threading
import time

from controllers.timing import TimingEngine
from emulation.fabric import Configuration, FabricError


class ParallelOcs(TimingEngine):
    """Runs one slot sequence per OCS (module doc)."""

    def start_timeline(self, sequences: list[list[tuple[frozenset, float]]], reconfiguration_delay_s: float,
              start_delay_s: float = 0.05) -> dict:
        """Run one slot sequence per OCS, every OCS on its own timeline from one origin T0 = now
        + ``start_delay_s``: OCS k goes dark (every circuit removed) at T0, installs
        ``sequences[k][0]``'s circuits ``reconfiguration_delay_s`` (R) later, holds them for its
        slot, goes dark again for R before its next configuration, and after its last slot holds
        no circuit. A change on one OCS leaves the others alone. A removal is sent at its planned
        time (a slot ends late by its acknowledgement latency, never early); an installation
        early by a running estimate of its acknowledgement latency, but never before the
        removal's acknowledgement plus R (every dark window lasts at least R). Every slot logs an
        event ``ocs-slot`` (its OCS, index, planned start, ``t_dark``: removal acknowledged,
        ``t_sent``: installation sent, ``t_barrier``: its barrier reply, ``t_live``: the datapath
        flushed after it) and ``sequences-done`` closes the run; an OCS whose switch fails (no
        barrier reply, a failed flush) logs ``sequences-failed`` (its OCS and the error) and stops
        every sequence.

        :param sequences: per OCS (index k of the fabric's OCSes, at most all of them), its
            ``(circuits, slot_s)`` in order.
        :returns: ``{"t0", "slots"}`` at once (the sequences run in threads of their own, one per OCS).
        :raises FabricError: a circuit not on its OCS, a slot not positive, R < 0, more sequences
            than OCSes. :raises RuntimeError: a rotor or sequences are running.
        """
        ocs = self.state.fabric.ocs
        if len(sequences) > len(ocs) or reconfiguration_delay_s < 0:
            raise FabricError(f"sequences: at most {len(ocs)} (one per OCS), R >= 0")
        for k, seq in enumerate(sequences):
            for circuits, slot_s in seq:
                if slot_s <= 0:
                    raise FabricError(f"sequences: OCS {ocs[k].name} has a slot of {slot_s} s")
                self.state.fabric.check_configuration(Configuration({ocs[k].name: circuits}))
        t0 = time.monotonic() + start_delay_s
        timelines = []  # per OCS: (planned time, slot, circuits to install, or None: go dark)
        for seq in sequences:
            t, events = t0, []
            for i, (circuits, slot_s) in enumerate(seq):
                events += [(t, i, None), (t + reconfiguration_delay_s, i, frozenset(circuits))]
                t += reconfiguration_delay_s + slot_s
            if seq:
                events.append((t, len(seq), None))
            timelines.append(events)
        self._launch(self._run, timelines, t0, reconfiguration_delay_s)
        return {"t0": t0, "slots": sum(len(seq) for seq in sequences)}

    def _run(self, timelines, t0, dark: float) -> None:
        # Every OCS runs its timeline in a thread of its own: one OCS waiting for its barrier
        # and the datapath flush never delays another's change (run one after the other, four
        # OCSes of 16 ports changing together started their slots up to 1.4 s late, emulated,
        # under load). Their flushes are coalesced (DatapathCache.purge).
        threads = [threading.Thread(target=self._failing_as, daemon=True, args=(
            "sequences-failed", {"ocs": self.state.fabric.ocs[k].name}, self._timeline, k, events, t0, dark))
                   for k, events in enumerate(timelines)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.state.log_event("sequences-done", t0=t0)

    def _timeline(self, k: int, events, t0: float, dark: float) -> None:
        # A removal is sent at its planned time, never early: circuits carry traffic to the end of
        # their slot (a late removal only lengthens the slot by its acknowledgement latency). An
        # installation is sent early by a running estimate of its acknowledgement latency, but
        # never before the OCS's removal was acknowledged plus R: every dark window lasts R.
        cs = self.switch
        lead_add = 0.0
        dark_at: dict[int, float] = {}
        name = self.state.fabric.ocs[k].name
        for planned, i, circuits in events:
            add = circuits is not None
            send_at = max(planned - lead_add, dark_at.get(i, t0) + dark) if add else planned
            if self._timeline_stop.wait(max(0.0, send_at - time.monotonic())):
                break
            with self.state.lock:
                old = self.state.circuits[name]
            t_sent = time.monotonic()
            change = circuits if add else old
            t_barrier = t_ack = t_sent
            if change:
                t_barrier = cs.send_with_barriers(cs.circuit_batches(k, change, add=add))
                t_ack = cs.in_datapath(t_barrier)
                if add:
                    lead_add = 0.8 * lead_add + 0.2 * (t_ack - t_sent)
            with self.state.lock:
                self.state.circuits = Configuration({**{o.name: self.state.circuits[o.name] for o in self.state.fabric.ocs},
                                                     name: circuits if add else frozenset()})
            if not add:
                dark_at[i] = t_ack
                continue
            self.state.log_event("ocs-slot", ocs=name, slot=i, planned_start=planned, t_dark=dark_at.get(i, t0),
                                 t_sent=t_sent, t_barrier=t_barrier, t_live=t_ack, start_error_s=t_ack - planned)
