"""``ocslab fabric FILE -o FILE``: the exported document is the fabric the scenario's packet run
builds (its initial circuits included), byte for byte what the emulator hands its controller; the
printed ``mn --topo`` builds the same switches, hosts and ports; bad input is one line, exit 2;
and (emulation) the controller started from the printed command plus Mininet on the printed
topology reach every GPU from every other."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from emulation import cli, kinds
from emulation.collective import fabric_export
from emulation.fabric import Fabric
from emulation.scenario import resolve

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"
#: Collective scenarios of every base topology and initial configuration the experiments use.
SCENARIOS = ["demo", "ring16", "pccl8", "lab", "moe_eps", "moe_twohop", "scale1024"]


def _export(name_or_path, out: Path, capsys) -> tuple[int, str, str]:
    path = name_or_path if isinstance(name_or_path, Path) else EXP / f"{name_or_path}.yaml"
    status = cli.main(["fabric", str(path), "-o", str(out)])
    got = capsys.readouterr()
    return status, got.out, got.err


def _commands(printed: str) -> tuple[list[str], list[str] | None]:
    """The controller's and mn's argv from what ``ocslab fabric`` printed."""
    lines = [shlex.split(line) for line in printed.splitlines() if line.startswith("  ") and "(" not in line[:4]]
    ctl = next(a for a in lines if "--ocslab-fabric" in a)
    mn = next((a for a in lines if "--custom" in a), None)
    return ctl, mn


def _the_runs_fabric(name: str) -> Fabric:
    _, sc = kinds.load(EXP / f"{name}.yaml")
    return (sc.experiment if sc.experiment is not None else resolve(sc)).fabric


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_export_is_the_fabric_the_run_builds(tmp_path, capsys, name):
    out = tmp_path / "f.json"
    status, printed, err = _export(name, out, capsys)
    assert status == 0 and err == "", err
    fabric = _the_runs_fabric(name)
    text = out.read_text()
    assert text == json.dumps(fabric.to_json()) + "\n"  # what EmulatedFabric writes for its controller
    back = Fabric.from_json(json.loads(text))
    assert back == fabric and back.initial == fabric.initial
    circuits = sum(1 for _ in back.initial.all_circuits())
    assert f"fabric: {out} ({fabric.gpus} GPUs x {fabric.ports_per_gpu} ports" in printed
    assert f"; {circuits} circuits at the start)" in printed
    ctl, _ = _commands(printed)
    assert ctl[ctl.index("--ocslab-fabric") + 1] in (str(out), os.path.relpath(out))
    assert ctl[ctl.index("--ofp-tcp-listen-port") + 1] == str(fabric_export.FABRIC_OFP_PORT)


def test_the_demo_starts_in_its_ring_of_circuits(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert _export("demo", out, capsys)[0] == 0
    back = Fabric.from_json(json.loads(out.read_text()))
    pairs = {frozenset((c.a.gpu, c.b.gpu)) for _, c in back.initial.all_circuits()}
    assert pairs == {frozenset((g, (g + 1) % 8)) for g in range(8)}
    twohop = tmp_path / "twohop.json"
    assert _export("moe_twohop", twohop, capsys)[0] == 0  # initial: empty
    assert json.loads(twohop.read_text())["initial"] in ({}, {"ocs0": []})


@pytest.mark.parametrize("name", SCENARIOS[:-1])
def test_the_printed_mn_topology_has_the_exported_switches_hosts_and_ports(tmp_path, capsys, name):
    pytest.importorskip("mininet.topo")
    from mininet.util import buildTopo

    from topologies.mininet_topos import FabricTopo

    out = tmp_path / "f.json"
    status, printed, _ = _export(name, out, capsys)
    assert status == 0
    _, mn = _commands(printed)
    if name in ("lab", "moe_twohop"):  # 1 port per GPU: mininet_topos.py's ocsstar starts in a ring (2 ports)
        assert mn is None and "mininet_topos.py has no --topo for this ocs-star fabric of 1 port(s)" in printed
        return
    assert mn is not None and mn[1].endswith("mn") and mn[0] == sys.executable
    assert mn[mn.index("--controller") + 1] == f"remote,ip=127.0.0.1,port={fabric_export.FABRIC_OFP_PORT}"
    custom = {}
    exec(compile((ROOT / "topologies" / "mininet_topos.py").read_text(), "mininet_topos.py", "exec"), custom, custom)
    printed_topo = buildTopo(custom["topos"], mn[mn.index("--topo") + 1])
    exported = FabricTopo(Fabric.from_json(json.loads(out.read_text())))

    def shape(t):
        return (sorted(t.hosts()), sorted((s, t.nodeInfo(s)["dpid"]) for s in t.switches()),
                sorted((a, b, i["port1"], i["port2"]) for a, b, i in t.links(sort=True, withInfo=True)))

    assert shape(printed_topo) == shape(exported)
    assert len(exported.hosts()) == _the_runs_fabric(name).gpus


BAD = [
    ("missing file", ["fabric", "nowhere.yaml"], "nowhere.yaml: cannot read"),
    ("bad field", ["fabric", "{bad}"], "fabric.gpus"),
    ("a wan scenario", ["fabric", str(EXP / "wan_b4.yaml")],
     "fabric: a wan scenario has no fabric (it applies to collective scenarios); for wan: ocslab run, ocslab te"),
    ("-o a directory", ["fabric", str(EXP / "demo.yaml"), "-o", "{dir}"], "is a directory, not a file"),
    ("-o below a file", ["fabric", str(EXP / "demo.yaml"), "-o", "{file}/f.json"], "is a file, not a directory"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    _id, argv, needle = case
    bad = tmp_path / "bad.yaml"
    bad.write_text((EXP / "demo.yaml").read_text().replace("gpus: 8", "gpus: 1", 1))
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    subs = {"bad": str(bad), "dir": str(tmp_path / "adir"), "file": str(tmp_path / "afile")}
    argv = [a.format(**subs) for a in argv]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert cli.main(argv) == 2
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("ocslab: ") and needle in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, no runs/ made


@pytest.mark.emulation
def test_the_printed_controller_and_mininet_topology_ping_every_pair(run_dir, capsys):
    """The controller started (by pid) from the printed command, on the exported file, and
    Mininet's API on the printed ``--topo`` with the printed switch options: every GPU pings
    every other (0% loss). Mininet's own network is stopped; nothing else is touched."""
    import subprocess
    from functools import partial

    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Node, OVSSwitch, RemoteController
    from mininet.util import buildTopo

    from emulation.emulator.controller_client import ControllerClient
    from emulation.emulator.net import MachineBusy, claim_machine, free_port, stop_net, stop_pid
    from emulation.poll import poll_until

    out = run_dir / "fabric.json"
    status, printed, _ = _export("demo", out, capsys)
    assert status == 0
    ctl, mn = _commands(printed)
    ofp, api = free_port(), free_port()  # the printed 6653/8080 may be taken on a shared machine
    ctl[ctl.index("--ofp-tcp-listen-port") + 1] = str(ofp)
    ctl[ctl.index("--ocslab-api-port") + 1] = str(api)
    ctl += ["--ofp-listen-host", "127.0.0.1", "--log-file", str(run_dir / "controller.log")]
    switch = dict(kv.split("=") for kv in mn[mn.index("--switch") + 1].split(",")[1:])
    assert switch == {"datapath": "user", "failMode": "secure", "protocols": "OpenFlow13"}

    def claim():
        try:
            return claim_machine(run_dir)
        except MachineBusy:
            return None

    reg = poll_until(claim, 600, interval_s=5)  # another emulation may hold the machine for a while
    assert reg is not None, "another emulation held the machine for 10 minutes"
    controller = net = None
    try:
        controller = subprocess.Popen(ctl, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        client = ControllerClient(api)
        assert poll_until(lambda: controller.poll() is None and client.alive(), 30), "the controller did not come up"

        class Remote(RemoteController):
            def checkListening(self) -> None:  # Mininet's telnet probe of the OpenFlow port: not needed
                pass

            def stop(self) -> None:
                Node.stop(self)

        custom = {}
        exec(compile((ROOT / "topologies" / "mininet_topos.py").read_text(), "mininet_topos.py", "exec"), custom, custom)
        setLogLevel("warning")
        net = Mininet(topo=buildTopo(custom["topos"], mn[mn.index("--topo") + 1]), build=False, controller=None,
                      autoSetMacs=False, switch=partial(OVSSwitch, batch=True, **switch))
        net.addController(Remote("c0", ip="127.0.0.1", port=ofp))
        net.build()
        net.start()
        client.wait_ready(timeout=60)
        loss = net.pingAll(timeout=2)
        assert loss == 0.0, f"{loss}% of the pings were lost"
        assert len(net.hosts) == 8
    finally:
        if net is not None:
            stop_net(net)
        stop_pid(controller)
        reg.release()
