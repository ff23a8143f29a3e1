"""Client of the controller's JSON API (``controllers/api.py``) on 127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from emulation.fabric import Configuration
from emulation.poll import wait_until


class ControllerError(RuntimeError):
    """The controller answered with an error or not at all."""


class ControllerClient:
    """Talks to ``http://127.0.0.1:<port>``."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.base = f"http://127.0.0.1:{port}"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise ControllerError(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ControllerError(f"{method} {path}: {e}") from None

    def request(self, method: str, path: str, body: dict | None = None) -> object:
        """``method path`` with the JSON ``body``; the decoded JSON answer.

        :raises ControllerError: an error status, or no answer within the timeout.
        """
        return self._call(method, path, body)

    def alive(self) -> bool:
        """The API answers."""
        try:
            self._call("GET", "/status")
            return True
        except ControllerError:
            return False

    def status(self) -> dict:
        """``{"switches": {name: connected}, "ready": bool}``."""
        return self._call("GET", "/status")

    def wait_ready(self, timeout: float = 60.0, poll_s: float = 0.05) -> None:
        """Poll until every bridge is connected and programmed.

        :raises ControllerError: not ready within ``timeout`` seconds (names the missing bridges).
        """
        last: dict = {}

        def ready() -> bool:
            last.update(self.status())
            return bool(last["ready"])

        def not_ready() -> ControllerError:
            missing = [n for n, up in last["switches"].items() if not up]
            return ControllerError(f"switches not connected after {timeout} s: {', '.join(missing)}")

        wait_until(ready, timeout, not_ready, interval_s=poll_s)

    def circuits(self) -> Configuration:
        """The controller's current configuration."""
        return Configuration.from_json(self._call("GET", "/circuits"))

    def apply(self, config: Configuration, reconfiguration_delay_s: float, live_at: float | None = None) -> dict:
        """Reconfigure; returns when the new circuits carry traffic (see ``CircuitSwitch.apply``);
        with ``live_at`` (CLOCK_MONOTONIC) they are installed no earlier than then."""
        body = {"configuration": config.to_json(), "reconfiguration_delay_s": reconfiguration_delay_s}
        if live_at is not None:
            body["live_at"] = live_at
        return self._call("POST", "/configuration", body)

    def prepare(self, configs: list[Configuration]) -> dict:
        """Have the controller compute the forwarding rules of ``configs`` ahead of time
        (``controllers.circuit_switch.CircuitSwitch.prepare``); returns ``{"configurations",
        "flow_mods", "seconds"}``. Untimed: call it before a run's clock starts."""
        return self._call("POST", "/prepare", {"configurations": [c.to_json() for c in configs]})

    def start_rotor(self, configs: list[Configuration], slots_s: list[float], reconfiguration_delay_s: float, count: int,
                    start_delay_s: float = 0.05) -> dict:
        """Start the controller's rotor (time-slotted configurations on its own clock; see
        ``controllers.rotor.Rotor.start_timeline``); returns ``{"t0", "slots"}``."""
        return self._call("POST", "/rotor", {"configurations": [c.to_json() for c in configs], "slots_s": slots_s,
                                             "reconfiguration_delay_s": reconfiguration_delay_s, "count": count,
                                             "start_delay_s": start_delay_s})

    def start_sequences(self, sequences: list[list[tuple[Configuration, float]]], reconfiguration_delay_s: float,
                        start_delay_s: float = 0.05) -> dict:
        """Start one slot sequence per OCS, each on its own timeline (parallel OCSes; see
        ``controllers.parallel_ocs.ParallelOcs.start_timeline``): ``sequences[k]`` lists OCS
        k's ``(configuration, slot_s)``; returns ``{"t0", "slots"}``."""
        return self._call("POST", "/rotor", {
            "sequences": [[{"configuration": c.to_json(), "slot_s": d} for c, d in seq] for seq in sequences],
            "reconfiguration_delay_s": reconfiguration_delay_s, "start_delay_s": start_delay_s})

    def stop_rotor(self) -> None:
        """Stop a running rotor after its current slot."""
        self._call("POST", "/rotor", {"stop": True})

    def arm_failover(self, mode: str, placement: list[int], spares: list[int], reconfiguration_delay_s: float) -> dict:
        """Arm GPU-failure recovery (``controllers.failover.FailoverApp.arm``); returns the
        precomputed ``{"mode", "table": {failed GPU: new placement}}``."""
        return self._call("POST", "/failover", {"mode": mode, "placement": placement, "spares": spares,
                                                "reconfiguration_delay_s": reconfiguration_delay_s})

    def disarm_failover(self) -> None:
        """Stop GPU-failure recovery (before tearing the emulation down)."""
        self._call("POST", "/failover", {"disarm": True})

    def arm_opus(self, socket: str, reconfiguration_delay_s: float, timeout_s: float = 10.0) -> dict:
        """Serve the Opus protocol on the Unix socket ``socket`` (``controllers.opus.OpusApp.arm``)."""
        return self._call("POST", "/opus", {"socket": socket, "reconfiguration_delay_s": reconfiguration_delay_s,
                                            "timeout_s": timeout_s})

    def disarm_opus(self) -> None:
        """Stop serving the Opus protocol."""
        self._call("POST", "/opus", {"disarm": True})

    def post_events(self, records: list[dict]) -> dict:
        """Raise collective and step events for the controller's apps (``POST /demand``,
        ``controllers.circuit_switch.CircuitSwitch.post``); returns once a step's handlers are
        done and the circuits they asked for are in place: ``{"events", "reconfigurations",
        "dark_window_measured_s", "refused", "handlers_s", "circuits"}``.

        :raises ControllerError: a malformed record (400) or no answer.
        """
        return self._call("POST", "/demand", {"events": records})

    def events(self, since: int = 0) -> list[dict]:
        """Controller event log from sequence number ``since``."""
        return self._call("GET", f"/events?since={since}")
