"""Message templates with ``{name}`` placeholders, as packs write them.

A brace pair holding anything that is not a known name (such as the ``{6}`` of a regex
quantifier) is left as written. Values are inserted raw, unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from engine.textio import int_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, values: Mapping[str, object]) -> str:
    """Replace ``{name}`` for every known name; leave anything else exactly as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            return match.group(0)
        value = values[name]
        return int_text(value) if isinstance(value, int) else str(value)

    return _PLACEHOLDER.sub(replace, template)


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def render_list(keys: list[str]) -> str:
    """``['a', 'b']``: sorted keys in single quotes, no escaping."""
    return "[" + ", ".join(f"'{k}'" for k in sorted(keys)) + "]"
