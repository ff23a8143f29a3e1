"""A Sphinx directive that documents a scenario kind's models from the code.

``.. ocslab-models:: wan`` (option ``:part: scenario`` or ``result``) emits an
``autopydantic_model`` (autodoc-pydantic) for the kind's scenario (or result) model and for every
model its fields reach, and a class with one attribute per field for every dataclass they
reach (pydantic dataclasses such as ``ParallelSpec``, stdlib ones such as ``CostModel``),
so that the reference lists every field of every kind, with its description, type, default and
constraints, without a line written by hand."""

from __future__ import annotations

import dataclasses
import inspect
import typing

from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from sphinx.util.docutils import SphinxDirective

from emulation.scenario.fields import section_fields, section_types
from emulation.kinds.reference import key_paths


def reachable(root: object) -> list[type]:
    """Every pydantic model and dataclass reachable from ``root`` (a model class or a type such
    as a Union of them) through field annotations, root first, each once
    (:func:`emulation.scenario.fields.section_types`)."""
    return section_types(root)


def _type_name(tp: object) -> str:
    """An annotation as written in code: ``int``, ``float | None``, ``Literal['a', 'b']``."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    text = repr(tp).replace("typing.", "").replace("NoneType", "None")
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and not typing.get_args(arg):
            text = text.replace(f"{arg.__module__}.{arg.__qualname__}", arg.__qualname__)
    return text


def _constraints(field) -> list[str]:
    """A field's constraints as ``name = value`` (``ge = 1``), from its pydantic metadata."""
    out = []
    for m in field.metadata:
        items = ({f.name: getattr(m, f.name) for f in dataclasses.fields(m)} if dataclasses.is_dataclass(m)
                 else dict(getattr(m, "__dict__", {})))
        out += [f"``{k} = {v!r}``" for k, v in items.items() if v is not None]
    return out


def dataclass_lines(cls: type) -> list[str]:
    """reST documenting dataclass ``cls``: the class with its docstring and an attribute per
    field with its description, type, default and constraints."""
    module = cls.__module__
    lines = [f".. py:class:: {cls.__qualname__}", f"   :module: {module}", ""]
    lines += [f"   {line}" if line else "" for line in (inspect.getdoc(cls) or "").splitlines()]
    lines.append("")
    for name, field in section_fields(cls).items():
        lines += [f"   .. py:attribute:: {name}", f"      :module: {module}",
                  f"      :type: {_type_name(field.annotation)}"]
        if field.default is not PydanticUndefined:
            lines.append(f"      :value: {field.default!r}")
        lines.append("")
        lines += [f"      {line}" if line else "" for line in (field.description or "").splitlines()]
        constraints = _constraints(field)
        if constraints:
            lines += ["", f"      Constraints: {', '.join(constraints)}"]
        lines.append("")
    return lines


class OcslabModels(SphinxDirective):
    """``.. ocslab-models:: KIND`` with ``:part: scenario|result`` (default scenario). A model
    shared by several kinds (such as ``EmulationSpec``) is documented where it first appears."""

    required_arguments = 1
    option_spec = {"part": lambda v: directives.choice(v, ("scenario", "result"))}

    def run(self):
        from docutils import nodes

        from emulation import kinds

        kind = kinds.get(self.arguments[0])
        root = kind.scenario if self.options.get("part", "scenario") == "scenario" else kind.result
        done = self.env.temp_data.setdefault("ocslab_models", set())
        lines = []
        where = key_paths(root) if self.options.get("part", "scenario") == "scenario" else {}
        for model in reachable(root):
            name = f"{model.__module__}.{model.__qualname__}"
            if name not in done:
                done.add(name)
                if model in where:
                    key = where[model]
                    lines += ["**The whole file:**" if key == "(the file)" else f"**The** ``{key}:`` **section:**", ""]
                if issubclass(model, BaseModel):
                    lines += [f".. autopydantic_model:: {name}", "   :inherited-members: BaseModel", ""]
                else:
                    lines += dataclass_lines(model)
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="ocslab-models"), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("ocslab-models", OcslabModels)
    return {"parallel_read_safe": False}
