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
#: Where ocslab is, here and on every server (the same path: agents run from it).
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


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
    :attr:`control_path`)."""

    def __init__(self, name: str, config: Path | None = None, control_dir: Path | None = None):
        self.name = name
        self.config = config
        self.remote = name != "localhost"
        self.control_path = str((control_dir or Path("/run/ocslab")) / f"ssh-{os.getpid()}-{name}")
        self._lock: subprocess.Popen | None = None

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
        cmd = remote_env([sys.executable, "-m", "emulation.emulator.registry", "hold", os.environ.get(MARKER, "")],
                         PROJECT_ROOT, {})
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

    def close(self) -> None:
        """Release the lock and end the multiplexed ssh connection (if any)."""
        self.release_lock()
        if self.remote and Path(self.control_path).exists():
            subprocess.run([*self.ssh()[:-1], "-O", "exit", self.name], capture_output=True, timeout=10)


LOCAL = Site("localhost")


def remote_env(args: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """``args`` wrapped to run on a server in directory ``cwd`` with ``env`` (plus the run
    marker): ssh passes neither a working directory nor an environment."""
    marker = {MARKER: os.environ[MARKER]} if MARKER in os.environ else {}
    assigns = [f"{k}={v}" for k, v in {**env, **marker}.items()]
    return ["env", *assigns, "sh", "-c", 'cd "$0" && exec "$@"', str(Path(cwd).resolve()), *args]


__all__ = ["ClusterError", "LOCAL", "MARKER", "PROJECT_ROOT", "Result", "Site", "remote_env"]
