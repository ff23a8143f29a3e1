"""Run a rail scenario: its sections become the layers' parameters, their records its results.

- :func:`run_rails` (``ocslab run``, flow backend): the phase trace of one iteration swept over
  every control mode and every reconfiguration delay R of ``rails.sweep_s``
  (:func:`emulation.flowsim.rail_sweep.sweep_fabric`), on the scenario's fabric and on each
  ``larger`` one; a timeline of one steady iteration per mode at the sweep's delay closest to
  100 ms (:func:`emulation.flowsim.rail_sweep.steady_timelines`).
- :func:`run_packet` (``ocslab train``, packet backend): ``rails.torch_job`` on emulated rails
  beside the flow replay (:func:`emulation.torchjob.rails_job.run_rail_job`).
"""

from __future__ import annotations

from pathlib import Path

from emulation.flowsim.rail_sweep import rail_trace, steady_timelines, sweep_fabric
from emulation.output import Progress
from emulation.rails.results import RailsResult, TorchJobResult


def run_rails(sc, progress: Progress | None = None) -> RailsResult:
    """Every fabric's sweep of ``sc`` (a :class:`emulation.kinds.rails.RailsScenario`) and the
    timelines (module doc)."""
    r = sc.rails
    net = r.fabric.network()
    tr = r.trace()
    main = sweep_fabric(tr, net, r.fabric.servers, r.fabric.gpus_per_server, r.modes, r.sweep_s, r.control.rtt_s,
                        r.iterations, progress, "")
    larger = [sweep_fabric(rail_trace(b.transformer(tr.model), b.parallel, r.compute, net, b.gpus_per_server), net,
                           b.servers, b.gpus_per_server, r.modes, r.sweep_s, r.control.rtt_s, r.iterations, progress,
                           f"{b.servers * b.gpus_per_server} GPUs: ") for b in r.larger]
    R = min(r.sweep_s, key=lambda x: abs(x - 0.1))
    model = r.transformer()
    return RailsResult(model=model.name, params=model.params, control_rtt_s=r.control.rtt_s, main=main,
                       larger=larger, timeline_delay_s=R,
                       timeline=steady_timelines(tr, net, r.modes, R, r.control.rtt_s, r.iterations),
                       paper=r.paper.model_dump() if r.paper else None)


def run_packet(sc, out: Path, progress: Progress | None = None) -> TorchJobResult:
    """Every mode of ``rails.torch_job.modes`` of ``sc`` (a
    :class:`emulation.kinds.rails.RailsScenario`) on a fresh emulation, with the flow replay
    beside it; each mode's summary also in ``out/MODE/summary.json``.

    :raises EmulationError: the emulation or the job failed. :raises ValueError: bad fabric.
    """
    from emulation.torchjob.rails_job import run_rail_job

    r = sc.rails
    return TorchJobResult.model_validate(
        run_rail_job(r.trace(), r.fabric.network(), r.fabric.gpus_per_server, r.torch_job, out, progress))
