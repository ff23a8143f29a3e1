"""The rotor: time-slotted configurations on the controller's own clock (a rotor OCS), as one
app of the controller (:class:`controllers.timing.TimingEngine`).

``POST /rotor`` (:mod:`controllers.api`) starts it: slot i holds configuration ``i mod n`` for
its slot after a dark window R, slot after slot from one clock origin, until ``count`` slots
ran or it is stopped. Every slot is logged (``rotor-slot``) and raised as
:class:`controllers.events.EventRotorSlot`.

Spec: ``docs/controllers.md`` (the rotor), ``docs/mechanisms.md`` (time-slotted OCS).
"""

from __future__ import annotations

import time

from controllers.events import EventRotorSlot
from controllers.timing import TimingEngine
from emulation.fabric import Configuration, FabricError


class Rotor(TimingEngine):
    """Cycles configurations on the controller's clock (module doc)."""

    _EVENTS = [EventRotorSlot]

    def start_timeline(self, configs: list[Configuration], slots_s: list[float], reconfiguration_delay_s: float, count: int,
              start_delay_s: float = 0.05) -> dict:
        """Cycle through ``configs`` autonomously: slot i (i = 0..count-1) holds
        ``configs[i % len]`` for ``slots_s[i % len]`` seconds after a dark window of
        ``reconfiguration_delay_s`` (the changed circuits are dark, as in
        :meth:`~controllers.circuit_switch.CircuitSwitch.apply`).

        Planned times come from one clock origin T0 = now + ``start_delay_s``: slot i's dark
        window is planned at ``T0 + sum_{j<i} (dark + slot_j)`` and the slot at that plus
        ``dark``; errors do not accumulate. Removal and installation are sent early by running
        estimates of their acknowledgement latency. Every slot logs an event ``rotor-slot`` with
        its planned start, ``t_dark`` (removal acknowledged: the previous slot's measured end) and
        ``t_live`` (new circuits acknowledged: the measured slot start), and ``rotor-done`` closes
        the run; a switch that fails (no barrier reply, a failed flush) logs ``rotor-failed`` (the
        error) and ends the rotor.

        :returns: ``{"t0", "slots"}`` at once (the rotor runs in its own thread).
        :raises FabricError: a configuration is invalid. :raises RuntimeError: a rotor is running.
        """
        if not configs or len(slots_s) != len(configs) or min(slots_s) <= 0 or reconfiguration_delay_s < 0 or count < 1:
            raise FabricError("rotor: needs configurations, one positive slot length each, dark >= 0, count >= 1")
        for c in configs:
            self.state.fabric.check_configuration(c)
        cs = self.switch
        if self.timeline_running():
            raise RuntimeError("a rotor is already running")
        cs.prepare(configs)
        t0 = time.monotonic() + start_delay_s
        self._launch(self._failing_as, "rotor-failed", {}, self._run, configs, slots_s, reconfiguration_delay_s,
                     count, t0)
        return {"t0": t0, "slots": count}

    def _run(self, configs, slots_s, dark, count, t0) -> None:
        # The removal and the installation take effect when their barrier is acknowledged; each
        # is started early by a running estimate of that latency, so that the previous slot ends
        # and the next one starts on the planned times.
        lead_rm = lead_add = 0.0
        planned_dark = t0
        for i in range(count):
            if self._timeline_stop.is_set():
                break
            k = i % len(configs)
            wait = planned_dark - lead_rm - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            planned = planned_dark + dark
            res = self._apply_until(configs[k], planned - lead_add)
            if res["changed"]:
                lead_rm = 0.8 * lead_rm + 0.2 * (res["t_dark"] - res["t_request"])
                lead_add = 0.8 * lead_add + 0.2 * (res["t_live"] - res["t_install"])
            self.state.log_event("rotor-slot", slot=i, config=k, planned_dark=planned_dark, planned_start=planned,
                                 t_dark=res["t_dark"], t_live=res["t_live"], slot_s=slots_s[k],
                                 start_error_s=res["t_live"] - planned, dark_error_s=res["t_dark"] - planned_dark)
            self.send_event_to_observers(EventRotorSlot(i, k, res["t_live"], slots_s[k]))
            planned_dark = planned + slots_s[k]
        self.state.log_event("rotor-done", t0=t0)

    def _apply_until(self, config: Configuration, live_at: float) -> dict:
        """The switch's ``apply`` with the new circuits live at ``live_at`` (or, unchanged, a wait)."""
        res = self.switch.apply(config, 0.0, live_at=live_at, by="rotor")
        if not res["changed"]:
            wait = live_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            res.update(t_dark=res["t_request"], t_live=max(live_at, res["t_live"]))
        return res
