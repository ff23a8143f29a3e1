"""OS-Ken app serving the controller's JSON API on 127.0.0.1 for the orchestrator.

Endpoints (JSON bodies and answers; times are CLOCK_MONOTONIC seconds of this machine, shared
by every network namespace on it):

- ``GET /status``: ``{"switches": {name: programmed}, "ready": bool}``: a switch counts once it
  is connected and its initial rules (circuits, routes) are barrier-acknowledged
- ``GET /circuits``: the current configuration ``{ocs: [[[gpu, port], [gpu, port]], ...]}``
- ``POST /configuration`` ``{"configuration": {...}, "reconfiguration_delay_s": float, "live_at": float
  (optional: CLOCK_MONOTONIC, the new circuits go live no earlier)}``: reconfigure;
  answers when the new circuits carry traffic, with the phase timestamps (see
  :meth:`controllers.circuit_switch.CircuitSwitch.apply`); 400 on a bad configuration, 409 while
  an OCS it changes is not connected.
- ``POST /prepare`` ``{"configurations": [...]}``: compute the forwarding rules of configurations
  a schedule will visit ahead of time (:meth:`controllers.circuit_switch.CircuitSwitch.prepare`),
  so that reconfiguring to them reroutes quickly inside the dark window; answers
  ``{"configurations", "flow_mods", "seconds"}``.
- ``POST /rotor`` ``{"configurations": [...], "slots_s": [...], "reconfiguration_delay_s": float, "count": int,
  "start_delay_s": float}``: cycle through the configurations on the controller's own clock
  (:meth:`controllers.rotor.Rotor.start_timeline`), answering at once with
  ``{"t0", "slots"}``; each slot logs a ``rotor-slot`` event; ``{"stop": true}`` stops it.
  ``{"sequences": [[{"configuration", "slot_s"}, ...] per OCS], "reconfiguration_delay_s",
  "start_delay_s"}`` runs one slot sequence per OCS, each on its own timeline
  (:meth:`controllers.parallel_ocs.ParallelOcs.start_timeline`, parallel OCSes); each slot
  logs an ``ocs-slot`` event.
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

The routes are the table :data:`ROUTES`; ``controllers/openapi.yaml`` is their OpenAPI 3.1
contract (request and answer schemas, statuses; a test holds the two equal). A malformed request
(not JSON, not an object, a missing or mistyped field, a time that is not in [0, 600] s, a
configuration that is not valid for the fabric) gets 400 and a one-line ``{"error": ...}`` before
anything is changed; an unknown path 404, a known path under another method 405; a valid request
the controller's state refuses now 409 (:func:`answer`). The server never stops on one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from controllers.barriers import BarrierTimeout
from controllers.http_api import JsonHandler, serve
from controllers.sdn import app_manager, cfg
from controllers.circuit_switch import CircuitSwitch
from controllers.timing import ENGINES
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


class ApiError(Exception):
    """A request the API refuses with HTTP ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


#: The API's route table, ``(method, path) -> handler(api, request) -> JSON answer``: the one the
#: server dispatches on and the one ``controllers/openapi.yaml`` documents (a test holds them
#: equal). ``request`` is the body of a POST, the query of a GET (``{name: last value}``).
ROUTES: dict[tuple[str, str], Callable[["JsonApi", dict], object]] = {}


def api_route(method: str, path: str):
    """Register the decorated function as the handler of ``method path`` in :data:`ROUTES`."""
    def register(fn):
        ROUTES[(method, path)] = fn
        return fn
    return register


def _brick(name: str):
    """The loaded app ``name`` (a service brick of the framework).

    :raises ApiError: 404, that app is not loaded (so its endpoint is not served).
    """
    app = app_manager.lookup_service_brick(name)
    if app is None:
        raise ApiError(404, f"the {name} app is not loaded: this endpoint is not served")
    return app


def _configurations(body: dict) -> list[Configuration]:
    """``body["configurations"]`` as configurations. :raises ValueError: not a list."""
    if not isinstance(body.get("configurations"), list):
        raise ValueError("configurations must be a list")
    return [Configuration.from_json(c) for c in body["configurations"]]


@api_route("GET", "/status")
def _status(api: "JsonApi", query: dict) -> dict:
    st = api.state
    names = st.expected_dpids()
    with st.lock:
        up = set(st.programmed)
    sw = {name: dpid in up for dpid, name in sorted(names.items())}
    return {"switches": sw, "ready": all(sw.values())}


@api_route("GET", "/circuits")
def _circuits(api: "JsonApi", query: dict) -> dict:
    with api.state.lock:
        return api.state.circuits.to_json()


@api_route("GET", "/events")
def _events(api: "JsonApi", query: dict) -> list:
    try:
        since = int(query.get("since", "0"))
    except ValueError:
        raise ValueError(f"since must be an integer, got {query.get('since')!r}") from None
    if since < 0:
        raise ValueError(f"since must be >= 0, got {since}")
    return api.state.events(since)


@api_route("POST", "/configuration")
def _configuration(api: "JsonApi", body: dict) -> dict:
    if "configuration" not in body:
        raise ValueError("configuration is missing")
    config = Configuration.from_json(body["configuration"])
    live_at = body.get("live_at")
    if live_at is not None and (isinstance(live_at, bool) or not isinstance(live_at, (int, float))
                                or not 0 <= live_at <= time.monotonic() + MAX_SECONDS):
        raise ValueError(f"live_at must be a CLOCK_MONOTONIC time in seconds at most {MAX_SECONDS:g} s from now, "
                         f"got {live_at!r}"[:200])
    return api._circuit_switch().apply(config, _seconds(body, "reconfiguration_delay_s", 0.0), live_at=live_at,
                                       by="emulator")


@api_route("POST", "/demand")
def _demand(api: "JsonApi", body: dict) -> dict:
    """The emulator's collective and step events (:meth:`CircuitSwitch.post`)."""
    return api._circuit_switch().post(body.get("events"))


@api_route("POST", "/prepare")
def _prepare(api: "JsonApi", body: dict) -> dict:
    return api._circuit_switch().prepare(_configurations(body))


@api_route("POST", "/rotor")
def _rotor(api: "JsonApi", body: dict) -> dict:
    cs = api._circuit_switch()
    if body.get("stop"):  # whichever timing engine runs
        for name in ENGINES:
            engine = app_manager.lookup_service_brick(name)
            if engine is not None:
                engine.stop_timeline()
        return {"stopped": True}
    if "sequences" in body:  # parallel OCSes, each on its own timeline
        seqs = body["sequences"]
        if not isinstance(seqs, list) or not all(isinstance(q, list) for q in seqs):
            raise ValueError("sequences must be a list (one per OCS) of lists of {configuration, slot_s}")
        names = [o.name for o in cs.state.fabric.ocs]
        if len(seqs) > len(names):
            raise ValueError(f"sequences: {len(seqs)} sequences for {len(names)} OCSes")
        parsed = []
        for k, seq in enumerate(seqs):
            slots = []
            for x in seq:
                if not isinstance(x, dict) or "configuration" not in x:
                    raise ValueError("sequences: every slot is {configuration, slot_s}")
                slots.append((Configuration.from_json(x["configuration"])[names[k]], _seconds(x, "slot_s", None)))
            parsed.append(slots)
        return _brick("ParallelOcs").start_timeline(parsed, _seconds(body, "reconfiguration_delay_s", 0.0),
                                           _seconds(body, "start_delay_s", 0.05))
    configs = _configurations(body)
    if not isinstance(body.get("slots_s"), list):
        raise ValueError("slots_s must be a list")
    slots = [_seconds({"slot": x}, "slot", None) for x in body["slots_s"]]
    count = body.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10**7:
        raise ValueError(f"count must be an integer in [0, 1e7], got {count!r}")
    return _brick("Rotor").start_timeline(configs, slots, _seconds(body, "reconfiguration_delay_s", 0.0), count,
                                 _seconds(body, "start_delay_s", 0.05))


@api_route("POST", "/failover")
def _failover(api: "JsonApi", body: dict) -> dict:
    app = _brick("FailoverApp")
    if body.get("disarm"):
        return app.disarm()
    if not isinstance(body.get("mode"), str):
        raise ValueError(f"mode must be a string, got {body.get('mode')!r}"[:200])
    return app.arm(body["mode"], _ints(body, "placement"), _ints(body, "spares"),
                   _seconds(body, "reconfiguration_delay_s", 0.0))


@api_route("POST", "/opus")
def _opus(api: "JsonApi", body: dict) -> dict:
    app = _brick("OpusApp")
    if body.get("disarm"):
        return app.disarm()
    if not isinstance(body.get("socket"), str) or not body["socket"]:
        raise ValueError("socket must be a path")
    return app.arm(body["socket"], _seconds(body, "reconfiguration_delay_s", 0.0), _seconds(body, "timeout_s", 10.0))


def _one_line(e: BaseException) -> str:
    """``e``'s message on one line (a KeyError names its key), at most 300 characters."""
    msg = f"{e.args[0]!r} is missing" if isinstance(e, KeyError) and e.args else str(e) or type(e).__name__
    return " ".join(msg.split())[:300]


def answer(api: "JsonApi", method: str, target: str, read_body: Callable[[], dict]) -> tuple[int, object, dict]:
    """Dispatch one request on :data:`ROUTES`: ``(status, JSON answer, extra headers)``.

    200 the handler's answer; 400 ``{"error"}`` a malformed request (not JSON, not an object, a
    missing or mistyped field, a time outside [0, MAX_SECONDS] s in any POST body's
    ``reconfiguration_delay_s``, a configuration that is not valid for the fabric); 404 no such
    path (or its app is not loaded); 405 a path served under other methods (``Allow`` says
    which); 409 a valid request the controller's state refuses now (an OCS not connected, a
    rotor already running); 500 a switch failing mid-way (a barrier timeout) or a bug. Nothing is
    changed before a 400, 404 or 405.
    """
    url = urlparse(target)
    methods = sorted(m for m, p in ROUTES if p == url.path)
    if not methods:
        return 404, {"error": f"no endpoint {url.path}"}, {}
    if method not in methods:
        return 405, {"error": f"{url.path} answers {', '.join(methods)}, not {method}"}, {"Allow": ", ".join(methods)}
    try:
        if method == "POST":
            request = read_body()
            _seconds(request, "reconfiguration_delay_s", 0.0)
        else:
            request = {k: v[-1] for k, v in parse_qs(url.query).items()}
        return 200, ROUTES[(method, url.path)](api, request), {}
    except ApiError as e:
        return e.status, {"error": str(e)}, {}
    except BarrierTimeout as e:  # a switch that fails mid-way: report, keep serving
        LOG.exception("%s %s failed", method, url.path)
        return 500, {"error": f"a switch did not acknowledge: {_one_line(e)}"}, {}
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError, FabricError) as e:
        return 400, {"error": f"bad request: {_one_line(e)}"}, {}
    except RuntimeError as e:
        return 409, {"error": _one_line(e)}, {}
    except Exception as e:  # a bug: report, keep serving
        LOG.exception("%s %s failed", method, url.path)
        return 500, {"error": f"{type(e).__name__}: {_one_line(e)}"}, {}


class JsonApi(OcsLabApp):
    """Runs the HTTP server in a hub thread; delegates to the circuit-switch app (an OS-Ken
    service brick, ``lookup_service_brick``) and the failover and Opus apps, through
    :data:`ROUTES`."""

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
        return _brick("CircuitSwitch")

    def _handler_class(self) -> type[JsonHandler]:
        """The request handler class: every method goes through :func:`answer`."""
        api = self

        class Handler(JsonHandler):
            def _dispatch(self, method: str) -> None:
                code, body, headers = answer(api, method, self.path, self.read_json)
                self.send_json(code, body, headers)

            def do_GET(self):  # noqa: N802 - http.server API
                self._dispatch("GET")

            def do_POST(self):  # noqa: N802
                self._dispatch("POST")

            def do_PUT(self):  # noqa: N802
                self._dispatch("PUT")

            def do_DELETE(self):  # noqa: N802
                self._dispatch("DELETE")

            def do_PATCH(self):  # noqa: N802
                self._dispatch("PATCH")

        return Handler
