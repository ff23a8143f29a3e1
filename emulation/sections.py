"""The base of every section of a scenario file, wherever its model lives.

A layer that takes parameters from a scenario file (a planner's settings, a fabric model's
shape, a trace generator's draws) declares them once, as a :class:`StrictModel` beside the code
that uses them; the scenario kinds compose those sections into their files' schemas
(:mod:`emulation.kinds`), so a setting has one model, not a schema twin and a conversion.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A section of a scenario file: unknown fields, infinities and NaN are refused; immutable.
    The docstring under each field is its description (with its unit), which the JSON Schema,
    the scenario reference and the errors show (:mod:`emulation.scenario.fields`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)


class SectionError(ValueError):
    """A section that validates alone but does not fit the rest of its scenario or its data (a
    matrix index beyond the matrices, a shape the rack has no slice of); ``str()`` is one line,
    ``field: problem``, the field's path from the top of the scenario file."""


def known_name(value: str, registry, what: str) -> str:
    """``value`` if it names an entry of ``registry``. :raises ValueError: ``unknown WHAT 'value' (known: ...)``."""
    if value not in registry:
        raise ValueError(f"unknown {what} {value!r} (known: {', '.join(registry)})")
    return value
