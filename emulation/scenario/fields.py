"""What the fields of a scenario file mean, read from the schema itself.

Every field of a section carries a description with its unit: the docstring under the field in a
pydantic model or a pydantic dataclass (``use_attribute_docstrings``), or, in the two stdlib
dataclasses a scenario uses as sections (:class:`~emulation.planners.cost.CostModel`,
:class:`~emulation.workloads.moe.MoELayer`), the ``description`` of the field's
``dataclasses.field(metadata=...)``, which pydantic reads as well. ``ocslab schema KIND
--scenario`` exports them, the scenario reference (docs/reference/scenarios.md) lists them, and a
bad value's one-line error ends with its field's (:func:`locate`, used by
:func:`emulation.scenario.load.validate`).
"""

from __future__ import annotations

import dataclasses
import types
import typing

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def section_fields(tp: object) -> dict[str, FieldInfo]:
    """The fields of a section type, by name: a pydantic model's, a pydantic dataclass's or a
    stdlib dataclass's (as pydantic sees them, description included); ``{}`` for any other type."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return dict(tp.model_fields)
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return {}
    if "__pydantic_fields__" in tp.__dict__:  # a pydantic dataclass
        return dict(tp.__pydantic_fields__)
    hints = typing.get_type_hints(tp, include_extras=True)
    return {f.name: FieldInfo.from_annotated_attribute(hints[f.name], f) for f in dataclasses.fields(tp) if f.init}


def section_types(root: object) -> list[type]:
    """Every section type (pydantic model or dataclass) reachable from ``root`` (such a type, or
    an annotation such as a Union of them) through field annotations, root first, each once."""
    seen: list[type] = []

    def visit(tp: object) -> None:
        fields = section_fields(tp)
        if fields or (isinstance(tp, type) and (issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp))):
            if tp in seen:
                return
            seen.append(tp)
            for f in fields.values():
                visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return seen


def _members(tp: object) -> list[object]:
    """The alternatives of a union annotation (``None`` left out; Annotated unwrapped)."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _item(tp: object, key: object) -> object:
    """The type of element ``key`` of a container annotation ``tp`` (a list index, a tuple
    position, a dict key), or None."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, set, frozenset) and args:
        return args[0]
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
        return args[key] if isinstance(key, int) and 0 <= key < len(args) else None
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def locate(root: type, loc: tuple) -> tuple[tuple, FieldInfo | None, int | None]:
    """Follow a validation error's location ``loc`` from section type ``root``.

    :returns: ``(loc, field, union)``: the location without pydantic's union member tags (such
        as ``float`` in ``emulation.link_mbps.float``), the :class:`FieldInfo` of the last field
        it names (None if it names none, such as an unknown field), and the position in the
        cleaned location of the field whose union dropped a tag (None if none did).
    """
    return _walk(root, loc)[:3]


def field_names_at(root: type, loc: tuple) -> list[str]:
    """The field names of the section at location ``loc`` from section type ``root`` (the
    section an unknown key was found in), or [] if ``loc`` names no section."""
    tp = _walk(root, loc)[3]
    for member in _members(tp) if tp is not None else []:
        fields = section_fields(member)
        if fields:
            return list(fields)
    return []


def _walk(root: type, loc: tuple) -> tuple[tuple, FieldInfo | None, int | None, object]:
    """:func:`locate`, and the type annotation at the end of ``loc`` (None if unknown)."""
    out: list = []
    field: FieldInfo | None = None
    union: int | None = None
    tp: object = root
    items = list(loc)
    while items:
        item = items.pop(0)
        members = _members(tp)
        if len(members) > 1:  # pydantic tags an error inside a union with the alternative's label
            named = [m for m in members if getattr(m, "__name__", None) == item]
            tp = named[0] if named else None
            union = len(out) - 1 if union is None else union
            continue
        tp = members[0] if members else None
        out.append(item)
        fields = section_fields(tp)
        if fields:
            field = fields.get(item) if isinstance(item, str) else None
            tp = field.annotation if field is not None else None
        else:
            tp = _item(tp, item)
    return tuple(out), field, union, tp
