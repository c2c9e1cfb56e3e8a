"""`{{name}}` templates, the seeds' macro syntax, with named inputs."""

from __future__ import annotations

import re
from collections.abc import Mapping

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render(template: str, values: Mapping[str, str]) -> str:
    """Replace every `{{key}}` whose key is in `values`; other placeholders stay as they are
    (a prompt may mention `{{something}}` for its own reasons)."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        return values[key] if key in values else match.group(0)

    return _PLACEHOLDER.sub(substitute, template)


def placeholders(template: str) -> set[str]:
    """The keys a template uses."""
    return {m.group(1) for m in _PLACEHOLDER.finditer(template)}
