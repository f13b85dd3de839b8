"""The model of a JSON contract: where the document is, its schema file, its bounds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.contracts.model import ContractModel
from engine.format.fields import (
    FailureRef,
    PackPath,
)


class JsonContract(ContractModel):
    """A JSON output checked against a JSON Schema file of the pack."""

    kind: Literal["json"]
    schema_file: PackPath
    extract: Literal["auto", "whole", "fenced", "first"] = "auto"
    """Where the JSON is: ``auto`` the whole output or its only fenced block (```json or
    ```; prose around it ignored; two such blocks are a parse failure), ``whole`` the whole
    output (strict), ``fenced`` the first ```json fenced block, ``first`` the first
    balanced object or array (prose around it ignored)."""
    many: Literal["one", "list", "jsonl"] = "one"
    """One document, each element of a top-level array, or one document per line."""
    max_chars: int = Field(default=8 * 1024 * 1024, ge=1, le=256 * 1024 * 1024)
    max_depth: int = Field(default=200, ge=1, le=900)
    max_errors: int = Field(default=100, ge=1, le=10_000)
    max_documents: int = Field(default=10_000, ge=1, le=1_000_000)
    """The most documents a ``list`` or ``jsonl`` output may hold (more: a parse failure)."""
    parse_failure: FailureRef = "PARSE_ERROR"
    schema_failure: FailureRef = "SCHEMA_ERROR"
