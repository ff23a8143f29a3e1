"""Precomputed failover configurations for a job's ring on a rack with spares (LUMION, arXiv 2505.23105).

A job's logical topology is a ring of ranks, realised by circuits: ``placement[r]`` is the GPU
of rank r, and consecutive ranks (cyclically) share a circuit. When the GPU of rank k fails,
one of three recoveries applies (``docs/mechanisms.md``, LUMION):

- ``optical``: a spare s takes rank k's logical position: the configuration is the ring over
  the placement with k's GPU replaced by s (same neighbours, same bandwidth). Circuits not
  touching the failed GPU are kept, so only rank k's two circuits go dark.
- ``electrical``: no rewiring: the failed GPU's circuits are removed (its light is gone) and the
  spare is reached over the rack's slower electrical path (``eps0`` of
  :func:`topologies.builders.rack`); rank k moves to the spare.
- ``migration``: the whole job restarts on a fresh set of GPUs (the first ``ranks`` spares),
  joined in a ring of their own; the old ring's circuits are removed.

:func:`failover_table` computes every (failed rank, spare) answer in advance, as LUMION's
controller does, so that recovery is a table lookup and one reconfiguration.

Spec: ``docs/mechanisms.md`` (LUMION: replacing a failed GPU inside the rack).
"""

from __future__ import annotations

from dataclasses import dataclass

from emulation.fabric import Circuit, Configuration, Fabric, FabricError, assign_ports

#: Recovery modes (module doc).
RECOVERIES = ("optical", "electrical", "migration")


@dataclass(frozen=True)
class Failover:
    """The answer to one failure: the new configuration and where every rank runs.

    :ivar placement: ``(ranks,)`` GPU of every rank after recovery.
    :ivar moved: ranks that run on a different GPU than before.
    """

    mode: str
    failed_gpu: int
    configuration: Configuration
    placement: tuple[int, ...]
    moved: tuple[int, ...]

    def to_json(self) -> dict:
        """``{"mode", "failed_gpu", "configuration", "placement", "moved"}``."""
        return {"mode": self.mode, "failed_gpu": self.failed_gpu, "configuration": self.configuration.to_json(),
                "placement": list(self.placement), "moved": list(self.moved)}


def ring_configuration(fabric: Fabric, placement: list[int] | tuple[int, ...], keep: Configuration | None = None,
                       ocs: str = "ocs0") -> Configuration:
    """Circuits of the ring ``placement[0]-placement[1]-...-placement[-1]-placement[0]`` on
    ``ocs``, reusing the circuits of ``keep`` that join ring neighbours.

    :raises FabricError: fewer than 3 GPUs, a GPU twice, or a GPU without 2 free ports on ``ocs``.
    """
    if len(placement) < 3 or len(set(placement)) != len(placement):
        raise FabricError(f"a ring needs at least 3 distinct GPUs, got {list(placement)}")
    pairs = [(placement[i], placement[(i + 1) % len(placement)]) for i in range(len(placement))]
    kept = keep[ocs] if keep is not None else ()
    return assign_ports(fabric, ocs, pairs, keep=kept)


def _without(config: Configuration, gpu: int) -> Configuration:
    return Configuration({name: [c for c in config[name] if gpu not in (c.a.gpu, c.b.gpu)] for name in config})


def failover(fabric: Fabric, mode: str, placement: tuple[int, ...], current: Configuration, failed_gpu: int,
             spare: int | None = None, spares: tuple[int, ...] = ()) -> Failover:
    """The recovery ``mode`` (:data:`RECOVERIES`) from the failure of ``failed_gpu``.

    :param placement: GPU of every rank now (``failed_gpu`` among them).
    :param current: the configuration in place (the ring's circuits).
    :param spare: the spare that takes the failed rank (``optical``, ``electrical``).
    :param spares: the free spares in order (``migration`` takes the first ``len(placement)``).
    :raises FabricError: unknown mode, ``failed_gpu`` not in the job, no usable spare, or a
        configuration that does not fit the ports.
    """
    if mode not in RECOVERIES:
        raise FabricError(f"unknown recovery {mode!r} (known: {', '.join(RECOVERIES)})")
    if failed_gpu not in placement:
        raise FabricError(f"GPU {failed_gpu} runs no rank of the job {list(placement)}")
    k = placement.index(failed_gpu)
    if mode == "migration":
        fresh = tuple(spares[:len(placement)])
        if len(fresh) < len(placement) or set(fresh) & set(placement):
            raise FabricError(f"migration needs {len(placement)} fresh GPUs, the free spares are {list(spares)}")
        config = ring_configuration(fabric, fresh)
        return Failover(mode, failed_gpu, config, fresh, tuple(range(len(placement))))
    if spare is None or spare in placement:
        raise FabricError(f"{mode} recovery needs a free spare, got {spare}")
    new = tuple(spare if r == k else g for r, g in enumerate(placement))
    if mode == "optical":
        config = ring_configuration(fabric, new, keep=current)
    else:
        config = _without(current, failed_gpu)
    return Failover(mode, failed_gpu, config, new, (k,))


def failover_table(fabric: Fabric, mode: str, placement: tuple[int, ...], spares: tuple[int, ...],
                   current: Configuration | None = None) -> dict[int, Failover]:
    """Every failure's answer, computed in advance: ``{failed GPU: Failover}`` for each GPU of
    ``placement``, each taking the first spare (``migration``: the first ``len(placement)``).

    :raises FabricError: as :func:`failover` (e.g. no spare, or too few for a migration).
    """
    current = fabric.initial if current is None else current
    if not spares:
        raise FabricError("the rack has no spare GPU")
    return {g: failover(fabric, mode, placement, current, g, spares[0], spares) for g in placement}


def circuits_touching(config: Configuration, gpu: int) -> list[Circuit]:
    """Circuits of ``config`` with an end on ``gpu``."""
    return [c for _, c in config.all_circuits() if gpu in (c.a.gpu, c.b.gpu)]
