"""Failed model calls classified, transport retries timed and usage priced: the one place
`rules run` (a model command), ``engine.run`` and ``engine.arun`` (a Python client) ask.

A failed call is described by what is known of it (``CallFailure``: an exception's class
names and HTTP status, a command's exit status and stderr, the engine's own timeout, a
``Retry-After``) and classified by the pack's ``model_calls.classify`` rules, then by the
engine's defaults, which recognise the exceptions of the ``openai``, ``anthropic`` and
``httpx`` clients by their shape (class names, ``status_code``, ``response.headers``),
without importing them. What matches nothing stays EXECUTION_FAILED.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from engine.core.patterns import CompiledPattern, compile_pattern
from engine.core.verdict import Verdict
from engine.policy.calls.replies import Usage
from engine.policy.triggers.decide import Decision

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.section import Compiling

MODEL_TIMEOUT = "MODEL_TIMEOUT"
MODEL_RATE_LIMITED = "MODEL_RATE_LIMITED"
MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"
MODEL_ERROR = "MODEL_ERROR"
EXECUTION_FAILED = "EXECUTION_FAILED"

MODEL_FAILURES = (MODEL_TIMEOUT, MODEL_RATE_LIMITED, MODEL_UNAVAILABLE, MODEL_ERROR)
CALL_FAILURES = frozenset([EXECUTION_FAILED, *MODEL_FAILURES])
"""The failure types of a failed model call (their validation tier is `execution`)."""

TRANSPORT_RULE = "transport-retry"
"""The rule of a decision that sends the same prompt again after a classified failure."""

# The kinds of attempt the ledger records: why the prompt was sent.
FIRST = "first"
REPAIR = "repair"
RETRY = "retry"
TRANSPORT_RETRY = "transport_retry"

USAGE_PREFIX = "rules-usage:"
"""The default start of the stderr line where a model command reports its usage."""

MAX_CLASS_NAMES = 32


@dataclass(frozen=True)
class CallFailure:
    """What is known of a failed model call. An exception gives its class names (its
    class's and its bases', most derived first), its message and, when it carries a
    response, the HTTP status and ``Retry-After``; a model command its exit status and
    the tail of its stderr; ``timed_out``: the engine stopped waiting for the call."""

    classes: tuple[str, ...] = ()
    message: str = ""
    status: int | None = None
    exit_status: int | None = None
    stderr: str = ""
    timed_out: bool = False
    retry_after: float | None = None


def _attribute(value: Any, name: str) -> Any:
    """``value.name``, None when reading it raises (the caller's object may)."""
    try:
        return getattr(value, name, None)
    except Exception:
        return None


def _status(value: Any) -> int | None:
    return value if type(value) is int and 100 <= value <= 599 else None


def exception_failure(exc: BaseException, message: str) -> CallFailure:
    """What ``exc`` tells of the failed call, read by its shape: ``status_code`` (or
    ``response.status_code``) and the ``Retry-After`` of ``response.headers``, as the
    ``openai``, ``anthropic`` and ``httpx`` exceptions carry them."""
    names: list[str] = []
    try:
        for klass in type.__getattribute__(type(exc), "__mro__")[:MAX_CLASS_NAMES]:
            names.append(str(type.__getattribute__(klass, "__name__")))
    except Exception:  # a metaclass of the caller's that raises: no names
        names = []
    response = _attribute(exc, "response")
    status = _status(_attribute(exc, "status_code")) or _status(_attribute(response, "status_code"))
    return CallFailure(
        tuple(names),
        message,
        status=status,
        retry_after=retry_after(_attribute(response, "headers")),
    )


def retry_after(headers: Any, now: datetime | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait (``retry-after-ms`` first, as the
    OpenAI API sends it; seconds, or an HTTP date), None when there is none or it cannot
    be read."""
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            seconds = float(str(millis)) / 1000
            return seconds if math.isfinite(seconds) and seconds >= 0 else None
        value = headers.get("retry-after")
    except Exception:  # no mapping of headers, or one that raises
        return None
    if value is None:
        return None
    text = str(value).strip()[:100]
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
        seconds = max(seconds, 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@dataclass(frozen=True)
class Rule:
    """One classification rule: its failure type when every matcher it gives matches."""

    type: str
    exception: frozenset[str] = frozenset()
    http_status: frozenset[int] = frozenset()
    exit_status: frozenset[int] = frozenset()
    stderr: CompiledPattern | None = None
    message: CompiledPattern | None = None
    timed_out: bool | None = None
    retry_after: bool | None = None

    def matches(self, failure: CallFailure) -> bool:
        if self.exception and self.exception.isdisjoint(failure.classes):
            return False
        if self.http_status and failure.status not in self.http_status:
            return False
        if self.exit_status and failure.exit_status not in self.exit_status:
            return False
        if self.stderr is not None and self.stderr.search(failure.stderr) is None:
            return False
        if self.message is not None and self.message.search(failure.message) is None:
            return False
        if self.retry_after is not None and self.retry_after != (failure.retry_after is not None):
            return False
        return self.timed_out is None or self.timed_out == failure.timed_out


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SERVER_ERRORS = frozenset(range(500, 600))
_CLIENT_ERRORS = frozenset(range(400, 500))
_TIMEOUTS = _names(
    "APITimeoutError TimeoutException ReadTimeout WriteTimeout ConnectTimeout PoolTimeout "
    "TimeoutError"
)
_RATE_LIMITS = _names("RateLimitError")
_UNAVAILABLE = _names(
    "InternalServerError OverloadedError ServiceUnavailableError APIConnectionError "
    "ConnectError NetworkError RemoteProtocolError ConnectionError"
)
_ERRORS = _names(
    "APIStatusError APIResponseValidationError BadRequestError AuthenticationError "
    "PermissionDeniedError NotFoundError ConflictError UnprocessableEntityError "
    "HTTPStatusError APIError"
)


def _engine_pattern(source: str) -> CompiledPattern:
    """One of the engine's own stderr patterns: fixed words and alternations, linear on
    stdlib ``re`` (a pack's patterns go through ``compile_pattern``; these need not, and
    RE2 is not imported for them at start-up)."""
    return re.compile(source, re.ASCII)


def _said(names: frozenset[str]) -> CompiledPattern:
    """A traceback's last line naming one of ``names`` (a model command written with an
    SDK that died of its exception)."""
    return _engine_pattern(r"\b(?:" + "|".join(sorted(names)) + r")\b")


@functools.cache
def default_rules() -> tuple[Rule, ...]:
    """The engine's defaults, tried after the pack's rules (unless ``defaults: false``);
    built when a call first fails (their patterns cost start-up time otherwise)."""
    return (
        Rule(MODEL_TIMEOUT, timed_out=True),
        Rule(MODEL_RATE_LIMITED, http_status=frozenset({429})),
        Rule(MODEL_TIMEOUT, http_status=frozenset({408})),
        Rule(MODEL_UNAVAILABLE, http_status=_SERVER_ERRORS),
        Rule(MODEL_TIMEOUT, exception=_TIMEOUTS),
        Rule(MODEL_RATE_LIMITED, exception=_RATE_LIMITS),
        Rule(MODEL_UNAVAILABLE, exception=_UNAVAILABLE),
        Rule(MODEL_ERROR, http_status=_CLIENT_ERRORS),
        Rule(MODEL_ERROR, exception=_ERRORS),
        # a model command's stderr: the same exceptions named in its traceback
        Rule(MODEL_RATE_LIMITED, stderr=_engine_pattern(r"\bRateLimitError\b|Error code: 429\b")),
        Rule(MODEL_TIMEOUT, stderr=_said(_TIMEOUTS - {"TimeoutError"})),
        Rule(MODEL_UNAVAILABLE, stderr=_engine_pattern(r"Error code: 5\d\d\b")),
        Rule(MODEL_UNAVAILABLE, stderr=_said(_UNAVAILABLE - {"ConnectionError"})),
        Rule(MODEL_ERROR, stderr=_engine_pattern(r"Error code: 4\d\d\b")),
        Rule(MODEL_ERROR, stderr=_said(_ERRORS - {"APIError"})),
    )


@dataclass(frozen=True)
class TransportRetry:
    """A declared transport retry: which failure types, how many retries of one prompt,
    the exponential backoff (``initial`` seconds, times ``multiplier`` each retry, less a
    random part of ``jitter`` of it, at most ``ceiling``) and whether ``Retry-After`` is
    honoured (a wait longer than ``ceiling`` is not made: the failure goes to the pack)."""

    on: frozenset[str]
    max_retries: int = 3
    initial: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.5
    ceiling: float = 60.0
    retry_after: bool = True

    def delay(
        self,
        failure_type: str,
        retried: int,
        asked: float | None,
        random: Callable[[], float],
    ) -> float | None:
        """Seconds to wait before resending the prompt after a failure of
        ``failure_type``, when ``retried`` transport retries of it were made already and
        the server asked for ``asked`` seconds; None: no retry (not declared for the type,
        none left, or a ``Retry-After`` beyond the ceiling)."""
        if failure_type not in self.on or retried >= self.max_retries:
            return None
        base = min(self.ceiling, self.initial * self.multiplier**retried)
        wait = base * (1.0 - self.jitter * min(max(random(), 0.0), 1.0))
        if asked is not None and self.retry_after:
            if asked > self.ceiling:
                return None
            wait = max(wait, asked)
        return min(wait, self.ceiling)


@dataclass(frozen=True)
class Price:
    """What ``per`` tokens in and out cost (in the pack's currency)."""

    input: float
    output: float
    per: int = 1_000_000


@dataclass(frozen=True)
class CompiledCalls:
    """The ``model_calls:`` section ready for use."""

    rules: tuple[Rule, ...] = ()
    defaults: bool = True
    retry: TransportRetry | None = None
    usage_prefix: str | None = USAGE_PREFIX
    chars_per_token: int = 4
    pricing: Mapping[str, Price] | None = None

    def classify(self, failure: CallFailure | None, declared: Container[str]) -> str:
        """The failure type of a failed call: the first rule (the pack's, then the
        engine's) that matches and whose type the pack ``declared``, else
        EXECUTION_FAILED."""
        if failure is None:
            return EXECUTION_FAILED
        for rule in self._every():
            if rule.type in declared and rule.matches(failure):
                return rule.type
        return EXECUTION_FAILED

    def _every(self) -> Iterable[Rule]:
        yield from self.rules
        if self.defaults:
            yield from default_rules()

    def delay(
        self, failure_type: str, retried: int, asked: float | None, random: Callable[[], float]
    ) -> float | None:
        """``TransportRetry.delay``; None without a declared retry."""
        if self.retry is None:
            return None
        return self.retry.delay(failure_type, retried, asked, random)

    def price(self, model: str | None) -> Price | None:
        """The price of ``model``: its own entry, else the longest entry its name starts
        with (``gpt-4o-mini`` prices ``gpt-4o-mini-2024-07-18``); None without one."""
        if not self.pricing or not model:
            return None
        found = self.pricing.get(model)
        if found is not None:
            return found
        prefixes = [name for name in self.pricing if model.startswith(name)]
        return self.pricing[max(prefixes, key=len)] if prefixes else None

    def cost(self, usage: Usage) -> float | None:
        """What ``usage`` cost at its model's price; None when the model has no price or
        no tokens are known."""
        price = self.price(usage.model)
        if price is None or not usage.known:
            return None
        spent = (usage.tokens_in or 0) * price.input + (usage.tokens_out or 0) * price.output
        return spent / price.per


NO_CALLS = CompiledCalls()
"""A pack without the section: the engine's defaults classify, nothing is retried at the
transport, no price is known."""


def compile_calls(section: Any) -> CompiledCalls:
    """The section as declared (a validated model, or its frozen record read back from a
    pack image): its rules' patterns compiled once."""
    if section is None:
        return NO_CALLS
    rules = tuple(
        Rule(
            rule.type,
            frozenset(rule.exception),
            frozenset(rule.http_status),
            frozenset(rule.exit_status),
            compile_pattern(rule.stderr) if rule.stderr is not None else None,
            compile_pattern(rule.message) if rule.message is not None else None,
            rule.timed_out,
            rule.retry_after,
        )
        for rule in section.classify
    )
    declared = section.retry
    retry = (
        None
        if declared is None
        else TransportRetry(
            frozenset(declared.on),
            declared.max_retries,
            declared.initial,
            declared.multiplier,
            declared.jitter,
            declared.ceiling,
            declared.retry_after,
        )
    )
    pricing = {
        name: Price(price.input, price.output, price.per) for name, price in section.pricing.items()
    }
    return CompiledCalls(
        rules,
        section.defaults,
        retry,
        section.usage.stderr_prefix,
        section.usage.chars_per_token,
        pricing,
    )


def attempt_kind(previous: Mapping[str, Any] | None) -> str:
    """Why an attempt's prompt was sent, from the attempt before it in its run (None: it
    is the run's first): resent by a transport retry; a repair when a prompt was rendered
    after it (it has a prompt's hash) or it failed its contract; the same prompt retried
    after a failed call (or a non-final decision on a passing output)."""
    if previous is None:
        return FIRST
    if previous.get("rule") == TRANSPORT_RULE:
        return TRANSPORT_RETRY
    if previous.get("prompt_sha256"):
        return REPAIR
    if previous.get("status") == "fail" and previous.get("validation") != "execution":
        return REPAIR
    return RETRY


def transport_decision(
    trigger: Any,
    verdict: Verdict,
    attempt: int,
    wait: float,
    retried: int,
    retry: TransportRetry | None,
) -> Decision:
    """The decision on a failed call that the transport retry resends: not final, no
    template (the prompt does not change), and the repairs left as they were."""
    most = retry.max_retries if retry is not None else retried + 1
    return Decision(
        action="RETRY",
        reason=f"{verdict.failure_type}: transport retry {retried + 1} of {most}, "
        f"after {wait:.2f} s",
        attempt=attempt,
        max_attempts=trigger.max_attempts + 1,  # outputs in all, as every decision counts
        attempts_left=max(0, trigger.max_attempts - attempt + 1),
        final=False,
        exit_code=3,
        rule=TRANSPORT_RULE,
    )


def compile_section(pack: Rulepack, compiling: Compiling) -> CompiledCalls:
    """The ``model_calls:`` section compiled (``engine.policy.calls.section``)."""
    return compile_calls(pack.model_calls)
