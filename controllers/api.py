"""OS-Ken app serving the controller's JSON API on 127.0.0.1 for the orchestrator.

Endpoints (JSON bodies and answers; times are CLOCK_MONOTONIC seconds, shared by every
network namespace on the machine):

- ``GET /status``: ``{"switches": {name: programmed}, "ready": bool}``: a switch counts once it
  is connected and its initial rules (circuits, routes) are barrier-acknowledged
- ``GET /circuits``: the current configuration ``{ocs: [[[gpu, port], [gpu, port]], ...]}``
- ``POST /configuration`` ``{"configuration": {...}, "reconfiguration_delay_s": float}``: reconfigure;
  answers when the new circuits carry traffic, with the phase timestamps (see
  :meth:`controllers.circuit_switch.CircuitSwitch.apply`); 400 on a bad configuration.
- ``POST /prepare`` ``{"configurations": [...]}``: compute the forwarding rules of configurations
  a schedule will visit ahead of time (:meth:`controllers.circuit_switch.CircuitSwitch.prepare`),
  so that reconfiguring to them reroutes quickly inside the dark window; answers
  ``{"configurations", "flow_mods", "seconds"}``.
- ``POST /rotor`` ``{"configurations": [...], "slots_s": [...], "reconfiguration_delay_s": float, "count": int,
  "start_delay_s": float}``: cycle through the configurations on the controller's own clock
  (:meth:`controllers.circuit_switch.CircuitSwitch.start_rotor`), answering at once with
  ``{"t0", "slots"}``; each slot logs a ``rotor-slot`` event; ``{"stop": true}`` stops it.
- ``POST /failover`` ``{"mode": "optical"|"electrical"|"migration", "placement": [gpu per rank],
  "spares": [gpu, ...], "reconfiguration_delay_s": float}``: arm GPU-failure recovery for a job
  (:meth:`controllers.failover.FailoverApp.arm`); answers with the precomputed table;
  ``{"disarm": true}`` stops watching.
- ``POST /opus`` ``{"socket": path, "reconfiguration_delay_s": float, "timeout_s": float}``: serve
  the Opus protocol on that Unix socket (:meth:`controllers.opus.OpusApp.arm`): a training job's
  process groups check in and ask for their phase's rail configuration; ``{"disarm": true}`` stops.
- ``POST /demand`` ``{"events": [...]}``: the emulator's collective and step events for the apps
  (:meth:`controllers.circuit_switch.CircuitSwitch.post`); answers once a step's handlers are done.
- ``GET /events?since=N``: the event log from sequence number N.

A malformed request (not JSON, not an object, a missing or mistyped field, a time that is not in
[0, 600] s) gets 400 and ``{"error": ...}`` before anything is changed; the server never stops on
one.
"""

from __future__ import annotations

import logging
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from controllers.http_api import JsonHandler, serve
from controllers.sdn import app_manager, cfg
from controllers.circuit_switch import CircuitSwitch
from controllers.base import OcsLabApp
from emulation.fabric import Configuration, FabricError

LOG = logging.getLogger("ocslab.api")
#: Largest time a request may ask for (dark window, slot, start delay), seconds.
MAX_SECONDS = 600.0


def _seconds(body: dict, key: str, default: float | None) -> float:
    """``body[key]`` as a time in [0, MAX_SECONDS] s. :raises ValueError: otherwise."""
    x = body.get(key, default)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= MAX_SECONDS:
        raise ValueError(f"{key} must be a number of seconds in [0, {MAX_SECONDS:g}], got {x!r}")
    return float(x)


def _ints(body: dict, key: str) -> list[int]:
    """``body[key]`` as a list of integers. :raises ValueError: otherwise."""
    x = body.get(key)
    if not isinstance(x, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in x):
        raise ValueError(f"{key} must be a list of integers, got {x!r}"[:200])
    return x


class JsonApi(OcsLabApp):
    """Runs the HTTP server in a hub thread; delegates to the circuit-switch app (an OS-Ken
    service brick, ``lookup_service_brick``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.server: ThreadingHTTPServer | None = None

    def start(self):
        thread = super().start()
        self.server = serve(cfg.CONF.ocslab.api_port, self._handler_class())
        self.state.log_event("api-listening", port=self.server.server_address[1])
        return thread

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
        super().stop()

    def _circuit_switch(self) -> CircuitSwitch:
        app = app_manager.lookup_service_brick("CircuitSwitch")
        if app is None:
            raise RuntimeError("the circuit_switch app is not loaded")
        return app

    def _handler_class(self):
        api = self

        class Handler(JsonHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                try:
                    self._get()
                except ValueError as e:
                    self.send_json(400, {"error": f"bad request: {e}"})

            def _get(self) -> None:
                url = urlparse(self.path)
                st = api.state
                if url.path == "/status":
                    names = st.expected_dpids()
                    with st.lock:
                        up = set(st.programmed)
                    sw = {name: dpid in up for dpid, name in sorted(names.items())}
                    self.send_json(200, {"switches": sw, "ready": all(sw.values())})
                elif url.path == "/circuits":
                    with st.lock:
                        self.send_json(200, st.circuits.to_json())
                elif url.path == "/events":
                    since = int(parse_qs(url.query).get("since", ["0"])[0])
                    if since < 0:
                        raise ValueError(f"since must be >= 0, got {since}")
                    self.send_json(200, st.events(since))
                else:
                    self.send_json(404, {"error": f"no endpoint {url.path}"})

            def do_POST(self):  # noqa: N802
                url = urlparse(self.path)
                try:
                    body = self.read_json()
                    dark = _seconds(body, "reconfiguration_delay_s", 0.0)
                except ValueError as e:
                    self.send_json(400, {"error": f"bad request: {e}"})
                    return
                if url.path == "/failover":
                    try:
                        app = app_manager.lookup_service_brick("FailoverApp")
                        if app is None:
                            raise RuntimeError("the failover app is not loaded")
                        if body.get("disarm"):
                            self.send_json(200, app.disarm())
                            return
                        self.send_json(200, app.arm(str(body["mode"]), _ints(body, "placement"), _ints(body, "spares"),
                                                dark))
                    except (KeyError, TypeError, ValueError, AttributeError, FabricError, RuntimeError) as e:
                        self.send_json(400, {"error": str(e)})
                    return
                if url.path == "/opus":
                    try:
                        app = app_manager.lookup_service_brick("OpusApp")
                        if app is None:
                            raise RuntimeError("the opus app is not loaded")
                        if body.get("disarm"):
                            self.send_json(200, app.disarm())
                            return
                        if not isinstance(body.get("socket"), str) or not body["socket"]:
                            raise ValueError("socket must be a path")
                        self.send_json(200, app.arm(body["socket"], dark, _seconds(body, "timeout_s", 10.0)))
                    except (KeyError, TypeError, ValueError, AttributeError, FabricError, RuntimeError) as e:
                        self.send_json(400, {"error": str(e)})
                    return
                if url.path == "/rotor":
                    try:
                        cs = api._circuit_switch()
                        if body.get("stop"):
                            cs.stop_rotor()
                            self.send_json(200, {"stopped": True})
                            return
                        if not isinstance(body.get("configurations"), list) or not isinstance(body.get("slots_s"), list):
                            raise ValueError("configurations and slots_s must be lists")
                        configs = [Configuration.from_json(c) for c in body["configurations"]]
                        slots = [_seconds({"slot": x}, "slot", None) for x in body["slots_s"]]
                        count = body.get("count")
                        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10**7:
                            raise ValueError(f"count must be an integer in [0, 1e7], got {count!r}")
                        self.send_json(200, cs.start_rotor(configs, slots, dark, count,
                                                       _seconds(body, "start_delay_s", 0.05)))
                    except (KeyError, TypeError, ValueError, AttributeError, FabricError, RuntimeError) as e:
                        self.send_json(400, {"error": str(e)})
                    return
                if url.path == "/demand":  # the emulator's collective and step events (CircuitSwitch.post)
                    try:
                        self.send_json(200, api._circuit_switch().post(body.get("events")))
                    except (ValueError, RuntimeError) as e:
                        self.send_json(400, {"error": str(e)})
                    return
                if url.path == "/prepare":
                    try:
                        if not isinstance(body.get("configurations"), list):
                            raise ValueError("configurations must be a list")
                        configs = [Configuration.from_json(c) for c in body["configurations"]]
                        self.send_json(200, api._circuit_switch().prepare(configs))
                    except (KeyError, TypeError, ValueError, AttributeError, FabricError, RuntimeError) as e:
                        self.send_json(400, {"error": str(e)})
                    return
                if url.path != "/configuration":
                    self.send_json(404, {"error": f"no endpoint {url.path}"})
                    return
                try:
                    config = Configuration.from_json(body["configuration"])
                    self.send_json(200, api._circuit_switch().apply(config, dark, by="emulator"))
                except (KeyError, TypeError, ValueError, AttributeError, FabricError) as e:
                    self.send_json(400, {"error": str(e)})
                except Exception as e:  # a switch that fails mid-way: report, keep serving
                    LOG.exception("apply failed")
                    self.send_json(500, {"error": f"{type(e).__name__}: {e}"})

        return Handler
