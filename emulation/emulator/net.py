"""The emulated fabric as a context manager: OS-Ken controller process + Mininet network.

``with EmulatedFabric(fabric, run_dir, link_mbps=10) as emu:`` starts our controller (by pid),
builds Open vSwitch bridges (secure fail mode, OpenFlow 1.3) and GPU hosts, turns offloads off
on every veth when the userspace datapath is used, waits until the controller has programmed
every bridge, and on exit (normal, error, Ctrl-C or SIGTERM) stops the agents and the
controller by pid and deletes our bridges and links by name. It never uses Mininet's global cleanup or kills
by name pattern.

Spec: ``docs/architecture.md`` (packet backend, machines); docs/reliability.md.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from controllers import FABRIC_APPS
from controllers.ovs_datapath import DatapathCache, DatapathError
from emulation import dataplane as dpn
from emulation.emulator.capabilities import Capabilities, detect
from emulation.emulator.cluster import Cluster
from emulation.emulator.sites import LOCAL, ClusterError, Site, remote_env
from emulation.emulator import controller_log, registry, shaper
from emulation.emulator.controller_client import ControllerClient
from emulation.emulator.counters import DropCounters, Ports, nic_drops_are_dark
from emulation.emulator.datapath import Datapath, ovs_vswitchd_pid
from emulation.emulator.errors import EmulationError, MachineBusy, MachineUnfit
from emulation.emulator.server_run import SWITCH_PROBE_EVERY_S, ServerRun
from emulation.emulator.lifecycle import Lifecycle
from emulation.emulator.agent import RCV_BUDGET
from emulation.emulator.ovs_sockets import SocketBuffers
from emulation.fabric import Fabric
from emulation.ocs_shards import OcsShards
from emulation.poll import wait_until

log = logging.getLogger(__name__)

#: ``ethtool -K`` arguments turning off the offloads Open vSwitch's userspace datapath cannot
#: handle (checksum, segmentation and receive offloads; :func:`disable_offloads`).
OFFLOADS_OFF = ("tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off")


#: TCP's minimum retransmission timeout (emulated ms; Linux default 200) for torch jobs, which
#: lose segments when a GPU fails (its circuits go dark): a lost segment is resent within a few
#: emulated RTTs instead of stalling the job.
FAST_RTO_MIN_MS = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_port_but(taken: set) -> int:
    """A free port on 127.0.0.1 not in ``taken`` (added to it)."""
    port = free_port()
    while port in taken:
        port = free_port()
    taken.add(port)
    return port


def bridge_names(fabric: Fabric, ocs_shards: int = 1) -> list[str]:
    """Names of every bridge the fabric uses, its OCSes sharded over ``ocs_shards`` servers
    (:mod:`emulation.ocs_shards`)."""
    return (
        [dpn.nic_name(g) for g in range(fabric.gpus)]
        + sorted(OcsShards(fabric, ocs_shards).bridges().values())
        + [dpn.eps_name(k) for k in range(len(fabric.eps))]
    )


def ryu_venv(environ: dict[str, str] | None = None, prefix: str | None = None,
             base_prefix: str | None = None) -> Path:
    """Where the Ryu environment ``make setup`` makes (``scripts/setup_ryu.sh``) is: the path in
    ``OCSLAB_RYU_VENV`` when set (relative to the project's root when relative); else, when this
    interpreter runs in a virtual environment (``sys.prefix`` differs from ``sys.base_prefix``),
    that environment's path with ``-ryu`` appended, as ``scripts/setup.sh`` puts it beside
    ``OCSLAB_VENV`` (``.venv`` gives ``.venv-ryu``; a lab VM's ``/home/vagrant/venvs/ocslab-ryu/venv``
    gives ``.../venv-ryu``, with no variable needed under ``sudo``); else ``.venv-ryu`` in the
    project's root. The path need not exist (:func:`ryu_unavailable` says what is missing).

    ``environ``, ``prefix`` and ``base_prefix`` default to ``os.environ``, ``sys.prefix`` and
    ``sys.base_prefix``. Raises nothing.
    """
    environ = os.environ if environ is None else environ
    prefix = sys.prefix if prefix is None else prefix
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    root = Path(__file__).resolve().parents[2]
    if environ.get("OCSLAB_RYU_VENV"):
        return root / Path(environ["OCSLAB_RYU_VENV"]).expanduser()  # an absolute path stays as is
    if prefix != base_prefix:
        return Path(prefix + "-ryu")
    return root / ".venv-ryu"


#: The Ryu environment of this process (:func:`ryu_venv`, read once at import).
RYU_VENV = ryu_venv()


def ryu_unavailable() -> str | None:
    """Why ``--controller ryu`` cannot run here (one line), or None when it can."""
    if (RYU_VENV / "bin" / "ryu-manager").exists() and (RYU_VENV / ".ocslab-installed").exists():
        return None
    why = RYU_VENV / "UNAVAILABLE"
    if why.exists():
        return why.read_text().strip()
    return f"no {RYU_VENV}: `OCSLAB_EXTRAS=ryu make setup` makes it where a Python 3.9 exists"


#: The environment variable that loads the framework's stock ``ofctl_rest`` beside the apps of
#: every command that starts a fabric's controller (``ocslab run --ofctl-rest [PORT]`` sets it):
#: the port of its REST API on 127.0.0.1, 0 for any free one (docs/controllers.md).
OFCTL_REST_ENV = "OCSLAB_OFCTL_REST"
#: The port ``--ofctl-rest`` takes without one: Ryu's own default (``--wsapi-port``).
OFCTL_REST_PORT = 8080


def ofctl_rest_unavailable(runtime: str) -> str | None:
    """Why the framework ``runtime`` (``os-ken`` or ``ryu``) cannot load its stock
    ``ofctl_rest`` app here (one line), or None when it can. Ryu ships ``ryu.app.ofctl_rest``;
    OS-Ken dropped ``os_ken.app.ofctl_rest`` and its WSGI server (4.x has neither)."""
    if runtime == "ryu":
        why = ryu_unavailable()
        return f"ryu is unavailable: {why}" if why else None
    if runtime != "os-ken":
        return f"unknown controller runtime {runtime!r} (os-ken or ryu)"
    try:
        found = all(importlib.util.find_spec(m) for m in ("os_ken.app.ofctl_rest", "os_ken.app.wsgi"))
    except ImportError:
        found = False
    return None if found else "this OS-Ken has no os_ken.app.ofctl_rest: run the controller on Ryu (--controller ryu)"


def ofctl_rest_port(value: int | str | None) -> int | None:
    """The ``ofctl_rest`` port asked for by ``value`` (an int, the text of :data:`OFCTL_REST_ENV`,
    or None/"" for none): None (not loaded), 0 (any free port) or a port in [1, 65535].

    :raises MachineUnfit: not such a port, or that port is in use on 127.0.0.1 now (refused
        before anything starts).
    """
    if value is None or value == "":
        return None
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise MachineUnfit(f"--ofctl-rest ({OFCTL_REST_ENV}): a TCP port in [0, 65535] is needed (0: any free one), "
                           f"got {value!r}")
    if port:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                raise MachineUnfit(f"--ofctl-rest: port {port} on 127.0.0.1 is not free ({e.strerror}): "
                                   "pick another, or 0 for any free one") from None
    return port


def ryu_manager_command(apps: list[str], args: list[str], root: str | Path) -> list[str]:
    """``ryu-manager --user-flags controllers/flags.py ARGS controllers.APP ...`` from the Ryu
    environment (:data:`RYU_VENV`), ``ryu.app.ofctl_rest`` for ``ofctl_rest`` and a path for
    an app file; ``root`` the project's root. Raises nothing (the environment need not exist)."""
    return [str(RYU_VENV / "bin" / "ryu-manager"), "--user-flags", str(Path(root) / "controllers" / "flags.py"),
            *args, *[a if a.endswith(".py") else "ryu.app.ofctl_rest" if a == "ofctl_rest" else f"controllers.{a}"
                     for a in apps]]


def controller_command(runtime: str, apps: list[str], args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command (and environment) that starts ``apps`` (names of :mod:`controllers`,
    ``ofctl_rest`` for the framework's stock REST app, or paths of your own apps' ``.py`` files)
    with ``args`` on ``runtime``: ``os-ken`` runs ``python -m controllers APPS ARGS`` in this
    interpreter; ``ryu`` runs ``ryu-manager --user-flags controllers/flags.py ARGS
    controllers.APP ...`` (``ryu.app.ofctl_rest`` for ``ofctl_rest``) from the Ryu environment
    (:func:`ryu_venv`) with the project on ``PYTHONPATH``.

    :raises EmulationError: unknown runtime, or ryu is unavailable (:func:`ryu_unavailable`).
    """
    root = project_root()
    if runtime == "os-ken":
        return [sys.executable, "-m", "controllers", *apps, *args], dict(os.environ)
    if runtime != "ryu":
        raise EmulationError(f"controller: unknown runtime {runtime!r} (os-ken or ryu)")
    why = ryu_unavailable()
    if why:
        raise EmulationError(f"controller: ryu is unavailable: {why}")
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("PYTHONHOME", None)
    return ryu_manager_command(apps, args, root), env


def claim_machine(run_dir: Path) -> registry.Registration:
    """Check that this process may emulate (root, Open vSwitch answering) and take the machine
    for one emulation (:mod:`emulation.emulator.registry`).

    :raises MachineUnfit: not root, iproute2 or Mininet not installed, or Open vSwitch not running.
    :raises MachineBusy: another emulation holds the machine, or a killed run left state behind
        (refused before anything of ours exists, so a teardown never touches theirs).
    """
    if os.geteuid() != 0:
        raise MachineUnfit("the packet backend needs root (run with sudo; --backend flow runs without)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise MachineUnfit("the packet backend needs iproute2 (ip, tc; make setup installs it)")
    if importlib.util.find_spec("mininet") is None:
        raise MachineUnfit("the packet backend needs Mininet (make setup installs it; --backend flow runs without)")
    if shutil.which("ovs-vsctl") is None or subprocess.run(["ovs-vsctl", "--timeout=5", "show"],
                                                           capture_output=True).returncode:
        raise MachineUnfit("Open vSwitch is not running (make setup installs and starts it)")
    problem = mnexec_problem()
    if problem:
        raise MachineUnfit(problem)
    try:
        reg = registry.Registration(run_dir)
    except registry.Busy as e:
        raise MachineBusy(str(e)) from None
    left = registry.leftovers(own=reg.entry.run_id)
    if left:
        reg.release()
        raise MachineBusy(f"an ocslab run that was killed left {left.summary()} behind; "
                          "`ocslab clean` removes them (and nothing else)")
    return reg


def mnexec_problem(cwd: str | None = None) -> str | None:
    """Why Mininet cannot run a GPU host here, or None: ``mnexec -n`` (a host's namespaces; it
    makes ``/`` private, so ``/`` must be a mount point) and ``mnexec -a`` (how every command enters
    a host; its setns() moves the caller to the mount namespace's root, so under a chroot it lands
    outside it). Either one failing left Mininet waiting for a prompt forever, or every agent
    failing to find its directory."""
    cwd = cwd or project_root()
    try:
        host = subprocess.Popen(["mnexec", "-cdnp", "sleep", "30"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    except OSError as e:
        return f"Mininet's mnexec does not run ({e})"
    try:
        line = host.stdout.readline()
        if not line.startswith("\x01"):
            host.wait(timeout=5)
            return (f"Mininet cannot make a host's namespaces here (mnexec -n: "
                    f"{host.stderr.read().strip() or 'exit ' + str(host.returncode)}); "
                    "a chroot whose root is not a mount point does this")
        r = subprocess.run(["mnexec", "-a", line[1:].strip(), "test", "-d", cwd], capture_output=True,
                           text=True, timeout=10)
        if r.returncode:
            return (f"Mininet cannot enter a host's namespaces here (mnexec -a: "
                    f"{r.stderr.strip() or 'exit ' + str(r.returncode)}): in a chroot, entering a mount "
                    "namespace leaves the chroot; use a container or pivot_root instead")
        return None
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()


def interrupt_shell(node, timeout_s: float = 2.0) -> None:
    """End the command a Mininet node's shell still runs (an interrupted ``iperf`` or ``ping``
    leaves the node ``waiting``, and Mininet then refuses every command on it, teardown's
    included): Ctrl-C to the shell, then SIGKILL to the shell's children (processes it started,
    by pid) if the prompt has not come back within ``timeout_s``; the node is ready for commands."""
    node.sendInt()
    deadline = time.monotonic() + timeout_s
    while node.waiting and time.monotonic() < deadline:
        node.monitor(timeoutms=100)
    if node.waiting:
        from emulation.emulator.census import descendants

        for pid in sorted(descendants(node.shell.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while node.waiting and time.monotonic() < deadline:
            node.monitor(timeoutms=100)
    node.waiting = False


def stop_net(net) -> None:
    """Stop a Mininet network and reap its nodes' shells (Mininet hangs them up, never reaps)."""
    nodes = (*net.controllers, *net.switches, *net.hosts)
    for node in nodes:
        if node.shell and getattr(node, "waiting", False):
            interrupt_shell(node)
    shells = [n.shell for n in nodes if n.shell]
    net.stop()
    for shell in shells:
        stop_pid(shell, timeout=5.0)


def keep_qdiscs(devices, site: Site = LOCAL) -> None:
    """Tell Open vSwitch to leave the qdiscs of ``devices`` (ports of our bridges) alone: it
    resets the qdisc of a port whose QoS it manages on any reconfiguration of any bridge, unless
    the port's QoS is ``linux-noop``.

    :raises EmulationError: ovs-vsctl refused.
    """
    args = ["ovs-vsctl", "--timeout=30"]
    for dev in devices:
        args += ["--", "set", "port", dev, "qos=@noop"]
    args += ["--", "--id=@noop", "create", "qos", "type=linux-noop"]
    r = site.run(args)
    if r.returncode:
        raise EmulationError(f"ovs-vsctl could not set QoS linux-noop on our ports: {r.stderr.strip()}")


def stop_pid(proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    """End a process we started: SIGTERM, wait, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class EmulatedFabric(Lifecycle):
    """A running emulation of ``fabric`` (see module doc).

    :param run_dir: where logs and the fabric JSON go (``runs/<id>``).
    :param link_mbps: emulated port rate B_e (Mbit/s, at most 1000: TCLink's HTB limit), applied
        to every fabric link.
    :param delay_s: emulated per-link propagation delay (s), used only when netem exists.
    :param controller: ``os-ken`` (``python -m controllers``) or ``ryu`` (``ryu-manager`` of
        ``.venv-ryu``, :func:`controller_command`).
    :param apps: paths of your own controller apps (``.py``), loaded beside the built-in ones.
    :param ofctl_rest: load the framework's stock ``ofctl_rest`` beside the apps, its REST API on
        127.0.0.1 at this port (0: any free one; :attr:`ofctl_rest_port` says which); None: as
        :data:`OFCTL_REST_ENV` says (unset: not loaded). Ryu only (:func:`ofctl_rest_unavailable`).
    :param mtu: MTU of every fabric interface (bytes, 1500 ... 9000). Open vSwitch's userspace
        datapath costs CPU per frame, not per byte: at 9000 a frame carries six times the payload,
        so the machine carries about that much more emulated traffic; each frame then stands for
        ``mtu / byte_scale`` real bytes, and a transfer ends about one frame time early against a
        fluid link (:func:`emulation.collective.runner.frame_warning`; docs/emulator.md, "How many GPUs this machine
        emulates faithfully").
    :param servers: spread the fabric over these servers with Mininet's cluster edition
        (:mod:`emulation.emulator.cluster`); None: all on this machine. No PMD ports there.
    :param ocs_shards: shard every OCS over the first this many servers (one bridge each, joined
        by lanes, :mod:`emulation.ocs_shards`); 1: one bridge per OCS.
    :param datapath: ``pmd`` (the GPUs' own links polled over AF_XDP by a PMD thread on a core of
        its own, :mod:`emulation.emulator.pmd`), ``steer`` (ovs-vswitchd pinned to one core and
        the GPUs' receive steered to the others, :mod:`emulation.emulator.steering`) or
        ``packet`` (neither); None: chosen for this machine and fabric
        (:class:`~emulation.emulator.datapath.Datapath`). :attr:`datapath` says which runs.
    :raises MachineBusy: another emulation is running, or a killed one left state behind.
    :raises MachineUnfit: ``ofctl_rest`` asked on a framework without it, or on a port in use.
    :raises EmulationError: not root, Open vSwitch not running, the controller did not start,
        or the switches did not connect in time.
    """

    def __init__(self, fabric: Fabric, run_dir: Path, *, link_mbps: float,
                 delay_s: float = 0.0, capabilities: Capabilities | None = None, controller: str = "os-ken",
                 apps: tuple[str, ...] = (), mtu: int = dpn.MTU, ofctl_rest: int | None = None,
                 datapath: str | None = None, servers: Cluster | None = None, ocs_shards: int = 1):
        if not 0 < link_mbps <= 1000:
            raise EmulationError(f"link_mbps: the emulated port rate must be in (0, 1000] Mbit/s, got {link_mbps}")
        if not dpn.MTU <= mtu <= dpn.MAX_MTU:
            raise EmulationError(f"mtu: must be in [{dpn.MTU}, {dpn.MAX_MTU}] bytes, got {mtu}")
        self.mtu = int(mtu)
        self.fabric = fabric
        self.run_dir = Path(run_dir).resolve()  # the controller runs from the project root
        self.link_mbps = link_mbps
        self.delay_s = delay_s
        self.controller_runtime = controller
        self.user_apps = [str(Path(a).resolve()) for a in apps]
        self.ofctl_rest_port = ofctl_rest_port(os.environ.get(OFCTL_REST_ENV) if ofctl_rest is None else ofctl_rest)
        if self.ofctl_rest_port is not None and ofctl_rest_unavailable(controller):
            raise MachineUnfit(f"--ofctl-rest: {ofctl_rest_unavailable(controller)}")
        self.caps = capabilities
        self.cluster = servers
        if ocs_shards > 1 and (servers is None or len(servers.servers) < ocs_shards):
            raise EmulationError(f"ocs: sharded over {ocs_shards} servers needs that many emulation.servers")
        self.ocs_shards = ocs_shards
        self.servers = ServerRun(servers) if servers is not None else None
        try:
            self.dp = Datapath(datapath, on_servers=servers is not None)
        except ValueError as e:
            raise EmulationError(str(e)) from None
        self.net = None
        self.drops: DropCounters | None = None
        self.controller: subprocess.Popen | None = None
        self.client: ControllerClient | None = None
        self.children: list[subprocess.Popen] = []
        #: TCP congestion controls the agents' connections ran (their ``ready`` reports)
        self.tcp_congestion: set[str] = set()
        self.registration: registry.Registration | None = None
        self._switch_probed = time.monotonic()

    @property
    def datapath(self) -> str:
        """What forwards the frames (:class:`~emulation.emulator.datapath.Datapath`): ``kernel``,
        ``pmd``, ``steer`` or ``packet``. Known once the fabric has started."""
        return self.dp.name(self.caps is not None and self.caps.ovs_kernel_datapath and self.cluster is None)

    @property
    def socket_buffers(self) -> SocketBuffers | None:
        """Open vSwitch's packet sockets as this fabric sized them (one machine, userspace datapath)."""
        return self.dp.socket_buffers

    @property
    def in_flight_bytes(self) -> int:
        """Bound on the TCP payload all agents can have in flight at once (bytes): every GPU's
        receive budget (:data:`emulation.emulator.agent.RCV_BUDGET`)."""
        return self.fabric.gpus * RCV_BUDGET

    @property
    def queue_packets(self) -> int:
        """Limit of every shaped queue (packets): room for everything that can be in flight, so
        that no queue of the fabric overflows (flow control, not loss, bounds what TCP sends)."""
        return max(shaper.QUEUE_PACKETS, -(-self.in_flight_bytes // dpn.mss(self.mtu)) + 64)

    # ---- life cycle -----------------------------------------------------------------------
    def _teardown(self) -> None:
        log.info("tearing the emulation down")
        for p in self.children:
            stop_pid(p)
        self.children.clear()
        try:
            if self.net is not None:
                if self.cluster is not None:
                    self.servers.end_agents(self.net)
                stop_net(self.net)
        finally:
            self.net = None
            try:
                if self.registration is not None:  # never another run's bridges (same names)
                    self._delete_leftovers()
            finally:
                stop_pid(self.controller)
                self.controller = None
                if self.cluster is not None:
                    self.servers.release()
        self.dp.stop()  # the cores, PMD mask and socket sizes Open vSwitch had
        if self.registration is not None and self.cluster is None:  # we hold the lock: any is ours
            left = registry.our_bridges() + registry.our_interfaces()
            if left:
                log.warning("teardown left %d bridge(s) or interface(s) (%s%s): `ocslab clean` removes them",
                            len(left), ", ".join(left[:4]), ", ..." if len(left) > 4 else "")

    def _start(self) -> None:
        self.registration = claim_machine(self.run_dir)
        if self.cluster is not None:
            self.servers.claim(self.registration)
        self.caps = self.caps or detect()
        log.debug("capabilities: %s", self.caps.to_json())
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log.info("starting the %s controller (logs in %s)", self.controller_runtime, self.run_dir / "controller.log")
        self._start_controller()
        if self.ofctl_rest_port is not None:
            log.info("ofctl_rest serves http://127.0.0.1:%d (e.g. GET /stats/flow/<dpid>)", self.ofctl_rest_port)
        log.info("building %d GPU hosts and %d switches at %s Mbit/s per link", self.fabric.gpus,
                 len(bridge_names(self.fabric, self.ocs_shards)), self.link_mbps)
        self._build_net()
        self.client.wait_ready(timeout=60)
        log.info("every switch connected to the controller")
        if self.cluster is not None:
            self.servers.size_sockets(self.drops, self.fabric, self.in_flight_bytes, self.site_of)
            return
        self.dp.start(self)

    # ---- servers (a fabric spread with the cluster edition) --------------------------------
    def site_of(self, node_name: str) -> Site:
        """Where commands for node ``node_name``'s root namespace run (this machine unless the
        fabric is spread over servers)."""
        if self.cluster is None:
            return LOCAL
        return self.cluster.sites[self.cluster.server_of(node_name, self.fabric.gpus)]

    def remote(self, gpu: int) -> bool:
        """Whether GPU ``gpu``'s host runs on a server (a fabric spread over servers), not here."""
        return bool(getattr(self.host(gpu), "isRemote", False))

    def reach(self, gpu: int, sock: Path) -> str:
        """The path at which a process of GPU ``gpu`` reaches the Unix socket ``sock`` of this
        machine: its name, for a process started in its directory here; on a server, a path
        there that ssh forwards to it (:meth:`ServerRun.reach`, until :meth:`unreach`)."""
        if not self.remote(gpu):
            return sock.name
        return self.servers.reach(self.host(gpu).server, sock)

    def unreach(self) -> None:
        """Undo every forwarding :meth:`reach` made."""
        if self.servers is not None:
            self.servers.unreach()

    def sites(self) -> list[Site]:
        """Every place this emulation's bridges live."""
        return [LOCAL] if self.cluster is None else list(self.cluster.sites.values())

    def _start_controller(self) -> None:
        fabric_json = self.run_dir / "fabric.json"
        fabric_json.write_text(json.dumps(self.fabric.to_json()))
        (self.run_dir / dpn.EVENTS_FILE).write_text("")  # this controller's events only
        taken = {self.ofctl_rest_port}
        self.ofp_port, api_port = (_free_port_but(taken), _free_port_but(taken))
        log = open(self.run_dir / "controller.log", "w")
        self.ofp_host = self.cluster.controller_ip if self.cluster is not None else "127.0.0.1"
        args = ["--ofp-listen-host", self.ofp_host, "--ofp-tcp-listen-port", str(self.ofp_port),
                "--ocslab-fabric", str(fabric_json), "--ocslab-api-port", str(api_port),
                "--log-file", str(self.run_dir / "controller.log"),
                "--ocslab-events", str(self.run_dir / dpn.EVENTS_FILE), "--ocslab-ocs-shards", str(self.ocs_shards)]
        ctl = ovs_ctl_path() if self.cluster is None else self.servers.ctl_paths()
        if ctl:  # the circuit switch flushes the datapath's cache after each barrier
            args += ["--ocslab-ovs-ctl", ctl]
        apps = [*FABRIC_APPS, *self.user_apps]
        if self.ofctl_rest_port is not None:  # the framework's WSGI server, never on ocslab's ports
            self.ofctl_rest_port = self.ofctl_rest_port or _free_port_but(taken)
            args += ["--wsapi-host", "127.0.0.1", "--wsapi-port", str(self.ofctl_rest_port)]
            apps.append("ofctl_rest")
        cmd, env = controller_command(self.controller_runtime, apps, args)
        self.controller = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=project_root(),
                                           start_new_session=True, env=env)
        self.client = ControllerClient(api_port)
        def up() -> bool:
            if self.controller.poll() is not None:
                raise EmulationError(controller_log.exited(self.run_dir / "controller.log", self.controller.returncode))
            return self.client.alive()

        wait_until(up, 30, lambda: EmulationError("controller API did not come up in 30 s"))

    def _build_net(self) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Node, OVSSwitch, RemoteController

        from topologies.mininet_topos import FabricTopo

        setLogLevel("warning")
        topo = FabricTopo(self.fabric, shards=self.ocs_shards)  # unshaped here: _shaped_links() sets every queue after the build
        if self.cluster is not None:
            from emulation.emulator.cluster import FabricPlacer, fabric_cluster, remote_classes

            # the servers' Open vSwitch: the userspace datapath (our socket sizing and counters expect it)
            host, switch, link = remote_classes(self.cluster, "user", self.mtu)
            self.net = fabric_cluster(self.cluster, topo, build=False, controller=None, autoSetMacs=False,
                                      autoStaticArp=False, host=host, switch=partial(switch, batch=True), link=link,
                                      placement=FabricPlacer)
        else:
            self.net = Mininet(
            topo=topo, build=False, controller=None, autoSetMacs=False, autoStaticArp=False,
            # batch: every bridge is created by one ovs-vsctl run from this process. Unbatched,
            # Mininet types each bridge's command into its node's shell, whose terminal cuts a
            # line at 4095 characters: beyond 8 GPUs the OCS bridge's command is longer, and
            # the bridge never appeared.
            switch=partial(OVSSwitch, datapath=self.caps.datapath, batch=True), link=TCLink,
            )
        class _Controller(RemoteController):
            def checkListening(self) -> None:
                # Mininet probes the port with telnet and decodes the reply as UTF-8: our
                # controller's binary OpenFlow HELLO can crash that decoder. We started the
                # controller ourselves and wait for it below (client.wait_ready).
                pass

            def stop(self) -> None:
                # RemoteController.stop does nothing, which left this node's shell running.
                Node.stop(self)

        self.net.addController(_Controller("c0", ip=self.ofp_host, port=self.ofp_port))
        setLogLevel("critical")  # tc's harmless "quantum ... is big" note for fast host links
        try:
            self._configure()
        except ClusterError as e:
            raise EmulationError(str(e)) from None
        finally:
            setLogLevel("warning")

    def _configure(self) -> None:
        self.net.build()
        for link in self.net.links:  # our root-namespace ends: no IPv6 chatter into the fabric
            for intf in (link.intf1, link.intf2):
                if dpn.node_kind(intf.node.name) != "g" and not getattr(link, "isPatchLink", False):
                    if self.cluster is None:
                        sysctl(f"net/ipv6/conf/{intf.name}/disable_ipv6", "1")
                    else:
                        intf.node.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        for link in self.net.links:
            if getattr(link, "isPatchLink", False):
                continue
            for intf in (link.intf1, link.intf2):
                if not self.caps.ovs_kernel_datapath:
                    disable_offloads(intf)
                if self.mtu != dpn.MTU:
                    out = intf.node.cmd("ip", "link", "set", "dev", intf.name, "mtu", str(self.mtu))
                    if out.strip():
                        raise EmulationError(f"mtu: {intf.name} refused MTU {self.mtu}: {out.strip()}")
        for host in self.net.hosts:  # TCP's congestion control is set per socket by the agents
            host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
                     " net.ipv4.tcp_slow_start_after_idle=0")
            # ACKs carry their connection's DSCP, so they travel on its channel: otherwise every
            # ACK takes channel 0 and that circuit loses ~2% per flow to the others' ACKs.
            host.cmd("sysctl -qw net.ipv4.tcp_reflect_tos=1")

        self.net.staticArp()
        self.net.start()
        self.drops = DropCounters(Ports.of_net(self.net), misdelivered_is_dark=nic_drops_are_dark(self.fabric),
                                  sites=self.cluster.sites if self.cluster is not None else None)
        if self.link_mbps is not None:
            for site, ports in self.drops.by_site(self.drops.ports.ovs_ports):
                keep_qdiscs(ports, site)
            try:
                shaper.apply(self._shaped_links(), self.run_dir / "tc", self.queue_packets, site_of=self._shaping_site)
            except shaper.ShapingError as e:
                raise EmulationError(str(e)) from None

    def _shaped_links(self) -> list[shaper.Shaped]:
        """Every link end that is a port of the modelled fabric, with its payload rate: a GPU's
        port toward an OCS (the way back is a patch port, which Open vSwitch crosses without a
        queue), both ends of an EPS port (at the EPS's own rate) and of a cable, with netem's
        delay where the machine has netem.

        A GPU's own link to its NIC is not shaped: it stands for the GPU's PCIe/NVLink path, which
        the model does not bound. Shaped at 1.1 x the ports' rate, as it once was, its queue sat
        in front of every fabric port of the GPU, and one flow's burst there left another port
        idle: an 8-GPU headroom probe reached 88-94% of link rate at 2.5 Mbit/s against 100%
        unshaped."""
        f, rate = self.fabric, self.link_mbps
        delay_ms = self.delay_s * 1e3 if (self.delay_s > 0 and self.caps.netem) else 0.0
        out = []
        for link in self.net.links:
            if getattr(link, "isPatchLink", False):
                continue
            for me, peer in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
                kind, other = dpn.node_kind(me.node.name), dpn.node_kind(peer.node.name)
                if "g" in (kind, other) or kind == "o":
                    continue
                scale = 1.0
                if "e" in (kind, other):
                    eps = f.eps[dpn.node_index((me.node if kind == "e" else peer.node).name)]
                    scale = eps.port_gbps / f.port_gbps if eps.port_gbps is not None else 1.0
                out.append(shaper.Shaped(me.name, rate * scale, None, delay_ms, self.mtu))
        return out

    @property
    def _shaping_site(self):
        """``site_of(device)`` for :func:`emulation.emulator.shaper.apply` on a fabric spread
        over servers; None on one machine (shaped here)."""
        return self.drops.site_of_device if self.cluster is not None else None

    def _delete_leftovers(self) -> None:
        """Delete any of our bridges that survived ``net.stop()`` (e.g. a build that failed
        half-way). Only names this fabric owns."""
        for b in bridge_names(self.fabric, self.ocs_shards):
            site = self.site_of(b)
            if self.servers is not None and not self.servers.holds(site):
                continue  # a server this run did not take: its bridges may be another run's
            try:
                site.run(["ovs-vsctl", "--timeout=30", "--if-exists", "del-br", b], timeout=60)
            except ClusterError as e:
                log.warning("%s (its bridge %s is left; ocslab clean removes it)", e, b)

    # ---- use ------------------------------------------------------------------------------
    def set_link_mbps(self, mbps: float) -> None:
        """Shape every fabric link at ``mbps`` (payload Mbit/s) from now on (between runs: the
        queues are not drained first). The propagation delay is scaled with it (``delay_s x old /
        new``): it stands for a real delay, and the time dilation factor is inversely
        proportional to the rate.

        :raises EmulationError: tc refused.
        """
        if mbps == self.link_mbps:
            return
        self.delay_s *= self.link_mbps / mbps
        self.link_mbps = mbps
        try:
            shaper.apply(self._shaped_links(), self.run_dir / "tc", self.queue_packets, change=True,
                         site_of=self._shaping_site)
        except shaper.ShapingError as e:
            raise EmulationError(str(e)) from None

    def settle(self) -> None:
        """Flush Open vSwitch's cached datapath flows (``revalidator/purge``,
        :mod:`controllers.ovs_datapath`), so that
        the next packets take the OpenFlow rules just installed. A barrier reply means the rules
        are in the tables, but in the userspace datapath packets that hit a cached flow of the
        old configuration keep following it until the revalidators catch up (2-4 ms measured
        after a rotor run): a SYN lost there costs TCP's 1 s initial timeout. Used before untimed
        connection set-up only; the flush is harmless to other bridges (their flows are
        re-created on the next packet)."""
        if self.cluster is not None:
            for site in self.sites():
                if site.run(["ovs-appctl", "--timeout=30", "revalidator/purge"], timeout=40).returncode:
                    raise EmulationError(f"server {site.name}: Open vSwitch did not flush its datapath")
            return
        ctl = ovs_ctl_path()
        if ctl is not None:
            try:
                DatapathCache(ctl, timeout=30).purge()
            except DatapathError as e:
                raise EmulationError(f"Open vSwitch did not flush its datapath: {e}") from None

    def set_rto_min(self, ms: float | None, quickack: bool = False) -> None:
        """Set (or with None, clear) TCP's minimum retransmission timeout on every GPU's routes
        (``ip route ... rto_min``; emulated milliseconds; Linux's default is 200 ms); with
        ``quickack``, receivers acknowledge every segment at once instead of delaying a lone
        one's acknowledgement up to 40 ms (``quickack 1``; cleared with ``ms=None``)."""
        for host in self.net.hosts:
            for line in host.cmd("ip -o route show").splitlines():
                route = re.sub(r"\s+(rto_min|quickack) \S+", "", line.strip())
                if route:
                    host.cmd(f"ip route replace {route}" + (f" rto_min {ms:g}ms" if ms else "")
                             + (" quickack 1" if ms and quickack else ""))

    def check_health(self) -> None:
        """Cheap enough to call every 0.2 s while a step runs: the controller process is alive,
        and Open vSwitch's daemon is neither gone nor stopped (its ``/proc`` state); every
        :data:`SWITCH_PROBE_EVERY_S` it must also answer ``ovs-appctl version`` within 2 s.

        :raises EmulationError: naming what failed. Neither is restarted: the run fails, and is
            torn down.
        """
        if self.controller is not None and self.controller.poll() is not None:
            raise EmulationError(controller_log.exited(self.run_dir / "controller.log", self.controller.returncode)
                                 .replace("exited", f"(pid {self.controller.pid}) exited mid-run", 1))
        if self.cluster is not None:
            self.servers.check()
            return
        pid = ovs_vswitchd_pid()
        state = _process_state(pid) if pid else None
        if state is None or state in "TtZX":
            what = "is gone" if state is None or state in "ZX" else "is stopped"
            raise EmulationError(f"Open vSwitch's daemon ovs-vswitchd{f' (pid {pid})' if pid else ''} {what}")
        now = time.monotonic()
        if now - self._switch_probed >= SWITCH_PROBE_EVERY_S:
            self._switch_probed = now
            if not LOCAL.switch_answers():
                raise EmulationError(f"Open vSwitch's daemon ovs-vswitchd (pid {pid}) stopped answering (ovs-appctl, 2 s)")

    def ocs_input_ports(self) -> list[str]:
        """Root-namespace interfaces of every OCS input port (the OCS end of each NIC's fibre:
        what a NIC puts on its fibre enters there; the outputs are patch ports, without a device)."""
        return sorted(self.ocs_input_gpus())

    def ocs_input_gpus(self) -> dict[str, int]:
        """``{OCS input port interface: the GPU whose NIC's fibre enters there}``."""
        out = {}
        for link in self.net.links:
            if getattr(link, "isPatchLink", False):
                continue
            for me, peer in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
                if dpn.node_kind(me.node.name) == "o" and dpn.node_kind(peer.node.name) == "n":
                    out[me.name] = dpn.node_index(peer.node.name)
        return out

    def host_link_ports(self) -> list[str]:
        """Root-namespace interfaces of every GPU's host link (the NIC end), in GPU order."""
        ends = {}
        for link in self.net.links:
            for me, peer in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
                if dpn.node_kind(me.node.name) == "n" and dpn.node_kind(peer.node.name) == "g":
                    ends[dpn.node_index(peer.node.name)] = me.name
        return [ends[g] for g in sorted(ends)]

    def host(self, gpu: int):
        """The Mininet host of GPU ``gpu``."""
        return self.net.get(dpn.host_name(gpu))

    def popen(self, gpu: int, args: list[str], log: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``args`` inside GPU ``gpu``'s namespace (working directory ``cwd``, default the
        project; our environment plus ``env``), output to ``log`` here; ended on exit. On a
        server it runs in ocslab's directory there, ``cwd`` being a path of this machine, and
        this Python (``args[0]``) is the server's (:meth:`~emulation.emulator.sites.Site.python`)."""
        with open(log, "w") as fh:
            host = self.host(gpu)
            if self.remote(gpu):  # ssh passes neither the directory nor the environment
                site = self.site_of(host.name)
                args = [site.python() if a == sys.executable else a for a in args[:1]] + args[1:]
                wrapped = remote_env(args, site.root, env or {})
                p = host.popen([shlex.quote(a) for a in wrapped], stdout=fh, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
            else:
                p = host.popen(args, stdout=fh, stderr=subprocess.STDOUT, cwd=str(cwd or project_root()),
                               env={**os.environ, **(env or {})})
        self.children.append(p)
        return p



def ovs_ctl_path() -> str | None:
    """ovs-vswitchd's control socket (what ``ovs-appctl`` talks to), None if there is none."""
    pid = ovs_vswitchd_pid()
    path = f"/var/run/openvswitch/ovs-vswitchd.{pid}.ctl"
    return path if pid is not None and Path(path).exists() else None


def _process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``T`` stopped, ``Z``...), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def disable_offloads(intf) -> None:
    """Turn off :data:`OFFLOADS_OFF` on Mininet interface ``intf`` (in its node's namespace):
    with offloads on, a veth of a bridge on the userspace datapath (``datapath_type=netdev``)
    passes unsegmented or unchecksummed frames and TCP stalls while ping works. What ethtool
    says (an offload it does not know) is ignored."""
    intf.node.cmd("ethtool", "-K", intf.name, *OFFLOADS_OFF)


def sysctl(path: str, value: str) -> None:
    """Write ``value`` to ``/proc/sys/<path>`` (root namespace), if it exists."""
    try:
        Path("/proc/sys", path).write_text(value)
    except OSError:
        pass


def project_root() -> str:
    """The project's root directory (controllers and agents run from it)."""
    return str(Path(__file__).resolve().parents[2])
