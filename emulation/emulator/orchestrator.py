"""Runs (Workload, Plan) on an :class:`~emulation.emulator.net.EmulatedFabric` with real packets.

Per run: the fabric is reset to the plan's initial configuration (untimed); one agent per GPU
starts, listens, connects to its peers (peers the initial configuration cannot reach are
connected under the first configuration of the plan that does, then the initial one is
restored; all untimed); then for every step the orchestrator, acting as the
step barrier over Unix sockets, first reconfigures the OCS if the plan says so (the controller
answers when the new circuits carry traffic, with the dark window measured) and then releases
the step. Measured times are divided by the TDF (real-equivalent seconds).

The run is timed on its own clock, as round-synchronous steps are in the flow model: a step
starts when the previous one ended, plus its measured dark window if it reconfigures. What the
emulator spends between steps is its own business and is left out; each step's ``timing``
(real-equivalent seconds) says how much it was:

- ``drain_s``: after the step's last byte arrived, until the slowest agent reported (before a
  reconfiguration agents wait for every ACK, so that none is lost in the dark);
- ``removal_s``, ``reply_s`` (reconfiguring steps): the switch acknowledging the removal of the
  changed circuits, and the controller's answer reaching the orchestrator after the new ones
  were acknowledged;
- ``commit_s``: the switch acknowledging the new circuits; this one is inside the measured dark
  window (R plus the commit), so it *is* in the run's time;
- ``reroute_s``: the controller reprogramming the NICs' routes, inside the dark window; longer
  than R it stretches the window, and the run's checks fail (:func:`emulation.checks.check_run`);
- ``heard_lag_s``: how long after the release the last agent heard of it (negative: before);
- ``start_lag_s``, ``first_start_s``: how late the last and the first transfer wrote their first
  byte after release + alpha (agents waking late: in the run's time).

The release itself is at one instant for every agent (``at``, a little after the broadcast).

With user apps loaded in the controller (``--app``), the run also raises the controller's
collective and step events (``POST /demand``, :class:`controllers.events.EventStepBegin`, ...):
``collective-begin`` before the run's set-up, which hands the circuits to the run's owner (the
user's apps when the scenario says ``planner: none``, otherwise the planner; the emulator for a
run it makes on its own behalf, such as the headroom probe); then, before each step is released,
the previous step's ``step-end`` and this step's ``step-begin`` in one request, whose answer
comes once the apps handled it and the circuits they asked for are live; ``step-end`` and
``collective-end`` after the last. That request sits between steps, off the run's clock; each
step's ``timing`` says what it cost: ``events_s`` (the request's round trip, apps' reconfiguration
included) and ``handlers_s`` (waiting for the apps' handlers). An app's reconfiguration counts
like a planner's: its measured dark window is in the run's time. In a run the apps own, every
transfer is spread evenly over the GPU's channels (parallel circuits the app sets are used
whatever they are), every step waits for its acknowledgements before it reports (the app may
reconfigure before the next), and each step's link loads are routed over the circuits in place
when it was released. Without user apps nothing is posted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emulation.emulator.agent_schedule import AgentSchedules
from emulation.emulator.controller_client import ControllerError
from emulation.emulator.net import EmulatedFabric, EmulationError
from emulation.fabric import Configuration
from emulation.poll import wait_until
from emulation.results import RunResult, StepResult, TransferResult
from emulation.routing import Routes, RoutingError
from emulation.scale import Scale
from emulation.schedule import Plan
from emulation.workloads.model import Transfer, Workload


#: Emulated seconds between broadcasting a step's release and the release itself, so that every
#: agent has heard of it and all start together (doubled, up to the maximum, when one was late).
RELEASE_LEAD_S = 0.005
MAX_RELEASE_LEAD_S = 0.2


log = logging.getLogger(__name__)


class _Stranger(Exception):
    """A connection to the control socket that did not open as an agent of this run."""


#: Round trips of the clock exchange with each agent as it connects (the shortest one counts).
CLOCK_ROUNDS = 8
#: The largest clock error a run accepts, as a fraction of its shortest step (or window) of wall
#: clock: an agent reads the orchestrator's clock to within its offset's uncertainty.
CLOCK_ERROR_FRACTION = 0.01


class _Coordinator:
    """Unix-socket step barrier: one line-JSON connection per agent, each handed its schedule and
    the offset of its clock (:mod:`emulation.emulator.agent`, control protocol) as it connects.

    :param measure: the ranks whose clocks are measured (agents on servers); the others share
        this machine's clock and are told offset 0 (none: measure every one).
    :ivar clocks: ``{rank: {"offset_s", "uncertainty_s"}}``: each agent's CLOCK_MONOTONIC minus
        this process's, and half the round trip it was measured in (s; 0 and 0 where not measured)."""

    def __init__(self, path: Path, schedules: list[dict], measure: set[int] | None = None):
        path.unlink(missing_ok=True)
        self.path = path
        self.schedules = schedules
        self.ranks = len(schedules)
        self.measure = set(range(self.ranks)) if measure is None else set(measure)
        self.clocks: dict[int, dict[str, float]] = {}
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # AF_UNIX paths are limited to 108 bytes: bind through the directory's fd alias;
        # agents connect by the relative name from the run directory (their cwd).
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            self.sock.bind(f"/proc/self/fd/{dfd}/{path.name}")
        finally:
            os.close(dfd)
        self.sock.listen(self.ranks + 8)
        self.inbox: queue.Queue = queue.Queue()
        self.conns: dict[int, socket.socket] = {}

    def _reader(self, rfile) -> None:
        for line in rfile:
            self.inbox.put(json.loads(line))
        self.inbox.put({"eof": True})

    def _welcome(self, conn: socket.socket, rfile) -> int:
        """An agent's ``hello``, the clock exchange, its schedule; returns its rank once it
        listens (:mod:`emulation.emulator.agent`, control protocol).

        :raises _Stranger: the connection did not open with the hello of a rank still expected.
        :raises EmulationError: an agent's set-up broke off after its hello."""
        def hear() -> dict:
            line = rfile.readline()
            if not line:
                raise EmulationError("an agent closed its control connection while it was being set up")
            return json.loads(line)

        try:
            hello = hear()
            rank = hello["hello"]
            if type(rank) is not int or not 0 <= rank < self.ranks or rank in self.conns:
                raise ValueError(f"hello {rank!r}")
        except (OSError, ValueError, KeyError, TypeError, EmulationError) as e:
            raise _Stranger(str(e)) from None
        conn.settimeout(30)  # an agent answers the rest of its set-up at once, or died
        best = (math.inf, 0.0) if rank in self.measure else (0.0, 0.0)  # (round trip, offset)
        for k in range(CLOCK_ROUNDS if rank in self.measure else 0):
            t1 = time.monotonic()
            conn.sendall((json.dumps({"sync": k}) + "\n").encode())
            theirs = float(hear()["clock"])
            t2 = time.monotonic()
            best = min(best, (t2 - t1, theirs - (t1 + t2) / 2))
        self.clocks[rank] = {"offset_s": best[1], "uncertainty_s": best[0] / 2}
        conn.sendall((json.dumps({"schedule": self.schedules[rank], "clock_offset_s": best[1]}) + "\n").encode())
        if hear().get("listening") != rank:
            raise EmulationError(f"the agent of GPU {rank} did not listen after taking its schedule")
        return rank

    def accept_all(self, timeout: float, alive) -> None:
        """Accept every agent: its clock measured, its schedule sent, its ``listening`` read."""
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + timeout
        while len(self.conns) < self.ranks:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                alive()
                if time.monotonic() > deadline:
                    raise EmulationError(f"only {len(self.conns)}/{self.ranks} agents connected in {timeout} s") from None
                continue
            conn.settimeout(5)  # an agent says hello at once
            rfile = conn.makefile("r")
            try:
                rank = self._welcome(conn, rfile)
            except _Stranger as e:  # not an agent of this run: refused, the run goes on
                log.warning("control channel: refused a connection that is not an agent of this run (%s)", e)
                rfile.close()
                conn.close()
                continue
            except Exception as e:  # noqa: BLE001 - an agent's set-up broke off: named below
                rfile.close()
                conn.close()
                alive()
                raise EmulationError(f"an agent's set-up on the control channel failed: {e}") from None
            conn.settimeout(None)
            self.conns[rank] = conn
            threading.Thread(target=self._reader, args=(rfile,), daemon=True).start()

    def broadcast(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        for c in self.conns.values():
            c.sendall(data)

    def send(self, rank: int, msg: dict) -> None:
        """Send ``msg`` to one agent."""
        self.conns[rank].sendall((json.dumps(msg) + "\n").encode())

    def gather(self, key: str, timeout: float, alive, count: int | None = None) -> list[dict]:
        """One message containing ``key`` from every agent (or from ``count`` agents)."""
        got: list[dict] = []
        deadline = time.monotonic() + timeout
        while len(got) < (self.ranks if count is None else count):
            try:
                msg = self.inbox.get(timeout=0.2)
            except queue.Empty:
                alive()
                if time.monotonic() > deadline:
                    heard = {m.get("rank") for m in got}
                    missing = [r for r in range(self.ranks) if r not in heard] if None not in heard else []
                    who = f"GPUs {missing}" if missing else "agents"
                    raise EmulationError(f"{who} did not report {key!r} within {timeout:.3g} s") from None
                continue
            if msg.get("eof"):  # an agent is ending: give it 2 s to exit, so that alive() names it
                def exited() -> bool:
                    alive()  # raises, naming the agent, once it has exited
                    return False

                wait_until(exited, 2.0, lambda: EmulationError(
                    f"an agent closed its control connection while the run waited for {key!r}"))
            if key in msg:
                got.append(msg)
        return got

    def close(self) -> None:
        for c in self.conns.values():
            with contextlib.suppress(OSError):  # the reader's file keeps the socket open: shut it down
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self.sock.close()
        self.path.unlink(missing_ok=True)


#: How much longer than the orchestrator an agent waits for a step before giving up (s).
AGENT_TIMEOUT_MARGIN_S = 10.0


def _last_line(path: Path, limit: int = 160) -> str:
    """The last non-empty line of a log (an agent's error), shortened to ``limit`` characters."""
    try:
        lines = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


class RunLedger:
    """What every packet executor counts while its run goes, the same way: the emulator's drop
    counters (a quiet snapshot at the run's start and end, a snapshot per step), the agents'
    ``done`` reports of every step or epoch, and their cumulative retransmission and stall
    counts turned into each step's own. Made once the agents are connected; :meth:`close`
    before they stop.

    :param emu: the fabric (its :attr:`~emulation.emulator.net.EmulatedFabric.drops` counters).
    """

    def __init__(self, emu: EmulatedFabric) -> None:
        self.counters = emu.drops
        self.first = self.last = self.counters.quiet_snapshot()
        self.reports: list[dict] = []
        self._retrans = self._stalls = 0

    def gather(self, coord: "_Coordinator", alive, timeout_s: float, where: str = "") -> list[dict]:
        """Every agent's ``done`` report of what ends now, within ``timeout_s`` (s).

        :raises EmulationError: an agent died or did not report in time, its message after
            ``where`` (e.g. ``step 3``) when given.
        """
        try:
            reports = coord.gather("done", timeout_s, alive)
        except EmulationError as e:
            if not where:
                raise
            raise EmulationError(f"{where}: {e}") from None
        self.reports += reports
        return reports

    def step(self, reports: list[dict]) -> tuple[dict, int, int]:
        """``(drops, retransmissions, stalls)`` of the step whose ``reports`` these are: the
        emulator's drops since the previous step, and the agents' retransmitted segments and
        stalls since."""
        snap = self.counters.snapshot()
        drops, self.last = self.counters.drops(self.last, snap), snap
        retrans, stalls = (sum(m.get(k, 0) for m in reports) for k in ("retrans", "stalls"))
        out = (drops, retrans - self._retrans, stalls - self._stalls)
        self._retrans, self._stalls = retrans, stalls
        return out

    def close(self, run_dir: Path) -> dict:
        """The run's drops (quiet snapshots at its start and end); writes ``run_dir/tcp_info.json``,
        ``{"retransmissions_by_connection": {connection: segments}}``: every connection's
        retransmissions (TCP_INFO) by the end of the run, from the reports in order (their
        counts are cumulative), for the capture analysis (:mod:`emulation.pcap`) to set beside
        the wire's count."""
        by_conn: dict[str, int] = {}
        for m in self.reports:
            by_conn.update(m.get("retrans_by_conn", {}))
        (run_dir / "tcp_info.json").write_text(json.dumps({"retransmissions_by_connection": by_conn}, indent=1))
        return self.counters.drops(self.first, self.counters.quiet_snapshot(), quiet=True)


def check_clocks(clocks: dict[int, dict[str, float]], shortest_s: float) -> None:
    """Stop a run whose agents read the orchestrator's clock less well than
    :data:`CLOCK_ERROR_FRACTION` of its shortest step or window (``shortest_s``, wall s).

    :param clocks: ``{rank: {"offset_s", "uncertainty_s"}}`` (:attr:`_Coordinator.clocks`).
    :raises EmulationError: naming the agent whose clock is known least well, and by how much."""
    worst = max(clocks, key=lambda r: clocks[r]["uncertainty_s"], default=None)
    if worst is not None and clocks[worst]["uncertainty_s"] > CLOCK_ERROR_FRACTION * shortest_s:
        raise EmulationError(f"the clock of GPU {worst}'s agent is known to within "
                             f"{clocks[worst]['uncertainty_s'] * 1e3:.3g} ms (half the shortest round trip of its "
                             f"control channel), more than {CLOCK_ERROR_FRACTION:.0%} of the run's shortest step "
                             f"({shortest_s * 1e3:.3g} ms of wall clock): emulate it at a larger byte scale")


@contextlib.contextmanager
def agents(emu: EmulatedFabric, schedules: list[dict], run_dir: Path, shortest_s: float = math.inf):
    """Start one agent per schedule (sent on its control channel, recorded as
    ``run_dir/agent-gR.json``; log ``agent-gR.log``), accept them (the offsets of the clocks of
    those on servers in ``run_dir/clocks.json``), have them connect to their peers and
    yield ``(coordinator, alive)``; ``alive()`` raises :class:`EmulationError` if an agent died.
    On leaving, the agents are told to exit and waited for (killed on an error) and the
    coordinator is closed.

    :param shortest_s: the run's shortest step or window (wall s): an agent whose clock is known
        less well than :data:`CLOCK_ERROR_FRACTION` of it stops the run (:class:`EmulationError`).
    """
    coord = _Coordinator(run_dir / "ctl.sock", schedules,
                         {r for r in range(len(schedules)) if emu.remote(r)})
    procs = []
    try:
        for r, sched in enumerate(schedules):
            (run_dir / f"agent-g{r}.json").write_text(json.dumps(sched))  # what it is sent, for the record
            control = emu.reach(r, coord.path)  # its name here; a forwarded path on a server
            procs.append(emu.popen(r, [sys.executable, "-m", "emulation.emulator.agent", control, str(r)],
                                   run_dir / f"agent-g{r}.log", cwd=run_dir))

        def alive() -> None:
            emu.check_health()
            for r, p in enumerate(procs):
                if p.poll() is not None and p.returncode != 0:
                    last = _last_line(run_dir / f"agent-g{r}.log")
                    raise EmulationError(f"agent of GPU {r} exited with {p.returncode}{f': {last}' if last else ''} "
                                         f"(see {run_dir}/agent-g{r}.log)")

        coord.accept_all(60, alive)
        (run_dir / "clocks.json").write_text(json.dumps({str(r): coord.clocks[r] for r in sorted(coord.clocks)}))
        check_clocks(coord.clocks, shortest_s)
        coord.broadcast({"connect": True})
        for m in coord.gather("ready", 60, alive):
            emu.tcp_congestion.update(m.get("tcp_congestion", []))
        yield coord, alive
        coord.broadcast({"exit": True})
        for p in procs:
            p.wait(10)
    finally:
        coord.close()
        for p in procs:
            if p in emu.children:
                emu.children.remove(p)
            if p.poll() is None:
                p.kill()
                p.wait()
        try:
            emu.unreach()
        except Exception as e:  # noqa: BLE001 - best effort; the error in flight, if any, matters more
            log.warning("control channel: forwarding not undone: %s", e)


def open_under(emu: EmulatedFabric, coord: _Coordinator, alive, config: Configuration,
               opens: dict[int, list]) -> None:
    """Untimed: apply ``config``, flush stale datapath flows (:meth:`EmulatedFabric.settle`) and
    have each agent ``r`` open its connections ``opens[r]`` (``[[dst, channel], ...]``)."""
    emu.client.apply(config, 0.0)
    emu.settle()
    for r, pairs in opens.items():
        coord.send(r, {"open": pairs})
    coord.gather("opened", 60, alive, count=len(opens))


#: Who may own the circuits during a run (:data:`controllers.events.OWNERS`).
OWNERS = ("app", "planner", "emulator")


def step_demand(step) -> list[list[int]]:
    """``[[src, dst, bytes], ...]``: the real bytes of ``step``'s transfers summed per ordered
    GPU pair, sorted (the ``demand`` of :class:`controllers.events.EventStepBegin`)."""
    out: dict[tuple[int, int], int] = {}
    for a, b, nbytes in zip(step.src.tolist(), step.dst.tolist(), step.bytes.tolist()):
        out[(a, b)] = out.get((a, b), 0) + int(nbytes)
    return [[a, b, v] for (a, b), v in sorted(out.items())]


def collective_record(kind: str, name: str, workload: Workload, **fields) -> dict:
    """A ``collective-begin`` or ``collective-end`` record for ``POST /demand`` (rank r on GPU r)."""
    return {"kind": kind, "name": name, "collective": workload.collective, "algorithm": workload.algorithm,
            "bytes": int(workload.bytes), "gpus": list(range(workload.ranks)), **fields}


def raise_if_switch_failed(events: list[dict], cause: Exception | None = None) -> None:
    """Raise :class:`EmulationError` if the controller's rotor or an OCS's slot sequence failed
    among ``events`` (``rotor-failed``, ``sequences-failed``: a switch stopped answering), naming
    what failed and why (and ``cause``, what the run saw): a controller-clocked run then says so
    instead of reporting missed windows or a timeout."""
    failed = next((e for e in events if e["kind"] in ("rotor-failed", "sequences-failed")), None)
    if failed is not None:
        what = f"sequence of {failed['ocs']}" if failed["kind"] == "sequences-failed" else "rotor"
        raise EmulationError(f"the controller's {what} failed: {failed['error']}"
                             + (f" ({cause})" if cause else "")) from None


@contextlib.contextmanager
def collective_events(emu: EmulatedFabric, name: str, workload: Workload, *, planner: str, owner: str, steps: int,
                      reconfiguration_delay_s: float):
    """Post ``collective-begin`` (owner ``owner`` for the run) on entering and ``collective-end``
    on leaving (``time_s`` from the yielded dict's ``"time_s"``, None if the run failed), when
    the controller has user apps; nothing otherwise. Yields that dict.

    :raises ValueError: ``owner`` is not one of :data:`OWNERS`.
    """
    if owner not in OWNERS:
        raise ValueError(f"owner must be one of {', '.join(OWNERS)}, got {owner!r}")
    end: dict = {"time_s": None, "records": []}
    if not emu.user_apps:
        yield end
        return
    emu.client.post_events([collective_record("collective-begin", name, workload, steps=steps, planner=planner,
                                              owner=owner, reconfiguration_delay_s=reconfiguration_delay_s)])
    try:
        yield end
    finally:
        try:
            emu.client.post_events([*end["records"], collective_record("collective-end", name, workload,
                                                                       time_s=end["time_s"])])
        except ControllerError:
            if end["time_s"] is not None:  # a failed run is reported by its own error
                raise


def run_workload(emu: EmulatedFabric, name: str, workload: Workload, plan: Plan, scale: Scale,
                 alpha_s: float, run_dir: Path, arrivals_s: list[float] | None = None,
                 step_timeout_s: float | None = None, owner: str = "emulator") -> RunResult:
    """Execute ``workload`` under ``plan`` with real packets; return the measured result.

    :param alpha_s: real per-message latency; agents wait ``alpha_s x TDF`` before each transfer.
    :param arrivals_s: real time each rank arrives (stragglers): rank r sends nothing before
        ``arrivals_s[r] x TDF`` after the first step's release.
    :param step_timeout_s: wall seconds a step may take (default: 20x its busiest link's time at
        the emulated rate, plus 30 s).
    :param owner: who owns the circuits during the run when user apps are loaded (module doc):
        ``"app"`` (a scenario run with ``planner: none``), ``"planner"`` or ``"emulator"`` (the
        default: a run the emulator makes on its own behalf).
    :raises ValueError: an unknown ``owner``, or ``owner="app"`` with a plan that reconfigures.
    :raises EmulationError: an agent, the controller or the switch daemon was lost, or a step did
        not finish in time (the message names the step).
    """
    fabric, n = emu.fabric, workload.ranks
    if n != fabric.gpus:
        raise EmulationError(f"workload has {n} ranks, fabric {fabric.gpus} GPUs")
    if owner == "app" and any(sp.action == "reconfigure" for sp in plan.steps):
        raise ValueError(f"owner: the user's apps own the circuits only in a run whose planner does not "
                         f"reconfigure (planner {plan.planner!r} does)")
    tdf = scale.tdf
    with collective_events(emu, name, workload, planner=plan.planner, owner=owner, steps=len(plan.steps),
                           reconfiguration_delay_s=plan.reconfiguration_delay_s * tdf) as end:
        res = _run_workload(emu, name, workload, plan, scale, alpha_s, run_dir, arrivals_s, step_timeout_s,
                            bool(emu.user_apps), owner == "app", end["records"])
        end["time_s"] = res.time_s
    return res


def _step_loads(fabric, config: Configuration, step, channels: int):
    """Route ``step`` under ``config``: its subflows and the real bytes on every directed link."""
    routes = Routes(fabric, config, channels)
    sf = routes.subflow_arrays([t.src for t in step.transfers], [t.dst for t in step.transfers])
    return routes, sf, sf.link_loads(sf.flow_bytes([t.bytes for t in step.transfers]), len(routes.links))


@dataclass
class CompiledRun:
    """A per-step run compiled for the agents (:func:`compile_run`).

    :ivar tids: ``(step, transfer)`` of every transfer id, step-major.
    :ivar schedules: the agents' schedules.
    :ivar step_loads: real bytes on every step's busiest directed link.
    :ivar totals: real bytes routed over each directed link in the run.
    :ivar routed: every step's ``(routes, subflows)`` on its configuration.
    :ivar warmup: ``(configuration, {rank: [[dst, channel], ...]})``: connections opened, untimed,
        under a configuration that carries them before the run.
    :ivar step_timeout_s: wall seconds a step may take.
    :ivar shortest_step_s: wall seconds the shortest step with bytes takes at the emulated rate.
    """

    tids: list[tuple[int, Transfer]]
    schedules: AgentSchedules
    step_loads: list[float]
    totals: dict
    routed: list[tuple[Routes, object]]
    warmup: list[tuple[Configuration, dict[int, list]]]
    step_timeout_s: float
    shortest_step_s: float = math.inf


def compile_run(fabric, workload: Workload, plan: Plan, scale: Scale, alpha_s: float,
                arrivals_s: list[float] | None, step_timeout_s: float | None, app_owned: bool = False) -> CompiledRun:
    """Route every step on its configuration once and compile the agents' schedules: each
    transfer's emulated bytes split into parts over its channels (the routes' subflows; in a run
    the user's apps own, an equal share per channel), drains before reconfigurations, the
    connections opened before the run, and the step timeout (default: 20x the busiest link's
    time at the emulated rate, plus 30 s)."""
    n, tdf, p = workload.ranks, scale.tdf, fabric.ports_per_gpu
    tids: list[tuple[int, Transfer]] = []
    step_loads: list[float] = []
    totals: dict = {}
    routed = []
    schedules = AgentSchedules(n, alpha_s * tdf, arrivals_s=[(arrivals_s[r] if arrivals_s else 0.0) * tdf
                                                             for r in range(n)])
    for si, step in enumerate(workload.steps):
        # Route the step once: the same subflows give the per-link loads and the agents' parts.
        routes, sf, loads = _step_loads(fabric, plan.steps[si].configuration, step, p)
        routed.append((routes, sf))
        if not app_owned:  # an app-owned run's loads are routed over the circuits it meets (module doc)
            for i in np.flatnonzero(loads):
                totals[routes.links[i]] = totals.get(routes.links[i], 0.0) + float(loads[i])
        step_loads.append(float(loads.max(initial=0.0)))
        schedules.add_step()
        for k, t in enumerate(step.transfers):
            tid = len(tids)
            tids.append((si, t))
            eb = scale.emulated_bytes(t.bytes)
            if app_owned:  # every channel an equal share: whichever parallel circuits the app sets
                parts = [[c, eb // p + (c < eb % p)] for c in range(p)]
            else:
                mine = np.flatnonzero(sf.transfer == k)
                parts = [[int(sf.channel[f]), int(eb * sf.fraction[f])] for f in mine]
                parts[0][1] += eb - sum(b for _, b in parts)
            schedules.transfer(si, tid, t.src, t.dst, parts)
    # Before a reconfiguration the agents wait until their data is acknowledged (agent doc); in a
    # run the apps own, any step may be followed by one.
    for si, sp in enumerate(plan.steps[1:]):
        if sp.action == "reconfigure" or app_owned:
            schedules.drain(si)
    # Connections the initial configuration cannot carry (a fabric of matchings, an empty OCS)
    # are opened before the timed run, each under the first configuration that routes it.
    initial = Routes(fabric, plan.initial, p)
    reach = {d: initial.distances(d) for d in range(n)}
    warmup: list[tuple[Configuration, dict[int, list]]] = []
    pending = {(sched["rank"], dst, ch) for sched in schedules.ranks for st in sched["steps"]
               for _tid, dst, parts in st["send"] for ch, _b in parts if sched["rank"] not in reach[dst]}
    schedules.later(pending)
    for si, step in enumerate(workload.steps):
        todo = sorted({(t.src, t.dst, ch) for t in step.transfers for ch in range(p)} & pending)
        if todo:
            opens: dict[int, list] = {}
            for r, d, c in todo:
                opens.setdefault(r, []).append([d, c])
            warmup.append((plan.steps[si].configuration, opens))
            pending -= set(todo)
    wire_s = scale.byte_scale * 8 / (scale.link_mbps * 1e6)  # wall seconds a real byte takes on a link
    bound = max(step_loads, default=0.0) * wire_s
    timeout = step_timeout_s or 20 * bound + 30 + plan.reconfiguration_delay_s * tdf + max(arrivals_s or [0.0]) * tdf
    schedules.timeout(timeout + AGENT_TIMEOUT_MARGIN_S)  # the orchestrator's decides; the agents' is a backstop
    return CompiledRun(tids, schedules, step_loads, totals, routed, warmup, timeout,
                       min((x * wire_s for x in step_loads if x > 0), default=math.inf))


@contextlib.contextmanager
def planned_agents(emu: EmulatedFabric, plan: Plan, job: CompiledRun, run_dir: Path, reconfigured: list[Configuration]):
    """The agents of a per-step run (either semantics), ready for the timed run: started
    (:func:`agents`), every connection the initial configuration cannot carry opened untimed
    under one that does (``job.warmup``), the initial configuration back, and the controller
    told every configuration of the run (``reconfigured``: those it will switch to) so that
    each switch is a lookup. Yields ``(coord, alive)``."""
    with agents(emu, job.schedules.ranks, run_dir, job.shortest_step_s) as (coord, alive):
        for config, opens in job.warmup:  # untimed
            open_under(emu, coord, alive, config, opens)
        if job.warmup:
            emu.client.apply(plan.initial, 0.0)
        emu.client.prepare([plan.initial, *reconfigured])
        yield coord, alive


def control_timing(res: dict, tdf: float) -> dict[str, float]:
    """Where a reconfiguration's time went (real s): ``removal_s`` (request to the old
    circuits' barrier), ``commit_s`` (the new ones' install to their barrier) and ``reroute_s``
    (the dark window's start to the routes reprogrammed), from the controller's answer ``res``."""
    return {"removal_s": (res["t_dark"] - res["t_request"]) / tdf, "commit_s": (res["t_live"] - res["t_install"]) / tdf,
            "reroute_s": (res["t_routed"] - res["t_dark"]) / tdf}


def measured_run(name: str, workload: Workload, planner: str, steps: list[StepResult],
                 transfers: list[TransferResult], drops: dict, totals: dict | None = None, **fields) -> RunResult:
    """The :class:`RunResult` of a packet run, whatever its executor: its ``steps`` (the run ends
    with the last), every transfer in id order (one that never arrived ends at ``inf`` and is
    not counted as delivered), its ``drops``, the real bytes each directed link carried
    (``totals``, as ``link_bytes``; None: not recorded) and ``fields`` (``semantics``,
    ``slots``) as given."""
    return RunResult(
        name=name, collective=workload.collective, algorithm=workload.algorithm, planner=planner,
        ranks=workload.ranks, bytes=workload.bytes, backend="packet", time_s=max((s.end_s for s in steps), default=0.0),
        steps=steps, transfers=transfers, bytes_sent=workload.bytes_sent,
        bytes_delivered=sum(t.bytes for t in transfers if math.isfinite(t.end_s)),
        link_bytes=[[l.u, l.up, l.v, l.vp, b] for l, b in sorted((totals or {}).items(), key=lambda x: (x[0].u, x[0].up))],
        drops=drops, **fields)


def _run_workload(emu: EmulatedFabric, name: str, workload: Workload, plan: Plan, scale: Scale, alpha_s: float,
                  run_dir: Path, arrivals_s: list[float] | None, step_timeout_s: float | None, post: bool,
                  app_owned: bool, tail: list[dict]) -> RunResult:
    """:func:`run_workload` once its collective is announced; ``post``: raise step events,
    ``app_owned``: the user's apps own the circuits; ``tail`` gets the last ``step-end`` record."""
    fabric, n = emu.fabric, workload.ranks
    tdf = scale.tdf
    p = fabric.ports_per_gpu
    emu.client.apply(plan.initial, 0.0)
    run_dir.mkdir(parents=True, exist_ok=True)
    job = compile_run(fabric, workload, plan, scale, alpha_s, arrivals_s, step_timeout_s, app_owned)
    tids, step_loads, totals, step_timeout = job.tids, job.step_loads, job.totals, job.step_timeout_s
    demands = [step_demand(step) for step in workload.steps] if post else []

    with planned_agents(emu, plan, job, run_dir,
                        [sp.configuration for sp in plan.steps if sp.action == "reconfigure"]) as (coord, alive):

        ledger = RunLedger(emu)
        arrive = [(arrivals_s[r] if arrivals_s else 0.0) * tdf for r in range(n)]  # emulated s on the run's clock
        clock = 0.0  # the run's clock (emulated s) when the next step starts
        steps: list[StepResult] = []
        transfers: dict[int, TransferResult] = {}
        lead = RELEASE_LEAD_S
        step_end: list[dict] = []
        for si, sp in enumerate(plan.steps):
            rec = StepResult.of(si, workload.steps[si].phase, clock / tdf, 0.0, sp.action, max_link_bytes=step_loads[si])
            dark = 0.0
            control: dict[str, float] = {}
            events: dict[str, float] = {}
            if post:  # the previous step's end and this one's beginning, in one request (module doc)
                t_post = time.monotonic()
                ans = emu.client.post_events([*step_end, {"kind": "step-begin", "name": name, "step": si,
                                                          "steps": len(plan.steps), "phase": workload.steps[si].phase,
                                                          "demand": demands[si]}])
                events = {"events_s": (time.monotonic() - t_post) / tdf, "handlers_s": ans["handlers_s"] / tdf}
                changed = [r for r in ans["reconfigurations"] if r.get("changed")]
                if changed:  # the apps' reconfigurations count like a planner's
                    dark = sum(r["dark_window_measured_s"] for r in changed)
                    rec.action = "reconfigure"
                    rec.reconfiguration_delay_s = sum(r["reconfiguration_delay_s"] for r in changed) / tdf
                    rec.dark_window_measured_s = dark / tdf
                    control = control_timing(changed[-1], tdf)
                if app_owned:  # route the step's loads over the circuits it meets
                    try:
                        routes, _sf, loads = _step_loads(fabric, Configuration.from_json(ans["circuits"]),
                                                         workload.steps[si], p)
                    except RoutingError as e:
                        raise EmulationError(f"step {si}: the circuits the apps set do not carry the step: {e}") from None
                    for i in np.flatnonzero(loads):
                        totals[routes.links[i]] = totals.get(routes.links[i], 0.0) + float(loads[i])
                    rec.max_link_bytes = float(loads.max(initial=0.0))
            if sp.action == "reconfigure":
                res = emu.client.apply(sp.configuration, plan.reconfiguration_delay_s * tdf)
                t_reply = time.monotonic()
                dark = res["dark_window_measured_s"]
                rec.reconfiguration_delay_s = res["reconfiguration_delay_s"] / tdf
                rec.dark_window_measured_s = dark / tdf
                if res.get("changed"):  # where the reconfiguration's time went (module doc)
                    control = {**control_timing(res, tdf), "reply_s": (t_reply - res["t_live"]) / tdf}
            # The step's transfers start on the run's clock at ``clock + dark``, which is the
            # instant ``at`` on the wall clock; ``origin`` maps one onto the other.
            at = time.monotonic() + lead
            origin = at - (clock + dark)
            coord.broadcast({"go": si, "at": at, "origin": origin})
            reports = ledger.gather(coord, alive, step_timeout, f"step {si}")
            late = max(m["t_heard"] for m in reports) - at
            if late > 0:  # an agent heard of the step after its release: give the next ones more lead
                lead = min(MAX_RELEASE_LEAD_S, 2 * (lead + late))
            rec.drops, rec.retransmissions, _ = ledger.step(reports)
            ends = {int(tid): t for m in reports for tid, t in m["recv"].items()}
            starts = [v[0] for m in reports for v in m["send"].values()]
            end = max(ends.values(), default=at)
            rec.timing = {**control, **events, "heard_lag_s": (max(m["t_heard"] for m in reports) - at) / tdf,
                          "drain_s": (max(m.get("t_done", end) for m in reports) - end) / tdf}
            if starts:  # how late the agents wrote their first bytes after release + alpha
                rec.timing.update(start_lag_s=(max(starts) - at - alpha_s * tdf) / tdf,
                                  first_start_s=(min(starts) - at - alpha_s * tdf) / tdf)
            rec.end_s = (end - origin) / tdf
            clock = end - origin
            for tid, t_end in ends.items():
                _, t = tids[tid]
                transfers[tid] = TransferResult.of(si, t.src, t.dst, t.bytes,
                                                (max(at, origin + arrive[t.src]) - origin) / tdf, (t_end - origin) / tdf)
            steps.append(rec)
            if post:
                step_end = [{"kind": "step-end", "name": name, "step": si, "phase": rec.phase, "demand": demands[si],
                             "time_s": rec.end_s - rec.start_s, "end_s": rec.end_s}]
        tail.extend(step_end)
        run_drops = ledger.close(run_dir)
    return measured_run(name, workload, plan.planner, steps, [transfers[k] for k in sorted(transfers)], run_drops,
                        totals)
