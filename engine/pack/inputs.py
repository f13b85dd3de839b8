"""One output to evaluate and what came with it: what `rules eval`, `rules run`, `rules
test`, the server and the Python API hand a pack or a session for each output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.core.textio import decode_output
from engine.pack.compiled import prepared_output
from engine.policy.triggers.decide import decide

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack
    from engine.policy.triggers.decide import Decision


@dataclass(frozen=True)
class OutputInput:
    """An output of ``block`` to evaluate (None: the file ``path`` does not exist), with
    its block's nonce and params (``vars``), the context, the model that wrote it, an
    ``error`` found outside the pack (the output was too large, the model failed) and its
    ``failure_type``, and the item it is an attempt of (``item``; else the one the pack's
    ``session.item`` parts make). A loop's inputs are one too: each attempt's output and
    error replace its own."""

    block: str
    output: str | bytes | None = None
    nonce: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    path: str | None = None
    error: str | None = None
    failure_type: str = "PARSE_ERROR"
    item: str | None = None
    shared: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """Work already done on this output that its evaluation reuses (a streamed output's
    reading: ``EvaluationInput.shared``); None: none."""

    def prepared(
        self,
        output: bytes | None,
        vars: Mapping[str, str],
        context: Mapping[str, Any],
        error: str | None,
        failure_type: str,
    ) -> OutputInput:
        """This input with what preparing it changed (``engine.session.evaluation``).
        Copied as ``copy.copy`` copies it, by its attributes' dictionary: a frozen
        dataclass's ``__init__`` (and so ``dataclasses.replace``) sets each field through
        ``object.__setattr__``, a tenth of what evaluating a 4 KB output costs."""
        copied = object.__new__(type(self))
        copied.__dict__.update(
            self.__dict__,
            output=output,
            vars=vars,
            context=context,
            error=error,
            failure_type=failure_type,
        )
        return copied

    def verdict(self, pack: Pack, context: Mapping[str, Any]) -> Verdict:
        """``pack``'s verdict on the output with ``context``: the failure ``error`` names
        when there is one."""
        if self.error is not None:
            return pack.verdict_for_error(self.block, self.error, self.failure_type)
        prepared = prepared_output(
            self.output, self.nonce, self.vars, path=self.path, shared=self.shared, context=context
        )
        return pack.evaluate_prepared(self.block, prepared, context, checked=True)

    def decide(
        self,
        pack: Pack,
        verdict: Verdict,
        context: Mapping[str, Any],
        *,
        attempt: int = 1,
        previous_errors: Sequence[str] = (),
        **counts: Any,
    ) -> Decision:
        """``pack``'s decision on ``verdict`` of the output as attempt ``attempt`` after
        ``previous_errors`` (``counts``: the rate-limit counts and extra attempts
        ``Pack.decide`` takes). The inputs were prepared by the engine (the use case
        checked them once), so ``Pack.decide``'s checks of a caller's types are skipped."""
        return decide(
            pack.policy,
            verdict,
            output=decode_output(self.output or b""),
            attempt=attempt,
            previous_errors=previous_errors,
            carry={"nonce": self.nonce, "model": self.model},
            context=context,
            **counts,
        )
