"""``ocslab fabric FILE``: a collective scenario's fabric as the JSON its controller reads, and
the two commands that run it by hand (the controller, and ``mn --custom
topologies/mininet_topos.py``); nothing runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from emulation.output import Refused, check_file, fail, guarded, write_file

#: What ``ocslab fabric`` prints for the controller's ports (any free ones do).
FABRIC_OFP_PORT, FABRIC_API_PORT = 6653, 8080


def mn_topo(spec) -> str | None:
    """The ``mn --topo`` argument of ``topologies/mininet_topos.py`` that builds the same
    switches, hosts and links as ``spec`` (a scenario's ``fabric:``, :class:`FabricSpec`); None
    when that file has no topology for it. The circuits are the controller's (``initial`` lives
    in the fabric JSON only)."""
    if spec.topology == "ocs-star":  # its builder there starts in a ring: 2 ports or more
        return f"ocsstar,{spec.gpus},{spec.ports_per_gpu}" if spec.ports_per_gpu >= 2 else None
    if spec.topology in ("ring", "torus", "eps"):
        return f"{spec.topology},{spec.gpus}"
    if spec.topology == "parallel-ocs":
        return f"parallelocs,{spec.gpus},{spec.switches}"
    if spec.topology == "rack" and spec.ports_per_gpu == 2 and spec.electrical_gbps is None:
        return f"rack,{spec.gpus},{spec.spares}"
    return None


def _shown(path: Path) -> str:
    """``path`` relative to the working directory if it is below it, else absolute."""
    full = path.resolve()
    try:
        return str(full.relative_to(Path.cwd()))
    except ValueError:
        return str(full)


def export(sc, args, path: Path) -> int:
    """``ocslab fabric FILE [-o FILE]``: the fabric the scenario's packet run builds
    (:attr:`Experiment.fabric`, its initial circuits included) written as the JSON the
    controller reads (``--ocslab-fabric``, the same document the emulator writes beside its
    controller), then the two commands that run it by hand: the controller, and ``mn`` on the
    same topology (:func:`mn_topo`). Nothing runs.

    :returns: the exit status (2: ``-o`` cannot be written, in one line).
    """
    from emulation.scenario import resolve

    out = Path(args.out) if args.out is not None else Path("runs") / f"{sc.name}-fabric.json"
    try:
        check_file(out, "-o")
    except Refused as e:
        return fail(str(e))
    fabric = (sc.experiment if sc.experiment is not None else resolve(sc)).fabric
    return guarded(out, lambda: _write_fabric(sc, fabric, out), flag="-o")


def _write_fabric(sc, fabric, out: Path) -> int:
    """Write ``fabric``'s JSON to ``out`` and print what was written and the next commands."""
    write_file(out, json.dumps(fabric.to_json()) + "\n")
    circuits = sum(1 for _ in fabric.initial.all_circuits())
    parts = [f"{fabric.gpus} GPUs x {fabric.ports_per_gpu} ports", f"{len(fabric.ocs)} OCS"]
    parts += [f"{len(fabric.eps)} EPS"] if fabric.eps else []
    parts += [f"{len(fabric.cables)} cables"] if fabric.cables else []
    print(f"fabric: {out} ({', '.join(parts)}; {circuits} circuits at the start)")
    root = Path(__file__).resolve().parents[1]
    flags = ["--ofp-tcp-listen-port", str(FABRIC_OFP_PORT), "--ocslab-fabric", _shown(out),
             "--ocslab-api-port", str(FABRIC_API_PORT)]
    from controllers import FABRIC_APPS
    from emulation.emulator.net import ryu_manager_command

    apps = list(FABRIC_APPS)
    if sc.emulation.controller == "ryu":  # the Ryu environment as OCSLAB_RYU_VENV or this venv place it
        ctl = [f"PYTHONPATH={_shown(root)}", *ryu_manager_command(apps, flags, _shown(root))]
    else:
        ctl = [sys.executable, "-m", "controllers", *apps, *flags]
    print("next, as root, in two shells (the controller first):")
    print("  " + " ".join(ctl))
    topo = mn_topo(sc.fabric)
    if topo is None:
        print(f"  (topologies/mininet_topos.py has no --topo for this {sc.fabric.topology} fabric of "
              f"{fabric.ports_per_gpu} port(s) per GPU: build its FabricTopo(Fabric.from_json(...)) from Python)")
        return 0
    # mn under this interpreter: the topology file imports ocslab's dependencies (networkx...),
    # which the system Python that runs a distribution's mn lacks.
    mn = shutil.which("mn") or "/usr/bin/mn"
    print(f"  {sys.executable} {mn} --custom {_shown(root / 'topologies' / 'mininet_topos.py')} --topo {topo} "
          f"--switch ovs,datapath=user,failMode=secure,protocols=OpenFlow13 "
          f"--controller remote,ip=127.0.0.1,port={FABRIC_OFP_PORT}")
    return 0
