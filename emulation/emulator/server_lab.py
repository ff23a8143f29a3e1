"""Servers for the cluster edition, made on this one machine: a lab to try and test a fabric
spread over servers without a second machine.

Each lab server is what a real server of Mininet's cluster edition is, reached the same way:

- a **network namespace** ``olab-<name>`` with its own address on an underlay bridge
  (:data:`BRIDGE`, ``10.250.0.0/24``; this machine is ``10.250.0.254``, server k is
  ``10.250.0.<k+1>``), MTU :data:`UNDERLAY_MTU` so that a VXLAN tunnel carries 1500- and
  9000-byte fabric frames whole;
- its own **sshd** (this machine's ``/usr/sbin/sshd``, listening on the server's address only,
  root by a key made for the lab), so every command ocslab runs there goes through ssh exactly
  as it would to another machine;
- its own **clock**: the sshd runs in a time namespace of its own, so every command it runs reads
  a CLOCK_MONOTONIC :func:`clock_offset_s` seconds ahead of this machine's (another machine's
  clock has nothing in common with this one's either);
- its own **files**: the sshd runs in a mount namespace of its own, where this checkout of
  ocslab is at another path (``<run directory>/ocslab``, which the sshd hands every session as
  ``OCSLAB_ROOT``), its ``runs/`` and ``/tmp`` are empty and private, and this checkout's own path
  is empty: nothing a run does there can lean on a file of this machine's;
- its own **Open vSwitch** (``ovsdb-server`` and ``ovs-vswitchd``, userspace datapath), whose
  run directory ``/run/ocslab/servers/<name>`` the sshd hands every session as ``OVS_RUNDIR``:
  ``ovs-vsctl``, ``ovs-ofctl`` and ``ovs-appctl`` run over ssh reach that server's switch.
  Each ``ovs-vswitchd`` can be pinned to a core of its own (``cores``).

The lab's names start with ``olab-``, not with ocslab's run prefix ``ocl-``: the servers are
machines that outlive runs, and ``ocslab clean`` (which removes what dead runs left) leaves them
alone. ``ocslab servers up a b`` makes them (idempotent), ``ocslab servers down`` ends every
process it started, by the pids in their pid files, and deletes its namespaces and links;
``ocslab servers status`` lists them. There is one lab per machine (its files are in
:data:`RUN_ROOT`, gone at reboot with the servers themselves), whichever checkout of ocslab
made it. A scenario then names them (``emulation.servers: [a, b]``)
with the lab's ssh configuration (:func:`ssh_config`), which ocslab uses by default while the
lab is up. Docs: docs/cluster.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from emulation.emulator.sites import PROJECT_ROOT
from emulation.poll import poll_until

#: Every lab interface, namespace and bridge name starts with this (not ocslab's run prefix).
PREFIX = "olab-"
BRIDGE = f"{PREFIX}ul"
SUBNET = "10.250.0"
HOST_IP = f"{SUBNET}.254"
#: Underlay MTU (bytes): a VXLAN tunnel's overhead is 50 bytes, so a 9000-byte fabric frame fits.
UNDERLAY_MTU = 9100
#: Where each server's Open vSwitch keeps its database, sockets and pid files.
RUN_ROOT = Path("/run/ocslab/servers")
MAX_SERVERS = 200
NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class LabError(RuntimeError):
    """A lab server could not be made or reached (the message names the server and the step)."""


def lab_dir() -> Path:
    """The lab's own files, one lab per machine whichever checkout made it: ``lab.json``, the
    lab's key, ``authorized_keys``, ``known_hosts`` and ``ssh_config`` (:data:`RUN_ROOT`), beside
    each server's run directory (its database, sockets, pid files, host key and logs)."""
    return RUN_ROOT


def ssh_config() -> Path:
    """The ssh client configuration that reaches the lab's servers by name (``ssh -F``)."""
    return lab_dir() / "ssh_config"


@dataclass
class LabServer:
    """One lab server (module doc): ``name`` (what a scenario's ``servers:`` says), its underlay
    ``ip``, its namespace, the root-namespace end of its underlay veth, and its run directory."""

    name: str
    ip: str
    netns: str
    veth: str
    run_dir: str

    def pid(self, daemon: str) -> int | None:
        """Pid of ``daemon`` (``sshd``, ``ovsdb-server``, ``ovs-vswitchd``) from its pid file."""
        try:
            return int(Path(self.run_dir, f"{daemon}.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def alive(self) -> bool:
        """Its namespace exists and its three daemons run."""
        return Path("/run/netns", self.netns).exists() and all(
            (p := self.pid(d)) is not None and Path(f"/proc/{p}").exists()
            for d in ("sshd", "ovsdb-server", "ovs-vswitchd"))


def _run(args: list[str], what: str, netns: str | None = None, env: dict | None = None) -> str:
    cmd = (["ip", "netns", "exec", netns] if netns else []) + args
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})
    except FileNotFoundError:
        raise LabError(f"{what}: {cmd[0]} is not installed (make setup installs openssh-server)") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: `{' '.join(cmd)}` did not finish in 60 s") from None
    if r.returncode != 0:
        raise LabError(f"{what}: `{' '.join(cmd)}` failed: {(r.stderr or r.stdout).strip()[:200]}")
    return r.stdout


def lab_servers() -> list[LabServer]:
    """The lab's servers as recorded in ``lab.json`` (none if there is no lab)."""
    try:
        return [LabServer(**s) for s in json.loads((lab_dir() / "lab.json").read_text())]
    except (OSError, ValueError, TypeError):
        return []


def _save(servers: list[LabServer]) -> None:
    lab_dir().mkdir(parents=True, exist_ok=True)
    (lab_dir() / "lab.json").write_text(json.dumps([asdict(s) for s in servers], indent=1))


def _keys() -> None:
    d = lab_dir()
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "id_ed25519").exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ocslab-lab", "-f", str(d / "id_ed25519")], "lab key")
    shutil.copyfile(d / "id_ed25519.pub", d / "authorized_keys")


def _write_ssh_config(servers: list[LabServer]) -> None:
    d = lab_dir()
    known = []
    lines = ["# ssh -F this file: the ocslab lab's servers (ocslab servers up)"]
    for s in servers:
        try:
            key = Path(s.run_dir, "ssh_host_ed25519_key.pub").read_text().split()
        except OSError:
            continue  # its run directory is gone (a reboot): ocslab servers up makes it again
        known.append(f"{s.ip} {key[0]} {key[1]}")
        lines += [f"Host {s.name} {s.ip}", f"  HostName {s.ip}"]
    lines += ["Host *", "  User root", f"  IdentityFile {d / 'id_ed25519'}", "  IdentitiesOnly yes",
              f"  UserKnownHostsFile {d / 'known_hosts'}", "  StrictHostKeyChecking yes",
              "  SendEnv OCSLAB_RUN", "  ConnectTimeout 10", "  LogLevel ERROR"]
    (d / "known_hosts").write_text("\n".join(known) + "\n")
    ssh_config().write_text("\n".join(lines) + "\n")


def _sshd_config(s: LabServer) -> Path:
    conf = Path(s.run_dir, "sshd_config")
    conf.write_text("\n".join([
        f"ListenAddress {s.ip}", "Port 22", f"HostKey {s.run_dir}/ssh_host_ed25519_key",
        f"PidFile {s.run_dir}/sshd.pid", f"AuthorizedKeysFile {lab_dir() / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM no", "StrictModes no", "UseDNS no", "PermitTunnel no", "X11Forwarding no",
        "MaxSessions 200", "MaxStartups 200:30:400", "AcceptEnv OCSLAB_RUN", "LogLevel ERROR",
        # HOME: a clean one, so that root's shell rc files (bash reads ~/.bashrc under sshd) stay out
        f"SetEnv HOME={s.run_dir} OVS_RUNDIR={s.run_dir} OVS_DBDIR={s.run_dir} OVS_LOGDIR={s.run_dir} "
        f"OCSLAB_REGISTRY_DIR={s.run_dir}/registry OCSLAB_SERVER={s.name} OCSLAB_ROOT={server_root(s)}",
    ]) + "\n")
    return conf


def clock_offset_s(s: LabServer) -> int:
    """Seconds server ``s``'s CLOCK_MONOTONIC runs ahead of this machine's (module doc): 1000
    times its address's last number, a different offset on every server."""
    return 1000 * int(s.ip.rsplit(".", 1)[1])


def server_root(s: LabServer) -> str:
    """Where ocslab is on server ``s`` (module doc): this checkout, mounted at another path."""
    return str(Path(s.run_dir, "ocslab"))


def _private_files(s: LabServer) -> str:
    """The shell commands that give the sshd of ``s`` its own files (module doc), in the mount
    namespace it is started in."""
    here, there = shlex.quote(PROJECT_ROOT), shlex.quote(server_root(s))
    return (f"mount --bind {here} {there} && mount -t tmpfs ocslab-runs {there}/runs && "
            f"mount -t tmpfs ocslab-here {here} && mount -t tmpfs ocslab-tmp /tmp")


def _mounted(path: str) -> bool:
    """Something is mounted at ``path`` in this mount namespace (``/proc/self/mountinfo``: a bind
    mount within one file system too, which :func:`os.path.ismount` does not see)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return os.path.ismount(path)
    return any(line.split()[4] == path for line in lines if len(line.split()) > 4)


def _bridge() -> None:
    if not Path("/sys/class/net", BRIDGE).exists():
        _run(["ip", "link", "add", BRIDGE, "mtu", str(UNDERLAY_MTU), "type", "bridge"], "underlay bridge")
        _run(["ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE], "underlay address")
        _run(["ip", "link", "set", BRIDGE, "up"], "underlay bridge up")


def _start(s: LabServer, core: int | None) -> None:
    """Make server ``s``'s namespace, underlay link and daemons (module doc)."""
    run = Path(s.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    (run / "registry").mkdir(exist_ok=True)
    if not Path("/run/netns", s.netns).exists():
        _run(["ip", "netns", "add", s.netns], f"server {s.name}: namespace")
    if not Path("/sys/class/net", s.veth).exists():
        _run(["ip", "link", "add", s.veth, "mtu", str(UNDERLAY_MTU), "type", "veth", "peer", "name", "eth0",
              "netns", s.netns], f"server {s.name}: underlay link")
        _run(["ip", "link", "set", s.veth, "master", BRIDGE, "up"], f"server {s.name}: underlay link")
        _run(["ip", "addr", "add", f"{s.ip}/24", "dev", "eth0"], f"server {s.name}: address", s.netns)
        _run(["ip", "link", "set", "eth0", "mtu", str(UNDERLAY_MTU), "up"], f"server {s.name}: address", s.netns)
        _run(["ip", "link", "set", "lo", "up"], f"server {s.name}: loopback", s.netns)
    env = {"OVS_RUNDIR": s.run_dir, "OVS_DBDIR": s.run_dir, "OVS_LOGDIR": s.run_dir}
    db = run / "conf.db"
    if not db.exists():
        _run(["ovsdb-tool", "create", str(db), "/usr/share/openvswitch/vswitch.ovsschema"], f"server {s.name}: database")
    if s.pid("ovsdb-server") is None or not Path(f"/proc/{s.pid('ovsdb-server')}").exists():
        _run(["ovsdb-server", str(db), f"--remote=punix:{run}/db.sock", f"--pidfile={run}/ovsdb-server.pid",
              f"--log-file={run}/ovsdb-server.log", "--detach", "--no-chdir"], f"server {s.name}: ovsdb-server", env=env)
        _run(["ovs-vsctl", f"--db=unix:{run}/db.sock", "--no-wait", "init"], f"server {s.name}: ovsdb init", env=env)
    if s.pid("ovs-vswitchd") is None or not Path(f"/proc/{s.pid('ovs-vswitchd')}").exists():
        pin = ["taskset", "-c", str(core)] if core is not None else []
        _run(pin + ["ovs-vswitchd", f"unix:{run}/db.sock", f"--pidfile={run}/ovs-vswitchd.pid",
                    f"--log-file={run}/ovs-vswitchd.log", "--detach", "--no-chdir"],
             f"server {s.name}: ovs-vswitchd", s.netns, env)
    if not Path(run, "ssh_host_ed25519_key").exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(run / "ssh_host_ed25519_key")], f"server {s.name}: host key")
    if s.pid("sshd") is None or not Path(f"/proc/{s.pid('sshd')}").exists():
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        Path(server_root(s)).mkdir(exist_ok=True)
        Path(PROJECT_ROOT, "runs").mkdir(exist_ok=True)
        sshd = shlex.join(["/usr/sbin/sshd", "-f", str(_sshd_config(s)), "-E", str(run / "sshd.log")])
        _run(["unshare", "--mount", "--propagation", "private", "--time", f"--monotonic={clock_offset_s(s)}",
              "sh", "-c", f"{_private_files(s)} && exec {sshd}"], f"server {s.name}: sshd", s.netns)
        if _mounted(server_root(s)):
            raise LabError(f"server {s.name}: its private mounts reached this machine's namespace")


def ssh_args(server: str, config: Path | None = None) -> list[str]:
    """``ssh`` reaching ``server`` through ``config`` (default: the lab's), without a terminal."""
    return ["ssh", "-F", str(config or ssh_config()), "-o", "BatchMode=yes", "-n", server]


def reachable(server: str, config: Path | None = None) -> str | None:
    """None if ``ssh server true`` works within 10 s, else what went wrong (one line)."""
    try:
        r = subprocess.run(ssh_args(server, config) + ["true"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return f"ssh {server}: no answer in 15 s"
    return None if r.returncode == 0 else f"ssh {server}: {(r.stderr or 'exit ' + str(r.returncode)).strip()[:160]}"


def lab_up(names: list[str], pin: bool = True) -> list[LabServer]:
    """Make (or keep) the lab servers ``names`` (module doc) and return them, once each answers
    over ssh. Servers of the lab not in ``names`` are kept. With ``pin``, server k's
    ``ovs-vswitchd`` runs on core ``k mod cores``.

    :raises LabError: a name is not 1-8 lowercase letters and digits starting with a letter, a
        tool failed (the message names the server and step), or a server did not answer in 20 s.
    """
    for n in names:
        if not NAME.match(n):
            raise LabError(f"servers: {n!r} is not a server name (1-8 lowercase letters and digits, starting with a letter)")
    if len(set(names)) != len(names):
        raise LabError("servers: a name is given twice")
    _keys()
    _bridge()
    servers = lab_servers()
    known = {s.name for s in servers}
    for n in names:
        if n not in known:
            k = next(i for i in range(MAX_SERVERS) if f"{SUBNET}.{i + 1}" not in {s.ip for s in servers})
            servers.append(LabServer(n, f"{SUBNET}.{k + 1}", f"{PREFIX}{n}", f"{PREFIX}{n}", str(RUN_ROOT / n)))
    _save(servers)
    cores = os.cpu_count() or 1
    try:
        for k, s in enumerate(servers):
            if s.name in names:
                _start(s, k % cores if pin and cores > 1 else None)
        _write_ssh_config(servers)
        for s in servers:
            if s.name in names and not poll_until(lambda: reachable(s.name) is None, 20.0, interval_s=0.2):
                raise LabError(f"server {s.name}: {reachable(s.name)}")
    except LabError:
        lab_down([n for n in names if n not in known])  # nothing half-made stays
        raise
    return [s for s in servers if s.name in names]


def _end(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not poll_until(lambda: not Path(f"/proc/{pid}").exists(), 5.0, interval_s=0.02):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def processes_in(netns: str) -> list[int]:
    """Pids of the processes living in network namespace ``netns`` (a lab server's: the lab made
    it, so what lives there is the lab's)."""
    try:
        inode = os.stat(f"/run/netns/{netns}").st_ino
    except OSError:
        return []
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.stat(d / "ns" / "net").st_ino == inode:
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def lab_down(names: list[str] | None = None) -> list[str]:
    """End the lab servers ``names`` (None: every one): their sshd, ovs-vswitchd and
    ovsdb-server, by pid, then every process still living in their namespaces (sshd's sessions);
    delete their namespaces, underlay links and run directories, and the underlay bridge once no
    server is left. One line per thing removed."""
    done = []
    servers = lab_servers()
    for s in servers:
        if names is not None and s.name not in names:
            continue
        for d in ("sshd", "ovs-vswitchd", "ovsdb-server"):
            pid = s.pid(d)
            if pid is not None and Path(f"/proc/{pid}").exists():
                _end(pid)
                done.append(f"server {s.name}: {d} (pid {pid})")
        for pid in processes_in(s.netns):  # its sshd's sessions, and anything else living there
            _end(pid)
            done.append(f"server {s.name}: process {pid}")
        if Path("/sys/class/net", s.veth).exists():
            subprocess.run(["ip", "link", "del", s.veth], capture_output=True)
        if Path("/run/netns", s.netns).exists():
            subprocess.run(["ip", "netns", "del", s.netns], capture_output=True)
            done.append(f"server {s.name}: namespace {s.netns}")
        if _mounted(server_root(s)):  # never here (module doc); if it were, rmtree would empty the checkout
            done.append(f"server {s.name}: kept {s.run_dir} ({server_root(s)} is mounted here)")
        else:
            shutil.rmtree(s.run_dir, ignore_errors=True)
    kept = [s for s in servers if names is not None and s.name not in names]
    if kept:
        _save(kept)
        _write_ssh_config(kept)
        return done
    if Path("/sys/class/net", BRIDGE).exists():
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
        done.append(f"underlay bridge {BRIDGE}")
    (lab_dir() / "lab.json").unlink(missing_ok=True)
    ssh_config().unlink(missing_ok=True)
    return done


__all__ = ["LabError", "LabServer", "lab_down", "lab_servers", "lab_up", "processes_in", "reachable", "ssh_args",
           "ssh_config"]
