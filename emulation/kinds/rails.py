"""The ``rails`` kind: a training job on a rail-optimised fabric whose rails are optical circuit
switches reconfigured at parallelism-phase boundaries (Opus, arXiv 2507.08119), swept over the
reconfiguration delay R and the control mode (``experiments/rails_*.yaml``).

Example (``experiments/rails_llama.yaml``)::

    name: rails_llama
    rails:
      model: llama3-8b
      parallel: {tp: 4, pp: 2, dp: 2, micro_batches: 24}
      compute: {gpu_tflops: 312, mfu: 0.53}
      fabric: {servers: 4, gpus_per_server: 4, port_gbps: 100, ports_per_gpu: 2}
      control: {rtt_s: 0.002}
      reconfiguration_delay_s: [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3]
      modes: [eps, on-demand, speculative]
      larger:
        - {servers: 128, gpus_per_server: 8, parallel: {tp: 8, pp: 8, dp: 16, micro_batches: 32}}

The ``rails:`` section is the sweep's (:class:`emulation.flowsim.rail_sweep.RailSweepSpec`:
``model`` names a published configuration, :data:`emulation.workloads.iteration.MODELS`, or
gives one field by field; ``paper`` may hold a published table to print beside the results;
``larger`` runs the same model and sweep on bigger rail fabrics) plus ``torch_job``. ``ocslab
run`` sweeps on the flow backend (:class:`emulation.flowsim.rail_sweep.RailsResult`); ``ocslab
train`` runs ``torch_job`` (:class:`emulation.torchjob.rails_job.TorchJobSpec`) on the packet
backend (:class:`emulation.torchjob.rails_job.TorchJobResult`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal, Union

from pydantic import model_validator

from emulation.envelope import envelope
from emulation.flowsim.rail_sweep import RailsResult, RailSweepSpec, sweep_rails
from emulation.kinds import Kind, command_job
from emulation.output import Refused
from emulation.rails import report
from emulation.scenario.schema import EmulationSpec, NamedScenario
from emulation.torchjob.rails_job import TorchJobResult, TorchJobSpec

log = logging.getLogger(__name__)


class RailsSection(RailSweepSpec):
    """``rails:`` the sweep's section, and the torch job ``ocslab train`` runs."""

    torch_job: TorchJobSpec | None = None
    """The torch job ``ocslab train`` runs on the packet backend; none: the scenario has no torch job."""


#: The ``emulation:`` keys a rail scenario's torch job honours (the job's bytes are real: no
#: ``byte_scale``; its rails are on one machine: no ``servers``).
EMULATION_KEYS = {"link_mbps", "mtu", "controller", "apps", "headroom", "headroom_target"}


class RailsScenario(NamedScenario):
    """A whole rail scenario file (module doc); ``ocslab run`` sweeps it on the flow backend,
    ``ocslab train`` runs its torch job on the packet backend (it needs ``rails.torch_job``)."""

    rails: RailsSection
    """The job, the rail fabric, the control plane and the sweep."""
    backend: Literal["flow"] = "flow"
    """Where ``ocslab run`` sweeps it: ``flow`` (the only backend of the sweep; ``ocslab
    train`` runs the torch job with packets)."""
    emulation: EmulationSpec = EmulationSpec()
    """The torch job's packet sessions: ``link_mbps`` (unset: the fabric's ``port_gbps``, refused
    if this machine cannot carry it; ``auto``: the highest rate up to it that the headroom probe
    passes; a number: that rate, at most the port rate; below the port rate the job runs with
    time dilation), ``mtu``, ``controller``, ``apps``, ``headroom`` and ``headroom_target``. The
    job's bytes are real (no ``byte_scale``)."""

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        if not isinstance(data, dict):
            return data
        rails = data.get("rails")
        job = rails.get("torch_job") if isinstance(rails, dict) else None
        if isinstance(job, dict) and "link_mbps" in job:  # the old spelling
            job = dict(job)
            old = job.pop("link_mbps")
            em = data.get("emulation") or {}
            if isinstance(em, dict) and "link_mbps" in em:
                raise ValueError("rails.torch_job.link_mbps: give the rate once, as emulation.link_mbps")
            log.warning("rails.torch_job.link_mbps is deprecated: it is read as emulation.link_mbps (write it there)")
            data = {**data, "rails": {**rails, "torch_job": job}, "emulation": {**em, "link_mbps": old}}
        port = (rails.get("fabric") or {}).get("port_gbps", 100.0) if isinstance(rails, dict) else 100.0
        default = {"link_mbps": float(port) * 1000} if isinstance(port, (int, float)) and 0 < port <= 1 else {}
        return EmulationSpec.defaulted(data, EMULATION_KEYS, "rails", headroom="refuse", **default)

    @model_validator(mode="after")
    def _torch_job(self):
        r = self.rails
        if r.torch_job is None:
            return self
        f, c, p = r.fabric, r.compute, r.parallel
        if f.port_gbps > 1.0 or f.scaleup_gbps != f.port_gbps:
            raise ValueError(f"rails.torch_job: the emulated links all run at one rate of at most 1 Gbit/s: rails.fabric."
                             f"port_gbps ({f.port_gbps:g}) must be <= 1 and equal scaleup_gbps ({f.scaleup_gbps:g})")
        asked = self.emulation.link_mbps
        if isinstance(asked, float) and asked > f.port_gbps * 1000:
            raise ValueError(f"emulation.link_mbps: {asked:g} Mbit/s is above the fabric's port rate "
                             f"({f.port_gbps * 1000:g} Mbit/s): time dilation only slows the job down")
        if c.bytes_per_element != 4 or c.grad_bytes != 4:
            raise ValueError("rails.torch_job: the torch job trains in float32: rails.compute.bytes_per_element and "
                             "grad_bytes must be 4")
        if p.optimizer != "ddp" or p.ep != 1:
            raise ValueError("rails.torch_job: the torch job runs optimizer: ddp (gloo has no reduce-scatter) and no "
                             "expert parallelism (ep: 1)")
        if isinstance(r.model, str):
            raise ValueError("rails.torch_job: the torch job's model is given field by field (rails.model), small enough "
                             "to run on the emulated GPUs")
        if f.gpus_per_server < 2:
            raise ValueError("rails.torch_job: rails.fabric.gpus_per_server must be >= 2 (the rails start in different "
                             "configurations so that every server reaches every other)")
        return self


def _train(sc: RailsScenario, args, path: Path) -> int:
    """``ocslab train``: the scenario's torch job on emulated rails under each control mode
    (:func:`emulation.torchjob.rails_job.run_rail_job`), beside the flow backend's replay."""
    from emulation.torchjob.launch import torch_missing
    from emulation.torchjob.rails_job import run_rail_job

    r = sc.rails
    if args.recovery is not None:
        raise Refused("--recovery: applies to training scenarios (LUMION), not rails ones")
    if r.torch_job is None:
        raise Refused(f"{path}: rails.torch_job: missing (the torch job's section); ocslab run sweeps the "
                      f"scenario on the flow backend")
    if why := torch_missing():
        raise Refused(why)
    return command_job(KIND, sc, args.out, "train", len(r.torch_job.modes),
                       lambda out, progress: envelope("rails", sc.name, "both", run_rail_job(
                           r.trace(), r.fabric.network(), r.fabric.gpus_per_server, r.torch_job, out, sc.emulation,
                           progress)))


KIND = Kind(name="rails", scenario=RailsScenario, result=Union[RailsResult, TorchJobResult], backends=("flow",),
            run=lambda req: sweep_rails(req.scenario.rails, req.progress),
            show={RailsResult: report.print_summary, TorchJobResult: report.print_packet},
            write={RailsResult: report.write, TorchJobResult: report.write_packet},
            deep=lambda sc: sc.rails.check(), commands={"train": _train},
            checks={RailsResult: lambda r: [], TorchJobResult: lambda r: r.failed_checks()})
