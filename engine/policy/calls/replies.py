"""What a model client returns, read for its text and usage without importing the client.

A call may return text, a ``ModelReply``, or the response object of an SDK: an OpenAI
``ChatCompletion`` (``choices[0].message.content``, ``usage.prompt_tokens`` and
``completion_tokens``), an OpenAI Responses ``Response`` (``output_text``,
``usage.input_tokens`` and ``output_tokens``) or an Anthropic ``Message`` (text blocks of
``content``, ``usage.input_tokens`` and ``output_tokens``). They are recognised by their
shape (duck typing): the engine imports no SDK, and an SDK's new version that keeps these
fields is read the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from engine.core.tokens import estimated_tokens


@dataclass(frozen=True)
class ModelReply:
    """A model's reply as a client may return it to ``engine.run``: the text, and what the
    provider reported of the call (tokens in and out, the model that answered). Tokens
    left None are estimated from the text and marked as an estimate."""

    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class Usage:
    """The tokens of one model call and the model that answered; ``estimated``: counted
    from the prompt's and the output's characters, not reported by the provider."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    model: str | None = None
    estimated: bool = False

    @property
    def known(self) -> bool:
        return self.tokens_in is not None or self.tokens_out is not None


NO_USAGE = Usage()


@dataclass(frozen=True)
class Call:
    """What is known of the model call that gave an attempt's output: its usage, and when
    its failure is retried at the transport, the wait before the retry (``transport``)
    and how many transport retries of its prompt were made before it (``retried``)."""

    usage: Usage = NO_USAGE
    transport: float | None = None
    retried: int = 0


NO_CALL = Call()


class NotAReply(Exception):
    """A returned object has a reply's shape but a part of it cannot be read."""


def _count(value: Any) -> int | None:
    """A token count as the provider gave it: a whole number from 0, else None."""
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def _text(value: Any) -> str | None:
    return str.__getitem__(value, slice(None)) if isinstance(value, str) else None


def _model(value: Any) -> str | None:
    text = _text(getattr(value, "model", None))
    return text[:200] if text else None


def read_reply(value: Any) -> tuple[str, Usage] | None:
    """The text and usage of ``value`` when it is a ``ModelReply`` or has the shape of an
    OpenAI or Anthropic response; None when it has none of these shapes. ``NotAReply``
    when it has one but its text cannot be read (no text, a refusal without text)."""
    if isinstance(value, ModelReply):
        text = _text(value.text)
        if text is None:
            raise NotAReply("ModelReply.text is not text")
        usage = Usage(_count(value.tokens_in), _count(value.tokens_out), _text(value.model))
        return text, usage
    usage_of = getattr(value, "usage", None)
    choices = getattr(value, "choices", None)
    if isinstance(choices, (list, tuple)):  # OpenAI chat completion
        if not choices:
            raise NotAReply("the completion has no choices")
        text = _text(getattr(getattr(choices[0], "message", None), "content", None))
        if text is None:
            raise NotAReply("the completion's first choice has no text content")
        return text, Usage(
            _count(getattr(usage_of, "prompt_tokens", None)),
            _count(getattr(usage_of, "completion_tokens", None)),
            _model(value),
        )
    content = getattr(value, "content", None)
    if isinstance(content, (list, tuple)) and getattr(value, "type", None) == "message":
        texts = [
            _text(getattr(block, "text", None))
            for block in content
            if getattr(block, "type", None) == "text"
        ]
        if not texts or any(t is None for t in texts):
            raise NotAReply("the message has no text block")
        return "".join(t for t in texts if t is not None), _in_out(usage_of, value)
    if getattr(value, "object", None) == "response" and hasattr(value, "output"):
        text = _text(getattr(value, "output_text", None))  # OpenAI Responses
        if text is None:
            raise NotAReply("the response has no output text")
        return text, _in_out(usage_of, value)
    return None


def _in_out(usage: Any, value: Any) -> Usage:
    return Usage(
        _count(getattr(usage, "input_tokens", None)),
        _count(getattr(usage, "output_tokens", None)),
        _model(value),
    )


def estimated(usage: Usage, prompt: str, output: str, chars_per_token: int) -> Usage:
    """``usage`` with the counts it lacks estimated from the characters of ``prompt`` and
    ``output`` (``chars_per_token`` characters a token, rounded up), marked as an
    estimate when any count was."""
    tokens_in, tokens_out = usage.tokens_in, usage.tokens_out
    guessed = tokens_in is None or tokens_out is None
    if tokens_in is None:
        tokens_in = estimated_tokens(len(prompt), chars_per_token)
    if tokens_out is None:
        tokens_out = estimated_tokens(len(output), chars_per_token)
    return Usage(tokens_in, tokens_out, usage.model, usage.estimated or guessed)


MAX_REPORT_CHARS = 4096


def reported_usage(stderr: str, prefix: str | None) -> tuple[Usage, float | None]:
    """The usage a model command reported on its stderr: the last line that starts with
    ``prefix``, followed by a JSON object with ``tokens_in``, ``tokens_out`` (or the
    providers' names: ``input_tokens``/``prompt_tokens``, ``output_tokens``/
    ``completion_tokens``), ``model`` and ``retry_after`` (seconds), each optional. A
    line that cannot be read reports nothing."""
    if prefix is None:
        return NO_USAGE, None
    found = None
    for line in stderr.splitlines():
        if line.startswith(prefix) and len(line) <= MAX_REPORT_CHARS:
            found = line[len(prefix) :]
    if found is None:
        return NO_USAGE, None
    try:
        data = json.loads(found)
    except ValueError:
        return NO_USAGE, None
    if not isinstance(data, dict):
        return NO_USAGE, None

    def first(*names: str) -> int | None:
        for name in names:
            count = _count(data.get(name))
            if count is not None:
                return count
        return None

    model = data.get("model")
    wait: Any = data.get("retry_after")
    asked = None
    if type(wait) in (int, float) and math.isfinite(wait) and wait >= 0:
        asked = float(wait)
    return (
        Usage(
            first("tokens_in", "input_tokens", "prompt_tokens"),
            first("tokens_out", "output_tokens", "completion_tokens"),
            model[:200] if isinstance(model, str) and model else None,
        ),
        asked,
    )
