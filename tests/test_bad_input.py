"""Bad input, table-driven: every case gets one line on stderr that names the field or flag, exit
status 2, no traceback, and nothing created (no ``runs/`` directory in the working directory) or
started.

Each case is a command line; ``{demo}``, ``{lumion}`` are replaced by the path of a copy of
``experiments/demo.yaml`` / ``experiments/lumion.yaml`` with one text substitution applied, and
``{file}`` by a file written for the case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = (ROOT / "experiments" / "demo.yaml").read_text()
LUMION = (ROOT / "experiments" / "lumion.yaml").read_text()
WAN = (ROOT / "experiments" / "wan_b4.yaml").read_text()
RAILS = (ROOT / "experiments" / "rails_llama.yaml").read_text()
TENANCY = (ROOT / "experiments" / "tenancy_rack64.yaml").read_text()
TENANTS = (ROOT / "experiments" / "tenancy_packets.yaml").read_text()
RAILS_TORCH = (ROOT / "experiments" / "rails_torch.yaml").read_text()

# (id, argv, {"demo"|"lumion"|"wan"|"rails"|"tenancy"|"tenants": (old, new)} or {"file": text}, what the message must contain)
CASES = [
    # collective scenario: the fabric
    ("gpus-zero", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: 0")}, "fabric.gpus"),
    ("app-missing", ["run", "{demo}", "--app", "nowhere/my_app.py"], {"demo": ("gpus: 8", "gpus: 8")}, "--app"),
    ("pcap-flow", ["run", "{demo}", "--backend", "flow", "--pcap"], {"demo": ("gpus: 8", "gpus: 8")}, "--pcap"),
    ("pcap-no-capture", ["pcap", "experiments"], {"demo": ("gpus: 8", "gpus: 8")}, "no capture"),
    ("app-in-scenario", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: 0.1\n  apps: [nowhere/my_app.py]")},
     "emulation.apps"),
    ("gpus-negative", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: -3")}, "fabric.gpus"),
    ("gpus-text", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: eight")}, "fabric.gpus"),
    ("gpus-fraction", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: 8.5")}, "fabric.gpus"),
    ("gpus-huge", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: 100000000")}, "fabric.gpus"),
    ("gpus-beyond-packet-limit", ["run", "{demo}"], {"demo": ("gpus: 8", "gpus: 1024")}, "at most"),
    ("gpus-beyond-memory", ["run", "{demo}"], {"demo": [("gpus: 8", "gpus: 131072"), (
        "  - {name: ring, algorithm: ring, planner: none}",
        "  - {name: ring, algorithm: ring, planner: none}\n  - {name: a2a, collective: alltoall, algorithm: direct}")]},
     "GiB"),
    ("ports-zero", ["run", "{demo}"], {"demo": ("ports_per_gpu: 2", "ports_per_gpu: 0")}, "fabric.ports_per_gpu"),
    ("rate-inf", ["run", "{demo}"], {"demo": ("port_gbps: 400", "port_gbps: .inf")}, "fabric.port_gbps"),
    ("rate-nan", ["run", "{demo}"], {"demo": ("port_gbps: 400", "port_gbps: .nan")}, "fabric.port_gbps"),
    ("rate-negative", ["run", "{demo}"], {"demo": ("port_gbps: 400", "port_gbps: -400")}, "fabric.port_gbps"),
    ("rate-zero", ["run", "{demo}"], {"demo": ("port_gbps: 400", "port_gbps: 0")}, "fabric.port_gbps"),
    ("rate-text", ["run", "{demo}"], {"demo": ("port_gbps: 400", "port_gbps: fast")}, "fabric.port_gbps"),
    ("r-negative", ["run", "{demo}"], {"demo": ("reconfiguration_delay_s: 10.0e-6", "reconfiguration_delay_s: -1")},
     "fabric.reconfiguration_delay_s"),
    ("r-nan", ["run", "{demo}"], {"demo": ("reconfiguration_delay_s: 10.0e-6", "reconfiguration_delay_s: .nan")},
     "fabric.reconfiguration_delay_s"),
    ("topology-unknown", ["run", "{demo}"], {"demo": ("topology: ocs-star", "topology: hypercube")}, "fabric.topology"),
    ("topology-path", ["run", "{demo}"], {"demo": ("topology: ocs-star", "topology: ../../etc")}, "fabric.topology"),
    ("initial-unknown", ["run", "{demo}"], {"demo": ("initial: ring ", "initial: moebius ")}, "fabric"),
    ("fabric-unknown-key", ["run", "{demo}"], {"demo": ("  gpus: 8", "  gpus: 8\n  colour: red")}, "fabric.colour"),
    # cost, sizes, runs
    ("alpha-negative", ["run", "{demo}"], {"demo": ("alpha_s: 5.0e-6", "alpha_s: -5.0e-6")}, "cost.alpha_s"),
    ("alpha-inf", ["run", "{demo}"], {"demo": ("alpha_s: 5.0e-6", "alpha_s: .inf")}, "cost.alpha_s"),
    ("delta-nan", ["run", "{demo}"], {"demo": ("delta_s: 0.0", "delta_s: .nan")}, "cost.delta_s"),
    ("sizes-empty", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: []")}, "sizes"),
    ("sizes-zero", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: [0]")}, "sizes"),
    ("sizes-negative", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: [-1MiB]")}, "sizes"),
    ("sizes-text", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: [lots]")}, "sizes"),
    ("sizes-not-list", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: 25MiB")}, "sizes"),
    ("sizes-inf", ["run", "{demo}"], {"demo": ("sizes: [25MiB, 1MiB]", "sizes: [.inf]")}, "sizes"),
    ("runs-empty", ["run", "{demo}"], {"demo": ("runs:\n", "runs: []\nx:\n")}, "runs"),
    ("run-name-slash", ["run", "{demo}"], {"demo": ("{name: ring,", "{name: ../ring,")}, "runs.0.name"),
    ("run-name-shell", ["run", "{demo}"], {"demo": ("{name: ring,", "{name: 'ring;rm -rf x',")}, "runs.0.name"),
    ("run-name-dup", ["run", "{demo}"], {"demo": ("{name: rhd-static,", "{name: ring,")}, "runs"),
    ("algorithm-unknown", ["run", "{demo}"], {"demo": ("algorithm: ring,", "algorithm: rin,")}, "runs.0.algorithm"),
    ("planner-unknown", ["run", "{demo}"], {"demo": ("planner: always", "planner: sometimes")}, "runs.2.planner"),
    ("collective-unknown", ["run", "{demo}"], {"demo": ("{name: ring, algorithm: ring,",
                                                       "{name: ring, collective: allsum, algorithm: ring,")},
     "runs.0.collective"),
    ("name-slash", ["run", "{demo}"], {"demo": ("name: demo", "name: a/b")}, "name"),
    ("name-shell", ["run", "{demo}"], {"demo": ("name: demo", "name: '$(reboot)'")}, "name"),
    ("name-empty", ["run", "{demo}"], {"demo": ("name: demo", "name: ''")}, "name"),
    # emulation section
    ("link-zero", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: 0")}, "emulation.link_mbps"),
    ("link-negative", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: -5")}, "emulation.link_mbps"),
    ("link-inf", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: .inf")}, "emulation.link_mbps"),
    ("link-huge", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: 5000")}, "emulation.link_mbps"),
    ("link-text", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: fast")}, "emulation.link_mbps"),
    ("mtu-small", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: auto\n  mtu: 576")}, "emulation.mtu"),
    ("mtu-huge", ["run", "{demo}"], {"demo": ("link_mbps: auto", "link_mbps: auto\n  mtu: 65536")}, "emulation.mtu"),
    ("byte-scale-zero", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: 0")}, "emulation.byte_scale"),
    ("byte-scale-big", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: 2")}, "emulation.byte_scale"),
    ("byte-scale-nan", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: .nan")}, "emulation.byte_scale"),
    ("headroom-unknown", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: 0.1\n  headroom: maybe")},
     "emulation.headroom"),
    ("target-big", ["run", "{demo}"], {"demo": ("byte_scale: 0.1", "byte_scale: 0.1\n  headroom_target: 2")},
     "emulation.headroom_target"),
    ("backend-unknown", ["run", "{demo}"], {"demo": ("backend: packet", "backend: quantum")}, "backend"),
    ("semantics-unknown", ["run", "{demo}"], {"demo": ("backend: packet", "backend: flow\nsemantics: lazy")}, "semantics"),
    ("iterations-zero", ["run", "{demo}"], {"demo": ("backend: packet", "backend: flow\niterations: 0")}, "iterations"),
    ("iterations-text", ["run", "{demo}"], {"demo": ("backend: packet", "backend: flow\niterations: many")},
     "iterations"),
    ("straggler-rank", ["run", "{demo}"], {"demo": ("backend: packet", "backend: flow\nstraggler: {rank: 99, delay_s: 1.0e-3}")},
     "straggler"),
    ("straggler-negative", ["run", "{demo}"], {"demo": ("backend: packet", "backend: flow\nstraggler: {rank: 1, delay_s: -1}")},
     "straggler.delay_s"),
    ("straggler-dist", ["run", "{demo}"], {"demo": ("backend: packet",
                                                     "backend: flow\nstraggler: {rank: 1, delay_s: 1.0e-3, distribution: cauchy}")},
     "straggler.distribution"),
    ("top-unknown-key", ["run", "{demo}"], {"demo": ("backend: packet", "backend: packet\ncolour: red")}, "colour"),
    # files
    ("file-missing", ["run", "no/such/file.yaml"], {}, "no/such/file.yaml"),
    ("file-directory", ["run", "{dir}"], {}, "directory"),
    ("file-not-yaml", ["run", "{file}"], {"file": "name: [unclosed\n  - : :"}, "YAML"),
    ("file-list", ["run", "{file}"], {"file": "- 1\n- 2\n"}, "mapping"),
    ("file-empty", ["run", "{file}"], {"file": ""}, "mapping"),
    ("file-scalar", ["run", "{file}"], {"file": "42\n"}, "mapping"),
    ("file-binary", ["run", "{file}"], {"file": "\x00\x01\x02\xff"}, "{file}"),
    ("file-python-tag", ["run", "{file}"], {"file": "name: !!python/object/apply:os.system ['true']\n"}, "{file}"),
    ("plan-file-missing", ["plan", "missing.yaml"], {}, "missing.yaml"),
    ("compare-file-missing", ["compare", "missing.yaml"], {}, "missing.yaml"),
    ("train-file-missing", ["train", "missing.yaml"], {}, "missing.yaml"),
    # flags
    ("backend-flag", ["run", "{demo}", "--backend", "quantum"], {"demo": ("", "")}, "--backend"),
    ("plan-size", ["plan", "{demo}", "--size", "lots"], {"demo": ("", "")}, "--size"),
    ("compare-max-error", ["compare", "{demo}", "--max-error", "-1"], {"demo": ("", "")}, "--max-error"),
    ("compare-max-error-nan", ["compare", "{demo}", "--max-error", "nan"], {"demo": ("", "")}, "--max-error"),
    ("workload-ranks-zero", ["workload", "ring", "--ranks", "0", "--bytes", "1MiB"], {}, "--ranks"),
    ("workload-ranks-negative", ["workload", "ring", "--ranks", "-3", "--bytes", "1MiB"], {}, "--ranks"),
    ("workload-ranks-huge", ["workload", "rhd", "--ranks", "100000000", "--bytes", "25MiB"], {}, "--ranks"),
    ("workload-ranks-text", ["workload", "ring", "--ranks", "many", "--bytes", "1MiB"], {}, "--ranks"),
    ("workload-bytes", ["workload", "ring", "--ranks", "8", "--bytes", "lots"], {}, "--bytes"),
    ("workload-bytes-negative", ["workload", "ring", "--ranks", "8", "--bytes", "-1"], {}, "--bytes"),
    ("workload-algorithm", ["workload", "rin", "--ranks", "8", "--bytes", "1MiB"], {}, "rin"),
    ("workload-collective", ["workload", "ring", "--collective", "allsum", "--ranks", "8", "--bytes", "1MiB"], {},
     "allsum"),
    ("torch-gpus-zero", ["torch", "allreduce-perf", "--gpus", "0"], {}, "--gpus"),
    ("torch-gpus-huge", ["torch", "allreduce-perf", "--gpus", "100000"], {}, "--gpus"),
    ("torch-link-zero", ["torch", "allreduce-perf", "--link-mbps", "0"], {}, "--link-mbps"),
    ("torch-link-inf", ["torch", "allreduce-perf", "--link-mbps", "inf"], {}, "--link-mbps"),
    ("torch-sizes", ["torch", "allreduce-perf", "--sizes", "4MiB,1MiB"], {}, "--sizes"),
    ("torch-iters", ["torch", "allreduce-perf", "--iters", "0"], {}, "--iters"),
    ("command-unknown", ["fly", "x"], {}, "fly"),
    # training scenarios
    # WAN scenario
    ("wan-topology", ["run", "{wan}"], {"wan": ("topology: b4", "topology: atlantis")}, "wan.topology"),
    ("wan-objective", ["run", "{wan}"], {"wan": ("objective: max-flow", "objective: max-min")}, "wan.te.objective"),
    ("wan-regulariser", ["run", "{wan}"], {"wan": ("regulariser: 0,", "regulariser: -1,")}, "wan.te.regulariser"),
    ("wan-headroom", ["run", "{wan}"], {"wan": ("headroom: 0}", "headroom: 1.5}")}, "wan.te.capacity_headroom"),
    ("wan-k-zero", ["run", "{wan}"], {"wan": ("k: 4,", "k: 0,")}, "wan.tunnels.k"),
    ("wan-slices", ["run", "{wan}"], {"wan": ("count: 5, method: random", "count: 40, method: random")},
     "wan.slices.count"),
    ("wan-slice-method", ["run", "{wan}"], {"wan": ("method: random", "method: regional")}, "wan.slices.method"),
    ("wan-scale", ["run", "{wan}"], {"wan": ("scale: 0.8", "scale: -1")}, "wan.traffic.scale"),
    ("wan-sd", ["run", "{wan}"], {"wan": ("sd: 0.05", "sd: .nan")}, "wan.divergence.sd"),
    ("wan-unknown-key", ["run", "{wan}"], {"wan": ("  topology: b4", "  topology: b4\n  colour: red")}, "wan.colour"),
    ("wan-backend", ["run", "{wan}"], {"wan": ("backend: flow", "backend: ns3")}, "backend"),
    ("wan-backend-flag", ["run", "{wan}", "--backend", "ns3"], {"wan": ("scale: 0.8", "scale: 0.8")}, "--backend"),
    ("wan-pcap", ["run", "{wan}", "--pcap"], {"wan": ("scale: 0.8", "scale: 0.8")}, "--pcap"),
    ("wan-kill-slice", ["run", "{wan}"], {"wan": ("payload_bytes: 500}", "payload_bytes: 500, kill: {slice: 7, interval: 1}}")},
     "wan.replay.kill.slice"),
    ("wan-fail-link", ["run", "{wan}"], {"wan": ("payload_bytes: 500}", "payload_bytes: 500, fail: {link: [0, 9], interval: 1}}")},
     "wan.replay.fail.link"),
    ("wan-warmup", ["run", "{wan}"], {"wan": ("interval_s: 3,", "interval_s: 3, warmup_s: 2.9,")}, "warmup_s"),
    ("te-tm", ["te", "{wan}", "--tm", "99"], {"wan": ("scale: 0.8", "scale: 0.8")}, "--tm"),
    ("te-collective", ["te", "{demo}"], {"demo": ("gpus: 8", "gpus: 8")}, "ocslab run"),
    ("train-gpus-zero", ["train", "{lumion}"], {"lumion": ("gpus: 4 ", "gpus: 0 ")}, "fabric.gpus"),
    ("train-spares-negative", ["train", "{lumion}"], {"lumion": ("spares: 4 ", "spares: -1 ")}, "fabric.spares"),
    ("train-electrical-inf", ["train", "{lumion}"], {"lumion": ("electrical_gbps: 50", "electrical_gbps: .inf")},
     "fabric.electrical_gbps"),
    ("train-link-auto", ["train", "{lumion}"], {"lumion": ("{link_mbps: 20}", "{link_mbps: auto}")},
     "emulation.link_mbps"),
    ("train-steps-zero", ["train", "{lumion}"], {"lumion": ("steps: 45", "steps: 0")}, "job.steps"),
    ("train-lr-nan", ["train", "{lumion}"], {"lumion": ("lr: 0.05", "lr: .nan")}, "job.lr"),
    ("train-failure-gpu", ["train", "{lumion}"], {"lumion": ("{gpu: 2, at_step: 16}", "{gpu: 9, at_step: 16}")},
     "failure.gpu"),
    ("train-failure-checkpoint", ["train", "{lumion}"], {"lumion": ("{gpu: 2, at_step: 16}", "{gpu: 2, at_step: 14}")},
     "failure.at_step"),
    ("train-failure-late", ["train", "{lumion}"], {"lumion": ("{gpu: 2, at_step: 16}", "{gpu: 2, at_step: 44}")},
     "failure.at_step"),
    ("train-recovery-unknown", ["train", "{lumion}"], {"lumion": ("[optical, electrical, migration]", "[teleport]")},
     "recovery"),
    ("train-recovery-flag", ["train", "{lumion}", "--recovery", "teleport"], {"lumion": ("", "")}, "--recovery"),
    ("train-name-slash", ["train", "{lumion}"], {"lumion": ("name: lumion", "name: ../lumion")}, "name"),
    ("rails-tp", ["run", "{rails}"], {"rails": ("{tp: 4, pp: 2", "{tp: 2, pp: 2")}, "rails.parallel.tp"),
    ("rails-servers", ["run", "{rails}"], {"rails": ("{servers: 4,", "{servers: 6,")}, "rails.parallel"),
    ("rails-model", ["run", "{rails}"], {"rails": ("model: llama3-8b", "model: llama9")}, "rails.model"),
    ("rails-mode", ["run", "{rails}"], {"rails": ("speculative-deferred]", "psychic]")}, "rails.modes"),
    ("rails-sweep", ["run", "{rails}"], {"rails": ("reconfiguration_delay_s: [0, 0.01", "reconfiguration_delay_s: [0.01, 0")}, "rails.reconfiguration_delay_s"),
    ("rails-ports", ["run", "{rails}"], {"rails": ("ports_per_gpu: 2", "ports_per_gpu: 3")}, "rails.fabric.ports_per_gpu"),
    ("rails-one-port", ["run", "{rails}"], {"rails": ("ports_per_gpu: 2", "ports_per_gpu: 1")}, "rails.larger"),
    ("rails-old-and-new-key", ["run", "{rails}"], {"rails": ("ports_per_gpu: 2", "ports_per_gpu: 2, rail_ports: 2")},
     "rails.fabric.rail_ports: given twice"),
    ("rails-ep-dense", ["run", "{rails}"], {"rails": ("dp: 2, micro_batches: 24", "dp: 2, ep: 2, micro_batches: 24")},
     "rails.parallel.ep"),
    ("rails-mfu", ["run", "{rails}"], {"rails": ("mfu: 0.53", "mfu: 1.5")}, "rails.compute.mfu"),
    ("rails-paper-row", ["run", "{rails}"], {"rails": ("on-demand: [10.44, ", "on-demand: [")}, "paper.times_s"),
    ("rails-larger", ["run", "{rails}"], {"rails": ("{tp: 8, pp: 8, dp: 16", "{tp: 8, pp: 8, dp: 8")},
     "rails.larger.0.parallel"),
    ("rails-backend", ["run", "{rails}", "--backend", "packet"], {"rails": ("", "")}, "--backend"),
    ("rails-torch-link-fast", ["train", "{railstorch}"], {"railstorch": ("link_mbps: auto", "link_mbps: 20")},
     "emulation.link_mbps: 20 Mbit/s is above the fabric's port rate"),
    ("rails-torch-link-text", ["train", "{railstorch}"], {"railstorch": ("link_mbps: auto", "link_mbps: fast")},
     "emulation.link_mbps"),
    ("tenancy-size", ["run", "{tenancy}"], {"tenancy": ("16: 0.2", "12: 0.2")}, "tenancy.trace.sizes"),
    ("tenancy-weight", ["run", "{tenancy}"], {"tenancy": ("16: 0.2", "16: -0.2")}, "tenancy.trace.sizes"),
    ("tenancy-scheduler", ["run", "{tenancy}"], {"tenancy": ("srdf, las", "srdf, lottery")}, "tenancy.schedulers"),
    ("tenancy-allocator", ["run", "{tenancy}"], {"tenancy": ("[torus-contiguous, photonic]", "[torus-contiguous, magic]")},
     "tenancy.allocators"),
    ("tenancy-partitions", ["run", "{tenancy}"], {"tenancy": ("static_partitions: 2", "static_partitions: 3")},
     "tenancy.static_partitions"),
    ("tenancy-partitions-spares", ["run", "{tenancy}"], {"tenancy": ("spares: 0", "spares: 1")},
     "tenancy.static_partitions"),
    ("tenancy-spares", ["run", "{tenancy}"], {"tenancy": ("spares: 0}", "spares: 16}")}, "tenancy.rack.spares"),
    ("tenancy-dims", ["run", "{tenancy}"], {"tenancy": ("dims: [4, 4, 4]", "dims: [3, 4, 4]")}, "tenancy.rack.dims"),
    ("tenancy-arrivals", ["run", "{tenancy}"], {"tenancy": ("interarrival_s: 250", "interarrival_s: 0")},
     "tenancy.trace.interarrival_s"),
    ("tenancy-rounds", ["run", "{tenancy}"], {"tenancy": ("rounds: [1, 10]", "rounds: [10, 1]")}, "tenancy.trace"),
    ("tenancy-backend", ["run", "{tenancy}", "--backend", "packet"], {"tenancy": ("", "")}, "--backend"),
    ("tenants-size", ["run", "{tenants}"], {"tenants": ("gpus: 8,", "gpus: 6,")}, "tenancy.tenants.2.gpus"),
    ("tenants-rhd", ["run", "{tenants}"], {"tenants": ("gpus: 4, algorithm: rhd", "gpus: 2, algorithm: rhd")},
     "tenancy.tenants"),
    ("tenants-too-many", ["run", "{tenants}"], {"tenants": ("gpus: 4, algorithm: ring", "gpus: 8, algorithm: ring")},
     "tenancy.tenants"),
    ("tenants-names", ["run", "{tenants}"], {"tenants": ("name: b,", "name: a,")}, "tenancy.tenants"),
    ("tenants-flow", ["run", "{tenants}"], {"tenants": ("backend: packet", "backend: flow")}, "backend"),
    ("tenants-cli-flow", ["run", "{tenants}", "--backend", "flow"], {"tenants": ("", "")}, "--backend"),
    ("tenants-size-bytes", ["run", "{tenants}"], {"tenants": ("size: 16MiB}", "size: 16 parsecs}")}, "tenancy.tenants.0.size"),
    ("tenants-and-trace", ["run", "{tenants}"], {"tenants": ("  fabric:", "  trace: {jobs: 4, interarrival_s: 1, "
                                                              "sizes: {4: 1}, round_s: [1, 2]}\n  fabric:")}, "tenancy"),
    ("run-training-on-flow", ["run", "{lumion}", "--backend", "flow"], {"lumion": ("", "")},
     "a training scenario runs on packet, not flow"),
    ("run-wan-app", ["run", "{wan}", "--app", "x.py"], {"wan": ("", "")}, "a wan scenario takes no --app"),
    ("kind-unknown", ["run", "{demo}"], {"demo": ("name: demo", "kind: ring\nname: demo")}, "kind: unknown kind 'ring'"),
    ("kind-two-sections", ["run", "{wan}"], {"wan": ("name: wan_b4", "name: wan_b4\ntenancy: {}")},
     "cannot also be a tenancy one"),
    ("out-is-a-file", ["run", "{demo}", "--backend", "flow", "--out", "{demo}"], {"demo": ("", "")}, "is a file"),
    ("train-collective-file", ["train", "{demo}"], {"demo": ("", "")}, "ocslab run"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_one_line_naming_the_field_and_exit_2(run_dir, case):
    _id, argv, files, needle = case
    subs = {"dir": str(run_dir)}
    for kind, source in (("demo", DEMO), ("lumion", LUMION), ("wan", WAN), ("rails", RAILS), ("tenancy", TENANCY),
                         ("tenants", TENANTS), ("railstorch", RAILS_TORCH)):
        if kind in files:
            text = source
            for old, new in files[kind] if isinstance(files[kind], list) else [files[kind]]:
                assert old in text, f"case {_id}: {old!r} not in {kind}.yaml"
                text = text.replace(old, new, 1)
            p = run_dir / f"{kind}-case.yaml"
            p.write_text(text)
            subs[kind] = str(p)
    if "file" in files:
        p = run_dir / "case.yaml"
        p.write_bytes(files["file"].encode("latin-1"))
        subs["file"] = str(p)
    argv = [a.format(**subs) if "{" in a else a for a in argv]
    work = run_dir / "cwd"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "emulation.cli", *argv], cwd=work, capture_output=True, text=True,
                       timeout=60, env=env)
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, err[-800:], r.stdout[-400:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("ocslab"), err
    assert needle.format(**subs) in err, err
    assert not (work / "runs").exists(), "a results directory was created"


def test_the_table_has_enough_cases():
    assert len(CASES) >= 60
