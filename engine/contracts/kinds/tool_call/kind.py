"""The ``tool_call`` contract kind: one or more tool calls, in any shape a client produces
(engine.contracts.tool_calls), checked against the tools the contract declares.

`rules check` reads each tool's schema (inline ``parameters`` or a ``schema_file``) and its
conditions; loading compiles each schema's validator once. Every way an output fails is
one failure of the same verdict: an output that is not JSON, an item that is no call, too
few or too many calls, a call to an unknown tool (with the nearest name), arguments that
are not JSON, each schema violation of the arguments (its JSON Pointer in ``path``), each
condition that is false.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.contracts.json_schemas import (
    check_schema,
    check_schema_file,
    compile_schema,
    read_schema_file,
    schema_violations,
)
from engine.contracts.kind import ChecksText, StandaloneKind
from engine.contracts.kinds.tool_call.model import Tool, ToolCallContract
from engine.contracts.tool_calls import (
    ToolCall,
    ToolCallsError,
    nearest_name,
    read_tool_calls,
    unknown_tool,
)
from engine.core.errors import ConditionError, PackError
from engine.core.results import Failure
from engine.core.verdict import verdict_from_checks
from engine.format.fields import Ref
from engine.format.findings import FindingRule
from engine.format.references import Reference
from engine.sandbox.environment import compile_condition

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


TOOL_SCHEMA_TWICE = FindingRule(
    "tool-schema-twice",
    "A tool declares its arguments' schema both inline and in a file.",
    "Keep one: `parameters` or `schema_file`.",
)

INVALID_CALL_COUNT = FindingRule(
    "invalid-call-count",
    "A tool-call contract whose min_calls is over its max_calls.",
    "Lower min_calls or raise max_calls.",
)

CONDITION_VARIABLES = frozenset({"arguments", "tool"})
"""What a tool's condition sees: the call's arguments and the tool's name."""

_ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""The schema of a tool that declares none: its arguments are an object."""


@dataclass(frozen=True)
class _CompiledTool:
    name: str
    validator: Any = field(repr=False)
    conditions: tuple[tuple[Callable[..., Any], str, str, str], ...] = field(repr=False)
    """(compiled check, its expression, message, failure type), in the declared order."""


@dataclass(frozen=True)
class CompiledToolCall(ChecksText):
    """A tool-call contract ready to check outputs: each tool's validator and conditions
    compiled once."""

    name: str
    contract: ToolCallContract = field(repr=False)
    tools: Mapping[str, _CompiledTool] = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    generated_contract_text: str = field(default="", repr=False)
    """The tools and their schemas as a prompt shows them, when the pack gives no
    ``contract_text`` file (engine.prompts reads it)."""
    param_names: frozenset[str] = frozenset()

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(self.tools)

    def unknown_tool(self, name: str) -> bool:
        """Whether a call naming ``name`` calls no tool of the contract (a stream may be
        stopped as soon as a complete name says so)."""
        return unknown_tool(name, self.tool_names)

    def evaluate_text(self, text: str) -> Verdict:
        contract = self.contract
        try:
            calls, problems = read_tool_calls(
                text, max_chars=contract.max_chars, max_depth=contract.max_depth
            )
        except ToolCallsError as exc:
            failure = Failure(contract.parse_failure, exc.message, exc.line)
            return verdict_from_checks(self.name, [failure], [], None, dict(self.severities))
        failures = [Failure(contract.parse_failure, problem) for problem in problems]
        failures.extend(self._count(len(calls)))
        for call in calls:
            failures.extend(self._call(call, len(calls) > 1))
        data = {"calls": [{"name": c.name, "arguments": c.arguments} for c in calls]}
        return verdict_from_checks(self.name, failures, [], data, dict(self.severities))

    def _count(self, count: int) -> list[Failure]:
        contract = self.contract
        least, most = contract.min_calls, contract.max_calls
        said = f"{count} tool call{'' if count == 1 else 's'}"
        if count < least:
            tools = ", ".join(f"`{n}`" for n in self.tools)
            return [
                Failure(
                    contract.count_failure,
                    f"the output holds {said}: call at least {least} (tools: {tools})",
                )
            ]
        if most is not None and count > most:
            return [
                Failure(
                    contract.count_failure,
                    f"the output holds {said}: make at most {most}",
                )
            ]
        return []

    def _call(self, call: ToolCall, many: bool) -> list[Failure]:
        contract = self.contract
        number = f"call {call.position + 1}" if many else "the call"
        name = call.name
        if not isinstance(name, str) or not name:
            return [
                Failure(
                    contract.unknown_tool_failure,
                    f"{number} names no tool: give `name` one of "
                    + ", ".join(f"`{n}`" for n in self.tools),
                )
            ]
        tool = self.tools.get(name)
        failures = []
        where = f"{number} (`{name}`)"
        if tool is None:
            near = nearest_name(name, list(self.tools))
            shown = name if len(name) <= 80 else name[:77] + "..."
            advice = (
                f"did you mean `{near}`?"
                if near
                else "call one of " + ", ".join(f"`{n}`" for n in self.tools)
            )
            failures.append(
                Failure(
                    contract.unknown_tool_failure,
                    f"{number} names the tool `{shown}`, which does not exist: {advice}",
                )
            )
            if near is None:
                return failures
            # The model most likely meant the nearest tool: its arguments are checked as
            # that tool's, so one repair fixes the name and the arguments together.
            tool, where = self.tools[near], f"{number} (as `{near}`)"
        if call.problem is not None:
            return [*failures, Failure(contract.arguments_failure, f"{where}: {call.problem}")]
        for violation in schema_violations(tool.validator, call.arguments, contract.max_errors):
            said = violation.sentence or violation.message
            said = said.replace("the document is", "the arguments are", 1)
            said = said.replace("the document has", "the arguments have", 1)
            failures.append(
                Failure(
                    contract.schema_failure,
                    f"{where}: {said}",
                    path=None if violation.summary else violation.pointer,
                )
            )
        if len(failures) > (1 if tool.name != name else 0):
            return failures
        for check, expression, message, fail in tool.conditions:
            try:
                met = check(arguments=call.arguments, tool=tool.name)
            except ConditionError as exc:
                failures.append(
                    Failure(
                        fail, f"{where}: {message} (the check {expression} failed: {exc.reason})"
                    )
                )
                continue
            if not met:
                failures.append(Failure(fail, f"{where}: {message}"))
        return failures

    def failure_tier(self, failure_type: str) -> str:
        contract = self.contract
        if failure_type in (contract.parse_failure, contract.arguments_failure):
            return "structure"
        return "content"


class ToolCallKind(StandaloneKind):
    name = "tool_call"
    model = ToolCallContract

    def check(self, name: str, contract: ToolCallContract, checker: PackChecker) -> None:
        if contract.max_calls is not None and contract.min_calls > contract.max_calls:
            checker.add(
                INVALID_CALL_COUNT,
                f"min_calls ({contract.min_calls}) is over max_calls ({contract.max_calls})",
                ("contracts", name, "min_calls"),
                "lower min_calls or raise max_calls",
            )
        for tool_name, tool in contract.tools.items():
            path: KeyPath = ("contracts", name, "tools", tool_name)
            self._check_schema(tool, path, checker)
            for index, condition in enumerate(tool.conditions):
                checker.expression(
                    Reference(
                        Ref.EXPRESSION, condition.check, (*path, "conditions", index, "check")
                    ),
                    CONDITION_VARIABLES,
                )

    def _check_schema(self, tool: Tool, path: KeyPath, checker: PackChecker) -> None:
        if tool.parameters is not None and tool.schema_file is not None:
            checker.add(
                TOOL_SCHEMA_TWICE,
                "the tool declares `parameters` and `schema_file`",
                (*path, "schema_file"),
                "keep one of them",
            )
            return
        if tool.schema_file is not None:
            check_schema_file(checker, tool.schema_file, (*path, "schema_file"))
        elif tool.parameters is not None:
            check_schema(checker, tool.parameters, (*path, "parameters"), "parameters")

    def compile(
        self,
        name: str,
        contract: ToolCallContract,
        pack: Rulepack,
        folder_of: Callable[[KeyPath], Path],
    ) -> CompiledToolCall:
        tools: dict[str, _CompiledTool] = {}
        schemas: dict[str, Any] = {}
        for tool_name, tool in contract.tools.items():
            schema: Any = tool.parameters if tool.parameters is not None else _ANY_OBJECT
            if tool.schema_file is not None:
                where: KeyPath = ("contracts", name, "tools", tool_name, "schema_file")
                target = folder_of(where) / tool.schema_file
                try:
                    schema = read_schema_file(target)
                except ValueError as exc:
                    raise PackError(f"{target}: {exc}") from None
            try:
                validator = compile_schema(schema)
            except ValueError as exc:
                raise PackError(f"contract {name!r}, tool {tool_name!r}: {exc}") from None
            conditions = tuple(
                (
                    compile_condition(c.check),
                    c.check,
                    c.message,
                    c.fail or contract.schema_failure,
                )
                for c in tool.conditions
            )
            tools[tool_name] = _CompiledTool(tool_name, validator, conditions)
            schemas[tool_name] = schema
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        text = contract_text(contract, schemas)
        return CompiledToolCall(name, contract, tools, severities, text)


KIND = ToolCallKind()


def contract_text(contract: ToolCallContract, schemas: Mapping[str, Any]) -> str:
    """The tools as a prompt shows them: how many calls, then each tool's name, what it
    does, the JSON Schema of its arguments and its conditions."""
    least, most = contract.min_calls, contract.max_calls
    if most is None:
        count = f"at least {least} call{'' if least == 1 else 's'}"
    elif least == most:
        count = f"exactly {least} call{'' if least == 1 else 's'}"
    else:
        count = f"from {least} to {most} calls"
    lines = [
        f"Answer with tool calls only ({count}), each naming one of these tools and giving "
        "its arguments as a JSON object that matches the tool's schema.",
    ]
    for tool_name, tool in contract.tools.items():
        lines += ["", f"Tool `{tool_name}`" + (f": {tool.description}" if tool.description else "")]
        lines.append(
            "Arguments (JSON Schema): " + json.dumps(schemas[tool_name], ensure_ascii=False)
        )
        for condition in tool.conditions:
            lines.append(f"Also: {condition.message}")
    return "\n".join(lines) + "\n"
