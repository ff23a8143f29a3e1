"""Scenario keys that were renamed, so that files written for the old keys keep loading.

Every kind spells a shared quantity one way (docs/architecture.md, vocabulary): the emulated link
rate is ``emulation.link_mbps``, the controller framework ``emulation.controller``, ports per
GPU ``ports_per_gpu``, the port rate ``port_gbps``; ``headroom`` is only the packet backend's
probe policy (``emulation.headroom``), so a rotor slot's spare capacity is ``slot_headroom`` and
a TE capacity reserve ``capacity_headroom``. :func:`migrate` moves an old key to its new place
and says so in one line; a file holding both the old and the new key is refused, naming both.
"""

from __future__ import annotations

from pathlib import Path

from emulation.scenario.schema import ScenarioError

#: ``kind -> [(old dotted path, new dotted path)]``; ``*`` stands for every item of a list.
RENAMED: dict[str, list[tuple[str, str]]] = {
    "collective": [("runs.*.headroom", "runs.*.slot_headroom")],
    "wan": [("packet.link_mbps", "emulation.link_mbps"), ("packet.controller", "emulation.controller"),
            ("wan.te.headroom", "wan.te.capacity_headroom"), ("packet", "wan.replay")],
    "rails": [("rails.fabric.rail_ports", "rails.fabric.ports_per_gpu"), ("packet", "rails.torch_job")],
    "tenancy": [("tenancy.packet.link_mbps", "emulation.link_mbps"),
                ("tenancy.packet.byte_scale", "emulation.byte_scale"), ("tenancy.packet", "tenancy.fabric")],
}


def _items(data: dict, parts: list[str], prefix: str = ""):
    """``(container, key, dotted path)`` of every place ``parts`` (with ``*`` for list items)
    names in ``data``; the containers are dicts, created on the way for a destination."""
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(data, list):
            for i, item in enumerate(data):
                yield from _items(item, rest, f"{prefix}{i}.") if rest else ()
        return
    if not isinstance(data, dict):
        return
    if not rest:
        yield data, head, f"{prefix}{head}"
    elif head in data:
        yield from _items(data[head], rest, f"{prefix}{head}.")


def migrate(kind: str, data: dict, path: Path | str = "") -> tuple[dict, list[str]]:
    """``data`` (a scenario file's mapping, changed in place) with the old keys of ``kind`` moved
    to their new places, and one note per key moved (``FILE: old is now new``).

    :raises ScenarioError: the old and the new key are both given.
    """
    notes = []
    for old, new in RENAMED.get(kind, []):
        for box, key, where in list(_items(data, old.split("."))):
            if key not in box:
                continue
            value = box.pop(key)
            # the destination, relative to the same list item as the source
            stem = where[: len(where) - len(old.split("*")[-1].lstrip("."))] if "*" in old else ""
            target = stem + new.split("*")[-1].lstrip(".") if "*" in new else new
            node = data
            *dirs, leaf = target.split(".")
            for d in dirs:
                node = node[int(d)] if isinstance(node, list) else node.setdefault(d, {})
            if not isinstance(node, dict):
                raise ScenarioError(f"{path}: {'.'.join(dirs)}: must be a mapping")
            if leaf in node and isinstance(node[leaf], dict) and isinstance(value, dict):
                clash = sorted(set(node[leaf]) & set(value))
                if clash:
                    raise ScenarioError(f"{path}: {where}.{clash[0]}: given twice (also as {target}.{clash[0]})")
                node[leaf] = {**node[leaf], **value}
            elif leaf in node:
                raise ScenarioError(f"{path}: {where}: given twice (it is now {target}, which is also given)")
            else:
                node[leaf] = value
            notes.append(f"{path}: {where} is now {target}")
    return data, notes
