"""An OCS sharded over the servers of a fabric spread over servers.

With the OCS central (the default), every frame between two GPUs on different servers crosses
the OCS's server: in from its sender's server, out to its receiver's, and one ovs-vswitchd
forwards the whole fabric. Sharded (``emulation.ocs: sharded``), each server holds one bridge
per OCS, its **shard**, with the OCS ports of that server's GPUs (the placement of
:func:`server_of_gpu`). A circuit between two ports of one shard is a flow pair on that shard,
as on a central OCS. A circuit between two shards runs through a **lane**: a tunnel between
the two shards' servers that carries that one circuit while it stands (each lane a VXLAN device
at both ends, :mod:`emulation.emulator.cluster`). A shard pair has as many lanes as the smaller
shard has ports, enough for any set of circuits.

A reconfiguration removes a crossing circuit's flows on both shards (one barrier each, sent
together), keeps both sides dark for R and installs them on both, the same phases as on one
switch (:meth:`controllers.circuit_switch.CircuitSwitch.apply`). A lane is taken when its
circuit is installed and given back when it is removed (:class:`Lanes`), the lowest free one
first, so that equal histories use equal lanes.

Names, dpids and port numbers: :mod:`emulation.dataplane`.
"""

from __future__ import annotations

from collections import Counter

from emulation import dataplane as dpn


def server_of_gpu(gpu: int, gpus: int, servers: int) -> int:
    """The server (index) of GPU ``gpu`` of ``gpus`` spread over ``servers``: contiguous blocks,
    ``floor(gpu * servers / gpus)``, so that a Ring's neighbours share a server."""
    return gpu * servers // max(1, gpus)


class OcsShards:
    """Where the ports of every OCS of ``fabric`` live, its OCSes sharded over ``servers``
    servers (1: every OCS one bridge, on the first server).

    :param fabric: a :class:`~emulation.fabric.Fabric`.
    :raises ValueError: ``servers`` is not in ``1..MAX_OCS_SHARDS``, or a shard pair would need
        more lanes than a shard has port numbers for.
    """

    def __init__(self, fabric, servers: int = 1):
        if not 1 <= servers <= dpn.MAX_OCS_SHARDS:
            raise ValueError(f"an OCS is sharded over 1..{dpn.MAX_OCS_SHARDS} servers, not {servers}")
        self.servers = servers
        self.sharded = servers > 1
        self._shard = [[server_of_gpu(r.gpu, fabric.gpus, servers) if self.sharded else 0 for r in ocs.ports]
                       for ocs in fabric.ocs]
        self._ports = [Counter(of_port) for of_port in self._shard]
        if any(n > dpn.OCS_LANE_STRIDE for ports in self._ports for n in ports.values()):
            raise ValueError(f"a shard holds more than {dpn.OCS_LANE_STRIDE} OCS ports")

    def shard(self, k: int, port: int) -> int:
        """The shard of OCS ``k``'s port ``port`` (1-based OpenFlow number)."""
        return self._shard[k][port - 1]

    def shards(self, k: int) -> list[int]:
        """The shards OCS ``k`` has (those holding at least one of its ports), ascending."""
        return sorted(self._ports[k])

    def lanes(self, k: int, a: int, b: int) -> int:
        """Lanes between shards ``a`` and ``b`` of OCS ``k``: the smaller shard's port count
        (0 for ``a == b``)."""
        return 0 if a == b else min(self._ports[k][a], self._ports[k][b])

    def bridges(self) -> dict[int, str]:
        """``{dpid: bridge name}`` of every shard of every OCS."""
        return {dpn.ocs_shard_dpid(k, j): dpn.ocs_shard_name(k, j)
                for k in range(len(self._shard)) for j in self.shards(k)}

    def of_dpid(self, dpid: int) -> tuple[int, int] | None:
        """``(OCS, shard)`` of a shard's datapath id, or None for another bridge."""
        rest = dpid - dpn.DPID_OCS
        k, j = rest & 0xFFFF, rest >> 16
        if rest < 0 or k >= len(self._shard) or j not in self._ports[k]:
            return None
        return k, j

    def crossing(self, k: int, a: int, b: int) -> bool:
        """Whether a circuit between OCS ``k``'s ports ``a`` and ``b`` crosses two shards."""
        return self.shard(k, a) != self.shard(k, b)

    def rules(self, k: int, a: int, b: int, lane: int | None = None) -> dict[int, list[tuple[int, int]]]:
        """The flows of the circuit between OCS ``k``'s ports ``a`` and ``b`` (1-based), per
        shard dpid: ``[(in_port, out_port), ...]``. Within a shard: ``a`` to ``b``'s output and
        back. Across two (``lane`` given): on each side, its port to the lane and the lane to
        its port's output.

        :raises ValueError: a crossing circuit without a lane, or a lane out of range.
        """
        ja, jb = self.shard(k, a), self.shard(k, b)
        if ja == jb:
            return {dpn.ocs_shard_dpid(k, ja): [(a, dpn.ocs_out_port(b)), (b, dpn.ocs_out_port(a))]}
        if lane is None or not 0 <= lane < self.lanes(k, ja, jb):
            raise ValueError(f"OCS {k}: the circuit {a}-{b} crosses shards {ja} and {jb} and needs a lane "
                             f"in 0..{self.lanes(k, ja, jb) - 1}, got {lane}")
        out: dict[int, list[tuple[int, int]]] = {}
        for me, mine, peer in ((ja, a, jb), (jb, b, ja)):
            via = dpn.ocs_lane_port(peer, lane)
            out[dpn.ocs_shard_dpid(k, me)] = [(mine, via), (via, dpn.ocs_out_port(mine))]
        return out

    def lane_links(self, k: int) -> list[tuple[int, int, int]]:
        """Every lane of OCS ``k``: ``(shard a, shard b, lane)`` with ``a < b``."""
        js = self.shards(k)
        return [(a, b, lane) for i, a in enumerate(js) for b in js[i + 1:] for lane in range(self.lanes(k, a, b))]


class Lanes:
    """Which lane each circuit crossing two shards holds (module doc); not thread-safe (the
    controller's state lock guards it).

    :param shards: the fabric's :class:`OcsShards`.
    """

    def __init__(self, shards: OcsShards):
        self.shards = shards
        self._held: dict[tuple[int, object], int] = {}  # (OCS, circuit) -> lane
        self._busy: dict[tuple[int, int, int], set[int]] = {}  # (OCS, shard a, shard b) -> lanes

    def take(self, k: int, circuit, a: int, b: int) -> int | None:
        """The lane ``circuit`` (between OCS ``k``'s ports ``a`` and ``b``) holds from now on:
        the lowest free one between its shards (the one it holds already, if any); None for a
        circuit within a shard.

        :raises ValueError: no lane is free (more crossing circuits than the smaller shard has ports).
        """
        if not self.shards.crossing(k, a, b):
            return None
        if (k, circuit) in self._held:
            return self._held[k, circuit]
        pair = (k, *sorted((self.shards.shard(k, a), self.shards.shard(k, b))))
        busy = self._busy.setdefault(pair, set())
        lane = next((i for i in range(self.shards.lanes(*pair)) if i not in busy), None)
        if lane is None:
            raise ValueError(f"OCS {k}: no free lane between shards {pair[1]} and {pair[2]}")
        busy.add(lane)
        self._held[k, circuit] = lane
        return lane

    def held(self, k: int, circuit) -> int | None:
        """The lane ``circuit`` of OCS ``k`` holds, or None."""
        return self._held.get((k, circuit))

    def give(self, k: int, circuit, a: int, b: int) -> int | None:
        """Give back the lane ``circuit`` held (the lane, or None if it held none)."""
        lane = self._held.pop((k, circuit), None)
        if lane is not None:
            self._busy[(k, *sorted((self.shards.shard(k, a), self.shards.shard(k, b))))].discard(lane)
        return lane


__all__ = ["Lanes", "OcsShards", "server_of_gpu"]
