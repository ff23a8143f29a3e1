"""Power and cost of a rail-optimised fabric: electrical rails against photonic rails (Opus,
arXiv 2602.12521), counted component by component.

A rail-optimised cluster of S servers of G GPUs has G rails; rail g joins GPU g of every server
through one NIC port per GPU (:class:`topologies.rail_network.RailNetwork` is the same fabric
for the simulators). What each design needs, per rail:

- **Electrical rails**: S ports of a packet switch of radix k when S <= k; otherwise a
  non-blocking two-tier leaf-spine of k-port switches: 3 S ports (the leaves' S down and S up,
  the spines' S). Links: S from the GPUs to the switches, and S more from the leaves to the
  spines. Every link is optical with a transceiver at each end (the NIC's, the switch port's).
  A port is priced and powered as its switch's share (several small rails share a switch).
- **Photonic rails**: one OCS whose ports take the rail's S links; a MEMS OCS switches one fibre
  per port, so a duplex link takes ``ocs_ports_per_link`` = 2 ports. The OCS passes light
  through, so the only transceivers are the GPUs'. An OCS port is priced and powered as its
  switch's share too.
- **Fibres**: one duplex fibre link per link, of ``fibre_m`` metres.

The components' figures, each with its published source, are in
``topologies/data/costs/components.yaml`` (:func:`load_components`). Power counts switches,
OCS ports and transceivers (fibres draw none); cost counts all four.

Two counts drive the ratio: the electrical switches' power per port (about 39 W at 400G against
0.4 W per OCS port) and how many transceivers each design needs (four per GPU on a two-tier
electrical rail, one on a photonic rail).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

#: The components' figures and the sets that combine them (module doc).
DATA = Path(__file__).resolve().parent / "data" / "costs" / "components.yaml"
#: Component kinds and the fields each must give.
KINDS = {"eps_switch": ("ports", "power_w", "cost_usd"), "ocs": ("ports", "power_w", "cost_usd"),
         "transceiver": ("power_w", "cost_usd"), "fibre": ("power_w", "cost_usd", "cost_usd_per_m")}


class CostDataError(ValueError):
    """The components file is malformed (one line naming the entry and field)."""


@dataclass(frozen=True)
class Component:
    """One priced component: ``power_w`` watts and ``cost_usd`` dollars per unit (a whole switch,
    one transceiver, one duplex fibre link; ``cost_usd_per_m`` adds to a fibre's cost per metre);
    ``ports``: a switch's radix; ``source``/``quote``/``confidence``: where the figures come from."""

    name: str
    kind: str
    power_w: float
    cost_usd: float
    ports: int = 0
    cost_usd_per_m: float = 0.0
    source: str = ""
    quote: str = ""
    confidence: str = ""


@dataclass(frozen=True)
class ComponentSet:
    """The components a cluster is priced with: an electrical switch, an OCS, a transceiver and a
    fibre, ``fibre_m`` metres per link, ``gpus_per_server`` GPUs (rails) per server."""

    name: str
    eps_switch: Component
    ocs: Component
    transceiver: Component
    fibre: Component
    fibre_m: float
    gpus_per_server: int


@dataclass(frozen=True)
class BillOfMaterials:
    """What one design of the fabric needs: electrical switch ports, OCS ports (each priced and
    powered as its switch's share), transceivers and duplex fibre links."""

    design: str
    eps_ports: int = 0
    ocs_ports: int = 0
    transceivers: int = 0
    fibres: int = 0

    def power_w(self, c: ComponentSet) -> dict[str, float]:
        """Watts per component class (``switches``, ``ocs``, ``transceivers``, ``fibres``) and
        ``total``."""
        parts = {"switches": self.eps_ports * c.eps_switch.power_w / c.eps_switch.ports,
                 "ocs": self.ocs_ports * c.ocs.power_w / c.ocs.ports,
                 "transceivers": self.transceivers * c.transceiver.power_w,
                 "fibres": self.fibres * c.fibre.power_w}
        return {**parts, "total": sum(parts.values())}

    def cost_usd(self, c: ComponentSet) -> dict[str, float]:
        """Dollars per component class and ``total``, as :meth:`power_w`."""
        parts = {"switches": self.eps_ports * c.eps_switch.cost_usd / c.eps_switch.ports,
                 "ocs": self.ocs_ports * c.ocs.cost_usd / c.ocs.ports,
                 "transceivers": self.transceivers * c.transceiver.cost_usd,
                 "fibres": self.fibres * (c.fibre.cost_usd + c.fibre.cost_usd_per_m * c.fibre_m)}
        return {**parts, "total": sum(parts.values())}


def _check_size(servers: int, gpus_per_server: int) -> None:
    if servers < 1 or gpus_per_server < 1:
        raise ValueError(f"servers and gpus_per_server must be at least 1, got {servers} and {gpus_per_server}")


def electrical_rails(servers: int, gpus_per_server: int, radix: int) -> BillOfMaterials:
    """The electrical rail-optimised fabric (module doc): per rail the ports of one switch of
    ``radix`` ports, or of a non-blocking leaf-spine when the rail has more servers than ports.

    :raises ValueError: a size below 1, a radix below 2, or a rail too large for two tiers
        (more than radix^2 / 2 servers).
    """
    _check_size(servers, gpus_per_server)
    if radix < 2:
        raise ValueError(f"radix must be at least 2, got {radix}")
    if servers <= radix:
        ports, links = servers, servers
    else:
        if servers > radix * radix // 2:
            raise ValueError(f"{servers} servers per rail need more than two tiers of {radix}-port switches "
                             f"(at most {radix * radix // 2})")
        ports, links = 3 * servers, 2 * servers  # leaves: S down, S up; spines: S
    g = gpus_per_server
    return BillOfMaterials("electrical rails", eps_ports=g * ports, transceivers=g * 2 * links, fibres=g * links)


def electrical_rails_opus_count(servers: int, gpus_per_server: int, switch_transceivers: bool = True) -> BillOfMaterials:
    """The electrical rails as the Opus authors' released cost model counts them (the artefact
    of arXiv 2602.12521, ``get_cost_power_h200``): per rail a fat tree of k-port switches with
    k = round(sqrt(4 S)), 2 S / (k/2) of them, plus G S / k spines across the rails, every one of
    their k ports counted; a transceiver on every GPU port, and on every switch port where
    ``switch_transceivers`` (its 400G case; its 800G case counts the GPUs' only); no fibres.
    Kept to show where its ratio comes from (docs/papers/opus.md).

    :raises ValueError: a size below 1.
    """
    _check_size(servers, gpus_per_server)
    k = max(2, int((servers * 4) ** 0.5 + 0.5))
    per_rail = servers // (k // 2) * 2
    spines = gpus_per_server * servers // k
    ports = k * (per_rail * gpus_per_server + spines)
    return BillOfMaterials("electrical rails (Opus code's count)", eps_ports=ports,
                           transceivers=servers * gpus_per_server + (ports if switch_transceivers else 0))


def photonic_rails(servers: int, gpus_per_server: int, ocs_ports_per_link: int = 2) -> BillOfMaterials:
    """Photonic rails (module doc): per rail OCS ports for its ``servers`` links, one transceiver
    per GPU.

    :raises ValueError: a size or ``ocs_ports_per_link`` below 1.
    """
    _check_size(servers, gpus_per_server)
    if ocs_ports_per_link < 1:
        raise ValueError(f"ocs_ports_per_link must be at least 1, got {ocs_ports_per_link}")
    g = gpus_per_server
    return BillOfMaterials("photonic rails", ocs_ports=g * servers * ocs_ports_per_link, transceivers=g * servers,
                           fibres=g * servers)


@dataclass(frozen=True)
class RailsComparison:
    """Electrical against photonic rails for one cluster: both bills, their power (W) and cost
    (USD) per component class, and the ratios electrical / photonic."""

    gpus: int
    components: ComponentSet
    electrical: BillOfMaterials
    photonic: BillOfMaterials

    @property
    def power_w(self) -> tuple[dict[str, float], dict[str, float]]:
        """(electrical, photonic) watts per class."""
        return self.electrical.power_w(self.components), self.photonic.power_w(self.components)

    @property
    def cost_usd(self) -> tuple[dict[str, float], dict[str, float]]:
        """(electrical, photonic) dollars per class."""
        return self.electrical.cost_usd(self.components), self.photonic.cost_usd(self.components)

    @property
    def power_ratio(self) -> float:
        """Electrical rails' power over photonic rails'."""
        e, p = self.power_w
        return e["total"] / p["total"]

    @property
    def cost_ratio(self) -> float:
        """Electrical rails' cost over photonic rails'."""
        e, p = self.cost_usd
        return e["total"] / p["total"]


def compare_rails(gpus: int, components: ComponentSet) -> RailsComparison:
    """Electrical against photonic rails for ``gpus`` GPUs in servers of
    ``components.gpus_per_server``.

    :raises ValueError: ``gpus`` is not a whole number of servers, or :func:`electrical_rails`
        refuses the size.
    """
    g = components.gpus_per_server
    if gpus < g or gpus % g:
        raise ValueError(f"gpus: {gpus} is not a whole number of servers of {g} GPUs")
    servers = gpus // g
    return RailsComparison(gpus, components, electrical_rails(servers, g, components.eps_switch.ports),
                      photonic_rails(servers, g))


def load_components(path: Path = DATA) -> tuple[dict[str, ComponentSet], dict]:
    """The component sets of ``path`` by name, and its ``paper`` entry (the published factors).

    :raises CostDataError: a missing or ill-typed field, an unknown kind, a set naming an unknown
        component or one of the wrong kind.
    """
    raw = yaml.safe_load(Path(path).read_text())
    comps: dict[str, Component] = {}
    for name, c in (raw.get("components") or {}).items():
        kind = c.get("kind")
        if kind not in KINDS:
            raise CostDataError(f"components.{name}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        for f in KINDS[kind]:
            if not isinstance(c.get(f), (int, float)) or c[f] < 0:
                raise CostDataError(f"components.{name}.{f}: a number >= 0 is required, got {c.get(f)!r}")
        if kind in ("eps_switch", "ocs") and c["ports"] < 2:
            raise CostDataError(f"components.{name}.ports: at least 2, got {c['ports']}")
        if not c.get("source") or not c.get("quote"):
            raise CostDataError(f"components.{name}: every figure needs its source and quote")
        comps[name] = Component(name, kind, float(c["power_w"]), float(c["cost_usd"]), int(c.get("ports", 0)),
                                float(c.get("cost_usd_per_m", 0.0)), c["source"], c["quote"],
                                str(c.get("confidence", "")))
    sets = {}
    for name, s in (raw.get("sets") or {}).items():
        parts = {}
        for kind in KINDS:  # each set names one component of every kind, under the kind's name
            ref = s.get(kind)
            if ref not in comps or comps[ref].kind != kind:
                raise CostDataError(f"sets.{name}.{kind}: {ref!r} is not a component of kind {kind}")
            parts[kind] = comps[ref]
        if not isinstance(s.get("gpus_per_server"), int) or s["gpus_per_server"] < 1:
            raise CostDataError(f"sets.{name}.gpus_per_server: a whole number >= 1 is required")
        sets[name] = ComponentSet(name, fibre_m=float(s.get("fibre_m", 0.0)), gpus_per_server=s["gpus_per_server"],
                                  **parts)
    return sets, raw.get("paper") or {}
