"""What an emulation has created on this machine, recorded as it is created, so that nothing of
ours outlives a run, even one killed with SIGKILL, and nothing of anyone else's is touched.

- **One emulation at a time.** Runs share the root network namespace (their veths, the OVS
  daemon, the CPU that calibration measures), so a run holds :data:`LOCK_NAME`, an abstract
  Unix socket: it belongs to the network namespace, which is exactly what runs share, and the
  kernel releases it when its holder dies, however it dies. A second run is refused with the
  holder's pid, command line and run directory (:class:`Busy`).
- **Names.** Every bridge and root-namespace interface we create starts with
  :data:`emulation.dataplane.PREFIX` (``ocl-``); GPU hosts' interfaces live in namespaces that
  end with their processes.
- **Marker.** Every process a run starts (the controller, Mininet's node shells, agents, torch
  ranks, probes) carries ``OCSLAB_RUN=<run id>`` in its environment.
- **Registry.** ``/run/ocslab/<run id>.json`` names the holder (pid and kernel start time, so a
  reused pid is not mistaken for it), its command line and run directory, and what cannot be
  found by name: the buffer size of Open vSwitch's send socket before the run raised it, and the
  kernel's boot id. ``/run`` is not a tmpfs on every machine (these VMs keep it on disk, and a
  machine image taken mid-run carries it into the next boot), so a record from an earlier boot
  is *expired*: its processes, namespaces and veths, and the Open vSwitch process whose socket it
  raised, ended with that boot; the run that takes the machine drops such records (its bridges,
  kept in Open vSwitch's database across boots, are still found by name as leftovers).

- **Servers.** A fabric spread over servers (:mod:`emulation.emulator.cluster`) takes each
  server's lock too, by a process there (:func:`hold`) that writes its own entry in that
  server's registry and lives as long as the run's ssh connection. The run's entry here names
  the servers, so :func:`clean` also cleans every server of a dead run
  (``python -m emulation.emulator.registry clean`` there). ``OCSLAB_REGISTRY_DIR`` moves a
  registry (the lab's servers, which share this machine's ``/run``, each keep their own).

A run's entry whose holder is gone, a bridge or interface with our prefix, or a marked process
of a run that is not alive are *leftovers*: :func:`leftovers` finds them (every emulation checks
at start and refuses to build on them), :func:`clean` (``ocslab clean``) removes exactly them and
says what it removed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.ovs_sockets import restore_send_buffers
from emulation.emulator.sites import MARKER, ClusterError, Site
from emulation.poll import poll_until

LOCK_NAME = "ocslab-emulation"
REGISTRY_DIR = Path(os.environ.get("OCSLAB_REGISTRY_DIR") or "/run/ocslab")


class Busy(RuntimeError):
    """Another emulation holds this machine (the message names it)."""


def _start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def boot_id() -> str:
    """The running kernel's boot id (a UUID that changes at every boot), or '' if unreadable."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int, start: int | None) -> bool:
    return start is not None and _start_time(pid) == start


def _marker_of(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(MARKER.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def marked_processes() -> dict[int, str]:
    """``{pid: run id}`` of every process carrying the marker (any run)."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            run = _marker_of(int(d.name))
            if run is not None:
                out[int(d.name)] = run
    return out


def our_bridges() -> list[str]:
    """Open vSwitch bridges whose name has our prefix."""
    r = subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True, text=True)
    return [b for b in r.stdout.split() if b.startswith(dpn.PREFIX)]


def our_interfaces() -> list[str]:
    """Root-namespace network interfaces whose name has our prefix."""
    r = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    names = [line.split(":", 2)[1].strip().split("@")[0] for line in r.stdout.splitlines() if ":" in line]
    return [n for n in names if n.startswith(dpn.PREFIX)]


@dataclass
class Entry:
    """One run's registry record (module doc)."""

    run_id: str
    pid: int
    start: int | None
    argv: list[str]
    run_dir: str
    started_at: float
    send_socket: list[list[int]] = field(default_factory=list)  # [[ovs pid, fd, bytes before], ...]
    #: Open vSwitch's pmd-cpu-mask before the run set its own ([] while untouched; [None]: unset)
    pmd_mask: list = field(default_factory=list)
    #: [ovs-vswitchd pid, [its cores before the run pinned it]] ([] while untouched)
    ovs_affinity: list = field(default_factory=list)
    boot: str = ""  # kernel boot id when written ('' in records of older ocslab: taken as this boot)
    #: the servers of a fabric spread over servers: {"names": [...], "ssh_config": path or ""}
    servers: dict = field(default_factory=dict)

    @property
    def expired(self) -> bool:
        """Written in an earlier boot of this machine (module doc)."""
        return bool(self.boot) and self.boot != boot_id()

    @property
    def alive(self) -> bool:
        return not self.expired and _alive(self.pid, self.start)

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.started_at))
        cmd = " ".join(self.argv)
        return f"pid {self.pid} `{cmd if len(cmd) <= 60 else cmd[:57] + '...'}` (since {when}, run dir {self.run_dir})"


def entries() -> list[Entry]:
    """Every registry record (live or not); unreadable files are skipped."""
    out = []
    for p in sorted(REGISTRY_DIR.glob("*.json")) if REGISTRY_DIR.is_dir() else []:
        try:
            out.append(Entry(**json.loads(p.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return out


def _take_lock(busy: str) -> socket.socket:
    """Bind the abstract socket :data:`LOCK_NAME` (module doc) and return it: the hold lasts until
    it is closed or this process dies.

    :raises Busy: ``busy`` with ``{who}`` replaced by the holder's description.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + LOCK_NAME)
    except OSError:
        sock.close()
        holders = [e for e in entries() if e.alive]
        who = holders[0].describe() if holders else "a process of another mount namespace or an older ocslab"
        raise Busy(busy.format(who=who)) from None
    sock.set_inheritable(False)
    return sock


def _command() -> list[str]:
    """This process's command line, ``ocslab ...`` for the CLI however it was started."""
    argv = list(sys.argv) or ["python"]
    head = Path(argv[0]).name
    if head in ("cli.py", "__main__.py") and Path(argv[0]).parent.name == "emulation":
        head = "ocslab"
    return [head, *argv[1:]]


class Registration:
    """This process's hold on the machine for one emulation: the lock, its registry entry and the
    marker in ``os.environ`` (so that every process started meanwhile carries it).

    :raises Busy: another live emulation holds the lock (named in the message).
    """

    def __init__(self, run_dir: Path):
        self._sock = _take_lock("another ocslab emulation holds this machine: {who}; one emulation at a time "
                                "(they share the CPU that calibration measures)")
        self.entry = Entry(run_id=f"{os.getpid()}-{time.time_ns()}", pid=os.getpid(), start=_start_time(os.getpid()),
                           argv=_command(), run_dir=str(run_dir),
                           started_at=time.time(), boot=boot_id())
        self.expired = drop_expired()
        self._path = REGISTRY_DIR / f"{self.entry.run_id}.json"
        self._old_marker = os.environ.get(MARKER)
        os.environ[MARKER] = self.entry.run_id
        self.save()

    def save(self) -> None:
        """Write the entry (atomically)."""
        REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entry.__dict__))
        tmp.replace(self._path)

    def release(self) -> None:
        """Drop the entry, the marker and the lock (at the end of a clean teardown)."""
        self._path.unlink(missing_ok=True)
        if self._old_marker is None:
            os.environ.pop(MARKER, None)
        else:
            os.environ[MARKER] = self._old_marker
        self._sock.close()


def drop_expired() -> list[Entry]:
    """Delete the records written in an earlier boot (module doc) and return them. Call it
    holding the lock."""
    gone = [e for e in entries() if e.expired]
    for e in gone:
        (REGISTRY_DIR / f"{e.run_id}.json").unlink(missing_ok=True)
    return gone


@dataclass
class Leftovers:
    """What dead runs left behind (module doc)."""

    entries: list[Entry]
    processes: dict[int, str]
    bridges: list[str]
    interfaces: list[str]

    def __bool__(self) -> bool:
        return bool(self.entries or self.processes or self.bridges or self.interfaces)

    def summary(self) -> str:
        parts = [f"{len(self.entries)} run record(s)" if self.entries else "",
                 f"{len(self.processes)} process(es)" if self.processes else "",
                 f"{len(self.bridges)} bridge(s)" if self.bridges else "",
                 f"{len(self.interfaces)} interface(s)" if self.interfaces else ""]
        runs = "; ".join(e.describe() for e in self.entries[:2])
        return ", ".join(p for p in parts if p) + (f" of {runs}" if runs else "")


def leftovers(own: str | None = None) -> Leftovers:
    """What runs that are no longer alive left behind. Call it holding the lock (then no other
    run is alive and every prefixed bridge or interface is a leftover); ``own`` is the caller's
    run id, whose entry and processes are not leftovers."""
    records = entries()
    dead = [e for e in records if e.run_id != own and not e.alive]
    live = {e.run_id for e in records if e.alive} | {own}
    procs = {pid: run for pid, run in marked_processes().items() if run not in live and pid != os.getpid()}
    return Leftovers(dead, procs, our_bridges(), our_interfaces())


def clean() -> list[str]:
    """Remove every leftover (:func:`leftovers`): end marked processes of dead runs by pid
    (SIGTERM, then SIGKILL after 2 s), delete our bridges and interfaces, give Open vSwitch's send
    socket its recorded size back (and its PMD core mask and ovs-vswitchd's cores), drop dead runs' records. Returns one line per thing removed.

    :raises Busy: an emulation is running (nothing is then removed).
    """
    hold = _take_lock("an ocslab emulation is running: {who}; nothing removed")
    try:
        dropped = drop_expired()
        left = leftovers()
        done = [f"run record of {e.describe()} (written in an earlier boot)" for e in dropped] + _remove(left)
        done += _end_ssh_masters()
        # then every server of those runs, this machine's lock still held (no run starts meanwhile);
        # their ssh connections and lock holders ended with this machine's leftovers
        for e in [*dropped, *left.entries]:
            done += _clean_servers(e.servers)
    finally:
        hold.close()
    return done


def _end_ssh_masters() -> list[str]:
    """Ask every multiplexed ssh connection a dead run left (its control socket
    ``/run/ocslab/ssh-<pid>-<server>``, :class:`emulation.emulator.sites.Site`) to exit. A master
    rewrites its own environment (its process title), so the run marker cannot find it; its
    socket's name says whose it was. The same for the aliases of the control sockets it forwarded,
    and, on a server, for the forwarded sockets sshd left in ``/tmp`` (nobody answers them)."""
    done = []
    for sock in sorted(REGISTRY_DIR.glob("ssh-*-*")) if REGISTRY_DIR.is_dir() else []:
        pid = sock.name.split("-")[1]
        if pid.isdigit() and _start_time(int(pid)) is not None:
            continue  # its run is alive
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "ocslab-master"], capture_output=True,
                       timeout=10)
        sock.unlink(missing_ok=True)
        done.append(f"ssh connection {sock.name}")
    # the short aliases of control sockets forwarded to servers (ServerRun.reach), and the servers'
    # ovs-vswitchd control sockets forwarded here (ServerRun.ctl_paths), by their run's pid
    for alias in sorted([*REGISTRY_DIR.glob("ctl-*-*.sock"), *REGISTRY_DIR.glob("ovs-*-*.sock")]
                        if REGISTRY_DIR.is_dir() else []):
        pid = alias.name.split("-")[1]
        if not (pid.isdigit() and _start_time(int(pid)) is not None):
            alias.unlink(missing_ok=True)
            done.append(f"control socket alias {alias.name}")
    # on a server: the ends of those forwardings, which sshd leaves when the connection ends
    for end in sorted(Path("/tmp").glob("ocslab-ctl-*.sock")):
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(str(end))
        except OSError:  # nobody forwards it any more
            end.unlink(missing_ok=True)
            done.append(f"forwarded control socket {end}")
        finally:
            probe.close()
    return done


def _clean_servers(servers: dict) -> list[str]:
    """Run :func:`clean` on every server of ``servers`` (an entry's record); lines prefixed with
    the server's name (a server that cannot be reached says so)."""
    if not servers.get("names"):
        return []
    out = []
    for name in servers["names"]:
        if name == "localhost":
            continue
        site = Site(name, Path(servers["ssh_config"]) if servers.get("ssh_config") else None)
        try:
            r = site.run(site.module("emulation.emulator.registry", "clean"), timeout=120)
            lines = json.loads(r.stdout) if r.returncode == 0 else [f"not cleaned: {(r.stderr or r.stdout).strip()[:160]}"]
        except (ClusterError, ValueError) as e:
            lines = [f"not cleaned: {e}"]
        finally:
            site.close()
        out += [f"server {name}: {line}" for line in lines]
    return out


def end(run_id: str, host_pids: list[int]) -> list[int]:
    """End (SIGKILL) the processes of run ``run_id`` in the network namespaces of the processes
    ``host_pids`` (a run's GPU hosts on this server), those processes themselves excepted, and
    return their pids: what a run's teardown leaves running on a server when it stops only the
    local ssh client of a remote agent."""
    spaces = set()
    for pid in host_pids:
        try:
            spaces.add(os.readlink(f"/proc/{pid}/ns/net"))
        except OSError:
            pass
    ended = []
    for pid, run in marked_processes().items():
        if run != run_id or pid in host_pids or pid == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{pid}/ns/net") in spaces:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
        except OSError:
            pass
    return ended


def hold(run_id: str) -> int:
    """Hold this machine's (or server's) lock for run ``run_id`` of another machine: bind the
    lock, write an entry for it with this process as holder, print ``held`` (or ``busy`` and exit
    1), then wait until stdin closes (the run's ssh connection ends) and drop the entry."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + LOCK_NAME)
    except OSError:
        print("busy", flush=True)
        return 1
    entry = Entry(run_id=run_id, pid=os.getpid(), start=_start_time(os.getpid()), argv=_command(),
                  run_dir="", started_at=time.time(), boot=boot_id())
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    path = REGISTRY_DIR / f"{run_id}.json"
    path.write_text(json.dumps(entry.__dict__))
    print("held", flush=True)
    try:
        sys.stdin.read()
    finally:
        path.unlink(missing_ok=True)
        sock.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m emulation.emulator.registry leftovers | clean | hold RUN_ID | end RUN_ID PID...``:
    what a server of a fabric spread over servers is asked (module doc). ``leftovers`` prints a
    summary (nothing if none), ``clean`` the JSON list of what it removed, ``end`` that of the
    pids it ended (:func:`end`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["leftovers"]:
        left = leftovers(own=os.environ.get(MARKER))
        print(left.summary() if left else "")
        return 0
    if args[:1] == ["clean"]:
        try:
            print(json.dumps(clean()))
        except Busy as e:
            print(str(e), file=sys.stderr)
            return 1
        return 0
    if args[:1] == ["hold"] and len(args) == 2:
        return hold(args[1])
    if args[:1] == ["end"] and len(args) >= 2 and all(a.isdigit() for a in args[2:]):
        print(json.dumps(end(args[1], [int(a) for a in args[2:]])))
        return 0
    print("usage: python -m emulation.emulator.registry leftovers | clean | hold RUN_ID | end RUN_ID PID...",
          file=sys.stderr)
    return 2



def _remove(left: Leftovers) -> list[str]:
    done = []
    for pid in left.processes:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 2.0
    for pid, run in left.processes.items():
        gone = poll_until(lambda: _start_time(pid) is None, max(0.0, deadline - time.monotonic()), interval_s=0.02)
        if not gone:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        done.append(f"process {pid} (run {run})")
    for b in left.bridges:
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", b], capture_output=True)
        done.append(f"bridge {b}")
    for i in our_interfaces():
        if Path("/sys/class/net", i).exists():  # deleting a veth end deletes its peer
            subprocess.run(["ip", "link", "del", i], capture_output=True)
            done.append(f"interface {i}")
    for e in left.entries:
        for pid, fd, size in restore_send_buffers(e.send_socket):
            done.append(f"Open vSwitch send socket (pid {pid} fd {fd}) back to {size} bytes")
        if e.pmd_mask:
            from emulation.emulator.pmd import set_mask

            set_mask(e.pmd_mask[0])
            done.append(f"Open vSwitch's pmd-cpu-mask back to {e.pmd_mask[0] or 'unset'}")
        if e.ovs_affinity and _start_time(e.ovs_affinity[0]) is not None:
            from emulation.emulator.steering import SteeringError, pin

            try:
                pin(*e.ovs_affinity)
                done.append(f"ovs-vswitchd (pid {e.ovs_affinity[0]}) back on cores {e.ovs_affinity[1]}")
            except SteeringError as err:
                done.append(f"ovs-vswitchd's cores not put back: {err}")
        (REGISTRY_DIR / f"{e.run_id}.json").unlink(missing_ok=True)
        done.append(f"run record of {e.describe()}")
    return done


if __name__ == "__main__":
    sys.exit(main())
