"""The scale model: run real-equivalent scenarios on slow emulated links.

A scenario gives real parameters (port rate B Gbit/s, alpha, delta, R, buffer bytes). The
emulator runs links at ``link_mbps`` (B_e) and sends ``byte_scale`` (s) of every buffer, so one
emulated second stands for ``1/TDF`` real seconds with ``TDF = s * B / B_e``. Every delay is
multiplied by TDF before it is emulated and every measured time divided by TDF before it is
reported; bandwidth-bound ratios are scale-invariant.

Spec: ``docs/architecture.md`` (scale model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: Fewest full frames the largest transfer of every step is given on the wire. A shaped link
#: hands frames on whole and an agent wakes up a few milliseconds late at worst, so a transfer
#: of a handful of frames ends several percent off the fluid time: the demo's Ring of 1 MiB, 9
#: frames per transfer at byte scale 0.1, measured +9.4% against alpha-beta; at 90 frames (byte
#: scale 1) +1.0% (docs/emulator.md, small messages).
FRAMES_PER_STEP = 64
#: The shortest wall-clock time (s) the largest transfer of every step is given on the wire, its
#: bytes spread over the GPU's ports. The emulator's own costs per step are wall-clock time (the
#: step barrier's round trip, the controller's install barrier and datapath flush, an agent
#: woken late on a busy core: 1-4 ms, more near the calibrated rate's limit), so in
#: real-equivalent time they weigh 1/TDF: a run at twice the link rate would measure them twice
#: as large. The demo's RHD with a reconfiguration per step (25 MiB, byte scale 0.1) measured
#: +3.5 to +5.9% against the flow backend with 131 ms steps (10 Mbit/s) and +0.9% with 262 ms
#: ones (5 Mbit/s) (docs/emulator.md, per-step costs).
MIN_STEP_WALL_S = 0.25
#: The most a run's byte scale is raised above the scenario's for its small steps (the scenario's
#: byte scale says how long its runs may take; a small step then takes at most this much longer).
MAX_RAISE = 8.0


@dataclass(frozen=True)
class Scale:
    """Emulated link rate and byte scale for a fabric of ``port_gbps`` Gbit/s ports.

    :param link_mbps: B_e, emulated port rate in Mbit/s (HTB, at most 1000).
    :param byte_scale: s in (0, 1], emulated bytes = real bytes x s.
    :param port_gbps: B, the real port rate in Gbit/s.
    """

    link_mbps: float
    byte_scale: float
    port_gbps: float

    @property
    def tdf(self) -> float:
        """Time dilation factor ``s * B / B_e`` (dimensionless)."""
        return self.byte_scale * self.port_gbps * 1e3 / self.link_mbps

    def emulated_bytes(self, real_bytes: int) -> int:
        """Bytes actually sent for ``real_bytes`` real bytes (at least 1)."""
        return max(1, round(real_bytes * self.byte_scale))

    def emulated_s(self, real_s: float) -> float:
        """Emulated (wall-clock) seconds standing for ``real_s`` real seconds."""
        return real_s * self.tdf

    def real_s(self, emulated_s: float) -> float:
        """Real-equivalent seconds of ``emulated_s`` measured wall-clock seconds."""
        return emulated_s / self.tdf

    def for_steps(self, smallest_step_bytes: int, frame_payload: int, ports: int = 1) -> Scale:
        """This scale with its byte scale raised, at most to 1 and to :data:`MAX_RAISE` times
        its own, so that ``smallest_step_bytes`` (real bytes of the smallest step's largest
        transfer) is at least :data:`FRAMES_PER_STEP` frames of ``frame_payload`` bytes on the
        wire and lasts at least :data:`MIN_STEP_WALL_S` of wall-clock time spread over ``ports``
        links at :attr:`link_mbps`; unchanged if it already does, or if the step is empty. A
        larger byte scale is a larger TDF: short steps run longer, not less faithfully, and the
        TDF of a run no longer depends on how fast a link rate the machine carried."""
        if smallest_step_bytes <= 0:
            return self
        frames = FRAMES_PER_STEP * frame_payload / smallest_step_bytes
        wall = MIN_STEP_WALL_S * self.link_mbps * 1e6 / 8 * max(1, ports) / smallest_step_bytes
        s = min(1.0, MAX_RAISE * self.byte_scale, max(self.byte_scale, frames, wall))
        return self if s == self.byte_scale else replace(self, byte_scale=s)

    def to_json(self) -> dict:
        """``{"link_mbps", "byte_scale", "port_gbps", "tdf"}``."""
        return {
            "link_mbps": self.link_mbps,
            "byte_scale": self.byte_scale,
            "port_gbps": self.port_gbps,
            "tdf": self.tdf,
        }
