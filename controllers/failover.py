"""OS-Ken app: detect a failed GPU by port status and splice a spare into its place (LUMION, arXiv 2505.23105).

Detection is by **port status**: when a GPU dies, its transceivers go dark and the OCS (or the
electrical switch) it is cabled to reports its port ``link_down`` in an OpenFlow
``OFPT_PORT_STATUS`` message. The first such report for a port of a GPU that runs a rank of the
armed job declares that GPU failed (event ``gpu-failed``); no heartbeat is involved, so
detection costs the switch's notification latency only.

Recovery looks up the answer precomputed when the job was armed
(:func:`emulation.planners.failover.failover_table`): a spare whose ports are all up, the new
configuration and the new rank placement. The configuration is applied with the armed dark
window (:meth:`controllers.circuit_switch.CircuitSwitch.apply`, phases timestamped), and the
event ``failover`` carries the failed GPU, its rank, the new placement, the detection time and
the reconfiguration's timestamps; the job's supervisor reads it (``GET /events``) to relaunch
the job with the new rank map.

Spec: ``docs/mechanisms.md`` (LUMION, arXiv 2505.23105).
"""

from __future__ import annotations

import threading
import time

from controllers.sdn import MAIN_DISPATCHER, app_manager, hub, ofp_event, set_ev_cls
from controllers.base import OcsLabApp
from emulation import dataplane as dpn
from emulation.fabric import FabricError
from emulation.planners.failover import RECOVERIES, failover, failover_table


class FailoverApp(OcsLabApp):
    """Watches port status; on a job GPU's link-down, installs the precomputed recovery."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._job: dict | None = None
        self._down: set[int] = set()  # GPUs with a port reported down
        self._handled: set[int] = set()

    # ---- arming ------------------------------------------------------------------------------
    def arm(self, mode: str, placement: list[int], spares: list[int], reconfiguration_delay_s: float) -> dict:
        """Watch the job whose rank r runs on GPU ``placement[r]``; ``spares`` are the free
        GPUs in order of preference; recoveries use dark window ``reconfiguration_delay_s`` (seconds).

        :returns: ``{"mode", "table": {failed GPU: new placement}}`` (precomputed).
        :raises FabricError: unknown mode, bad GPUs, or no recovery fits the rack.
        """
        fabric = self.state.fabric
        if mode not in RECOVERIES:
            raise FabricError(f"unknown recovery {mode!r} (known: {', '.join(RECOVERIES)})")
        for g in list(placement) + list(spares):
            if not 0 <= g < fabric.gpus:
                raise FabricError(f"GPU {g} is not in the fabric ({fabric.gpus} GPUs)")
        if reconfiguration_delay_s < 0:
            raise FabricError(f"reconfiguration_delay_s must be >= 0, got {reconfiguration_delay_s}")
        with self.state.lock:
            current = self.state.circuits
        table = failover_table(fabric, mode, tuple(placement), tuple(spares), current)
        cs = app_manager.lookup_service_brick("CircuitSwitch")
        if cs is not None:  # the recoveries' routes are ready before any failure
            cs.prepare([fo.configuration for fo in table.values()])
        with self._lock:
            self._job = {"mode": mode, "placement": tuple(placement), "spares": tuple(spares),
                         "reconfiguration_delay_s": reconfiguration_delay_s, "table": table}
            self._handled.clear()
        self.state.log_event("failover-armed", mode=mode, placement=list(placement), spares=list(spares),
                             reconfiguration_delay_s=reconfiguration_delay_s)
        return {"mode": mode, "table": {g: list(fo.placement) for g, fo in table.items()}}

    def disarm(self) -> dict:
        """Stop watching (before the emulation is torn down: deleting the links reports every
        port down). :returns: ``{"disarmed": True}``."""
        with self._lock:
            self._job = None
        self.state.log_event("failover-disarmed")
        return {"disarmed": True}

    # ---- detection ---------------------------------------------------------------------------
    def _gpu_of(self, dpid: int, port: int) -> int | None:
        fabric = self.state.fabric
        where = self.state.shards.of_dpid(dpid)
        if where is not None and 1 <= port <= len(fabric.ocs[where[0]].ports):
            return fabric.ocs[where[0]].ports[port - 1].gpu
        k = dpid - dpn.DPID_EPS
        if 0 <= k < len(fabric.eps) and 1 <= port <= len(fabric.eps[k].ports):
            return fabric.eps[k].ports[port - 1].gpu
        return None

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        t = time.monotonic()
        msg = ev.msg
        if not msg.desc.state & msg.datapath.ofproto.OFPPS_LINK_DOWN:
            return
        gpu = self._gpu_of(msg.datapath.id, msg.desc.port_no)
        if gpu is None:
            return
        with self._lock:
            self._down.add(gpu)
            job = self._job
            if job is None or gpu not in job["placement"] or gpu in self._handled:
                return
            self._handled.add(gpu)
        self.state.log_event("gpu-failed", gpu=gpu, rank=job["placement"].index(gpu), t_detected=t,
                             dpid=msg.datapath.id, port=msg.desc.port_no, detection="port-status")
        # apply() waits for barrier replies, delivered by another app's event thread: not here.
        hub.spawn(self._recover, job, gpu, t)

    # ---- recovery ----------------------------------------------------------------------------
    def _recover(self, job: dict, gpu: int, t_detected: float) -> None:
        with self._lock:
            healthy = tuple(s for s in job["spares"] if s not in self._down)
        try:
            fo = job["table"].get(gpu)  # precomputed; after a first recovery, computed now
            if fo is None or set(fo.placement) - set(job["placement"]) - set(healthy):  # its spare is down
                with self.state.lock:
                    current = self.state.circuits
                fo = failover(self.state.fabric, job["mode"], job["placement"], current, gpu,
                              healthy[0] if healthy else None, healthy)
        except FabricError as e:
            self.state.log_event("failover-failed", gpu=gpu, error=str(e))
            return
        t_decided = time.monotonic()
        cs = app_manager.lookup_service_brick("CircuitSwitch")
        dark = 0.0 if job["mode"] == "electrical" else job["reconfiguration_delay_s"]  # electrical: nothing to light
        res = cs.apply(fo.configuration, dark, by="failover")
        used = set(fo.placement)
        with self._lock:
            self._job = {**job, "placement": fo.placement, "spares": tuple(s for s in job["spares"] if s not in used),
                         "table": {}}
        self.state.log_event("failover", failed_gpu=gpu, rank=job["placement"].index(gpu), mode=job["mode"],
                             placement=list(fo.placement), moved=list(fo.moved),
                             configuration=fo.configuration.to_json(), t_detected=t_detected,
                             t_decided=t_decided, **res)
