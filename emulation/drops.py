"""Where a packet-backend run lost packets: the categories, and what a result says about them.

A packet the emulated fabric loses is either a *result* (modelled behaviour, which a real fabric
would show too) or an *artefact* of the emulator (which makes the measurement wrong):

modelled

- ``congestion``: the queue of a shaped fabric link overflowed;
- ``dark``: a packet reached an OCS port that had no circuit (a dark window, or a rotor slot
  that does not join the pair); where a NIC routes by channel whatever the circuits (one-port
  GPUs, parallel OCSes), also a packet sent outside its window that the next circuit carried to
  another GPU's NIC.

artefacts (a run with any fails its sanity check, :func:`emulation.checks.check_run`)

- ``veth``: a veth pair could not hand a packet to its peer;
- ``backlog``: the kernel's per-CPU input backlog was full;
- ``ovs_rx``: the packet socket on which Open vSwitch's userspace datapath receives from one of
  our ports was full;
- ``no_route``: a GPU's NIC (or an EPS) had no rule for a packet;
- ``datapath``: upcalls Open vSwitch's userspace datapath lost;
- ``ovs_tx`` (whole run only): packets the GPUs sent that neither arrived nor were counted
  anywhere else. Open vSwitch's userspace datapath sends on every port through one packet socket,
  and a packet it cannot queue there (the socket's send buffer is full) is dropped without a
  counter: conservation is the only way to see it.

The packet backend reads them with :mod:`emulation.emulator.counters`; a run's ``drops`` and
every step's ``drops`` in ``result.json`` hold one count per category.
"""

from __future__ import annotations

MODELLED = ("congestion", "dark")
ARTEFACTS = ("veth", "backlog", "ovs_rx", "no_route", "datapath", "ovs_tx")


def summarise(drops: dict) -> dict:
    """``{"modelled": n, "artefacts": n}`` of a drops dict (missing categories count 0)."""
    return {"modelled": sum(drops.get(k, 0) for k in MODELLED),
            "artefacts": sum(drops.get(k, 0) for k in ARTEFACTS)}


def artefact_problem(drops: dict) -> str | None:
    """One line naming where the emulator lost packets, or None if it lost none."""
    parts = [f"{k} {drops[k]}" for k in ARTEFACTS if drops.get(k)]
    if not parts:
        return None
    worst = sorted((drops.get("where") or {}).items(), key=lambda kv: -kv[1])[:3]
    detail = f" (most at {', '.join(f'{k}: {v}' for k, v in worst)})" if worst else ""
    return f"emulator drops: {', '.join(parts)}{detail}"
