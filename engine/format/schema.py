"""The JSON Schema of the rulepack format, generated from the models."""

from __future__ import annotations

import json
from typing import Any

from engine.format.model import FORMAT_VERSION, Rulepack

SCHEMA_ID = "https://rules-engine.invalid/schemas/rulepack.v1.json"

# Models that also accept a plain string (their before-validators expand it).
_SHORTHANDS = {"AfterFailure": "the action name alone, e.g. NEEDS_HUMAN"}


def rulepack_schema(root: type[Rulepack]) -> dict[str, Any]:
    """The JSON Schema of a composed root model (``engine.pack.sections.rulepack_model``)."""
    schema = root.model_json_schema()
    for name, description in _SHORTHANDS.items():
        definition = schema["$defs"][name]
        schema["$defs"][name] = {
            "anyOf": [{"type": "string", "description": description}, definition]
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"Rulepack (format {FORMAT_VERSION})",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def rulepack_schema_text(root: type[Rulepack]) -> str:
    return json.dumps(rulepack_schema(root), indent=2, sort_keys=False, ensure_ascii=False) + "\n"
