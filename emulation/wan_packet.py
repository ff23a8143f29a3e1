"""A WAN run with real packets (Symphony, arXiv 2510.11937): the matrices of a ``wan:`` section
replayed as UDP flows through Open vSwitch routers, one TE controller per slice
(:func:`emulation.emulator.wan_replay.replay_wan`), and every interval's computed side from the
flow model of the splits the switches held (:func:`emulation.flowsim.wan.interval`), in one
:class:`~emulation.te_intervals.WanResult`. It sits above both backends, which never import each
other; the flow backend's own run is :func:`emulation.flowsim.wan.run_wan`."""

from __future__ import annotations

from pathlib import Path

from emulation.flowsim.wan import interval
from emulation.output import Progress
from emulation.scenario.schema import EmulationSpec
from emulation.te_intervals import WanResult, WanSpec


def emulate_wan(spec: WanSpec, emulation: EmulationSpec, run_dir: Path, progress: Progress | None = None) -> WanResult:
    """``spec`` on the packet backend (module doc): the largest link at ``emulation.link_mbps``
    (Mbit/s), the slices' controllers on ``emulation.controller``, logs in ``run_dir``.

    :raises emulation.emulator.net.EmulationError: see :func:`emulation.emulator.wan_replay.replay_wan`.
    """
    from emulation.emulator.wan_replay import replay_wan

    setup, mbps, ctl = spec.setup(), emulation.link_mbps, emulation.controller
    rep = replay_wan(setup, spec.te.settings(), spec.replay, run_dir, link_mbps=mbps, controller=ctl, progress=progress)
    intervals = [interval(setup, j, o, m) for j, (o, m) in enumerate(zip(rep.outcomes, rep.measured))]
    return WanResult.of(spec, setup, intervals, {**spec.replay.model_dump(), "link_mbps": mbps, "controller": ctl,
                                                 "mbps_per_unit": rep.mbps_per_unit, "frame_bytes": rep.frame_bytes})
