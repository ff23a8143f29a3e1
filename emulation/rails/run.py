"""Run a rail scenario: its sections become the layers' parameters, their records its results.

- :func:`run_rails` (``ocslab run``, flow backend): the phase trace of one iteration swept over
  every control mode and every reconfiguration delay R of ``rails.sweep_s``
  (:func:`emulation.flowsim.rail_sweep.sweep_fabric`), on the scenario's fabric and on each
  ``larger`` one; a timeline of one steady iteration per mode at the sweep's delay closest to
  100 ms (:func:`emulation.flowsim.rail_sweep.steady_timelines`).

``ocslab train`` (packet backend) hands ``rails.torch_job`` to
:func:`emulation.torchjob.rails_job.run_rail_job`, which runs it on emulated rails beside the flow
replay and returns its typed result.
"""

from __future__ import annotations

from emulation.flowsim.rail_sweep import rail_trace, steady_timelines, sweep_fabric
from emulation.output import Progress
from emulation.rails.results import RailsResult


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
