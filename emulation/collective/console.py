"""``ocslab up FILE``: a collective scenario's fabric at Mininet's own prompt.

The fabric is built, and its link rate calibrated, exactly as ``ocslab run`` builds it (the
packet session, :func:`emulation.collective.runner.collective_session`): the controller
with the scenario's runtime and any ``--app``, Open vSwitch bridges for the OCS and the NICs, one
Mininet host per GPU (``g0``, ``g1``, ...). Then Mininet's CLI (:class:`FabricCLI`, a subclass of
``mininet.cli.CLI``) takes over, so ``pingall``, ``g0 tcpdump -ni g0-eth0`` and ``xterm g0`` work
as under ``mn``, with ocslab's commands beside them (:class:`FabricSession`):

- ``circuits``: the OCS configuration the controller holds now;
- ``reconfigure ring|torus|empty|matching A-B,C-D,...|rotor SLOT [TURNS]`` (optionally
  ``R=10us``): the new circuits, with the dark window the controller measured;
- ``allreduce ALGORITHM SIZE [PLANNER]``: one collective run by the agents on the circuits in
  place (planner ``none`` by default), printed as a row of ``ocslab run``'s table;
- ``capture start [PORTS]`` / ``capture stop``: tcpdump on the OCS inputs (or the ports named)
  with wire probes, analysed on stop as ``ocslab pcap`` does;
- ``iperf [SRC DST] [SECONDS]``: one TCP flow's rate, in place of Mininet's (which kills every
  iperf on the machine and hangs on iperf 2.1).

Whatever a command raises (an interrupt aside) is one line, and the session goes on
(:meth:`FabricCLI.onecmd`); a dead controller is named once with the cause from its log.

Times are real-equivalent (divided by the time-dilation factor) unless they say "emulated".
Leaving the prompt (``exit``, ``quit``, Ctrl-D) or a SIGTERM tears everything down as a run does;
the session holds the run lock meanwhile, and ``ocslab clean`` removes what a killed one left.
The session's collectives are its result (:func:`up` returns the envelope).
"""

from __future__ import annotations

import dataclasses
import re
import signal
import sys
from pathlib import Path

from mininet.cli import CLI
from mininet.log import error, output, setLogLevel

from emulation import dataplane as dpn
from emulation.envelope import ResultEnvelope, write_result
from emulation.fabric import Configuration, FabricError
from emulation.results import RunResult
from emulation.scenario import Experiment
from emulation.units import format_bytes, parse_bytes


class SessionError(ValueError):
    """A console command that cannot be done as typed (one line; the session goes on)."""


#: Longest collective the console runs (wall-clock seconds, estimated beforehand); longer ones
#: belong in ``ocslab run``, which shows their progress and can be left running.
CONSOLE_RUN_LIMIT_S = 300.0

#: Time units a console argument may carry (``R=10us``, a rotor's ``SLOT``).
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_time(text: str, what: str) -> float:
    """Seconds of ``text`` (``10us``, ``2.5ms``, ``1e-5``; a bare number is seconds).

    :raises SessionError: not a time >= 0, naming ``what``."""
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([a-zµ]*)\s*", text)
    try:
        value = float(m.group(1)) * _TIME_UNITS[m.group(2) or "s"] if m else -1.0
    except (ValueError, KeyError):
        value = -1.0
    if not value >= 0:
        raise SessionError(f"{what}: {text!r} is not a time (e.g. 10us, 2ms)")
    return value


def parse_matching(text: str, gpus: int) -> list[tuple[int, int]]:
    """GPU pairs of ``A-B,C-D,...`` (a pair repeated asks for parallel circuits).

    :raises SessionError: a malformed pair or a GPU outside ``0..gpus-1``."""
    pairs = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*g?(\d+)\s*-\s*g?(\d+)\s*", item)
        if not m:
            raise SessionError(f"matching: {item!r} is not a GPU pair A-B (e.g. 0-4,1-5)")
        a, b = int(m.group(1)), int(m.group(2))
        if max(a, b) >= gpus or a == b:
            raise SessionError(f"matching: {item.strip()}: GPUs are 0..{gpus - 1}, two different ones")
        pairs.append((a, b))
    return pairs


class FabricSession:
    """What ocslab's console commands act on: the running packet session ``packet``
    (:class:`~emulation.emulator.session.PacketSession`: its fabric ``emu`` at ``scale``, its
    directory ``out``) of experiment ``exp``. Each method raises :class:`SessionError` for input
    it cannot act on, and the emulator's own errors for a failed emulation."""

    def __init__(self, packet, exp: Experiment):
        self.packet, self.exp = packet, exp
        self.emu, self.scale, self.out = packet.emu, packet.scale, Path(packet.out)
        self.runs: list[RunResult] = []
        self.capture = None
        self._probes: list = []
        self._captured = False
        self._told_dead = False

    @property
    def ocs(self) -> str:
        """The name of the fabric's only OCS.

        :raises SessionError: the fabric has none, or several."""
        if len(self.emu.fabric.ocs) != 1:
            raise SessionError(f"reconfigure: needs a fabric with one OCS (this one has {len(self.emu.fabric.ocs)})")
        return self.emu.fabric.ocs[0].name

    # ---- circuits -------------------------------------------------------------------------
    def circuits(self) -> str:
        """The controller's configuration now: per OCS its circuits (``g0.p0<->g1.p1``, with the
        OpenFlow port numbers they join on the OCS bridge) and the GPU pairs they join."""
        config = self.emu.client.circuits()
        lines = []
        for ocs in self.emu.fabric.ocs:
            cs = sorted(config[ocs.name])
            pairs: dict[tuple[int, int], int] = {}
            for c in cs:
                key = (c.a.gpu, c.b.gpu)
                pairs[key] = pairs.get(key, 0) + 1
            joined = " ".join(f"{a}-{b}" + (f"x{k}" if k > 1 else "") for (a, b), k in sorted(pairs.items()))
            lines.append(f"{ocs.name}: {len(cs)} circuits joining {len(pairs)} GPU pairs: {joined or '(none)'}")
            lines += [f"  {c}   (OCS ports {ocs.port_number(c.a)}<->{ocs.port_number(c.b)})" for c in cs]
        return "\n".join(lines) if lines else "this fabric has no OCS (static links only)"

    def configuration(self, words: list[str]) -> Configuration:
        """The configuration ``reconfigure`` asks for (``ring``, ``torus``, ``empty`` or
        ``matching A-B,...``), reusing the circuits in place where they serve.

        :raises SessionError: an unknown form, or GPUs without the ports it needs."""
        from topologies.builders import ring_pairs, torus_pairs

        from emulation.fabric import assign_ports

        fabric, ocs = self.emu.fabric, self.ocs
        form = words[0] if words else ""
        if form == "ring":
            pairs = ring_pairs(fabric.gpus)
        elif form == "torus":
            pairs = torus_pairs(fabric.gpus)
        elif form == "empty":
            return Configuration({})
        elif form == "matching" and len(words) == 2:
            pairs = parse_matching(words[1], fabric.gpus)
        else:
            raise SessionError("reconfigure: ring | torus | empty | matching A-B,C-D,... | rotor SLOT [TURNS] "
                               "(then R=TIME to override the fabric's reconfiguration delay)")
        try:
            return assign_ports(fabric, ocs, pairs, fill=form == "matching", keep=self.emu.client.circuits()[ocs])
        except FabricError as e:
            raise SessionError(f"reconfigure {form}: {e}") from None

    def reconfigure(self, line: str) -> str:
        """``reconfigure FORM [ARGS] [R=TIME]``: apply the configuration (:meth:`configuration`)
        with the reconfiguration delay R (real seconds; default the fabric's) and say what
        changed and the dark window the controller measured; ``rotor SLOT [TURNS]`` cycles the
        round-robin matchings instead (:meth:`rotor`)."""
        words = line.split()
        delay = max((o.reconfiguration_delay_s for o in self.emu.fabric.ocs), default=0.0)
        if words and words[-1].startswith("R="):
            delay = parse_time(words.pop()[2:], "R")
        if words[:1] == ["rotor"]:
            return self.rotor(words[1:], delay)
        config = self.configuration(words)
        before = self.emu.client.circuits()
        tdf = self.scale.tdf
        res = self.emu.client.apply(config, delay * tdf)
        if not res.get("changed"):
            return "no circuit changed (no dark window)"
        removed = sum(len(set(before[o.name]) - set(config[o.name])) for o in self.emu.fabric.ocs)
        added = sum(len(set(config[o.name]) - set(before[o.name])) for o in self.emu.fabric.ocs)
        dark = res["dark_window_measured_s"]
        return (f"{removed} circuits removed, {added} added; dark window requested {delay * 1e6:.1f} us, "
                f"measured {dark / tdf * 1e6:.1f} us ({delay * tdf * 1e3:.1f}/{dark * 1e3:.1f} ms emulated)")

    def rotor(self, words: list[str], delay: float) -> str:
        """``reconfigure rotor SLOT [TURNS]``: the controller cycles the round-robin matchings
        of the GPUs (:func:`emulation.workloads.matchings.round_robin_matchings`, every port of a
        GPU on its partner) for ``TURNS`` turns (default 1) of ``SLOT`` real seconds per slot,
        each slot after a dark window of R, on its own clock; returns when it is done, with the
        slots' measured dark windows.

        :raises SessionError: bad arguments, or an odd GPU count (no perfect matchings)."""
        from emulation.fabric import assign_ports
        from emulation.poll import wait_until
        from emulation.workloads.matchings import round_robin_matchings

        if not 1 <= len(words) <= 2:
            raise SessionError("reconfigure rotor SLOT [TURNS] (e.g. rotor 50us 2)")
        slot = parse_time(words[0], "SLOT")
        if slot <= 0:
            raise SessionError("SLOT: must be longer than 0")
        try:
            turns = int(words[1]) if len(words) == 2 else 1
        except ValueError:
            turns = 0
        if turns < 1:
            raise SessionError(f"TURNS: {words[1]!r} is not a positive whole number")
        n = self.emu.fabric.gpus
        if n % 2:
            raise SessionError(f"reconfigure rotor: {n} GPUs have no perfect matchings (an even count does)")
        configs = [assign_ports(self.emu.fabric, self.ocs, list(m), fill=True) for m in round_robin_matchings(n)]
        tdf = self.scale.tdf
        since = len(self.emu.client.events())
        count = turns * len(configs)
        self.emu.client.start_rotor(configs, [slot * tdf] * len(configs), delay * tdf, count)
        budget = count * (slot + delay) * tdf * 3 + 30

        def done() -> bool:
            return any(e["kind"] == "rotor-done" for e in self.emu.client.events(since))

        wait_until(done, budget, lambda: SessionError(f"reconfigure rotor: not done within {budget:.0f} s"),
                   interval_s=0.1)
        slots = [e for e in self.emu.client.events(since) if e["kind"] == "rotor-slot"]
        darks = [(e["t_live"] - e["t_dark"]) / tdf for e in slots if e.get("t_live") and e.get("t_dark")]
        text = f"rotor: {len(slots)} slots of {slot * 1e6:g} us over {len(configs)} matchings"
        if darks:
            text += (f"; dark windows planned {delay * 1e6:.1f} us on the controller's clock, measured "
                     f"{min(darks) * 1e6:.1f}-{max(darks) * 1e6:.1f} us (median {sorted(darks)[len(darks) // 2] * 1e6:.1f}; "
                     "a rotor keeps its slot times, so each window is R give or take the switch's acknowledgement "
                     "jitter)")
        return text + "; circuits now: the last slot's"

    # ---- collectives ----------------------------------------------------------------------
    def allreduce(self, line: str) -> ResultEnvelope:
        """``allreduce ALGORITHM SIZE [PLANNER]``: one AllReduce on the circuits in place
        (the planner, default ``none``, starts from them), run by the agents as ``ocslab run``
        runs it; the envelope of that one run (printed as its table's row).

        :raises SessionError: a bad algorithm, size or planner, or a run the circuits cannot
            carry (a GPU unreachable)."""
        from emulation.emulator.execute import execute
        from emulation.flowsim import SimulationError
        from emulation.routing import RoutingError
        from emulation.collective.runner import collective_envelope
        from emulation.scenario.schema import RunSpec
        from emulation.schedule import PlanError

        words = line.split()
        if len(words) not in (2, 3):
            raise SessionError("allreduce ALGORITHM SIZE [PLANNER] (e.g. allreduce ring 25MiB)")
        try:
            size = parse_bytes(words[1])
        except ValueError as e:
            raise SessionError(f"SIZE: {e}") from None
        try:
            run = RunSpec(name=words[0], algorithm=words[0], planner=words[2] if len(words) == 3 else "none")
        except ValueError as e:  # pydantic's ValidationError is one
            first = e.errors()[0] if hasattr(e, "errors") else {"msg": str(e)}
            raise SessionError(f"allreduce: {first['msg'].removeprefix('Value error, ')}") from None
        fabric = dataclasses.replace(self.emu.fabric, initial=self.emu.client.circuits())
        exp = dataclasses.replace(self.exp, fabric=fabric)
        try:
            desc = exp.resolve(run, size)
        except (PlanError, ValueError, KeyError) as e:
            raise SessionError(f"allreduce {words[0]} {words[1]}: {e}") from None
        hint = "(circuits shows them; reconfigure ring joins every GPU)"
        try:
            wall = self.wall_estimate(desc)
        except (RoutingError, SimulationError) as e:
            raise SessionError(f"allreduce {words[0]} {words[1]}: {e} {hint}") from None
        if wall > CONSOLE_RUN_LIMIT_S:
            raise SessionError(f"allreduce {words[0]} {words[1]}: would take about {wall / 60:.0f} min of wall clock "
                               f"at this scale (the console runs up to {CONSOLE_RUN_LIMIT_S / 60:.0f} min; a smaller "
                               "SIZE, or ocslab run)")
        k = len(self.runs)
        run_dir = self.out / "emulation" / f"{run.name}-{format_bytes(size)}-{k}"
        try:
            res = execute(self.emu, desc, self.scale, self.exp.cost, run_dir)
        except RoutingError as e:
            raise SessionError(f"allreduce {words[0]} {words[1]}: {e} {hint}") from None
        self.runs.append(res)
        return collective_envelope(exp, "packet", [res], {**self.packet.record(), "complete": True})

    def wall_estimate(self, desc) -> float:
        """Wall-clock seconds the packet run of ``desc`` (a RunDescription) should take: the flow
        backend's time for it on the fabric, times the time-dilation factor it is emulated at
        (:func:`emulation.emulator.execute.run_scale`).

        :raises emulation.flowsim.SimulationError: the circuits in place leave a pair of the run
            without a path (or the flow backend cannot simulate it otherwise)."""
        from emulation.emulator.execute import run_scale
        from emulation.flowsim.run import execute as simulate

        real_s = simulate(self.emu.fabric, desc, self.exp.cost).time_s
        return real_s * run_scale(desc, self.scale, self.emu.mtu, self.emu.fabric.ports_per_gpu).tdf

    # ---- capture --------------------------------------------------------------------------
    def capture_start(self, ports: str | None) -> str:
        """Start capturing the OCS inputs (or the comma-separated ``ports``) with wire probes
        (:func:`emulation.collective.runner.start_capture`).

        :raises SessionError: a capture runs already, this session captured once, or the fabric
            is spread over servers."""
        from emulation.collective.runner import start_capture

        if self.capture is not None:
            raise SessionError("capture: already capturing (capture stop first)")
        if getattr(self.emu, "cluster", None) is not None:
            raise SessionError("capture: captures are taken on one machine; not on a fabric spread over servers")
        if self._captured:
            raise SessionError(f"capture: this session captured into {self.out / 'emulation' / 'pcap'} already "
                               f"(one capture per session: leave and ocslab up again for another)")
        from emulation.emulator.net import EmulationError

        try:
            self.capture, self._probes = start_capture(self.emu, self.out, ["ocs"] if not ports else ports.split(","))
        except EmulationError as e:
            raise SessionError(f"capture: {str(e).removeprefix('--pcap: ')}") from None
        self._captured = True
        return f"capturing {len(self.capture.devices)} ports into {self.out / 'emulation' / 'pcap'}"

    def capture_stop(self) -> list[str]:
        """Stop the capture and its probes, write the session's ``result.json`` so far and
        analyse the capture (:func:`emulation.pcap.analyse`: ``pcap.json``, ``pcap.png``); the
        analysis' summary lines.

        :raises SessionError: no capture runs."""
        import json

        from emulation import pcap
        from emulation.emulator.net import stop_pid

        if self.capture is None:
            raise SessionError("capture: not capturing (capture start first)")
        self.capture.stop()
        for p in self._probes:
            stop_pid(p)
            if p in self.emu.children:
                self.emu.children.remove(p)
        self.capture, self._probes = None, []
        write_result(self.out, self.envelope())
        try:
            rep = pcap.analyse(self.out, self.out / "pcap.png")
        except pcap.PcapError as e:
            raise SessionError(f"capture: {e}") from None
        (self.out / "pcap.json").write_text(json.dumps(rep.model_dump(), indent=1))
        return [*pcap.summary_lines(rep), f"capture: {self.out}/pcap.json, pcap.png"]

    def problem(self, e: Exception) -> str:
        """The one line the console prints for a command that raised ``e``: the message of
        ocslab's own errors, the type and message of any other; when the controller is dead,
        why it died (the first time, from its log) or that it is."""
        from emulation.emulator.controller_client import ControllerError
        from emulation.emulator.controller_log import exited

        ctl = self.emu.controller
        if isinstance(e, ControllerError) and ctl is not None and ctl.poll() is not None:
            if not self._told_dead:
                self._told_dead = True
                return (exited(self.emu.run_dir / "controller.log", ctl.returncode)
                        + "; circuits, reconfigure and allreduce need it: leave with exit")
            return "the controller is not running: leave with exit"
        from emulation.emulator.net import EmulationError
        from emulation.routing import RoutingError

        if isinstance(e, (SessionError, ControllerError, EmulationError, RoutingError, FabricError)):
            return str(e)
        return f"{type(e).__name__}: {e}"

    def iperf(self, src: str | None = None, dst: str | None = None, seconds: float = 5.0) -> str:
        """One TCP flow from host ``src`` to ``dst`` (default ``g0`` and the last GPU) for
        ``seconds`` (wall clock, 1-60), measured by iperf's client; its own processes only (by pid;
        Mininet's ``iperf`` kills every iperf on the machine and waits for its server's report,
        which iperf 2.1 never prints for Mininet's probe connection, so it hung).

        :raises SessionError: unknown hosts, the same host twice, a duration outside 1-60 s, no
            iperf, or a transfer that did not finish."""
        import shutil
        import subprocess

        from emulation.emulator.net import stop_pid
        from emulation.poll import poll_until, wait_until

        hosts = {h.name: h for h in self.emu.net.hosts}
        src = src or dpn.host_name(0)
        dst = dst or dpn.host_name(self.emu.fabric.gpus - 1)
        for h in (src, dst):
            if h not in hosts:
                raise SessionError(f"iperf: no host {h!r} (the GPUs are g0..g{self.emu.fabric.gpus - 1})")
        if src == dst:
            raise SessionError("iperf: SRC and DST must be two different GPUs")
        if not 1 <= seconds <= 60:
            raise SessionError(f"iperf: SECONDS: {seconds:g} is outside 1-60")
        if shutil.which("iperf") is None:
            raise SessionError("iperf: the iperf program is not installed (apt install iperf)")
        port = "5201"
        before = tcp_counters(hosts[src])
        logs = self.out / "emulation" / "iperf"
        logs.mkdir(parents=True, exist_ok=True)
        server_csv = logs / f"server-{src}-{dst}-{len(list(logs.glob('server-*.csv')))}.csv"
        with open(server_csv, "w") as fh:
            server = hosts[dst].popen(["stdbuf", "-oL", "iperf", "-s", "-p", port, "-y", "C"], stdout=fh,
                                      stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: hosts[dst].cmd(f"ss -Hltn sport = :{port}").strip(), 10,
                       lambda: SessionError(f"iperf: the server on {dst} did not listen within 10 s"))
            client = hosts[src].popen(["iperf", "-c", hosts[dst].IP(), "-p", port, "-t", f"{seconds:g}", "-y", "C"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = client.communicate(timeout=seconds + 30)
            except subprocess.TimeoutExpired:
                stop_pid(client)
                raise SessionError(f"iperf {src} {dst}: no result within {seconds + 30:g} s") from None
            if client.returncode == 0:  # the server's row for the connection, written once it closed
                poll_until(lambda: server_csv.read_text().count(",") >= 8, 5)
        finally:
            stop_pid(server)
        rows = [r.split(",") for r in out.splitlines() if r.count(",") >= 8]
        if not rows:
            raise SessionError(f"iperf {src} {dst}: {(err or out).strip().splitlines()[-1:] or ['no report']}")
        sent_bps = float(rows[-1][-1])
        after = tcp_counters(hosts[src])
        lost = {k: after.get(k, 0) - before.get(k, 0) for k in ("RetransSegs", "TCPTimeouts")}
        got = [r.split(",") for r in server_csv.read_text().splitlines() if r.count(",") >= 8]
        # The headline is the delivered rate (the server's bytes over its connection); the client's
        # counts the bytes written into its socket, over an interval ending with iperf's close.
        bps, what = (float(got[-1][8]), "delivered") if got else (sent_bps, "sent (the server gave no report)")
        real = bps * self.scale.port_gbps * 1e3 / self.scale.link_mbps
        received = f", {dst} received {int(got[-1][7])} bytes over {got[-1][6]} s" if got else ""
        return (f"iperf {src} -> {dst}: {bps / 1e6:.2f} Mbit/s {what}, emulated = {real / 1e9:.1f} Gbit/s "
                f"real-equivalent (links at {self.scale.link_mbps:g} Mbit/s = {self.scale.port_gbps:g} Gbit/s); "
                f"{src}'s client wrote {int(rows[-1][7])} bytes over {rows[-1][6]} s ({sent_bps / 1e6:.2f} Mbit/s)"
                f"{received}; {src} retransmitted {lost['RetransSegs']} segments, {lost['TCPTimeouts']} on a timeout")

    def envelope(self) -> ResultEnvelope:
        """The session's result: every collective run so far."""
        from emulation.collective.runner import collective_envelope

        return collective_envelope(self.exp, "packet", self.runs, {**self.packet.record(), "complete": True})

    def close(self) -> None:
        """Stop a capture still running (before the fabric is torn down)."""
        if self.capture is not None:
            self.capture.stop()
            self.capture = None

    def banner(self) -> str:
        """What the prompt starts with: the fabric, the scale model, the commands."""
        f, s = self.emu.fabric, self.scale
        delay = max((o.reconfiguration_delay_s for o in f.ocs), default=0.0)
        hosts = ", ".join(dpn.host_name(g) for g in range(min(f.gpus, 3))) + (", ..." if f.gpus > 3 else "")
        return "\n".join([
            f"ocslab: {f.name}: {f.gpus} GPUs ({hosts}), {f.ports_per_gpu} ports each, {len(f.ocs)} OCS; "
            f"controller {self.exp.emulation.controller}",
            f"scale: {s.link_mbps:g} Mbit/s per link emulated = {s.port_gbps:g} Gbit/s real (byte scale "
            f"{s.byte_scale:g}, time dilation {s.tdf:g})",
            f"       R = {delay * 1e6:g} us real = {delay * s.tdf * 1e3:g} ms emulated",
            "ocslab's commands: circuits, reconfigure, allreduce, capture, iperf SRC DST (help NAME)",
            "Mininet's: pingall, g0 CMD, xterm g0, ...",
            "exit or Ctrl-D tears the fabric down",
        ] + ([f"ofctl_rest: http://127.0.0.1:{self.emu.ofctl_rest_port}/stats/flow/<dpid>"]
             if self.emu.ofctl_rest_port is not None else []))


def tcp_counters(host) -> dict[str, int]:
    """The TCP counters of ``host``'s network namespace (``/proc/net/snmp``'s ``Tcp:`` and
    ``/proc/net/netstat``'s ``TcpExt:`` groups, by name: ``RetransSegs``, ``TCPTimeouts``, ...);
    empty where the host cannot read them."""
    from emulation.emulator.counters import snmp_counters

    return snmp_counters(host.cmd("cat /proc/net/snmp /proc/net/netstat"), ("Tcp:", "TcpExt:"))


class FabricCLI(CLI):
    """Mininet's CLI on the emulation's network, with ocslab's commands (module doc). A SIGTERM
    (which the emulation turns into an interrupt) ends the prompt; Ctrl-C only stops the command
    in progress, as in Mininet."""

    prompt = "ocslab> "

    def __init__(self, session: FabricSession, stdin=sys.stdin, **kwargs):
        self.session = session
        super().__init__(session.emu.net, stdin=stdin, **kwargs)

    def run(self) -> None:
        """Mininet's loop, except that an interrupt raised for a signal (SIGTERM) ends it."""
        while True:
            try:
                self.cmdloop()
                return
            except KeyboardInterrupt as e:
                if e.args and str(e.args[0]).startswith("signal"):
                    raise
                output("\nInterrupt\n")

    def onecmd(self, line: str) -> bool:
        """Any command, Mininet's included: whatever it raises (an interrupt aside) is one line,
        and the prompt goes on."""
        try:
            return super().onecmd(line)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - the console's contract: one line, the session goes on
            error(f"*** {self.session.problem(e)}\n")
            return False

    def _do(self, fn, *args) -> None:
        out = fn(*args)
        for line in ([out] if isinstance(out, str) else out):
            output(line + "\n")

    def do_iperf(self, line: str) -> None:
        """TCP throughput from one GPU to another over the fabric (iperf, one flow).
           Usage: iperf [SRC DST] [SECONDS]  (default g0 and the last GPU, 5 s)"""
        words = line.split()
        seconds = 5.0
        if words and re.fullmatch(r"[0-9.]+", words[-1]):
            seconds = float(words.pop())
        if len(words) not in (0, 2):
            raise SessionError("iperf [SRC DST] [SECONDS] (e.g. iperf g0 g1 5)")
        self._do(self.session.iperf, *words, seconds)

    def do_circuits(self, _line: str) -> None:
        """Print the OCS's circuits now.
           Usage: circuits"""
        self._do(self.session.circuits)

    def do_reconfigure(self, line: str) -> None:
        """Set new circuits; prints the measured dark window.
           Usage: reconfigure ring | torus | empty | matching A-B,C-D,... [R=TIME]
                  reconfigure rotor SLOT [TURNS] [R=TIME]  (round-robin matchings)"""
        self._do(self.session.reconfigure, line)

    def do_allreduce(self, line: str) -> None:
        """Run one AllReduce with the agents on the circuits in place; prints its row.
           Usage: allreduce ALGORITHM SIZE [PLANNER]  (e.g. allreduce ring 25MiB)"""
        from emulation.collective import report

        def run() -> list[str]:
            env = self.session.allreduce(line)
            report.print_summary(env)
            return []

        self._do(run)

    def do_capture(self, line: str) -> None:
        """Capture packets on the OCS inputs (or PORTS), analysed on stop.
           Usage: capture start [PORTS] | capture stop"""
        words = line.split()
        if words[:1] == ["start"] and len(words) <= 2:
            self._do(self.session.capture_start, words[1] if len(words) == 2 else None)
        elif words == ["stop"]:
            self._do(self.session.capture_stop)
        else:
            error("*** capture start [PORTS] | capture stop\n")


def up(exp: Experiment, out: Path, *, force: bool = False, ofctl_rest: int | None = None, stdin=sys.stdin,
       progress=None) -> ResultEnvelope:
    """Build and calibrate ``exp``'s fabric (logs in ``out/emulation``), run the prompt on
    ``stdin`` until it ends, tear everything down; the session's result (every ``allreduce``).

    :raises emulation.emulator.session.HeadroomError: the scenario's rate misses the headroom target.
    :raises emulation.emulator.net.EmulationError: the emulation could not be brought up.
    """
    # Ctrl-C stops the command in progress however the console was started: a shell without job
    # control (a script, `cmd &`) starts its children with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _prompt(exp, out, force, ofctl_rest, stdin, progress)
    finally:
        signal.signal(signal.SIGINT, previous)


def _prompt(exp: Experiment, out: Path, force: bool, ofctl_rest: int | None, stdin, progress) -> ResultEnvelope:
    """:func:`up` once Ctrl-C is an interrupt."""
    from emulation.collective.runner import collective_session

    with collective_session(exp, out, force, ofctl_rest, progress) as packet:
        session = FabricSession(packet, exp)
        try:
            setLogLevel("info")  # Mininet's own commands report at info and output, as under mn
            output(session.banner() + "\n")
            FabricCLI(session, stdin=stdin)
        finally:
            setLogLevel("warning")
            session.close()
        return session.envelope()
