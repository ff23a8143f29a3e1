"""A Sphinx directive that documents a scenario kind's models from the code.

``.. ocslab-models:: wan`` (option ``:part: scenario`` or ``result``) emits an
``autopydantic_model`` (autodoc-pydantic) for the kind's scenario (or result) model and for every
model its fields reach, so that the reference lists every field of every kind without a line
written by hand."""

from __future__ import annotations

import typing

from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from pydantic import BaseModel
from sphinx.util.docutils import SphinxDirective


def reachable(root: object) -> list[type[BaseModel]]:
    """Every pydantic model reachable from ``root`` (a model class or a type such as a Union of
    them) through field annotations, root first, each once."""
    seen: list[type[BaseModel]] = []

    def visit(tp: object) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                return
            seen.append(tp)
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return seen


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
        for model in reachable(root):
            name = f"{model.__module__}.{model.__qualname__}"
            if name not in done:
                done.add(name)
                lines += [f".. autopydantic_model:: {name}", "   :inherited-members: BaseModel", ""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="ocslab-models"), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("ocslab-models", OcslabModels)
    return {"parallel_read_safe": False}
