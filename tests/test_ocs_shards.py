"""An OCS sharded over servers (emulation/ocs_shards.py): where its ports live, the rules of a
circuit within a shard and across two, the lanes circuits take and give back, the bridges the
controller expects and the topology Mininet builds. No packets (tests/test_cluster.py runs a
sharded fabric on two lab servers)."""

from __future__ import annotations

import pytest

from emulation import dataplane as dpn
from emulation.fabric import Circuit, Configuration, PortRef
from emulation.ocs_shards import Lanes, OcsShards, server_of_gpu
from topologies.builders import ocs_star


def test_ports_live_on_their_gpus_server_and_shards_are_joined_by_as_many_lanes_as_the_smaller_has_ports():
    fabric = ocs_star(8, 1, initial="empty")
    split = OcsShards(fabric, 3)  # GPUs 0-2, 3-5, 6-7
    assert [split.shard(0, m) for m in range(1, 9)] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert [server_of_gpu(g, 8, 3) for g in range(8)] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert split.shards(0) == [0, 1, 2]
    assert (split.lanes(0, 0, 1), split.lanes(0, 1, 2), split.lanes(0, 0, 2), split.lanes(0, 1, 1)) == (3, 2, 2, 0)
    assert len(split.lane_links(0)) == 3 + 2 + 2
    assert split.bridges() == {dpn.DPID_OCS: "ocl-o0", dpn.DPID_OCS + (1 << 16): "ocl-o0s1",
                               dpn.DPID_OCS + (2 << 16): "ocl-o0s2"}
    assert [split.of_dpid(d) for d in split.bridges()] == [(0, 0), (0, 1), (0, 2)]
    assert split.of_dpid(dpn.DPID_NIC + 3) is None and split.of_dpid(dpn.DPID_EPS) is None
    assert split.of_dpid(dpn.DPID_OCS + (3 << 16)) is None  # no fourth shard
    central = OcsShards(fabric)
    assert central.bridges() == {dpn.DPID_OCS: "ocl-o0"} and not central.sharded


def test_a_circuit_within_a_shard_is_two_rules_there_and_one_across_shards_two_on_each_side_through_its_lane():
    split = OcsShards(ocs_star(4, 1, initial="empty"), 2)  # ports 1, 2 on shard 0; 3, 4 on shard 1
    s0, s1 = dpn.ocs_shard_dpid(0, 0), dpn.ocs_shard_dpid(0, 1)
    assert split.rules(0, 1, 2) == {s0: [(1, dpn.ocs_out_port(2)), (2, dpn.ocs_out_port(1))]}
    lane_on_0, lane_on_1 = dpn.ocs_lane_port(1, 1), dpn.ocs_lane_port(0, 1)
    assert split.rules(0, 2, 3, lane=1) == {s0: [(2, lane_on_0), (lane_on_0, dpn.ocs_out_port(2))],
                                            s1: [(3, lane_on_1), (lane_on_1, dpn.ocs_out_port(3))]}
    with pytest.raises(ValueError, match="crosses shards 0 and 1 and needs a lane in 0..1, got None"):
        split.rules(0, 2, 3)
    with pytest.raises(ValueError, match="got 2"):
        split.rules(0, 2, 3, lane=2)


def test_a_crossing_circuit_takes_the_lowest_free_lane_and_gives_it_back():
    split = OcsShards(ocs_star(4, 1, initial="empty"), 2)
    lanes = Lanes(split)
    c = [Circuit.of(PortRef(a, 0), PortRef(b, 0)) for a, b in ((0, 2), (1, 3), (0, 1))]
    assert lanes.take(0, c[0], 1, 3) == 0 and lanes.take(0, c[1], 2, 4) == 1
    assert lanes.take(0, c[0], 1, 3) == 0  # held already
    assert lanes.take(0, c[2], 1, 2) is None  # within shard 0
    with pytest.raises(ValueError, match="no free lane between shards 0 and 1"):
        lanes.take(0, Circuit.of(PortRef(0, 0), PortRef(3, 0)), 1, 4)
    assert lanes.give(0, c[0], 1, 3) == 0 and lanes.held(0, c[0]) is None
    assert lanes.take(0, Circuit.of(PortRef(0, 0), PortRef(3, 0)), 1, 4) == 0
    assert lanes.give(0, c[2], 1, 2) is None


def test_more_shards_than_lane_port_numbers_allow_are_refused():
    with pytest.raises(ValueError, match=f"1..{dpn.MAX_OCS_SHARDS} servers, not 17"):
        OcsShards(ocs_star(32, 1, initial="empty"), 17)


def test_the_controller_expects_every_shard_and_gives_the_initial_crossing_circuits_their_lanes():
    from controllers.state import FabricState

    fabric = ocs_star(4, 2)  # initial: ring 0-1-2-3-0; GPUs 0 and 1 on shard 0
    state = FabricState(fabric, shards=2)
    names = state.expected_dpids()
    assert names[dpn.ocs_shard_dpid(0, 0)] == "ocl-o0" and names[dpn.ocs_shard_dpid(0, 1)] == "ocl-o0s1"
    crossing = sorted(c for c in fabric.initial["ocs0"] if {c.a.gpu, c.b.gpu} in ({1, 2}, {0, 3}))
    assert len(crossing) == 2 and sorted(state.lanes.held(0, c) for c in crossing) == [0, 1]
    assert len(fabric.initial["ocs0"]) == 4
    assert all(state.lanes.held(0, c) is None for c in fabric.initial["ocs0"] - set(crossing))
    with pytest.raises(SystemExit, match="--ocslab-ocs-shards"):
        FabricState(fabric, shards=dpn.MAX_OCS_SHARDS + 1)
    assert isinstance(fabric.initial, Configuration)


def test_mininet_builds_a_shard_per_server_with_the_lanes_between_them_named_within_fifteen_characters():
    pytest.importorskip("mininet")
    from emulation.emulator.cluster import place_node
    from topologies.mininet_topos import FabricTopo

    topo = FabricTopo(ocs_star(4, 1, initial="empty"), shards=2)
    assert {"ocl-o0", "ocl-o0s1"} <= set(topo.switches())
    lanes = [(a, b, info) for a, b, info in topo.links(withInfo=True) if dpn.node_kind(a) == dpn.node_kind(b) == "o"]
    assert len(lanes) == 2
    for _a, _b, info in lanes:
        assert len(info["intfName1"]) <= 15 and len(info["intfName2"]) <= 15
        assert info["port1"] >= dpn.OCS_LANE_BASE and "bw" not in info  # a circuit's path: not shaped
    ports = {b if dpn.node_kind(b) == "o" else a: [] for a, b in topo.links() if "o" in (dpn.node_kind(a), dpn.node_kind(b))}
    assert set(ports) == {"ocl-o0", "ocl-o0s1"}
    assert [place_node(n, ["a", "b"], 4) for n in ("ocl-o0", "ocl-o0s1", "g1", "ocl-n2", "ocl-e0")] == ["a", "b", "a", "b", "a"]
    assert dpn.node_index("ocl-o0s1") == 0 and dpn.node_shard("ocl-o0s1") == 1 and dpn.node_shard("ocl-o3") == 0
