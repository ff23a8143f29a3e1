"""Every kind honours every key of the scenario's ``emulation:`` section, or refuses it in one
line naming the key and the kind (the packet session, emulation/emulator/session.py).

"Honoured" is shown without packets: the fabric and the calibration are replaced by recorders,
and each kind's packet path runs until it first touches the fabric. What reached them must be
the value the file gave; the session's own behaviour (build, calibrate, tear down) is tested on
real packets by the emulation tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from emulation import api
from emulation.scenario import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "controllers" / "examples" / "static_schedule.py")

#: A value of each key unlike its default, and how it shows in what the session was given.
GIVEN = {"link_mbps": 7.0, "mtu": 9000, "controller": "ryu", "apps": [APP], "byte_scale": 0.05,
         "headroom": "warn", "headroom_target": 0.9, "servers": ["lab-a", "lab-b"], "ssh_config": "/nonexistent/cfg",
         "ocs": "sharded"}

#: Kind -> (its shipped scenario, the keys it honours). Every other key must be refused.
KINDS = {
    "collective": ("demo.yaml", set(GIVEN)),
    "tenancy": ("tenancy_packets.yaml", set(GIVEN) - {"servers", "ssh_config", "ocs"}),
    "training": ("lumion.yaml", {"link_mbps", "mtu", "controller", "apps", "headroom", "headroom_target"}),
    "wan": ("wan_abilene_packet.yaml", {"link_mbps", "controller"}),
    "rails": ("rails_torch.yaml", {"link_mbps", "mtu", "controller", "apps", "headroom", "headroom_target"}),
}


class _Touched(Exception):
    """The kind's packet path went past the session: what was recorded is all there is."""


class _Fabric:
    """Stands for EmulatedFabric: records its arguments; any use beyond the session raises."""

    made: list[dict] = []

    def __init__(self, fabric, run_dir, **kwargs):
        self.fabric, self.link_mbps, self.datapath = fabric, kwargs["link_mbps"], "packet"
        _Fabric.made.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_link_mbps(self, mbps):
        self.link_mbps = mbps

    def __getattr__(self, name):
        raise _Touched(name)


def _data(kind: str, key: str) -> dict:
    name, _ = KINDS[kind]
    data = yaml.safe_load((ROOT / "experiments" / name).read_text())
    em = dict(data.get("emulation") or {})
    em[key] = GIVEN[key]
    if key in ("ssh_config", "ocs") and "servers" in KINDS[kind][1]:
        em["servers"] = GIVEN["servers"]
    if key == "headroom":
        em["link_mbps"] = 7.0  # warn probes a given rate
    if key == "headroom_target" and "headroom" in KINDS[kind][1]:
        em["headroom"] = "refuse"  # a training scenario skips the probe unless asked
    data["emulation"] = em
    return data


def _packet_path(kind: str, sc, out: Path) -> None:
    """Run ``sc``'s packet path as its kind's ``ocslab run`` would, to its first use of the fabric."""
    if kind == "collective":
        from emulation.collective.runner import run_packet
        from emulation.scenario import resolve

        run_packet(resolve(sc), out)
    elif kind == "rails":
        from emulation.torchjob.rails_job import run_rail_job

        r = sc.rails
        run_rail_job(r.trace(), r.fabric.network(), r.fabric.gpus_per_server, r.torch_job, out, sc.emulation)
    elif kind == "tenancy":
        from emulation.tenants_packet import compare_tenants

        t = sc.tenancy
        compare_tenants(t.rack, t.tenants, t.fabric, sc.emulation, out)
    else:
        from emulation.torchjob.recoveries import run_recoveries

        run_recoveries(sc.recovery_setup(), sc.recovery, out)


@pytest.fixture
def recorded(monkeypatch):
    """The fabric, the calibration, the cluster and the capability probe replaced by recorders."""
    from emulation.emulator import calibration, capabilities, net, session

    got = {"calibrate": [], "cluster": []}
    _Fabric.made = []

    class Caps:
        netem = True

        def to_json(self):
            return {"netem": True}

    class Cal:
        def __init__(self, requested):
            self.link_mbps, self.requested = requested or 5.0, requested
            self.requested_ok, self.chosen = True, {"link_mbps": requested or 5.0, "efficiency": 1.0}
            self.probes = [self.chosen]

        def to_json(self):
            return {}

    def calibrate(emu, requested, byte_scale, run_dir, target=0.98, seconds=1.0, max_mbps=None):
        got["calibrate"].append({"requested": requested, "byte_scale": byte_scale, "target": target})
        return Cal(requested)

    class Cluster:
        def __init__(self, spec):
            self.servers = list(spec.servers)
            got["cluster"].append({"servers": list(spec.servers), "ssh_config": spec.ssh_config})

    monkeypatch.setattr(net, "EmulatedFabric", _Fabric)
    monkeypatch.setattr(calibration, "calibrate", calibrate)
    monkeypatch.setattr(capabilities, "detect", Caps)
    monkeypatch.setattr(session, "cluster_of", lambda spec: Cluster(spec) if spec.servers else None)
    return got


@pytest.mark.parametrize("kind, key", [(k, key) for k in KINDS for key in GIVEN])
def test_each_kind_honours_or_refuses_each_emulation_key(kind, key, recorded, tmp_path, monkeypatch):
    _, honours = KINDS[kind]
    data = _data(kind, key)
    if key not in honours:
        with pytest.raises(ScenarioError) as e:
            api.from_dict(data, "s.yaml")
        line = str(e.value)
        assert "\n" not in line and line.startswith(f"s.yaml: emulation.{key}: a {kind} scenario does not use it")
        return
    sc = api.from_dict(data, "s.yaml")
    assert getattr(sc.emulation, key) == (tuple(GIVEN[key]) if isinstance(GIVEN[key], list) else GIVEN[key])
    if kind == "wan":
        return  # the WAN replay's routers take link_mbps and controller (tests/test_wan_packet.py)
    with pytest.raises(_Touched):
        _packet_path(kind, sc, tmp_path / "out")
    (made,) = _Fabric.made
    cal = recorded["calibrate"]
    if key == "link_mbps":
        assert made["link_mbps"] == 7.0
    elif key in ("mtu", "controller"):
        assert made[key] == GIVEN[key]
    elif key == "apps":
        assert list(made["apps"]) == [APP]
    elif key == "byte_scale":
        assert cal and cal[0]["byte_scale"] == 0.05
    elif key == "headroom":  # warn: probed at the given rate
        assert cal and cal[0]["requested"] == 7.0
    elif key == "headroom_target":
        assert cal and cal[0]["target"] == 0.9
    elif key in ("servers", "ssh_config"):
        assert recorded["cluster"] == [{"servers": GIVEN["servers"],
                                        "ssh_config": GIVEN["ssh_config"] if key == "ssh_config" else None}]
        assert made["servers"].servers == GIVEN["servers"]
    elif key == "ocs":  # sharded over both servers
        assert made["servers"].servers == GIVEN["servers"] and made["ocs_shards"] == 2


def test_a_rails_scenario_takes_its_torch_jobs_link_rate_from_emulation_and_the_old_spelling_with_a_warning(caplog):
    data = yaml.safe_load((ROOT / "experiments" / "rails_torch.yaml").read_text())
    assert api.from_dict(data).emulation.link_mbps == "auto"
    del data["emulation"]
    assert api.from_dict(data).emulation.link_mbps == 10.0  # unset: the fabric's port rate (0.01 Gbit/s)
    data["rails"]["torch_job"]["link_mbps"] = 5
    with caplog.at_level("WARNING"):
        assert api.from_dict(data).emulation.link_mbps == 5.0
    (line,) = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert line == "rails.torch_job.link_mbps is deprecated: it is read as emulation.link_mbps (write it there)"
    data["emulation"] = {"link_mbps": 5}
    with pytest.raises(ScenarioError, match=r"rails.torch_job.link_mbps: give the rate once, as emulation.link_mbps"):
        api.from_dict(data)
    for key in ("byte_scale", "servers"):
        bad = {**data, "emulation": {key: GIVEN[key]}}
        bad["rails"] = {**data["rails"], "torch_job": {k: v for k, v in data["rails"]["torch_job"].items() if k != "link_mbps"}}
        with pytest.raises(ScenarioError, match=rf"emulation.{key}: a rails scenario does not use it"):
            api.from_dict(bad)


def test_the_old_spelling_of_a_rail_sweeps_r_loads_with_a_warning(caplog):
    data = yaml.safe_load((ROOT / "experiments" / "rails_llama.yaml").read_text())
    swept = data["rails"]["reconfiguration_delay_s"]
    data["rails"]["sweep_s"] = data["rails"].pop("reconfiguration_delay_s")
    with caplog.at_level("WARNING"):
        assert api.from_dict(data).rails.reconfiguration_delay_s == swept
    assert [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()] == [
        "rails.sweep_s is deprecated: it is read as rails.reconfiguration_delay_s (write it there)"]
    data["rails"]["reconfiguration_delay_s"] = swept
    with pytest.raises(ScenarioError, match="sweep_s: give the delays once, as reconfiguration_delay_s"):
        api.from_dict(data)


@pytest.mark.parametrize("name", ["demo", "wan_b4_faults", "tenancy_packets"])
def test_the_packet_backends_old_name_loads_with_a_warning_and_reads_in_old_results(name, caplog, tmp_path):
    """``backend: mininet`` (the packet backend's earlier name) in a scenario file of each kind
    that runs on both backends loads as ``packet`` with one deprecation line; ``--backend
    mininet`` is taken as ``packet``; a result written with the old name reads as packet."""
    from pydantic import TypeAdapter

    from emulation.backends import EnvelopeBackend
    from emulation.cli import parser
    from emulation.results import RunResult

    data = yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())
    assert data["backend"] == "packet"
    data["backend"] = "mininet"
    with caplog.at_level("WARNING"):
        assert api.from_dict(data).backend == "packet"
    assert [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()] == [
        "backend: mininet is deprecated: it is read as packet (write that)"]
    assert parser().parse_args(["run", "x.yaml", "--backend", "mininet"]).backend == "packet"
    old = {"name": "ring", "collective": "allreduce", "algorithm": "ring", "planner": "static", "ranks": 8,
           "bytes": 1 << 20, "backend": "mininet", "time_s": 1e-3}
    assert RunResult.model_validate(old).backend == "packet"
    assert TypeAdapter(EnvelopeBackend).validate_python("mininet") == "packet"
    data["backend"] = "quantum"
    with pytest.raises(ScenarioError, match="backend: Input should be 'packet' or 'flow'"):
        api.from_dict(data)
