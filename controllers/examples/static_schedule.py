"""Example app: a static circuit schedule. Every OCS alternates between two configurations
every ``PERIOD_S`` seconds, with a dark window of ``DARK_S``: the fabric's initial one and the
"skip-one" pairing (GPU i with GPU i + 2 mod n, on every port), ``CYCLES`` reconfigurations in
all, starting once every bridge is ready.

Run it beside the built-in apps::

    .venv/bin/ocslab run experiments/lab.yaml --app controllers/examples/static_schedule.py

Edit the constants, or :meth:`StaticSchedule.schedule`, to make it yours (README, Your own
controller app). Each reconfiguration is logged (``controller.log``) with its measured dark window.
"""

from __future__ import annotations

from controllers.base import OcsLabApp
from controllers.events import EventCircuitsChanged, EventSwitchReady
from controllers.sdn import app_manager, hub, set_ev_cls
from emulation.fabric import Configuration, assign_ports

#: Seconds each configuration holds (real seconds of the emulation).
PERIOD_S = 1.0
#: Dark window of every reconfiguration, seconds.
DARK_S = 0.02
#: Reconfigurations before the app stops.
CYCLES = 4


class StaticSchedule(OcsLabApp):
    """Cycles the circuits through :meth:`schedule` (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = False
        self.applied: list[dict] = []

    def schedule(self) -> list[Configuration]:
        """The configurations to cycle through: skip-one pairing (needs 2 ports per GPU), then the
        initial one."""
        f = self.state.fabric
        n, p = f.gpus, f.ports_per_gpu
        skip = {}
        for ocs in f.ocs:
            pairs = [(i, (i + 2) % n) for i in range(n)] * max(1, p // 2)  # every GPU twice per copy
            skip[ocs.name] = assign_ports(f, ocs.name, pairs, fill=True)[ocs.name]
        return [Configuration(skip), f.initial]

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
            res = switch.apply(configs[k % len(configs)], DARK_S)
            self.applied.append(res)
            self.state.log_event("static-schedule", step=k, config=k % len(configs),
                                 dark_window_measured_s=res["dark_window_measured_s"])
