"""The scenario reference as plain Markdown, generated from the models that validate the files:
``docs/reference/scenario-fields.md``, readable in the repository without building the docs.

Every section of every kind gets a table: field, type, default, bounds, description. The
description, type, default and bounds come from the code (:mod:`emulation.scenario.fields`), as
in ``ocslab schema KIND --scenario`` and the Sphinx reference; a section shared by several kinds
is listed under the first that has it. ``python -m emulation.kinds.reference`` rewrites the
page; ``tests/test_scenario_fields.py`` fails when it is out of date.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from pathlib import Path

from pydantic_core import PydanticUndefined

from emulation.scenario.fields import section_fields, section_types

#: The page this module writes, relative to the repository's root.
PAGE = Path("docs/reference/scenario-fields.md")


def key_paths(root: object) -> dict[type, str]:
    """Where each section type reachable from ``root`` sits in a scenario file: its dotted YAML
    key (``wan.te``; ``[]`` marks a list item), the first place it is found; the root is
    ``(the file)``."""
    paths: dict[type, str] = {}
    queue = [(t, "(the file)") for t in section_types(root)[:1]]
    while queue:
        model, path = queue.pop(0)
        if model in paths:
            continue
        paths[model] = path
        for name, field in section_fields(model).items():
            found = section_types(field.annotation)
            direct = [t for t in found if not any(t in section_types(c)[1:] for c in found if c is not t)]
            listed = "[]" if "list[" in str(field.annotation) else ""
            prefix = "" if path == "(the file)" else path + "."
            queue += [(t, f"{prefix}{name}{listed}") for t in direct]
    return paths


def type_name(tp: object) -> str:
    """An annotation as a reader writes it: ``int``, ``float | None``, ``'ring' | 'rhd'``, a
    section by its class name."""
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType")):
        return " | ".join(type_name(a) for a in args)
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not args:
        return tp.__name__
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args if a is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return str(tp).replace("typing.", "")


def _bounds(field) -> str:
    """A field's bounds from its pydantic metadata: ``>= 1``, ``> 0, <= 1``."""
    names = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >=", "max_length": "length <="}
    out = []
    for m in field.metadata:
        items = ({f.name: getattr(m, f.name) for f in dataclasses.fields(m)} if dataclasses.is_dataclass(m)
                 else dict(getattr(m, "__dict__", {})))
        out += [f"{names.get(k, k)} {v:g}" if isinstance(v, float) else f"{names.get(k, k)} {v}"
                for k, v in items.items() if v is not None and k in names]
    return ", ".join(out)


def _cell(text: str) -> str:
    """One Markdown table cell: one line, pipes escaped, reST roles and literals made Markdown."""
    text = " ".join((text or "").split())
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|")


def _default(field) -> str:
    if field.default is not PydanticUndefined:
        return f"`{field.default!r}`" if field.default is not None else "none"
    if field.default_factory is not None:
        try:
            return f"`{field.default_factory()!r}`"
        except TypeError:
            return "(computed)"
    return "**required**"


def reference_markdown() -> str:
    """The whole page (module doc)."""
    from emulation import kinds

    lines = ["# Scenario fields", "",
             "Every field of every scenario kind, generated from the models that validate the files "
             "(`python -m emulation.kinds.reference` rewrites this page; a test fails when it is out of date). "
             "The same descriptions end the one-line refusal of a bad field (`FILE: field: problem; expected: "
             "description`). [Scenario files](scenarios.md) is the same reference in the built documentation; "
             "`ocslab schema KIND --scenario` prints the JSON Schema.", ""]
    done: set[type] = set()
    for name in kinds.NAMES:
        root = kinds.get(name).scenario
        lines += [f"## {name}", ""]
        for model, path in key_paths(root).items():
            if model in done:
                lines += [f"`{path}`: as in {model.__qualname__} above.", ""] if path != "(the file)" else []
                continue
            done.add(model)
            title = "The whole file" if path == "(the file)" else f"`{path}:`"
            lines += [f"### {title} ({model.__qualname__})", "", "| field | type | default | bounds | description |",
                      "|---|---|---|---|---|"]
            for fname, field in section_fields(model).items():
                lines.append(f"| `{fname}` | {_cell(type_name(field.annotation))} | {_cell(_default(field))} | "
                             f"{_cell(_bounds(field))} | {_cell(field.description or '')} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write :data:`PAGE` under the repository's root (or the path given)."""
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / PAGE
    path.write_text(reference_markdown())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
