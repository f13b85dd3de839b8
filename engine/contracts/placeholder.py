"""Values that are still a template's placeholder: a model that copies the form of a contract
(``"<one line>"``, ``<YES|NO>``) instead of answering has not answered, whatever the syntax.

Shared by the kinds, so each says it the same way.
"""

from __future__ import annotations

import re

_PLACEHOLDER = re.compile(r"<[^<>\n]{1,80}>")


def is_placeholder(value: object) -> bool:
    """Whether ``value`` is text that is, whole, one ``<...>`` placeholder."""
    return isinstance(value, str) and _PLACEHOLDER.fullmatch(value.strip()) is not None


def placeholder_message(name: str, value: str) -> str:
    """What the model is told: the value is the form's, not an answer, and what to write."""
    return f"`{name}` is still the placeholder `{value.strip()}`: write the {name} itself"
