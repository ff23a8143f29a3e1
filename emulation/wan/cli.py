"""``ocslab run`` of a WAN scenario and ``ocslab te``: the command-line side of :mod:`emulation.wan`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from emulation.cli import _fail, _fresh_out
from emulation.scenario import ScenarioError


def run(path: Path, backend: str | None, out: Path | None, controller: str | None = None) -> int:
    """Run the WAN scenario at ``path`` (``--backend`` or the file's: flow or mininet; the slice
    controllers on ``controller``, default the file's ``packet.controller``) and write its
    results; the exit status."""
    import datetime as dt

    import yaml
    from rich.console import Console

    from emulation.wan.report import print_summary, write
    from emulation.wan.run import run_wan
    from emulation.wan.scenario import load_wan_scenario

    try:
        sc = load_wan_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    backend = backend or sc.backend
    if backend not in ("flow", "mininet"):
        return _fail(f"--backend: WAN scenarios run on flow or mininet, not {backend!r}")
    out = _fresh_out(out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    if controller:
        sc = sc.model_copy(update={"packet": sc.packet.model_copy(update={"controller": controller})})
    if backend == "mininet":
        from emulation.emulator.net import EmulationError, ryu_unavailable
        from emulation.wan.replay import emulate_wan

        if sc.packet.controller == "ryu" and ryu_unavailable():
            return _fail(f"--controller: ryu is unavailable here: {ryu_unavailable()}")
        try:
            res = emulate_wan(sc, out / "emulation")
        except EmulationError as e:
            return _fail(f"mininet backend: {e}", 1)
    else:
        res = run_wan(sc)
    write(res, out, yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    print_summary(res)
    Console().print(f"results: {out}/result.json, intervals.csv, links.png")
    return 0


def te(path: Path, tm: int, as_json: bool) -> int:
    """Print the TE solution of matrix ``tm`` of the WAN scenario at ``path`` (its objective,
    regulariser and headroom; one central controller, the true demand): tunnels as router
    paths, split ratios per demand, link utilisations. The exit status."""
    from rich.console import Console
    from rich.table import Table

    from emulation.wan.scenario import load_wan_scenario
    from emulation.planners.te import solve
    from emulation.planners.tunnels import k_shortest

    try:
        sc = load_wan_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    topo, tms = sc.wan.load()
    if not 0 <= tm < len(tms):
        return _fail(f"--tm: must be in 0..{len(tms) - 1} for {topo.name}, got {tm}")
    tunnels = k_shortest(topo, sc.wan.tunnels.k)
    matrix = tms[tm] * sc.wan.traffic.scale
    cap = np.array(topo.capacity)
    sol = solve(tunnels, matrix, cap, sc.wan.te.objective, sc.wan.te.lam, sc.wan.te.headroom)
    vol = tunnels.volumes(matrix)
    names = topo.names

    def route(p) -> list[str]:
        return [names[topo.links[p[0]][0]]] + [names[topo.links[e][1]] for e in p]

    demands = [{"src": names[s], "dst": names[d], "demand": float(vol[i]),
                "tunnels": [{"path": route(tunnels.paths[j]), "split": float(sol.splits[j])} for j in tunnels.of(i)]}
               for i, (s, d) in enumerate(tunnels.demands)]
    links = [{"src": names[u], "dst": names[v], "capacity": float(c), "load": float(l), "utilisation": float(x)}
             for (u, v), c, l, x in zip(topo.links, cap, sol.load, sol.utilisation)]
    body = {"scenario": sc.name, "matrix": tm, "objective": sol.objective, "regulariser": sol.regulariser,
            "headroom": sc.wan.te.headroom, "value": sol.value, "carried": sol.carried, "offered": float(vol.sum()),
            "mlu": sol.mlu, "demands": demands, "links": links}
    if as_json:
        print(json.dumps(body))
        return 0
    console = Console(width=max(Console().width, 110))
    console.print(f"{sc.name} matrix {tm}: {sol.objective} (lambda {sol.regulariser:g}) optimum {sol.value:.4g}; "
                  f"carried {sol.carried:.0f} of {vol.sum():.0f}; MLU {sol.mlu:.3f}")
    t = Table(title="links")
    for c in ("link", "capacity", "load", "utilisation"):
        t.add_column(c, justify="right")
    for l in links:
        t.add_row(f"{l['src']}->{l['dst']}", f"{l['capacity']:.0f}", f"{l['load']:.1f}", f"{l['utilisation']:.3f}")
    console.print(t)
    return 0
