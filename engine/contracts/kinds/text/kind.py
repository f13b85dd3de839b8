"""The ``text`` contract kind: plain text with size and line bounds and required or
forbidden patterns, each failure worded by the pack (``messages``) or by a default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.contracts.kind import ChecksText, StandaloneKind
from engine.contracts.kinds.text.model import TextContract
from engine.core.patterns import CompiledPattern, compile_pattern
from engine.core.placeholders import fill
from engine.core.results import Failure
from engine.core.verdict import verdict_from_checks
from engine.format.findings import FindingRule

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


INVALID_RANGE = FindingRule(
    "invalid-range",
    "A minimum above its maximum.",
    "Swap or fix the bounds.",
)

UNKNOWN_MESSAGE = FindingRule(
    "unknown-message",
    "A message override for a rule the contract does not have.",
    "Use the ids the contract's rules have.",
)

DEFAULT_MESSAGES = {
    "min_chars": "output has {count} characters (at least {min})",
    "max_chars": "output has {count} characters (at most {max})",
    "min_lines": "output has {count} lines (at least {min})",
    "max_lines": "output has {count} lines (at most {max})",
    "require": "output does not match {pattern}",
    "forbid": "output must not match {pattern} (found '{match}')",
}


@dataclass(frozen=True)
class _TextRule:
    pattern: str
    compiled: CompiledPattern
    message: str | None
    fail: str


@dataclass(frozen=True)
class CompiledText(ChecksText):
    name: str
    contract: TextContract = field(repr=False)
    require: tuple[_TextRule, ...] = field(repr=False)
    forbid: tuple[_TextRule, ...] = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    param_names: frozenset[str] = frozenset()

    def _say(self, code: str, values: Mapping[str, object], own: str | None = None) -> str:
        template = own or self.contract.messages.get(code) or DEFAULT_MESSAGES[code]
        return fill(template, values)

    def evaluate_text(self, text: str) -> Verdict:
        contract, fail = self.contract, self.contract.fail
        failures = []
        size = len(text)
        lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        for measure, count in (("chars", size), ("lines", lines)):
            least = getattr(contract, f"min_{measure}")
            most = getattr(contract, f"max_{measure}")
            if least is not None and count < least:
                values = {"count": count, "min": least}
                failures.append(Failure(fail, self._say(f"min_{measure}", values)))
            if most is not None and count > most:
                values = {"count": count, "max": most}
                failures.append(Failure(fail, self._say(f"max_{measure}", values)))
        for rule in self.require:
            if rule.compiled.search(text) is None:
                failures.append(
                    Failure(
                        rule.fail, self._say("require", {"pattern": rule.pattern}, rule.message)
                    )
                )
        for rule in self.forbid:
            found = rule.compiled.search(text)
            if found is not None:
                failures.append(
                    Failure(
                        rule.fail,
                        self._say(
                            "forbid",
                            {"pattern": rule.pattern, "match": found.group(0)[:200]},
                            rule.message,
                        ),
                    )
                )
        data = {"chars": size, "lines": lines}
        return verdict_from_checks(self.name, failures, [], data, dict(self.severities))

    def failure_tier(self, failure_type: str) -> str:
        return "structure"


class TextKind(StandaloneKind):
    name = "text"
    model = TextContract

    def check(self, name: str, contract: TextContract, checker: PackChecker) -> None:
        """Its patterns and references are checked by the generic walk; the bounds here."""
        for low, high in (("min_chars", "max_chars"), ("min_lines", "max_lines")):
            least, most = getattr(contract, low), getattr(contract, high)
            if least is not None and most is not None and least > most:
                checker.add(
                    INVALID_RANGE,
                    f"{low} ({least}) is over {high} ({most})",
                    ("contracts", name, low),
                    "lower the minimum or raise the maximum",
                )
        for key in sorted(set(contract.messages) - set(DEFAULT_MESSAGES)):
            checker.add(
                UNKNOWN_MESSAGE,
                f"unknown message id {key!r}",
                ("contracts", name, "messages", key),
                f"text contracts word: {', '.join(DEFAULT_MESSAGES)}",
                is_key=True,
            )

    def compile(
        self,
        name: str,
        contract: TextContract,
        pack: Rulepack,
        folder_of: Callable[[KeyPath], Path],
    ) -> CompiledText:
        def rule(pattern: str, message: str | None, fail: str | None) -> _TextRule:
            return _TextRule(pattern, compile_pattern(pattern), message, fail or contract.fail)

        require = [rule(r.pattern, r.message, r.fail) for r in contract.require]
        if contract.pattern is not None:
            require.insert(0, rule(contract.pattern, None, None))
        forbid = [rule(r.pattern, r.message, r.fail) for r in contract.forbid]
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledText(name, contract, tuple(require), tuple(forbid), severities)


KIND = TextKind()
