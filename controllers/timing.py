"""The base of the controller's timing engines: apps that change the circuits on the
controller's own clock, in a thread of their own, through the circuit switch
(:class:`controllers.circuit_switch.CircuitSwitch`), which keeps the circuit table, the
barriers and the datapath flushes.

Two engines stand on :class:`TimingEngine`: the rotor (:mod:`controllers.rotor`: one sequence of
configurations cycled on every OCS) and parallel OCSes (:mod:`controllers.parallel_ocs`: one
sequence per OCS, each on its own timeline). At most one engine runs at a time: starting one
while another runs is refused. An engine whose switch fails (no barrier reply, a failed flush)
logs its failure event with the error and stops, so that a run says what failed instead of
timing out.
"""

from __future__ import annotations

import logging
import threading

from controllers.base import OcsLabApp
from controllers.sdn import app_manager

#: The timing engines' app names (service bricks).
ENGINES = ("Rotor", "ParallelOcs")


class TimingEngine(OcsLabApp):
    """An app that runs a timeline of circuit changes in its own thread (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._timeline_thread: threading.Thread | None = None
        self._timeline_stop = threading.Event()

    @property
    def switch(self):
        """The circuit switch app. :raises RuntimeError: it is not loaded."""
        cs = app_manager.lookup_service_brick("CircuitSwitch")
        if cs is None:
            raise RuntimeError("the circuit_switch app is not loaded")
        return cs

    def timeline_running(self) -> bool:
        """This engine's timeline is running."""
        return self._timeline_thread is not None and self._timeline_thread.is_alive()

    def stop_timeline(self) -> None:
        """Stop the timeline after its current change (a no-op when none runs)."""
        if self._timeline_thread is not None:
            self._timeline_stop.set()
            self._timeline_thread.join()

    def _launch(self, target, *args) -> None:
        """Run ``target(*args)`` as the timeline, in a thread of its own.

        :raises RuntimeError: a timeline of any engine is running."""
        for name in ENGINES:
            engine = app_manager.lookup_service_brick(name)
            if engine is not None and engine.timeline_running():
                raise RuntimeError("a rotor is already running")
        self._timeline_stop = threading.Event()
        self._timeline_thread = threading.Thread(target=target, args=args, daemon=True)
        self._timeline_thread.start()

    def _failing_as(self, kind: str, fields: dict, run, *args) -> None:
        """The body of a timeline thread: an error (a switch that stopped answering) is logged
        as event ``kind`` with ``fields`` and the error, and stops the timeline."""
        try:
            run(*args)
        except Exception as e:
            self.state.log_event(kind, logging.ERROR, **fields, error=f"{type(e).__name__}: {e}")
            self._timeline_stop.set()
