"""Where a command for one server's root namespace runs: this machine, or a server of a fabric
spread over servers (:mod:`emulation.emulator.cluster`) over one multiplexed ssh connection.

Every process a run starts carries the run marker :data:`MARKER` in its environment (this
machine: inherited; a server: :func:`remote_env`), which is how :mod:`emulation.emulator.registry`
finds what a killed run left.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: Environment variable naming the run a process belongs to.
MARKER = "OCSLAB_RUN"
#: How long a server has to answer that it holds its run lock (s).
LOCK_TIMEOUT_S = 30.0
#: Where ocslab is here, and on a server that does not say otherwise (:data:`ROOT_VARIABLE`).
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
#: The environment variable that names where ocslab is on a server (its sshd's ``SetEnv``, or
#: ``~/.ssh/environment`` with ``PermitUserEnvironment``); unset there: :data:`PROJECT_ROOT`.
ROOT_VARIABLE = "OCSLAB_ROOT"


class ClusterError(RuntimeError):
    """A server could not be reached or refused a step (the message names the server)."""


@dataclass
class Result:
    """What a command on a site printed (``stdout``, ``stderr``) and its exit status."""

    returncode: int
    stdout: str
    stderr: str


class Site:
    """Where commands for one server's root namespace run: this machine (``name`` is
    ``localhost``) or a server over ssh (``config``: ssh client configuration, ``-F``). Over ssh
    the connection is multiplexed (a ControlMaster per run, ended by :meth:`close`), so a
    command costs a few milliseconds (the Mininet nodes on that server share it:
    :attr:`control_path`).

    """

    def __init__(self, name: str, config: Path | None = None, control_dir: Path | None = None):
        self.name = name
        self.config = config
        self.remote = name != "localhost"
        self.control_path = str((control_dir or Path("/run/ocslab")) / f"ssh-{os.getpid()}-{name}")
        self._root: str | None = None if self.remote else PROJECT_ROOT
        self._lock: subprocess.Popen | None = None
        self._forwarded: list[str] = []
        self._fetched: list[str] = []  # -L forwardings: "local:remote"

    @property
    def root(self) -> str:
        """Where ocslab is on the server: its :data:`ROOT_VARIABLE`, else :data:`PROJECT_ROOT`
        (asked once).

        :raises ClusterError: ssh could not reach the server."""
        if self._root is None:
            self._root = self.run(["sh", "-c", f'printf %s "${ROOT_VARIABLE}"']).stdout.strip() or PROJECT_ROOT
        return self._root

    def python(self) -> str:
        """The Python that runs ocslab on the server: this one's path under its :attr:`root` when
        it lies in this checkout (its virtual environment), else the same path."""
        rel = os.path.relpath(sys.executable, PROJECT_ROOT)
        return sys.executable if rel.startswith("..") else str(Path(self.root) / rel)

    def module(self, module: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
        """``python -m module args`` in ocslab's directory on the server (:attr:`root`, its
        :meth:`python`), with ``env`` and the run marker (:func:`remote_env`)."""
        return remote_env([self.python(), "-m", module, *args], self.root, env or {})

    def forward(self, local: Path, remote: str) -> None:
        """Make the Unix socket ``local`` of this machine answer at ``remote`` on the server, over
        the run's ssh connection (``ssh -O forward -R``); undone by :meth:`close`.

        :raises ClusterError: ssh refused the forwarding."""
        self._ssh_forward("-R", f"{remote}:{local}", f"the control socket to {remote}")
        self._forwarded.append(f"{remote}:{local}")

    def forward_here(self, local: Path, remote: str) -> None:
        """Make the server's Unix socket ``remote`` answer at ``local`` on this machine, over the
        run's ssh connection (``ssh -O forward -L``); undone by :meth:`unforward_here` (and
        :meth:`close`).

        :raises ClusterError: ssh refused the forwarding."""
        self._ssh_forward("-L", f"{local}:{remote}", f"{remote} here")
        self._fetched.append(f"{local}:{remote}")

    def _ssh_forward(self, flag: str, spec: str, what: str) -> None:
        """``ssh -O forward FLAG SPEC`` on the run's connection. :raises ClusterError: refused or
        not done in 30 s (``what`` names the socket)."""
        try:
            r = subprocess.run([*self.ssh()[:-1], "-O", "forward", flag, spec, self.name],
                               capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"server {self.name}: ssh did not forward {what} in 30 s") from None
        if r.returncode:
            raise ClusterError(f"server {self.name}: cannot forward {what}: {r.stderr.strip()[:160]}")

    def ssh(self) -> list[str]:
        """The ssh command line reaching this server (empty for this machine)."""
        if not self.remote:
            return []
        return ["ssh", *(["-F", str(self.config)] if self.config else []), "-o", "BatchMode=yes",
                "-o", f"SendEnv={MARKER}",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path}", "-o", "ControlPersist=600",
                self.name]

    def run(self, args: list[str], timeout: float = 30.0, input: str | None = None) -> Result:
        """Run ``args`` in the server's root namespace.

        :raises ClusterError: ssh could not reach the server (exit 255) or the command timed out.
        """
        cmd = args if not self.remote else [*self.ssh(), shlex.join(args)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                               stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"server {self.name}: `{shlex.join(args)[:80]}` did not finish in {timeout:g} s") from None
        if self.remote and r.returncode == 255:
            raise ClusterError(f"server {self.name}: ssh failed: {r.stderr.strip()[:160]}")
        return Result(r.returncode, r.stdout, r.stderr)

    def switch_answers(self) -> bool:
        """Open vSwitch's daemon there answers ``ovs-appctl version`` within 2 s (a daemon that
        stopped, or a server that cannot be reached, does not)."""
        try:
            return self.run(["ovs-appctl", "-t", "ovs-vswitchd", "--timeout=2", "version"], timeout=10).returncode == 0
        except ClusterError:
            return False

    def out(self, args: list[str], timeout: float = 30.0) -> str:
        """``run(args).stdout``."""
        return self.run(args, timeout).stdout

    def read(self, paths: list[str]) -> dict[str, str]:
        """``{path: text}`` of the files among ``paths`` that exist there (one command)."""
        if not self.remote:
            out = {}
            for p in paths:
                try:
                    out[p] = Path(p).read_text()
                except OSError:
                    pass
            return out
        script = "import json,sys\nd={}\nfor p in sys.argv[1:]:\n try: d[p]=open(p).read()\n except OSError: pass\nprint(json.dumps(d))"
        r = self.run(["python3", "-c", script, *paths])
        return json.loads(r.stdout or "{}")

    def hold_lock(self) -> str | None:
        """Take the emulation lock of this server's network namespace (the abstract socket
        :data:`emulation.emulator.registry.LOCK_NAME`) for this run (its ``OCSLAB_RUN``) with a
        process there (:func:`emulation.emulator.registry.hold`) that holds it until this run's
        ssh connection closes, however the run ends. None if held, else the refusal."""
        if not self.remote:
            return None
        cmd = self.module("emulation.emulator.registry", "hold", os.environ.get(MARKER, ""))
        self._lock = subprocess.Popen([*self.ssh()[:-1], "-T", self.name, shlex.join(cmd)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self._lock.stdout], [], [], LOCK_TIMEOUT_S)
        line = self._lock.stdout.readline().strip() if ready else ""
        if line == "held":
            return None
        err = ""
        if ready:  # it answered otherwise, or exited
            try:
                self._lock.wait(5)
                err = self._lock.stderr.read().strip()
            except subprocess.TimeoutExpired:
                pass
        self.release_lock()
        return (f"server {self.name}: another ocslab emulation holds it" if line == "busy"
                else f"server {self.name}: the run lock could not be taken "
                     f"({err[-160:] or f'no answer in {LOCK_TIMEOUT_S:g} s'})")

    def release_lock(self) -> None:
        """Let the lock holder exit (its stdin closes) and reap it."""
        if self._lock is not None:
            try:
                self._lock.stdin.close()
                self._lock.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._lock.kill()
                self._lock.wait()
            for f in (self._lock.stdout, self._lock.stderr):
                f.close()
            self._lock = None

    def unforward_here(self) -> None:
        """Cancel the forwardings :meth:`forward_here` made and remove their sockets here."""
        for spec in self._fetched:
            if Path(self.control_path).exists():
                subprocess.run([*self.ssh()[:-1], "-O", "cancel", "-L", spec, self.name], capture_output=True,
                               timeout=30)
            Path(spec.split(":", 1)[0]).unlink(missing_ok=True)
        self._fetched.clear()

    def unforward(self) -> None:
        """Cancel the forwardings :meth:`forward` made and remove their sockets on the server."""
        if self._forwarded and Path(self.control_path).exists():
            try:
                for spec in self._forwarded:
                    subprocess.run([*self.ssh()[:-1], "-O", "cancel", "-R", spec, self.name], capture_output=True,
                                   timeout=30)
                self.run(["rm", "-f", *(spec.rsplit(":", 1)[0] for spec in self._forwarded)])
            except (ClusterError, subprocess.TimeoutExpired):
                pass  # best effort: ocslab clean removes what is left there
        self._forwarded.clear()

    def close(self) -> None:
        """Cancel the forwardings, release the lock and end the multiplexed ssh connection (if
        any)."""
        self.unforward()
        self.unforward_here()
        self.release_lock()
        if self.remote and Path(self.control_path).exists():
            subprocess.run([*self.ssh()[:-1], "-O", "exit", self.name], capture_output=True, timeout=10)


LOCAL = Site("localhost")


def remote_env(args: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """``args`` wrapped to run on a server in directory ``cwd`` (a path there, as given) with
    ``env`` (plus the run marker): ssh passes neither a working directory nor an environment."""
    marker = {MARKER: os.environ[MARKER]} if MARKER in os.environ else {}
    assigns = [f"{k}={v}" for k, v in {**env, **marker}.items()]
    return ["env", *assigns, "sh", "-c", 'cd "$0" && exec "$@"', str(cwd), *args]


__all__ = ["ClusterError", "LOCAL", "MARKER", "PROJECT_ROOT", "ROOT_VARIABLE", "Result", "Site", "remote_env"]
