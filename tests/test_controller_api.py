"""The controller's JSON API: it listens on 127.0.0.1 only (OpenFlow too), answers malformed
requests with 400 and a JSON error, and keeps serving: a seeded fuzz of a few hundred bodies.

Starts the real controller process (no switches are needed for this)."""

from __future__ import annotations

import http.client
import json
import random
import subprocess
from pathlib import Path

import pytest

from emulation.emulator.controller_client import ControllerClient
from topologies import ocs_star

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def controller(controller_process):
    p, ofp, api, _client = controller_process(ocs_star(4, 2, 400, 0.0, "ring"),
                                              ["circuit_switch", "routing", "api", "failover"])
    return p, ofp, api


def _listeners(pid: int) -> set[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return {line.split()[3] for line in out.splitlines() if f"pid={pid}," in line}


def test_the_api_and_openflow_listen_on_loopback_only(controller):
    p, ofp, api = controller
    listening = _listeners(p.pid)
    assert listening == {f"127.0.0.1:{ofp}", f"127.0.0.1:{api}"}, listening


def _garbage(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 3 else 6)
    return [lambda: None, lambda: rng.random() < 0.5, lambda: rng.randint(-10**12, 10**12),
            lambda: rng.choice([float("inf"), -1.0, 1e308, 0.5, -0.0]),
            lambda: "".join(rng.choice("abc/..;$()\\\"'\x00é") for _ in range(rng.randrange(12))),
            lambda: rng.choice(["ocs0", "ocl-o0", "optical", "", "stop"]),
            lambda: [_garbage(rng, depth + 1) for _ in range(rng.randrange(4))],
            lambda: {rng.choice(["configuration", "configurations", "slots_s", "count", "reconfiguration_delay_s", "mode",
                                 "placement", "spares", "start_delay_s", "ocs0", "x"]): _garbage(rng, depth + 1)
                     for _ in range(rng.randrange(4))},
            lambda: {"ocs0": [[[rng.randint(-2, 9), rng.randint(-2, 3)], [_garbage(rng, depth + 1), 0]]]}][kind]()


def _malformed_bodies(rng: random.Random, count: int):
    """(path, raw body) pairs that are malformed by construction."""
    valid = {"/configuration": {"configuration": {"ocs0": [[[0, 0], [1, 0]]]}, "reconfiguration_delay_s": 0.0},
             "/rotor": {"configurations": [{"ocs0": [[[0, 0], [1, 0]]]}], "slots_s": [0.01], "count": 1},
             "/failover": {"mode": "optical", "placement": [0, 1], "spares": [2], "reconfiguration_delay_s": 0.0},
             "/prepare": {"configurations": [{"ocs0": [[[0, 0], [1, 0]]]}]}}
    required = {"/configuration": ["configuration"], "/rotor": ["configurations", "slots_s", "count"],
                "/failover": ["mode", "placement", "spares"], "/prepare": ["configurations"]}
    for i in range(count):
        path = rng.choice(list(valid))
        how = i % 5
        if how == 0:  # not JSON at all
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            raw = raw if raw.strip() else b"\xff"
            try:
                json.loads(raw)
                raw = b"{" + raw
            except ValueError:
                pass
        elif how == 1:  # JSON, not an object
            raw = json.dumps(rng.choice([[1, 2], "text", 3, 2.5, True, None, []])).encode()
        elif how == 2:  # a required field missing
            body = dict(valid[path])
            body.pop(rng.choice(required[path]))
            raw = json.dumps(body).encode()
        elif how == 3:  # a time that is not a time
            body = dict(valid[path])
            body["reconfiguration_delay_s"] = rng.choice([-1, "soon", [], {}, 1e9, True])
            raw = json.dumps(body).encode()
        else:  # a required field of the wrong shape
            body = dict(valid[path])
            key = rng.choice(required[path])
            bad = _garbage(rng)
            while isinstance(bad, type(valid[path][key])) and not isinstance(bad, (list, dict)):
                bad = _garbage(rng)
            body[key] = bad if not isinstance(bad, (list, dict)) else {"not": "it"} if isinstance(bad, list) else [bad]
            raw = json.dumps(body, allow_nan=True).encode()
        yield path, raw


def test_malformed_requests_get_400_and_the_controller_keeps_serving(controller):
    p, _ofp, api = controller
    rng = random.Random(20261123)
    codes: dict[int, int] = {}
    for path, raw in _malformed_bodies(rng, 300):
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
        conn.request("POST", path, body=raw, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        codes[r.status] = codes.get(r.status, 0) + 1
        assert r.status == 400, (path, raw[:200], r.status, body[:200])
        assert "error" in json.loads(body)
    for live_at in ('"x"', "-1", "1e308", "Infinity", "NaN", "true"):  # CLOCK_MONOTONIC, within 600 s
        raw = ('{"configuration": {"ocs0": [[[0, 0], [1, 0]]]}, "reconfiguration_delay_s": 0.0, "live_at": %s}'
               % live_at)
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
        conn.request("POST", "/configuration", body=raw, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 400 and "live_at" in json.loads(r.read())["error"], live_at
        conn.close()
    for path in ("/events?since=x", "/events?since=-1"):
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
        conn.request("GET", path)
        assert conn.getresponse().status == 400
        conn.close()
    print(f"fuzz: 300 malformed requests, answers {codes}, controller alive {p.poll() is None}")
    assert p.poll() is None
    assert ControllerClient(api).alive()
