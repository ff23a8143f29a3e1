"""Multi-tenant racks on the flow backend: the torus's stranded bandwidth, the photonic allocator's
integer program, the job manager's policies and the replay's accounting."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulation.flowsim.job_manager import simulate_job_manager, static_partitions
from emulation.flowsim.job_metrics import metrics
from emulation.planners.allocators import Allocation, ClusterState, Photonic, TorusContiguous, route_circuits
from emulation.workloads.tenant_jobs import Job, make_trace
from topologies.torus_rack import LEGAL_SHAPES, RackError, TorusRack

ROOT = Path(__file__).resolve().parents[1]
RACK = TorusRack()


def test_stranded_bandwidth_per_shape_and_photonic_strands_none():
    """On the 4x4x4 torus a contiguous slice uses only the ports whose far end it owns: 2x2x1 2 of
    6 (33%), 2x2x2 50%, 2x2x4 67%, 2x4x4 83%, 4x4x4 100%. Morphlux's interposers give every
    slice all 6 ports' worth (bandwidth redirection)."""
    usable = {s: 1 - RACK.stranded_share(s) for s in LEGAL_SHAPES}
    assert [round(usable[s] * 100) for s in LEGAL_SHAPES] == [33, 50, 67, 83, 100]
    torus, photonic = TorusContiguous(RACK), Photonic(RACK)
    for s in LEGAL_SHAPES:
        n = s[0] * s[1] * s[2]
        assert torus.allocate(ClusterState(RACK), n).bandwidth == pytest.approx(usable[s])
        a = photonic.allocate(ClusterState(RACK), n)
        assert a.bandwidth == 1.0 and len(a.accelerators) == n


def test_the_rack_has_sixteen_servers_with_four_fibres_per_boundary():
    assert RACK.servers == 16 and RACK.per_server == 4
    b = RACK.boundaries
    assert b.number_of_edges() == 32 and {d["fibres"] for *_, d in b.edges(data=True)} == {4}
    # every server: 4 accelerators x 4 ports leave it (x and y once, z twice)
    assert all(sum(b[s][t]["fibres"] for t in b[s]) == 16 for s in b)
    with pytest.raises(RackError, match="rack.dims: axis x"):
        TorusRack((3, 4, 4))
    with pytest.raises(RackError, match="not a legal slice shape"):
        RACK.orientations((2, 2, 3))


def test_the_electrical_torus_as_a_fabric_cables_every_port_to_its_torus_neighbour():
    """TorusRack.fabric: one cable per + port, so every accelerator's 6 ports are attached and the
    fabric's directed links are the rack's torus links (parallel on an axis of 2); an axis of 1
    has no cables."""
    from collections import Counter

    f = RACK.fabric(200.0)
    assert (f.gpus, f.ports_per_gpu, f.port_gbps, len(f.cables)) == (64, 6, 200.0, 192)
    assert Counter((l.u, l.v) for l in f.links()) == Counter(RACK.torus_links)
    flat = TorusRack((2, 2, 1)).fabric()
    assert len(flat.cables) == 8 and not {r.port for c in flat.cables for r in (c.a, c.b)} & {4, 5}


def test_the_torus_rack_mininet_topo_has_a_host_per_accelerator():
    pytest.importorskip("mininet")
    from topologies.mininet_topos import topos

    t = topos["torusrack"](2, 2, 2)
    assert len(t.hosts()) == 8 and len(t.links()) == 8 + 8 * 3  # host links, then 3 cables each


def test_the_integer_program_minimises_the_most_circuits_on_a_boundary_within_the_fibres():
    """Two servers joined by one 4-fibre boundary need 6 circuits (3 lanes each way round their
    ring): at most 4 go direct, the rest detour through other servers' interposers. The most
    circuits on any boundary the routes cross is then 2 (6 circuits over 3 disjoint routes), and
    a boundary already full is never used."""
    p = Photonic(RACK)
    held = {e: 0 for e in (tuple(sorted(x)) for x in RACK.boundaries.edges)}
    cands = [p.routes(0, 4), p.routes(4, 0)]
    used = route_circuits(RACK.boundaries, held, cands, 3)
    assert used is not None and max(used.values()) == 2 and used[(0, 4)] == 2
    assert sum(c for e, c in used.items() if 0 in e) == 6  # six circuits leave server 0
    full = {**held, (0, 4): 4}
    used = route_circuits(RACK.boundaries, full, cands, 3)
    assert used is not None and (0, 4) not in used
    # every boundary out of server 0 full: nothing fits
    blocked = {**held, **{tuple(sorted((0, t))): 4 for t in RACK.boundaries[0]}}
    assert route_circuits(RACK.boundaries, blocked, cands, 1) is None


def test_photonic_places_a_slice_on_scattered_servers_where_the_torus_cannot():
    """Fragmentation: servers 0 and 3 free, nothing else. No contiguous 2x2x2 block is free, so
    the torus refuses 8 accelerators although 8 are free; the photonic allocator wires the two
    servers together through the others' interposers."""
    state = ClusterState(RACK)
    busy = Allocation(tuple(s for s in range(16) if s not in (0, 3)), (), True, 1.0)
    state.take(busy)
    assert state.free_accelerators == 8
    assert TorusContiguous(RACK).allocate(state, 8) is None
    a = Photonic(RACK).allocate(state, 8)
    assert a is not None and set(a.servers) == {0, 3} and not a.contiguous and a.bandwidth == 1.0
    state.take(a)
    assert all(state.circuits[e] <= RACK.boundaries.edges[e]["fibres"] for e in state.circuits)
    state.release(a)
    state.release(busy)
    assert state.free == set(range(16)) and not any(state.circuits.values())


def _jobs():
    return make_trace(120, 3, 200, {4: 0.4, 8: 0.3, 16: 0.2, 32: 0.1}, (1, 6), (60, 600), 0.5, 4)


def test_a_replay_accounts_every_round_and_never_overcommits_the_rack():
    jobs = _jobs()
    for alloc in (TorusContiguous(RACK), Photonic(RACK)):
        r = simulate_job_manager(RACK, jobs, alloc, "fifo")
        assert len(r.requests) == sum(j.rounds for j in jobs) and len(r.job_end) == len(jobs)
        events = sorted([(q.t_start, q.job.accelerators) for q in r.requests] +
                        [(q.t_end, -q.job.accelerators) for q in r.requests], key=lambda e: (e[0], e[1]))
        held = np.cumsum([n for _, n in events])
        assert held.max() <= 64 and held[-1] == 0
        for q in r.requests:  # a round lasts its compute plus its communication at the slice's bandwidth
            assert q.t_end - q.t_start >= q.job.round_at(q.bandwidth) - 1e-9
            assert q.t_start >= q.t_request >= q.job.arrival_s
        m = metrics(r)
        assert 0 < m["utilisation"] <= 1 and m["jobs_rejected"] == 0


def test_photonic_beats_the_torus_on_bandwidth_fragmentation_and_completion_time():
    jobs = _jobs()
    t = metrics(simulate_job_manager(RACK, jobs, TorusContiguous(RACK), "fifo"))
    p = metrics(simulate_job_manager(RACK, jobs, Photonic(RACK), "fifo"))
    assert p["allocation_bandwidth"] > 1.5 * t["allocation_bandwidth"]
    assert p["fragmentation"] < t["fragmentation"]
    assert p["jct_mean_s"] < t["jct_mean_s"]


def test_srtf_serves_the_short_job_first_and_fifo_the_early_one():
    """One 64-accelerator job holds the rack; a long job then a short one arrive and wait. When
    the rack frees, FIFO serves the long one (it came first), SRTF the short one."""
    jobs = [Job(0, 0, 0.0, 64, 1, 100.0, 0.0), Job(1, 1, 1.0, 64, 1, 500.0, 0.0), Job(2, 2, 2.0, 64, 1, 50.0, 0.0)]
    for policy, first in (("fifo", 1), ("srtf", 2), ("srdf", 1), ("las", 1)):
        r = simulate_job_manager(RACK, jobs, TorusContiguous(RACK), policy)
        starts = {q.job.id: q.t_start for q in r.requests}
        assert starts[first] == 100.0, (policy, starts)
    # SRDF: remaining demand = accelerators x rounds left: the job with fewer rounds goes first
    jobs = [Job(0, 0, 0.0, 64, 1, 100.0, 0.0), Job(1, 1, 1.0, 64, 3, 10.0, 0.0), Job(2, 2, 2.0, 64, 2, 10.0, 0.0)]
    r = simulate_job_manager(RACK, jobs, TorusContiguous(RACK), "srdf")
    assert {q.job.id: q.t_start for q in r.requests if q.round == 0}[2] == 100.0


def test_irs_serves_the_scarcest_size_first():
    """While a 64-accelerator job holds the rack, nine 4-accelerator jobs then a 32-accelerator one
    arrive. When the rack frees, FIFO serves the small ones first and their nine servers leave no
    free half for the big one until they end; IRS serves the size with the fewest free placements
    (32: 8 blocks against 16) first."""
    jobs = [Job(0, 0, 0.0, 64, 1, 100.0, 0.0)] + [Job(i, 1, float(i), 4, 1, 1000.0, 0.0) for i in range(1, 10)] + \
           [Job(10, 2, 20.0, 32, 1, 10.0, 0.0)]
    fifo = {q.job.id: q.t_start for q in simulate_job_manager(RACK, jobs, TorusContiguous(RACK), "fifo").requests}
    irs = {q.job.id: q.t_start for q in simulate_job_manager(RACK, jobs, TorusContiguous(RACK), "irs").requests}
    assert irs[10] == 100.0 and fifo[10] == 1100.0
    assert sorted(fifo.values())[:10] == [0.0] + [100.0] * 9


def test_static_partitioning_keeps_each_tenant_in_its_half():
    parts = static_partitions(RACK, 2)
    assert len(parts) == 2 and not parts[0] & parts[1] and len(parts[0] | parts[1]) == 16
    jobs = _jobs()
    r = simulate_job_manager(RACK, jobs, Photonic(RACK), "fifo", partitions=2)
    for q in r.requests:
        assert set(q.servers) <= parts[q.job.tenant % 2]
    with pytest.raises(ValueError, match="static_partitions: 16 servers do not split into 3"):
        static_partitions(RACK, 3)


def test_the_photonic_allocators_memory_does_not_change_its_answers(monkeypatch):
    import emulation.planners.allocators as al

    jobs = _jobs()[:60]
    a = metrics(simulate_job_manager(RACK, jobs, Photonic(RACK), "fifo"))
    monkeypatch.setattr(al, "CACHE_SIZE", 0)
    b = metrics(simulate_job_manager(RACK, jobs, Photonic(RACK), "fifo"))
    assert a == b


def test_ocslab_run_writes_the_tables_and_plots(tmp_path):
    text = (ROOT / "experiments" / "tenancy_rack64.yaml").read_text()
    text = text.replace("jobs: 400", "jobs: 40").replace("[fifo, random, srtf, srdf, las, irs]", "[fifo, irs]")
    path = tmp_path / "t.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", str(path), "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    res = json.loads((out / "result.json").read_text())["result"]
    assert [(x["allocator"], x["scheduler"]) for x in res["runs"]] == [
        ("torus-contiguous", "fifo"), ("torus-contiguous", "irs"), ("photonic", "fifo"), ("photonic", "irs"),
        ("torus-contiguous", "static"), ("photonic", "static")]
    assert (out / "utilisation.png").stat().st_size > 10_000 and (out / "policies.png").stat().st_size > 10_000
    assert (out / "runs.csv").read_text().count("\n") == 7
