"""Sphinx configuration of ocslab's documentation site (``make docs``; the tests build it with
warnings as errors). Pages are Markdown (MyST); the references come from the code: the CLI from
its argument parsers (sphinx-argparse), the scenario files and results from their pydantic
models (autodoc-pydantic)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from emulation import __version__  # noqa: E402

project = "ocslab"
author = "the ocslab authors"
copyright = "2026, the ocslab authors (Apache-2.0)"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
    "sphinxcontrib.autodoc_pydantic",
    "ocslab_models",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"ocslab {version}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_pydantic_model_show_json = False
autodoc_pydantic_model_show_config_summary = False
autodoc_pydantic_model_show_validator_summary = False
autodoc_pydantic_model_show_validator_members = False
autodoc_pydantic_model_show_field_summary = False
autodoc_pydantic_field_list_validators = False
autodoc_pydantic_field_doc_policy = "docstring"  # a scenario field's description is its docstring
autodoc_pydantic_model_member_order = "bysource"
autodoc_pydantic_model_hide_paramlist = True
autodoc_pydantic_field_show_constraints = True
autodoc_pydantic_field_show_default = True
