"""One output to evaluate and what came with it: what `rules eval`, `rules run`, `rules
test`, the server and the Python API hand a pack or a session for each output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.pack.compiled import prepared_output

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

    def verdict(self, pack: Pack, context: Mapping[str, Any]) -> Verdict:
        """``pack``'s verdict on the output with ``context``: the failure ``error`` names
        when there is one."""
        if self.error is not None:
            return pack.verdict_for_error(self.block, self.error, self.failure_type)
        prepared = prepared_output(
            self.output, self.nonce, self.vars, path=self.path, shared=self.shared
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
        ``Pack.decide`` takes)."""
        return pack.decide_checked(
            verdict,
            output=self.output or b"",
            attempt=attempt,
            previous_errors=previous_errors,
            nonce=self.nonce,
            model=self.model,
            context=context,
            **counts,
        )
