"""A WAN on the packet backend (:func:`replay_wan`): the traffic matrices of a
:class:`emulation.te_intervals.WanSetup` replayed as real UDP flows through Open vSwitch routers
programmed by one OS-Ken TE controller per slice (:mod:`emulation.emulator.wan_net`,
:mod:`controllers.wan_te`, :mod:`emulation.emulator.wan_traffic`).

Interval i starts at ``t0 + i x interval_s``. At that moment every live controller gets its own
view of matrix i (:func:`emulation.planners.divergence.views`, the same views as the flow backend),
solves the TE and rewrites its routers' select groups; meanwhile the generators already send
matrix i (on the previous groups until the new ones are acknowledged: the reinstall time, and the
datagrams lost in it, are reported). Link loads are the switches' port counters read at
``start + warmup_s`` and again so as to end by ``end - 0.1 s``, each port's rate over the switch's
own times of its two readings (so how long a reading takes does not enter); a run whose readings
fall outside their interval, or before its groups were installed, is refused (the machine could
not keep the timeline). Loss and reordering per demand come from the datagrams' sequence numbers. The computed side of every interval is the union of the splits the controllers
reported (the last ones of a killed controller), evaluated on the true matrix exactly as the flow
backend does (:func:`emulation.planners.divergence.evaluate`; the WAN kind adds the flow model's
proportional sharing, :func:`emulation.flowsim.wan.interval`).

Faults: ``wan.replay.kill`` SIGKILLs a slice's controller at the start of an interval (its routers
keep their last groups: secure fail mode) and the measured blast radius is the share of the
offered demand whose installed splits (read back with ``ovs-ofctl dump-groups``) are not what its
controller would now install; ``wan.replay.fail`` takes a cable down halfway through an interval and
the live controllers whose tunnels used it recompute without it at once (the others avoid it
from the next interval on).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emulation.emulator import wan_net as em
from emulation.emulator.controller_client import ControllerError
from emulation.emulator.net import EmulationError, project_root
from emulation.emulator.wan_traffic import BIN_S
from emulation.output import Progress
from emulation.planners.divergence import Outcome, evaluate, owned, views
from emulation.planners.te import bucket_weights, solve
from emulation.te_intervals import CALM_UTILISATION, Measured, ReplaySpec, WanSetup

#: Time between starting the generators and the first interval, s (their start-up is ~0.3 s).
LEAD_S = 2.0
#: How long the sinks listen after the last interval, s.
DRAIN_S = 1.0
#: The measurement window ends this long before the interval does, s.
TAIL_S = 0.1


@dataclass(frozen=True)
class WanReplay:
    """What the packet replay of a WAN gives back, per interval j: ``outcomes[j]``, the union of
    the splits the switches held during its measurement window evaluated on the true matrix
    (:func:`emulation.planners.divergence.evaluate`; the computed side), and ``measured[j]``;
    ``mbps_per_unit``, the emulated Mbit/s of one demand unit, and ``frame_bytes``, the
    generators' Ethernet frame."""

    outcomes: list[Outcome]
    measured: list[Measured]
    mbps_per_unit: float
    frame_bytes: int


def replay_wan(setup: WanSetup, te: dict, replay: ReplaySpec, run_dir: Path, *, link_mbps: float, controller: str = "os-ken",
               progress: Progress | None = None) -> WanReplay:
    """Replay the matrices of ``setup`` as UDP flows through Open vSwitch routers, one TE
    controller per slice (module doc; Symphony's decentralised TE, arXiv 2510.11937). Controller
    logs, generator plans and per-site datagram counts go to ``run_dir``.

    :param te: what every controller solves: ``{"objective", "regulariser" (lambda, a number),
        "capacity_headroom"}`` (:meth:`emulation.planners.te.TeSpec.settings`).
    :param replay: the replay's settings (a WAN scenario's ``wan.replay``,
        :class:`emulation.te_intervals.ReplaySpec`).
    :param link_mbps: the emulated rate of the largest-capacity link (Mbit/s of frames).
    :param controller: the slice controllers' framework, ``os-ken`` or ``ryu``.
    :param progress: called as ``progress(label, done, total)`` before each interval.
    :returns: the computed and the measured side of every interval (:class:`WanReplay`; link
        loads in the traffic matrix's units, times in s from each interval's start).

    :raises EmulationError: the emulation could not be brought up, a controller failed, or the
        generators could not pace the load (:func:`_check_pacing`). Datagrams lost on calm paths
        are a failed check of the result (:meth:`emulation.te_intervals.WanResult.failed_checks`).
    """
    p = replay
    topo, tunnels, cap, slicing, dev = setup.topo, setup.tunnels, setup.capacity, setup.slicing, setup.deviation
    matrices, indices, count = setup.matrices, setup.indices, len(setup.indices)
    failed_link = None
    if p.fail is not None:
        u, v = p.fail.link
        failed_link = [topo.links.index((u, v))] + ([topo.links.index((v, u))] if (v, u) in topo.links else [])
    run_dir = Path(run_dir)
    with em.WanNet(topo, tunnels, slicing, te, run_dir, link_mbps=link_mbps, controller=controller) as net:
        net.add_flow_addresses(p.flows)
        splits = np.zeros(len(tunnels.paths))
        answers = _install(net, views(tunnels, matrices[0], slicing, dev, indices[0]), [])
        for k, a in answers.items():
            _take(splits, a)
        t0 = time.monotonic() + LEAD_S
        gens = _start_generators(net, matrices, t0, p, run_dir)
        intervals, counters = [], []
        failed: list[int] = []
        for j in range(count):
            if progress:
                progress(f"matrix {indices[j]}", j, count)
            start = t0 + j * p.interval_s
            events, reinstall = [], {}
            stale, end_old = 0.0, start
            if j > 0:
                _sleep_until(start)
                if p.kill is not None and p.kill.interval == j:
                    net.kill_controller(p.kill.slice)
                    events.append(f"controller of slice {p.kill.slice} killed")
                view = views(tunnels, matrices[j], slicing, dev, indices[j])
                answers = _install(net, {k: v for k, v in view.items() if k in net.clients}, failed)
                for k, a in answers.items():
                    _take(splits, a)
                    reinstall[str(k)] = a["solve_s"] + a["install_s"]
                    end_old = max(end_old, a["t_installed"])
                if p.kill is not None and j >= p.kill.interval:
                    stale = (view, list(failed))  # the share is computed after the run (_stale_share)
            else:
                reinstall = {str(k): a["solve_s"] + a["install_s"] for k, a in answers.items()}
            window = [start + p.warmup_s, start + p.interval_s - TAIL_S]
            if p.fail is not None and p.fail.interval == j:
                window = [start + p.warmup_s / 2, start + p.interval_s / 2 - 0.05]
            _sleep_until(window[0])
            a0 = net.port_bytes()
            if isinstance(stale, tuple):  # what the routers hold, read inside the window
                stale = (*stale, _installed(net))
            # the last reading must end inside the interval: it starts early by twice the first's length
            _sleep_until(window[1] - 2 * (a0.ended - a0.began))
            a1 = net.port_bytes()
            _check_window(j, start, start + p.interval_s, end_old, a0, a1)
            window = [a0.began, a1.ended]
            measured_splits = splits.copy()  # what the switches held during the window
            if p.fail is not None and p.fail.interval == j:
                net.set_link(failed_link[0], up=False)
                t_fail = time.monotonic()
                failed = failed_link
                view = views(tunnels, matrices[j], slicing, dev, indices[j])
                on_it = {t for t, path in enumerate(tunnels.paths) if splits[t] > 0 and set(path) & set(failed)}
                owners = [k for k in view if k in net.clients and on_it & set(np.flatnonzero(owned(tunnels, slicing, k)))]
                answers = _install(net, {k: view[k] for k in owners}, failed)
                for k, a in answers.items():
                    _take(splits, a)
                done = max((a["t_installed"] for a in answers.values()), default=t_fail)
                events.append(f"link {list(p.fail.link)} down at {t_fail - start:.2f} s, slices {owners} "
                              f"(whose tunnels used it) rerouted in {done - t_fail:.3f} s")
            counters.append((a0, a1))
            intervals.append((measured_splits, reinstall, end_old, stale, events, window))
            net_check(net)
        _wait_generators(gens, t0 + count * p.interval_s + DRAIN_S + 30)
        counts = [json.loads((run_dir / f"counts-{i}.json").read_text()) for i in range(topo.routers)]
    _check_pacing(matrices, counts, net.mbps_per_unit, p, link_mbps)
    intervals = [(*i[:3], _stale_share(tunnels, slicing, matrices[j], cap, te, *i[3]) if isinstance(i[3], tuple) else i[3],
                  *i[4:]) for j, i in enumerate(intervals)]
    outcomes, measured = _measured(setup, p, net.mbps_per_unit, t0, counters, intervals, counts)
    return WanReplay(outcomes, measured, net.mbps_per_unit, counts[0]["frame_bytes"])


def net_check(net: em.WanNet) -> None:
    """:raises EmulationError: a live slice's controller exited."""
    for k, proc in net.controllers.items():
        if k in net.clients and proc.poll() is not None:
            raise EmulationError(f"slice {k}'s controller exited with {proc.returncode} mid-run "
                                 f"(see {net.run_dir / f'controller-{k}.log'})")


def _take(splits: np.ndarray, answer: dict) -> None:
    for t, x in answer["splits"]:
        splits[t] = x


def _install(net: em.WanNet, view: dict[int, np.ndarray], failed: list[int]) -> dict[int, dict]:
    """Every controller in ``view`` solves its view and installs, all at once; their answers."""
    def one(k):
        try:
            return k, net.clients[k].request("POST", "/interval", {"view": view[k].tolist(), "failed": failed})
        except ControllerError as e:
            raise EmulationError(f"slice {k}'s controller: {e}") from None

    with ThreadPoolExecutor(max_workers=max(1, len(view))) as pool:
        return dict(pool.map(one, sorted(view)))


def _installed(net: em.WanNet) -> dict[int, dict[int, int]]:
    """``{group: {tunnel label: weight}}`` installed on every router now."""
    installed = {}
    for i in range(net.topo.routers):
        installed.update(net.group_weights(i))
    return installed


def _check_window(j: int, start: float, end: float, installed: float, a0: em.PortSnapshot,
                  a1: em.PortSnapshot) -> None:
    """Both counter readings of interval ``j`` lie inside it, after its groups were installed
    (CLOCK_MONOTONIC s), so that they measure that interval's matrix on its splits.

    :raises EmulationError: they do not: the machine was too busy to keep the replay's timeline."""
    if a0.began < max(start, installed) or a1.ended > end or a1.began <= a0.ended:
        raise EmulationError(f"matrix {j}: the port counters were read at {a0.began - start:.2f}-{a0.ended - start:.2f} s "
                             f"and {a1.began - start:.2f}-{a1.ended - start:.2f} s into a {end - start:g} s interval "
                             f"whose groups were installed at {installed - start:.2f} s: this machine is too busy to "
                             "keep the replay's timeline; raise wan.replay.interval_s or wan.replay.warmup_s")


def _stale_share(tunnels, slicing, matrix, cap, te, view, failed, installed) -> float:
    """Share of the offered demand whose installed bucket weights (``installed``, read from the
    routers) are not what its slice's controller would install on its view now."""
    alive, keep = tunnels.avoiding(failed)
    vol = tunnels.volumes(matrix)
    fresh = np.zeros(len(tunnels.paths))
    for k, v in view.items():
        sol = solve(alive, v, cap, te["objective"], te["regulariser"], te["capacity_headroom"])
        s = np.zeros(len(tunnels.paths))
        s[keep] = sol.splits
        mine = owned(tunnels, slicing, k)
        fresh[mine] = s[mine]
    stale = 0.0
    for d in range(len(tunnels.demands)):
        got = installed.get(d + 1, {})
        ts = tunnels.of(d)
        want = {int(t) + 1: w for t, w in zip(ts, bucket_weights(fresh[ts])[0]) if w > 0}
        if {k: v for k, v in got.items() if k} != want:
            stale += vol[d]
    return float(stale / vol.sum()) if vol.sum() > 0 else 0.0


def _start_generators(net: em.WanNet, matrices, t0: float, p, run_dir: Path) -> list:
    n = net.topo.routers
    procs = []
    for i in range(n):
        rates = [[float(m[i, j]) * net.mbps_per_unit * 1e6 for j in range(n)] for m in matrices]
        plan = {"site": i, "t0": t0, "interval_s": p.interval_s, "payload": p.payload_bytes, "flows": p.flows,
                "rates": rates, "drain_s": DRAIN_S, "peers_ip": [em.host_ip(j) for j in range(n)],
                "sources": [em.flow_ip(i, f + 1) for f in range(p.flows)],
                "out": str((run_dir / f"counts-{i}.json").resolve())}
        path = run_dir / f"plan-{i}.json"
        path.write_text(json.dumps(plan))
        with open(run_dir / f"traffic-{i}.log", "w") as fh:
            procs.append(net.host(i).popen([sys.executable, "-m", "emulation.emulator.wan_traffic",
                                            str(path.resolve())], stdout=fh, stderr=fh, cwd=project_root()))
    return procs


def _wait_generators(procs: list, deadline: float) -> None:
    for proc in procs:
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except Exception:
            proc.kill()
            raise EmulationError("a traffic generator did not finish in time") from None
        if proc.returncode:
            raise EmulationError(f"a traffic generator exited with {proc.returncode}")


#: Fewest datagrams the generators must have sent, as a share of the plan.
PACED_SHARE = 0.97
def _check_pacing(matrices, counts, mbps_per_unit: float, p, link_mbps: float) -> None:
    """Refuse a run whose generators could not send what the matrices ask for (a machine too
    slow or too busy for ``emulation.link_mbps``): what was measured would not be that load.

    :raises EmulationError: fewer than :data:`PACED_SHARE` of the planned datagrams were sent.
    """
    frame_bits = counts[0]["frame_bytes"] * 8
    planned = sum(float(m.sum()) for m in matrices) * mbps_per_unit * 1e6 * p.interval_s / frame_bits
    sent = sum(c for site in counts for row in site["sent"].values() for c in row.values())
    if sent < PACED_SHARE * planned:
        raise EmulationError(f"the traffic generators sent {sent} of {planned:.0f} planned datagrams "
                             f"({sent / planned:.1%}): this machine cannot pace this load; lower emulation.link_mbps "
                             f"(now {link_mbps:g}) or raise wan.replay.payload_bytes")


def _sleep_until(t: float) -> None:
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


def _bins(row: dict, lo: float, hi: float, t0: float) -> int:
    """Datagrams counted in bins whose send times lie in [lo, hi)."""
    a, b = int(np.floor((lo - t0) / BIN_S)), int(np.ceil((hi - t0) / BIN_S))
    return sum(c for k, c in row.items() if a <= int(k) < b)


def _measured(setup: WanSetup, p, mbps_per_unit, t0, counters, intervals,
              counts) -> tuple[list[Outcome], list[Measured]]:
    """Every interval's outcome (the splits held in its window on the true matrix) and what was
    measured in it, from the port counter readings and the generators' counts."""
    tunnels, cap = setup.tunnels, setup.capacity
    outcomes, measured = [], []
    for j, ((a0, a1), (splits, reinstall, end_old, stale, events, window)) in enumerate(zip(counters, intervals)):
        o = evaluate(tunnels, splits, setup.matrices[j], cap)
        unit = 8 / 1e6 / mbps_per_unit  # bytes/s -> demand units
        load, carried = (r * unit for r in a1.rates(a0))
        lo, hi = t0 + j * p.interval_s, t0 + (j + 1) * p.interval_s
        demands, sent_all, lost_all, reord = [], 0, 0, 0
        end_reinstall = end_old
        lost_re = 0
        util = o.load / cap
        calm = [0, 0]  # datagrams sent and lost, after the reinstall, on demands far from any overload
        for di, (s, d) in enumerate(tunnels.demands):
            sent = _bins(counts[s]["sent"].get(str(d), {}), lo, hi, t0)
            recv = _bins(counts[d]["received"].get(str(s), {}), lo, hi, t0)
            lost = max(0, sent - recv)
            used = [t for t in tunnels.of(di) if splits[t] > 0]
            if not events and used and max(util[list(tunnels.paths[t])].max() for t in used) < CALM_UTILISATION:
                a = _bins(counts[s]["sent"].get(str(d), {}), end_reinstall, hi, t0)
                calm[0] += a
                calm[1] += max(0, a - _bins(counts[d]["received"].get(str(s), {}), end_reinstall, hi, t0))
            demands.append([s, d, sent, lost])
            sent_all += sent
            lost_all += lost
            reord += _bins(counts[d]["reordered"].get(str(s), {}), lo, hi, t0)
            if j > 0:
                lost_re += max(0, _bins(counts[s]["sent"].get(str(d), {}), lo, end_reinstall, t0)
                               - _bins(counts[d]["received"].get(str(s), {}), lo, end_reinstall, t0))
        m = Measured(window_s=[window[0] - lo, window[1] - lo], link_load=[float(x) for x in load],
                     link_carried=[float(x) for x in carried], demands=demands, sent=sent_all, lost=lost_all,
                     reordered=reord, reinstall_s=reinstall, lost_during_reinstall=lost_re,
                     stale_demand_share=stale, events=events, calm=calm)
        outcomes.append(o)
        measured.append(m)
    return outcomes, measured
