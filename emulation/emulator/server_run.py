"""One run's hold on the servers of a fabric spread over them (Mininet's cluster edition,
:mod:`emulation.emulator.cluster`): what an :class:`~emulation.emulator.net.EmulatedFabric`
does on servers besides building the net there.

:class:`ServerRun` takes each server's run lock after checking it (recorded in the run's
registry entry, so that ``ocslab clean`` reaches them after a SIGKILL), sizes each server's Open
vSwitch packet sockets as on one machine, answers whether a server is this run's, finds the
servers' ovs-vswitchd control sockets for the controller's flushes, checks that every
ovs-vswitchd still answers, and at teardown ends the agents left in the GPUs' namespaces there,
gives the sizes back and releases the locks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator import registry
from emulation.emulator.cluster import Cluster
from emulation.emulator.errors import EmulationError, MachineBusy, MachineUnfit
from emulation.emulator.ovs_sockets import SEND_BUFFER
from emulation.emulator.sites import ClusterError, Site

log = logging.getLogger(__name__)

#: Seconds between two checks that every ovs-vswitchd answers (``ovs-appctl version``, 2 s).
SWITCH_PROBE_EVERY_S = 5.0


class ServerRun:
    """This run on the servers of ``cluster`` (module doc); ocslab runs on each server from where
    that server says it is (:attr:`emulation.emulator.sites.Site.root`)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self._claimed: set[str] = set()  # servers whose run lock this run holds
        #: ``{server: socket record}`` of the servers' Open vSwitch sockets this run resized
        self._remote_sockets: dict[str, list] = {}
        self._probed = time.monotonic()
        #: ``{(server, socket here): (path there, its short alias here)}`` (:meth:`reach`)
        self._reached: dict[tuple[str, str], tuple[str, Path]] = {}

    def sites(self) -> list[Site]:
        """Every server's site (this machine's among them)."""
        return list(self.cluster.sites.values())

    def holds(self, site: Site) -> bool:
        """This run took ``site``'s lock (this machine always: its lock is the run's own)."""
        return not site.remote or site.name in self._claimed

    def claim(self, registration: registry.Registration) -> None:
        """Check every server and take its run lock; recorded in ``registration``.

        :raises MachineUnfit: a server cannot be reached, lacks a tool or
            does not run ocslab where it says (its ``OCSLAB_ROOT``).
        :raises MachineBusy: another emulation holds a server, or left
            state there.
        """
        registration.entry.servers = {"names": self.cluster.servers, "ssh_config": str(self.cluster.ssh_config or "")}
        registration.save()
        try:
            self.cluster.check()
        except ClusterError as e:
            raise MachineUnfit(str(e)) from None
        for site in self.cluster.sites.values():
            if not site.remote:
                continue  # this machine: claimed with the run
            try:
                refused = site.hold_lock()
                if refused:
                    raise MachineBusy(refused)
                left = site.run(site.module("emulation.emulator.registry", "leftovers"), timeout=60)
            except ClusterError as e:
                raise MachineUnfit(str(e)) from None
            if left.returncode:
                raise MachineUnfit(f"server {site.name}: ocslab does not run there at {site.root} "
                                   f"({(left.stderr or left.stdout).strip()[-160:]})")
            if left.stdout.strip():
                raise MachineBusy(f"server {site.name}: an ocslab run left {left.stdout.strip()} behind "
                                  f"(`ocslab clean` on the machine that ran it, or on {site.name}, removes them)")
            self._claimed.add(site.name)

    def size_sockets(self, drops, fabric, in_flight_bytes: int, site_of) -> None:
        """On every server: have its ovs-vswitchd open its send socket (a frame to one of its
        NICs' GPU) and raise its packet sockets' buffers for our ports there to ``in_flight_bytes``
        at least (:mod:`emulation.emulator.ovs_sockets`); given back by :meth:`release`.

        :param drops: the fabric's :class:`~emulation.emulator.counters.DropCounters` (its ports
            and where each lives); ``site_of``: a node name's site.
        :raises EmulationError: a server's sockets cannot be sized.
        """
        size = max(SEND_BUFFER, in_flight_bytes)
        for server, site in self.cluster.sites.items():
            ports = [p for p in drops.ports.ovs_ports if drops.site_of_device(p) is site]
            nics = [dpn.nic_name(g) for g in range(fabric.gpus) if site_of(dpn.nic_name(g)) is site]
            if not ports:
                continue
            if nics:
                g = dpn.node_index(nics[0])
                frame = dpn.gpu_mac(g).replace(":", "") + "020000000000" + "88b5" + "00" * 46
                site.run(["ovs-ofctl", "-O", "OpenFlow13", "packet-out", nics[0], "LOCAL",
                          f"output:{dpn.NIC_HOST_PORT}", frame])
            out = self._sockets(site, ["apply", "--send-bytes", str(size), *ports])
            self._remote_sockets[server] = json.loads(out)["restore"]

    def ctl_paths(self) -> str:
        """Comma-separated paths on this machine of every server's ovs-vswitchd control socket,
        for the controller's datapath flushes (:mod:`controllers.ovs_datapath`): each forwarded
        over the run's ssh connection to that server (``ssh -O forward -L``, to a socket in the
        registry's directory named by this run's pid; undone at teardown, :meth:`release`), so
        nothing is read from a server's files; this machine's own, directly.

        :raises EmulationError: a server has no control socket, or ssh refused to forward it."""
        paths = []
        for n, site in enumerate(self.sites()):
            out = site.out(["sh", "-c", 'd=${OVS_RUNDIR:-/var/run/openvswitch}; '
                                        'echo "$d/ovs-vswitchd.$(cat "$d/ovs-vswitchd.pid").ctl"']).strip()
            if not site.remote:
                paths.append(out)
                continue
            if not out.endswith(".ctl"):
                raise EmulationError(f"server {site.name}: no control socket of ovs-vswitchd found ({out[:120]!r})")
            here = registry.REGISTRY_DIR / f"ovs-{os.getpid()}-{n}.sock"
            here.parent.mkdir(parents=True, exist_ok=True)
            here.unlink(missing_ok=True)
            try:
                site.forward_here(here, out)
            except ClusterError as e:
                raise EmulationError(str(e)) from None
            paths.append(str(here))
        return ",".join(paths)

    def check(self) -> None:
        """Every :data:`SWITCH_PROBE_EVERY_S`, each server's ovs-vswitchd answers within 2 s.

        :raises EmulationError: one stopped answering."""
        now = time.monotonic()
        if now - self._probed < SWITCH_PROBE_EVERY_S:
            return
        self._probed = now
        for site in self.sites():
            if not site.switch_answers():
                raise EmulationError(f"server {site.name}: Open vSwitch's daemon ovs-vswitchd stopped answering")

    def end_agents(self, net) -> None:
        """End our run's processes left in our GPU hosts' namespaces on each server (an agent
        whose local ssh client was stopped goes on there), the hosts' shells excepted, which
        Mininet ends. Best effort: a server that cannot be reached is named in the log."""
        hosts: dict[str, list[str]] = {}
        for h in net.hosts:
            if getattr(h, "isRemote", False) and h.pid:
                hosts.setdefault(h.server, []).append(str(h.pid))
        for server, pids in hosts.items():
            try:
                site = self.cluster.sites[server]
                site.run(site.module("emulation.emulator.registry", "end", os.environ.get(registry.MARKER, ""), *pids))
            except ClusterError as e:
                log.warning("%s", e)

    def reach(self, server: str, sock: Path) -> str:
        """The path on ``server`` at which the Unix socket ``sock`` of this machine answers,
        forwarded over the run's ssh connection the first time it is asked for (ssh connects to
        it through a short alias, a symbolic link in the registry's directory, ``/run/ocslab``: a
        socket's path is at most
        107 bytes); undone by :meth:`unreach`.

        :raises EmulationError: ssh refused the forwarding."""
        key = (server, str(sock))
        if key not in self._reached:
            n = len(self._reached)
            alias = registry.REGISTRY_DIR / f"ctl-{os.getpid()}-{n}.sock"
            alias.parent.mkdir(parents=True, exist_ok=True)
            alias.unlink(missing_ok=True)
            alias.symlink_to(sock.resolve())
            there = f"/tmp/ocslab-ctl-{os.getpid()}-{n}.sock"
            try:
                self.cluster.sites[server].forward(alias, there)
            except ClusterError as e:
                alias.unlink(missing_ok=True)
                raise EmulationError(str(e)) from None
            self._reached[key] = (there, alias)
        return self._reached[key][0]

    def unreach(self) -> None:
        """Cancel every forwarding :meth:`reach` made, on every server, and remove the aliases."""
        for site in self.cluster.sites.values():
            site.unforward()
        for _there, alias in self._reached.values():
            alias.unlink(missing_ok=True)
        self._reached.clear()

    def release(self) -> None:
        """At teardown: give each server's Open vSwitch its socket sizes back, release the
        locks and end the ssh connections. Best effort: a server that cannot be reached is named
        in the log."""
        for server, site in self.cluster.sites.items():
            if site.remote and server in self._claimed:
                try:
                    if server in self._remote_sockets:
                        self._sockets(site, ["restore", json.dumps(self._remote_sockets[server])])
                except (ClusterError, EmulationError) as e:
                    log.warning("%s", e)
        self._remote_sockets.clear()
        self.unreach()
        self.cluster.close()

    def _sockets(self, site: Site, args: list[str]) -> str:
        r = site.run(site.module("emulation.emulator.ovs_sockets", *args), timeout=60)
        if r.returncode:
            raise EmulationError(f"server {site.name}: cannot size Open vSwitch's packet sockets: "
                                 f"{(r.stderr or r.stdout).strip()[-200:]}")
        return r.stdout
