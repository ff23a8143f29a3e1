"""Opus (arXiv 2507.08119): the controller app's protocol over its Unix socket (a real controller
process, no switches needed), and the torch job on photonic rails on the packet backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from emulation.torchjob.launch import torch_available
from emulation.torchjob.opus_client import OpusClient, OpusError
from topologies import rails

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def opus(controller_process):
    _p, _ofp, _api, client = controller_process(rails(2, 2, rail_ports=1, initial="empty"),
                                                ["circuit_switch", "routing", "api", "opus"])
    d = tempfile.mkdtemp(prefix="ocl-opus-test-")
    sock = os.path.join(d, "opus.sock")
    client.arm_opus(sock, 0.05, timeout_s=0.5)
    try:
        yield client, sock
    finally:
        client.disarm_opus()
        os.rmdir(d)


def test_groups_check_in_and_an_incomplete_group_times_out_naming_who_did_not_ask(opus):
    client, sock = opus
    c = OpusClient(sock)
    assert c.call({"op": "ping"})["t"] > 0
    # GPU r of server s is s * 2 + r: GPUs 0 and 2 share rail 0; 0 and 1 share server 0
    dp = c.checkin("dp@r0", [0, 2], 0)
    assert (dp["ignored"], dp["rail"], dp["bit"]) == (False, "rail0", 0)
    assert c.checkin("pp@r0", [2, 0], 1)["bit"] == 0  # the same circuits: the same segment
    assert c.checkin("tp/s0", [0, 1], 0)["ignored"] is True
    assert c.request("tp/s0", 1, "on-demand")["ignored"] is True  # answered at once, nothing to do
    with pytest.raises(OpusError, match="share no rail"):
        c.checkin("bad", [0, 3], 0)
    with pytest.raises(OpusError, match="before with members"):
        c.checkin("dp@r0", [0, 3], 0)
    with pytest.raises(OpusError, match="not a member"):
        c.request("dp@r0", 1, "on-demand")
    t0 = time.monotonic()
    with pytest.raises(OpusError, match=r"timeout after 0.5 s: group dp@r0 waits for GPUs \[2\]"):
        c.request("dp@r0", 0, "on-demand")
    assert 0.5 <= time.monotonic() - t0 < 2.0
    for bad, needle in ((b"{nope\n", "bad message"), (b'{"op": "teleport"}\n', "unknown op"),
                        (b'{"op": "request", "group": "dp@r0", "rank": 0, "mode": "psychic"}\n', "mode")):
        c.sock.sendall(bad)
        out = json.loads(c.rfile.readline())
        assert out["ok"] is False and needle in out["error"], out
    events = [e["kind"] for e in client.events()]
    assert "opus-armed" in events and "opus-reconfigured" not in events
    c.close()


@pytest.mark.emulation
@pytest.mark.skipif(not torch_available(), reason="PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
def test_a_torch_job_drives_the_rails_and_matches_the_flow_replay(run_dir):
    text = (ROOT / "experiments" / "rails_torch.yaml").read_text().replace("iterations: 5", "iterations: 4")
    path = run_dir / "rails_torch.yaml"
    path.write_text(text)
    out = run_dir / "out"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "train", str(path), "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "result.json").read_text())["result"]
    runs = res["runs"]
    assert list(runs) == ["on-demand", "speculative-deferred"]
    R = res["reconfiguration_delay_s"]
    for mode, run in runs.items():
        dark = [x["measured_s"] for x in run["reconfigurations"]]
        # 4 iterations x 4 rail phase changes x 2 rails, each by pairs of groups: rewires happened,
        # and none was shorter than asked (the controller's barriers bound it from below)
        assert len(dark) >= 4 * 2 * 2 and min(dark) >= R, (mode, dark)
        # the job learns: its loss falls from the first iteration to the last
        assert run["loss"][-1] < run["loss"][0], run["loss"]
        # within 15% of the flow replay of the same trace (measured at 10 Mbit/s: +3.4% to +4.8% idle,
        # +4.6% and +4.7% with two busy loops on the two cores; +19% once before ranks drained their
        # sends before a rewire; at 5 Mbit/s with time dilation 2: +1.3% to +3.0% over 4 runs)
        assert abs(run["deviation"]) < 0.15, (mode, run["iteration_s"], run["flow_iteration_s"])
        assert run["headroom"]["efficiency"] >= 0.98 and run["overrun_s"] < 0.05 * run["iteration_s"]
        # link_mbps: auto: the links ran at the rate this machine carries, the job slowed to match
        assert run["headroom"]["link_mbps"] * run["time_dilation"] == pytest.approx(res["link_mbps"])
    # asking as a phase ends hides R in the backward: speculative is faster (flow: by R = 0.2 s)
    spec, od = runs["speculative-deferred"], runs["on-demand"]
    assert spec["flow_iteration_s"] < od["flow_iteration_s"]
    assert spec["iteration_s"] < od["iteration_s"] - R / 4, (spec["iteration_s"], od["iteration_s"])
    assert (out / "timeline.png").stat().st_size > 20_000
