"""Building sentinel test inputs from the YAML case data."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

CASES_DIR = Path(__file__).resolve().parent / "cases"
NONCE = "4F2C9A"
VERDICT_ARGS = (
    "--pack",
    "sentinel",
    "--block",
    "VERDICT",
    "--nonce",
    NONCE,
    "--var",
    "criterion=AC1",
)
"""The command-line options of a shipped sentinel VERDICT with its nonce and criterion."""
_MACRO = re.compile(r"@@(.+?)\*(\d+)@@", re.S)


def load(name: str) -> Any:
    return yaml.safe_load((CASES_DIR / name).read_text(encoding="utf-8"))


BASES: dict[str, list[str]] = load("sentinel_bases.yaml")
CASES: list[dict[str, Any]] = load("sentinel_cases.yaml")


def expand(value: Any) -> Any:
    """Apply the @@x*N@@ macro everywhere in a case value."""
    if isinstance(value, str):
        return _MACRO.sub(lambda m: m.group(1) * int(m.group(2)), value)
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    return value


def _lines(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [value["each"].replace("{i}", str(i)) for i in range(1, value["count"] + 1)]
    if isinstance(value, list):
        return [line for item in value for line in _lines(item)]
    return [value]


def delimiters(block: str, criterion: str = "AC1", nonce: str = NONCE) -> tuple[str, str]:
    middle = f"{criterion}:" if block == "VERDICT" else ""
    return (f"<<<{block}:V1:{middle}NONCE={nonce}>>>", f"<<<END_{block}:{middle}NONCE={nonce}>>>")


def build_text(case: dict[str, Any]) -> str:
    if "text" in case:
        return str(expand(case["text"]))
    lines = _lines(expand(case.get("payload") or BASES[case["block"]]))
    for prefix in case.get("drop", []):
        lines = [line for line in lines if not line.startswith(prefix)]
    for prefix, replacement in (case.get("set") or {}).items():
        index = next(i for i, line in enumerate(lines) if line.startswith(prefix))
        lines[index : index + 1] = _lines(expand(replacement))
    lines.extend(_lines(expand(case.get("add", []))))
    opener, closer = delimiters(case["block"])
    return "\n".join([opener, *lines, closer])


def call_args(case: dict[str, Any]) -> dict[str, Any]:
    variables = {}
    if case["block"] == "VERDICT":
        criterion = case.get("criterion", "AC1")
        if criterion is not None:
            variables["criterion"] = criterion
    return {"nonce": case.get("nonce", NONCE), "vars": variables}
