"""The tools of `rules mcp`: what each takes and answers (JSON Schemas), and each call
answered by a use case of ``engine.session``, as POST /v1/evaluate, /v1/render and
/v1/sessions/{session}/outputs answer theirs.

Nothing here imports the `mcp` SDK: a call is a tool name and its arguments, its answer a
JSON document (the tool's ``structuredContent``) or a ``ToolRefused`` whose message the
agent reads (an ``isError`` result). An agent validates its own output with
``evaluate_output`` before it answers; with ``session`` the attempt is counted and recorded
in that session's ledger, so a repair after a repair is decided as a loop decides it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema

from engine.core.errors import EngineError, ParamError
from engine.core.resources import data_dir
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.session.choice_book import SessionPaused
from engine.session.evaluation import EvaluationRequest, InputRefused, Rendered, render
from engine.session.explain import explain
from engine.session.recording import named_session
from engine.session.run import PromptRequest, first_prompt
from engine.session.session_ref import SessionRef, item_name_problem, session_name_problem


class ToolRefused(EngineError):
    """A call the engine cannot answer (an unknown pack or block, an argument that does
    not fit): its message, naming the argument, is what the agent reads."""


@dataclass(frozen=True)
class Served:
    """What `rules mcp` serves: its packs by name, and where a named session records
    (``ledger``: one ledger for every session; else a folder per session under
    ``sessions_dir``)."""

    packs: Mapping[str, Pack]
    sessions_dir: str = "sessions"
    ledger: str | None = None


@dataclass(frozen=True)
class Tool:
    """A tool: its name, what it does, the JSON Schemas of its arguments and its result,
    and the function that answers a call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    answer: Callable[[Served, dict[str, Any]], dict[str, Any]]


_STRING = {"type": "string"}
_PACK = {
    "type": "string",
    "description": "The name of a served pack (may be left out when one pack is served).",
}
_BLOCK = {"type": "string", "description": "The block (contract) of the pack."}
_NONCE = {"type": "string", "description": "The nonce of this cycle (delimited blocks)."}
_VARS = {
    "type": "object",
    "additionalProperties": _STRING,
    "description": "Block parameters and context strings, as `--var KEY=VALUE`.",
}
_CONTEXT = {
    "type": "object",
    "description": "Context keys for guards and templates, as `--context FILE`.",
}
_SESSION = {
    "type": "string",
    "description": "Record the attempt in this session's ledger, as POST "
    "/v1/sessions/{session}/outputs does: the session counts the item's attempts (1 to 128 "
    "letters, digits, '.', '_' or '-').",
}
_ITEM = {
    "type": "string",
    "description": "With session: the item whose attempts are counted (default: the one the "
    "pack's `session.item` makes of the nonce, vars and context).",
}
_OUTPUT_ARGS = {
    "pack": _PACK,
    "block": _BLOCK,
    "output": {"type": "string", "description": "The model's output, as text."},
    "nonce": _NONCE,
    "vars": _VARS,
    "context": _CONTEXT,
    "model": {"type": "string", "description": "The model that wrote the output."},
    "attempt": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1_000_000,
        "description": "Without session: which attempt the output is (1 = the original).",
    },
    "session": _SESSION,
    "item": _ITEM,
}


def _arguments(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }


@cache
def _shipped_schema(name: str) -> dict[str, Any]:
    """A schema of contracts/ (the verdict's, the decision's) to embed under ``$defs``:
    its own ``$schema`` and ``$id`` left out, so it resolves inside the tool's schema."""
    path = data_dir("contracts") / f"{name}.schema.json"
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in schema.items() if k not in ("$schema", "$id")}


_ABOUT = {
    "type": "object",
    "required": ["name", "version", "revision"],
    "properties": {"name": _STRING, "version": _STRING, "revision": _STRING},
}
_PROMPT = {
    "type": ["string", "null"],
    "description": "The prompt the decision calls for (a repair or retry), null when none is due.",
}
_WARNINGS = {"type": "array", "items": _STRING}


def _result(properties: Mapping[str, Any], defs: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
    }
    if defs:
        schema["$defs"] = {name: _shipped_schema(name) for name in defs}
    return schema


def _pack(served: Served, arguments: Mapping[str, Any]) -> Pack:
    name = arguments.get("pack")
    if name is None:
        if len(served.packs) == 1:
            return next(iter(served.packs.values()))
        raise ToolRefused(f"pack: name one of the served packs ({_names(served)})")
    pack = served.packs.get(name)
    if pack is None:
        raise ToolRefused(f"pack: no pack {name!r} is served (served: {_names(served)})")
    return pack


def _names(served: Served) -> str:
    return ", ".join(sorted(served.packs)) or "none"


def _block(pack: Pack, block: str) -> str:
    if block not in pack.model.contracts:
        known = ", ".join(pack.model.contracts)
        raise ToolRefused(f"block: pack {pack.name!r} has no block {block!r} (blocks: {known})")
    return block


def _about(pack: Pack) -> dict[str, str]:
    return {"name": pack.name, "version": pack.model.version, "revision": pack.revision}


def _session(served: Served, arguments: Mapping[str, Any]) -> SessionRef | None:
    name = arguments.get("session")
    if name is None:
        return None
    if problem := session_name_problem(name):
        raise ToolRefused(f"session {name[:60]!r}: {problem}")
    return named_session(name, ledger=served.ledger, sessions_dir=served.sessions_dir)


def _request(served: Served, pack: Pack, arguments: Mapping[str, Any]) -> EvaluationRequest:
    item = arguments.get("item")
    if item is not None and (problem := item_name_problem(item)):
        raise ToolRefused(f"item: {problem}")
    given = OutputInput(
        _block(pack, arguments["block"]),
        output=arguments["output"],
        nonce=arguments.get("nonce"),
        vars=dict(arguments.get("vars") or {}),
        context=dict(arguments.get("context") or {}),
        model=arguments.get("model"),
        path="-",
        item=item,
    )
    return EvaluationRequest(
        given, attempt=arguments.get("attempt"), session=_session(served, arguments)
    )


_recording = threading.Lock()
"""Calls that record are answered one at a time: a session's attempts are numbered in the
order its outputs arrive."""


def _rendered(
    served: Served, arguments: Mapping[str, Any], presentation: bool
) -> tuple[Pack, Rendered]:
    pack = _pack(served, arguments)
    request = _request(served, pack, arguments)
    if request.session is None:
        return pack, render(pack, request, presentation=presentation)
    with _recording:
        return pack, render(pack, request, presentation=presentation)


def evaluate_output(served: Served, arguments: dict[str, Any]) -> dict[str, Any]:
    pack, rendered = _rendered(served, arguments, presentation=False)
    evaluated = rendered.evaluated
    return {
        "pack": _about(pack),
        "ok": evaluated.verdict.status != "fail",
        "verdict": evaluated.verdict.to_json(),
        "decision": evaluated.decision.to_json(),
        "prompt": rendered.prompt,
        "attempt_id": evaluated.attempt_id,
    }


def repair_prompt(served: Served, arguments: dict[str, Any]) -> dict[str, Any]:
    pack, rendered = _rendered(served, arguments, presentation=True)
    return {
        "pack": _about(pack),
        "decision": rendered.evaluated.decision.to_json(),
        "prompt": rendered.prompt,
        "presentation": rendered.presentation,
        "warnings": rendered.warnings,
        "attempt_id": rendered.evaluated.attempt_id,
    }


def block_first_prompt(served: Served, arguments: dict[str, Any]) -> dict[str, Any]:
    pack = _pack(served, arguments)
    block = _block(pack, arguments["block"])
    request = PromptRequest(
        block,
        nonce=arguments.get("nonce"),
        vars=dict(arguments.get("vars") or {}),
        context=dict(arguments.get("context") or {}),
        session=_session(served, arguments),
    )
    return {"pack": _about(pack), "block": block, "prompt": first_prompt(pack, request)}


def explain_block(served: Served, arguments: dict[str, Any]) -> dict[str, Any]:
    pack = _pack(served, arguments)
    block = arguments.get("block")
    explained = explain(pack, None if block is None else _block(pack, block))
    return {"pack": _about(pack), **explained.tables}


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "evaluate_output",
            "Check a model output against a pack's block: the verdict (failures, warnings, "
            "the parsed data), the decision (proceed, repair, retry, give up...), and the "
            "repair or retry prompt when one is due. `ok` is true when the output is "
            "accepted. With `session`, the attempt is counted and recorded in its ledger.",
            _arguments(_OUTPUT_ARGS, ["block", "output"]),
            _result(
                {
                    "pack": _ABOUT,
                    "ok": {
                        "type": "boolean",
                        "description": "The output meets its contract (warnings allowed).",
                    },
                    "verdict": {"$ref": "#/$defs/verdict"},
                    "decision": {"$ref": "#/$defs/decision"},
                    "prompt": _PROMPT,
                    "attempt_id": {"type": ["integer", "null"]},
                },
                ("verdict", "decision"),
            ),
            evaluate_output,
        ),
        Tool(
            "repair_prompt",
            "The prompt the decision on a model output calls for (`rules render`): the "
            "repair or retry prompt with the exact errors, or a rate limit's presentation "
            "for the user; both null when the output is accepted.",
            _arguments(_OUTPUT_ARGS, ["block", "output"]),
            _result(
                {
                    "pack": _ABOUT,
                    "decision": {"$ref": "#/$defs/decision"},
                    "prompt": _PROMPT,
                    "presentation": {"type": ["string", "null"]},
                    "warnings": _WARNINGS,
                    "attempt_id": {"type": ["integer", "null"]},
                },
                ("decision",),
            ),
            repair_prompt,
        ),
        Tool(
            "first_prompt",
            "A block's first prompt, as the pack declares it (`rules prompt`): the task and "
            "the block's format contract, with the session's decided items when a session "
            "is named.",
            _arguments(
                {
                    k: _OUTPUT_ARGS[k]
                    for k in ("pack", "block", "nonce", "vars", "context", "session")
                },
                ["block"],
            ),
            _result({"pack": _ABOUT, "block": _STRING, "prompt": _STRING}),
            block_first_prompt,
        ),
        Tool(
            "explain_block",
            "A pack's policy as data (`rules explain`): per block when to repair, how often, "
            "the guards and what happens after the last failure; the failure types and the "
            "actions. Name a block for its row only.",
            _arguments({"pack": _PACK, "block": _BLOCK}, []),
            _result(
                {
                    "pack": _ABOUT,
                    "description": {"type": ["string", "null"]},
                    "blocks": {"type": "array", "items": {"type": "object"}},
                    "guards": {"type": "array", "items": {"type": "object"}},
                    "failure_types": {"type": "array", "items": {"type": "object"}},
                    "actions": {"type": "array", "items": {"type": "object"}},
                }
            ),
            explain_block,
        ),
    )
}


def call(served: Served, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The answer of tool ``name`` to ``arguments``; ``ToolRefused`` for a call it cannot
    answer, worded for the agent (the argument at fault, what it may be)."""
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolRefused(f"there is no tool {name!r} (tools: {', '.join(TOOLS)})")
    given = dict(arguments or {})
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(tool.input_schema).iter_errors(given)
    )
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        raise ToolRefused(f"{where}: {error.message}")
    try:
        return tool.answer(served, given)
    except InputRefused as exc:
        raise ToolRefused(exc.said(str)) from None
    except ParamError as exc:
        raise ToolRefused(f"{exc.field}: {exc}") from None
    except SessionPaused as exc:
        raise ToolRefused(
            f"session {given.get('session')!r} was paused at {exc.paused_at} by a choice; "
            "resume it with `rules choose --resume`"
        ) from None
    except OSError as exc:
        raise ToolRefused(f"session {given.get('session')!r}: {exc.strerror or exc}") from None
    except EngineError as exc:
        raise ToolRefused(str(exc)) from None
