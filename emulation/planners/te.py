"""Traffic-engineering formulations over tunnels, as LPs (scipy's HiGHS) and with Symphony's
quadratic regulariser (cvxpy with Clarabel); arXiv 2510.11937.

Variables ``w[t] >= 0``: the fraction of tunnel t's demand d (volume ``D_d``) sent on it. Link
load ``L_e = sum_t w[t] D_d(t)`` over the tunnels through e; utilisation ``u_e = L_e / c_e``.

- ``max-flow``: maximise the carried demand ``sum_t w[t] D_d(t)`` s.t. ``sum_{t of d} w[t] <= 1``
  and ``L_e <= c_e``;
- ``mcf`` (maximum concurrent flow): maximise ``a`` in [0, 1] s.t. ``sum_{t of d} w[t] = a`` for
  every demand with volume and ``L_e <= c_e``;
- ``min-mlu``: minimise ``Z`` s.t. ``sum_{t of d} w[t] = 1`` and ``u_e <= Z``.

``regulariser`` lambda > 0 adds ``lambda x sum_e u_e^2`` to the minimised objective (maximised
ones are negated), which makes the optimum unique and smooth in the demands, so that controllers
with slightly different views of the demand land on compatible splits (Symphony's point; its
artefact uses lambda = 1, 1e-4, 1e-4 for the three objectives: :data:`SYMPHONY_LAMBDA`).
``headroom`` h solves against capacities ``(1 - h) c_e`` (the usual guard against divergence).

A controller installs a demand's splits as an OpenFlow select group whose buckets carry integer
weights: :func:`bucket_weights` turns splits into those weights. :func:`te_routes` gives a
solution in the topology's own terms (router names, each demand's tunnels and splits, each link's
load): what ``ocslab te`` prints.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator
from scipy.optimize import linprog
from scipy.sparse import csr_matrix
from scipy.sparse import hstack as sparse_hstack
from scipy.sparse import vstack as sparse_vstack

from emulation.planners.tunnels import Tunnels
from emulation.sections import StrictModel, known_name
from topologies.wan import WanTopology

Objective = Literal["max-flow", "mcf", "min-mlu"]
OBJECTIVES: tuple[str, ...] = ("max-flow", "mcf", "min-mlu")

#: Symphony's regulariser weights per objective (its released artefact).
SYMPHONY_LAMBDA = {"max-flow": 1.0, "mcf": 1e-4, "min-mlu": 1e-4}


class TeSpec(StrictModel):
    """``te:`` what every controller's TE solves (:func:`solve`): the ``objective``, the
    regulariser lambda (a number >= 0, or ``symphony``) and ``capacity_headroom``, the fraction
    of every link's capacity the TE leaves free."""

    objective: str = "mcf"
    """What every controller's TE optimises: ``max-flow`` (the carried demand), ``mcf`` (maximum
    concurrent flow: the fraction of every demand carried) or ``min-mlu`` (the maximum link
    utilisation, minimised)."""
    regulariser: float | Literal["symphony"] = 0.0
    """The regulariser lambda: the weight of ``sum_e u_e^2`` (link utilisations) Symphony adds
    to the objective, a number >= 0 (0: the plain LP), or ``symphony``: its artefact's value for
    the objective."""
    capacity_headroom: float = Field(default=0.0, ge=0, lt=1)
    """Fraction of every link's capacity the TE leaves free."""

    @field_validator("objective")
    @classmethod
    def _objective(cls, v: str) -> str:
        return known_name(v, OBJECTIVES, "objective")

    @field_validator("regulariser")
    @classmethod
    def _lam(cls, v):
        if v != "symphony" and v < 0:
            raise ValueError(f"must be >= 0 or symphony, got {v}")
        return v

    @property
    def lam(self) -> float:
        """lambda as a number."""
        return SYMPHONY_LAMBDA[self.objective] if self.regulariser == "symphony" else float(self.regulariser)

    def settings(self) -> dict:
        """``{"objective", "regulariser" (lambda, a number), "capacity_headroom"}``: what a
        controller is handed and a result records."""
        return {"objective": self.objective, "regulariser": self.lam, "capacity_headroom": self.capacity_headroom}


#: The bucket weights of one demand's select group sum to GROUP_WEIGHT (:func:`bucket_weights`).
#: Open vSwitch selects a bucket with its dp_hash method (flows hashed onto 64 values, each value
#: mapped to a bucket in proportion to the weights) only when every weight is at least 1/64 of
#: the total; otherwise it falls back to highest-random-weight hashing, whose shares are not
#: proportional to the weights (3:1 gives 5:1). Weights in 64ths keep every group on dp_hash.
GROUP_WEIGHT = 64


class TeError(ValueError):
    """A TE problem that cannot be solved (bad input, or the solver failed)."""


@dataclass(frozen=True)
class TeSolution:
    """A TE allocation: ``splits[t]`` the fraction of tunnel t's demand on it; ``load[e]`` the
    resulting load of link e (demand units), ``utilisation[e] = load / capacity``; ``value`` the
    objective's optimum (carried demand, concurrent fraction a, or MLU Z), without the
    regulariser; ``carried`` the demand carried in total."""

    objective: str
    regulariser: float
    splits: np.ndarray
    load: np.ndarray
    utilisation: np.ndarray
    value: float
    carried: float

    @property
    def mlu(self) -> float:
        """The largest link utilisation."""
        return float(self.utilisation.max(initial=0.0))


def link_load(tunnels: Tunnels, splits: np.ndarray, volumes: np.ndarray) -> np.ndarray:
    """``(links,)`` load of every link (the volumes' unit) when tunnel t carries
    ``splits[t] x volumes[demand of t]``: ``splits`` is ``(tunnels,)``, ``volumes`` ``(demands,)``
    (:meth:`Tunnels.volumes`)."""
    return tunnels.incidence @ (np.asarray(splits) * volumes[tunnels.demand_of])


def solve(tunnels: Tunnels, matrix: np.ndarray, capacity: np.ndarray, objective: Objective = "mcf",
          regulariser: float = 0.0, headroom: float = 0.0) -> TeSolution:
    """Solve ``objective`` for the demands of ``matrix`` over ``tunnels`` (module doc; Symphony,
    arXiv 2510.11937).

    :param tunnels: the tunnels of every demand (:func:`emulation.planners.tunnels.k_shortest`).
    :param matrix: ``(n, n)`` demands ``[src, dst]`` of n routers, in the unit of ``capacity``.
    :param capacity: ``(links,)`` capacity of every link, > 0.
    :param objective: ``max-flow``, ``mcf`` or ``min-mlu`` (:data:`OBJECTIVES`).
    :param regulariser: lambda >= 0 (0: the LP, solved by HiGHS; else the QP, by Clarabel).
    :param headroom: fraction of every capacity kept free, in [0, 1).
    :returns: the splits per tunnel and the link loads they give (:class:`TeSolution`).
    :raises TeError: bad arguments, or the solver did not reach an optimum.
    """
    if objective not in OBJECTIVES:
        raise TeError(f"te.objective: unknown {objective!r} (known: {', '.join(OBJECTIVES)})")
    if not (regulariser >= 0 and np.isfinite(regulariser)):
        raise TeError(f"te.regulariser: must be a finite number >= 0, got {regulariser}")
    if not 0 <= headroom < 1:
        raise TeError(f"te.capacity_headroom: must be in [0, 1), got {headroom}")
    vol = tunnels.volumes(matrix)
    if (vol < 0).any() or not np.isfinite(vol).all():
        raise TeError("traffic matrix: demands must be finite and >= 0")
    cap = np.asarray(capacity, dtype=float) * (1 - headroom)
    coeff = tunnels.incidence * vol[tunnels.demand_of] / cap[:, None]  # (links, tunnels): u = coeff @ w
    if regulariser > 0:
        w, extra = _qp(tunnels, vol, coeff, objective, regulariser)
    else:
        w, extra = _lp(tunnels, vol, coeff, objective)
    w = np.clip(w, 0.0, 1.0)
    load = link_load(tunnels, w, vol)
    carried = float(w @ vol[tunnels.demand_of])
    util = load / np.asarray(capacity, dtype=float)
    value = {"max-flow": carried, "mcf": extra, "min-mlu": float(util.max(initial=0.0))}[objective]
    return TeSolution(objective, regulariser, w, load, util, value, carried)


def _membership(tunnels: Tunnels) -> csr_matrix:
    """``(demands, tunnels)``: 1 where the tunnel belongs to the demand."""
    t = len(tunnels.paths)
    return csr_matrix((np.ones(t), (tunnels.demand_of, np.arange(t))), shape=(len(tunnels.demands), t))


def _lp(tunnels: Tunnels, vol: np.ndarray, coeff: np.ndarray, objective: str) -> tuple[np.ndarray, float]:
    """The LP with HiGHS; the splits and the auxiliary variable (a or Z; 0 for max-flow). The
    constraint matrices are handed over sparse (a tunnel crosses a few links; GEANT's 1,848
    tunnels and 72 links are 97% zeros), which HiGHS takes as they are."""
    nt, nl = len(tunnels.paths), coeff.shape[0]
    member = _membership(tunnels)
    util = csr_matrix(coeff)
    active = vol > 0
    if objective == "max-flow":
        c = -vol[tunnels.demand_of]
        res = linprog(c, A_ub=sparse_vstack([util, member], format="csr"),
                      b_ub=np.concatenate([np.ones(nl), np.ones(len(vol))]), bounds=(0, None), method="highs")
        extra = 0.0
    elif objective == "mcf":  # variables [w, a]: maximise a
        c = np.zeros(nt + 1)
        c[-1] = -1.0
        a_ub = sparse_hstack([util, csr_matrix((nl, 1))], format="csr")
        a_eq = sparse_hstack([member[active], csr_matrix(-np.ones((int(active.sum()), 1)))], format="csr")
        res = linprog(c, A_ub=a_ub, b_ub=np.ones(nl), A_eq=a_eq, b_eq=np.zeros(active.sum()),
                      bounds=[(0, None)] * nt + [(0, 1)], method="highs")
        extra = float(res.x[-1]) if res.status == 0 else 0.0
    else:  # min-mlu, variables [w, Z]: minimise Z
        c = np.zeros(nt + 1)
        c[-1] = 1.0
        a_ub = sparse_hstack([util, csr_matrix(-np.ones((nl, 1)))], format="csr")
        a_eq = sparse_hstack([member, csr_matrix((len(vol), 1))], format="csr")
        res = linprog(c, A_ub=a_ub, b_ub=np.zeros(nl), A_eq=a_eq, b_eq=np.ones(len(vol)),
                      bounds=(0, None), method="highs")
        extra = float(res.x[-1]) if res.status == 0 else 0.0
    if res.status != 0:
        raise TeError(f"te: HiGHS did not reach an optimum for {objective}: {res.message}")
    return res.x[:nt], extra


def _qp(tunnels: Tunnels, vol: np.ndarray, coeff: np.ndarray, objective: str,
        lam: float) -> tuple[np.ndarray, float]:
    """The regularised problem with cvxpy and Clarabel; the splits and a (mcf; else 0)."""
    import cvxpy as cp

    nt = len(tunnels.paths)
    member = _membership(tunnels)
    active = np.flatnonzero(vol > 0)
    w = cp.Variable(nt, nonneg=True)
    util = coeff @ w
    reg = lam * cp.sum_squares(util)
    extra = None
    if objective == "max-flow":
        problem = cp.Problem(cp.Minimize(-(vol[tunnels.demand_of] @ w) + reg), [member @ w <= 1, util <= 1])
    elif objective == "mcf":
        a = cp.Variable()
        problem = cp.Problem(cp.Minimize(-a + reg), [member[active] @ w == a, util <= 1, a >= 0, a <= 1])
        extra = a
    else:
        z = cp.Variable()
        problem = cp.Problem(cp.Minimize(z + reg), [member @ w == 1, util <= z])
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as e:
        raise TeError(f"te: Clarabel failed on regularised {objective}: {e}") from None
    if problem.status not in ("optimal", "optimal_inaccurate") or w.value is None:
        raise TeError(f"te: Clarabel did not reach an optimum for regularised {objective}: {problem.status}")
    return np.asarray(w.value), float(extra.value) if extra is not None else 0.0


def bucket_weights(splits) -> tuple[list[int], int]:
    """Integer OpenFlow select-group bucket weights for one demand's tunnel splits.

    The largest remainder method over the splits and the share not admitted (``1 - sum``), so
    that no bucket's share is off by more than ``1 / GROUP_WEIGHT``.

    :param splits: ``(tunnels of the demand,)`` fractions of the demand per tunnel
        (:attr:`TeSolution.splits` of its tunnels); each is clipped to [0, 1] and together they
        should sum to at most 1 (not checked: a larger sum gives weights totalling more than
        :data:`GROUP_WEIGHT`).
    :returns: ``(weights, drop)``: ``weights[i]`` the integer weight of tunnel i's bucket and
        ``drop`` that of the bucket that drops what the TE does not admit (max-flow, mcf);
        together they sum to :data:`GROUP_WEIGHT`. A zero weight means no bucket.
    """
    x = np.clip(np.asarray(splits, dtype=float), 0.0, 1.0)
    want = np.append(x, max(0.0, 1.0 - x.sum())) * GROUP_WEIGHT
    w = np.floor(want).astype(int)
    for j in np.argsort(-(want - w), kind="stable")[: GROUP_WEIGHT - int(w.sum())]:
        w[j] += 1
    return [int(v) for v in w[:-1]], int(w[-1])


@dataclass(frozen=True)
class TunnelSplit:
    """One tunnel of a demand: its ``path`` as router names (source first, destination last) and
    its ``split``, the fraction of the demand sent on it."""

    path: list[str]
    split: float


@dataclass(frozen=True)
class DemandSplits:
    """One demand ``src -> dst`` (router names) of ``demand`` units and its tunnels (:class:`TunnelSplit`)."""

    src: str
    dst: str
    demand: float
    tunnels: list[TunnelSplit]


@dataclass(frozen=True)
class LinkLoad:
    """Link ``src -> dst`` (router names): its ``capacity`` and ``load`` (demand units) and
    ``utilisation = load / capacity``."""

    src: str
    dst: str
    capacity: float
    load: float
    utilisation: float


@dataclass(frozen=True)
class TeRoutes:
    """A :class:`TeSolution` in its topology's terms (:func:`te_routes`): the ``solution``, the
    demand ``offered`` in total (demand units), one :class:`DemandSplits` per demand (the order of
    :attr:`Tunnels.demands`) and one :class:`LinkLoad` per link (the topology's order)."""

    solution: TeSolution
    offered: float
    demands: list[DemandSplits]
    links: list[LinkLoad]

    #: Relative slack of the feasibility checks (the solvers' own tolerance is about 1e-7).
    FEASIBILITY_SLACK = 1e-5

    def infeasible(self, headroom: float = 0.0) -> list[str]:
        """What the solution breaks, one line ``check: detail`` each (empty: feasible): a split
        outside [0, 1], or a demand's splits summing past 1 (``splits``), and for ``max-flow``
        and ``mcf``, whose constraints keep every load within capacity less ``headroom``, a link
        loaded past it (``capacity``). ``min-mlu`` may load links past 1: its MLU is the answer."""
        slack, out = self.FEASIBILITY_SLACK, []
        for d in self.demands:
            fractions = [t.split for t in d.tunnels]
            if min(fractions, default=0.0) < -slack or sum(fractions) > 1 + slack:
                out.append(f"splits: demand {d.src}->{d.dst} splits {', '.join(f'{x:.6f}' for x in fractions)}")
        if self.solution.objective in ("max-flow", "mcf"):
            over = [l for l in self.links if l.load > (1 - headroom) * l.capacity * (1 + slack)]
            if over:
                worst = max(over, key=lambda l: l.utilisation)
                out.append(f"capacity: {len(over)} links loaded past {1 - headroom:.0%} of capacity, the worst "
                           f"{worst.src}->{worst.dst} at {worst.utilisation:.4f}")
        return out

    def to_json(self) -> dict:
        """The solution's objective, regulariser, value, carried demand and MLU, the demand
        offered, and every demand's splits and link's load, as plain data."""
        sol = self.solution
        return {"objective": sol.objective, "regulariser": sol.regulariser, "value": sol.value, "carried": sol.carried,
                "offered": self.offered, "mlu": sol.mlu, "demands": [dataclasses.asdict(d) for d in self.demands],
                "links": [dataclasses.asdict(l) for l in self.links]}


def te_routes(topo: WanTopology, tunnels: Tunnels, matrix: np.ndarray, objective: Objective = "mcf",
              regulariser: float = 0.0, headroom: float = 0.0) -> TeRoutes:
    """Solve ``objective`` for ``matrix`` over ``tunnels`` on ``topo``'s capacities, as one central
    controller with the true demand (:func:`solve`; Symphony, arXiv 2510.11937), and give every
    demand's tunnels as router paths with their splits and every link's load and utilisation.

    :param topo: the WAN (router names, links, capacities).
    :param tunnels: its tunnels (:func:`emulation.planners.tunnels.k_shortest`).
    :param matrix: ``(routers, routers)`` demands ``[src, dst]``, in the unit of the capacities.
    :param objective: ``max-flow``, ``mcf`` or ``min-mlu`` (:data:`OBJECTIVES`).
    :param regulariser: lambda >= 0 (Symphony's ``lambda x sum_e u_e^2``).
    :param headroom: fraction of every capacity kept free, in [0, 1).
    :raises TeError: bad arguments, or the solver did not reach an optimum.
    """
    cap = np.array(topo.capacity)
    sol = solve(tunnels, matrix, cap, objective, regulariser, headroom)
    vol = tunnels.volumes(matrix)
    names = topo.names

    def route(path) -> list[str]:
        return [names[topo.links[path[0]][0]]] + [names[topo.links[e][1]] for e in path]

    demands = [DemandSplits(names[s], names[d], float(vol[i]),
                            [TunnelSplit(route(tunnels.paths[j]), float(sol.splits[j])) for j in tunnels.of(i)])
               for i, (s, d) in enumerate(tunnels.demands)]
    links = [LinkLoad(names[u], names[v], float(c), float(l), float(x))
             for (u, v), c, l, x in zip(topo.links, cap, sol.load, sol.utilisation)]
    return TeRoutes(sol, float(vol.sum()), demands, links)
