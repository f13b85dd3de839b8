"""Default wording of grammar messages; packs override any of them by id.

Placeholders are ``{name}``; a brace pair holding anything that is not a known name (such as
the ``{6}`` of a regex quantifier) is left as written. Values are inserted raw, unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from engine.textio import int_text

DEFAULT_MESSAGES: dict[str, str] = {
    # inputs and delimiters
    "param_missing": "{param} is required",
    "param_invalid": "invalid {param} format",
    "nonce_invalid": "invalid nonce format: '{nonce}'",
    "opener_count": "expected exactly 1 opener, found {count}",
    "closer_count": "expected exactly 1 closer, found {count}",
    "order": "opener must appear before closer",
    "nonce_pair": "nonce mismatch: opener={opener}, closer={closer}",
    "nonce_expected": "nonce mismatch: block={found}, expected={expected}",
    "payload_too_large": "block content exceeds {max} chars ({size})",
    # payload lines
    "line_prefix": "line {line}: {message}",
    "tab_start": "tab character at start of line",
    "unexpected_continuation": "unexpected continuation (no active multi-line field)",
    "item_outside_section": "list item outside section",
    "invalid_field_name": "invalid field name '{key}'",
    "unknown_field": "unknown field '{key}'",
    "not_a_section": "'{key}' cannot be a section header",
    "duplicate_field": "duplicate field '{key}'",
    "must_be_section": "'{key}' must be a section header (use '{key}:')",
    "must_be_multiline": "{key} must be multi-line (use {key}=)",
    "needs_continuation": "{key} must have at least one continuation line",
    "multiline_empty": "{key} cannot be empty",
    "must_be_quoted": "{key} must be quoted",
    "must_be_unquoted": "{key} must be unquoted",
    "unrecognized_line": "unrecognized line content",
    "missing_fields": "missing required fields: {fields}",
    # values
    "unmatched_quote": "unmatched quote in value",
    "unescaped_quote": "unescaped quote inside quoted value",
    "unterminated_escape": "unterminated escape sequence",
    "invalid_escape": "invalid escape \\{char}",
    # list items
    "item_line_too_long": "{section} line exceeds {limit} chars",
    "unterminated_token": "unterminated quoted string in token",
    "expected_key_value": "expected key=value, got '{token}'",
    "invalid_item_key": "invalid item key '{key}' (must match {pattern})",
    "duplicate_item_key": "duplicate item key '{key}'",
    "item_key_quoted": "{key} must be quoted",
    "item_value_quoted": "{section} item must be quoted",
    "unknown_item_keys": "unknown {section} keys: {keys}",
    "missing_item_keys": "missing {section} keys: {keys}",
    # rules (a rule's own `message:` wins)
    "rule_enum": "{name} must be one of {values}",
    "rule_pattern": "invalid {name} '{value}'",
    "rule_non_empty": "{name} cannot be empty",
    "rule_single_line": "{name} must be single-line",
    "rule_max_len": "{name} exceeds {max} chars ({len})",
    "rule_min_items": "{name} must have at least {min} item",
    "rule_max_items": "{name} has {count} items (max {max})",
    "rule_max_parts": "{name} has {count} items (max {max})",
    "rule_unique": "duplicate {name} '{value}'",
    "rule_required": "{name} is required",
    "rule_count_matches": "{name}={count} but {n} items provided",
    "rule_path_chars": "invalid path characters: '{value}'",
    "rule_path_absolute": "absolute path not allowed: '{value}'",
    "rule_path_traversal": "path traversal not allowed: '{value}'",
    "rule_int_too_long": "{name} is too long to be an integer",
}

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
