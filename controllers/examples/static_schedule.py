"""Example app: a static circuit schedule. Every OCS alternates between two configurations
every ``PERIOD_S`` seconds, with a dark window of ``RECONFIGURATION_DELAY_S``: the "skip-one" pairing (GPU i with
GPU i + 2) and the fabric's initial configuration (:meth:`StaticSchedule.schedule`), ``CYCLES``
reconfigurations in all, starting once every bridge is ready.

Run it beside the built-in apps::

    .venv/bin/ocslab run experiments/lab.yaml --app controllers/examples/static_schedule.py

Edit the constants, or :meth:`StaticSchedule.schedule`, to make it yours (docs/controllers.md, Your own
controller app). Each reconfiguration is logged (``controller.log``) with its measured dark window.
It asks in its own name (``by=self.name``): during a run whose planner owns the circuits the
request is refused (``ownership-refused`` in the event log) and the step is logged with
``refused`` true.
"""

from __future__ import annotations

from controllers.base import OcsLabApp
from controllers.events import EventCircuitsChanged, EventSwitchReady
from controllers.sdn import app_manager, hub, set_ev_cls
from emulation.fabric import Configuration, assign_ports

#: Seconds each configuration holds (real seconds of the emulation).
PERIOD_S = 1.0
#: Dark window of every reconfiguration, seconds.
RECONFIGURATION_DELAY_S = 0.02
#: Reconfigurations before the app stops.
CYCLES = 4


class StaticSchedule(OcsLabApp):
    """Cycles the circuits through :meth:`schedule` (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = False
        self.applied: list[dict] = []

    def schedule(self) -> list[Configuration]:
        """The configurations to cycle through: GPU i with GPU i + 2 (on every port pair; with one
        port per GPU, as a matching), then the fabric's initial configuration, or, if that has no
        circuits, neighbours 0-1, 2-3, ..."""
        f = self.state.fabric
        n, p = f.gpus, f.ports_per_gpu
        if p == 1:
            skip = [(i, i + 2) for i in range(n - 2) if (i // 2) % 2 == 0]
            near = [(i, i + 1) for i in range(0, n - 1, 2)]
        else:
            skip = [(i, (i + 2) % n) for i in range(n)] * (p // 2)  # every GPU twice per copy
            near = [(i, (i + 1) % n) for i in range(n)] * (p // 2)
        first = Configuration({o.name: assign_ports(f, o.name, skip, fill=True)[o.name] for o in f.ocs})
        second = f.initial if any(f.initial.values()) else Configuration(
            {o.name: assign_ports(f, o.name, near, fill=True)[o.name] for o in f.ocs})
        return [first, second]

    @set_ev_cls(EventSwitchReady)
    def _ready(self, ev):
        if ev.ready and not self._started:
            self._started = True
            hub.spawn(self._run)

    @set_ev_cls(EventCircuitsChanged)
    def _changed(self, ev):
        r = ev.result
        self.logger.info("circuits changed: %d removed, %d added, dark %.1f ms measured", r["removed"], r["added"],
                         r["dark_window_measured_s"] * 1e3)

    def _run(self) -> None:
        configs = self.schedule()
        switch = app_manager.lookup_service_brick("CircuitSwitch")
        for k in range(CYCLES):
            hub.sleep(PERIOD_S)
            res = switch.apply(configs[k % len(configs)], RECONFIGURATION_DELAY_S, by=self.name)
            self.applied.append(res)
            self.state.log_event("static-schedule", step=k, config=k % len(configs), refused=bool(res.get("refused")),
                                 dark_window_measured_s=res["dark_window_measured_s"])
