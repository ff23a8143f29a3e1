"""A census of what an emulation could leave behind on this machine, to compare before and after
(the leak tests in ``tests/test_lifecycle.py``).

Counted: processes that are this process's descendants or carry an ocslab run marker
(:mod:`emulation.emulator.registry`), Open vSwitch bridges and ports, root-namespace network
interfaces, network namespaces held by any process, qdiscs of the root namespace, files in
the system temporary directory, and this process's open file descriptors.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

from emulation.emulator.registry import marked_processes


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int(Path(d, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(d.name))
    return out


def descendants(pid: int | None = None) -> set[int]:
    """Pids of every descendant of ``pid`` (default: this process)."""
    tree, todo, seen = _children(), [pid or os.getpid()], set()
    while todo:
        for c in tree.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _lines(args: list[str]) -> frozenset[str]:
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    return frozenset(x.strip() for x in r.stdout.splitlines() if x.strip())


@dataclass(frozen=True)
class Census:
    """What exists now (each field a frozenset of names, ids or command lines)."""

    processes: frozenset[str]
    bridges: frozenset[str]
    ports: frozenset[str]
    interfaces: frozenset[str]
    namespaces: frozenset[str]
    qdiscs: frozenset[str]
    tmp_files: frozenset[str]
    fds: frozenset[str]

    def diff(self, other: Census) -> dict[str, dict[str, list[str]]]:
        """``{field: {"added": [...], "removed": [...]}}`` for every field that differs."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out[f.name] = {"added": sorted(b - a)[:10], "removed": sorted(a - b)[:10]}
        return out

    def sizes(self) -> dict[str, int]:
        return {f.name: len(getattr(self, f.name)) for f in fields(self)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def take() -> Census:
    """Count now (root needed for other processes' namespaces and environments)."""
    pids = descendants() | set(marked_processes())
    procs = frozenset(f"{p} {_cmdline(p)}" for p in pids if _cmdline(p))
    namespaces = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                namespaces.add(os.readlink(d / "ns" / "net"))
            except OSError:
                pass
    ifaces = _lines(["ip", "-o", "link", "show"])
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.add(f"{fd} {os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            pass  # the descriptor listdir itself used
    return Census(
        processes=procs,
        bridges=_lines(["ovs-vsctl", "--timeout=10", "list-br"]),
        ports=_lines(["ovs-vsctl", "--timeout=10", "--format=csv", "--no-headings", "--columns=name", "list", "port"]),
        interfaces=frozenset(x.split(":", 2)[1].strip().split("@")[0] for x in ifaces if ":" in x),
        namespaces=frozenset(namespaces),
        qdiscs=_lines(["tc", "qdisc", "show"]),
        tmp_files=frozenset(os.listdir(tempfile.gettempdir())),
        fds=frozenset(fds),
    )


def main() -> int:
    """``python -m emulation.emulator.census``: print this machine's (or server's) census as JSON
    (``{field: [sorted names]}``), which the cluster tests take on every server."""
    import json

    c = take()
    print(json.dumps({f.name: sorted(getattr(c, f.name)) for f in fields(c)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
