"""Streamed outputs: read as they arrive, closed at the first definite failure.

A model call may give its output as a stream: an iterator (or async iterator) of text
chunks, an OpenAI or Anthropic stream object (read by the shapes of their events, never by
importing the SDKs), or a model command's stdout (`rules run --stream`). A ``Watch`` takes
the chunks, counts them against the output cap, and asks the contract's prefix reader
(``engine.contracts.kind.prefix_reader``) what the text so far already decides, each time
the text has grown enough since it last asked (``FIRST_STEP``, then ``STEP`` or a quarter).

At the first definite failure the stream is closed (``close()`` or ``aclose()``: an SDK's
stream closes its connection and the provider stops generating; a command is ended), and
the prefix is the attempt's output, with that failure as its verdict. A stream that never
fails definitively is evaluated whole, exactly as if it had been returned as one text.
"""

from __future__ import annotations

import codecs
import contextlib
import inspect
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.contracts.kind import EvaluationInput, PrefixReader, prefix_reader
from engine.core.results import Failure
from engine.core.textio import clean_text
from engine.core.tokens import estimated_tokens
from engine.pack.compiled import Pack

FIRST_STEP = 256
"""The prefix reader is first asked once this many characters have arrived: a cut output
shows the repair what the model was writing, not a lone first line."""

STEP = 4096
"""Then it is asked each time the text has grown by this much, or by a quarter, whichever
is more: a failure is found before the text is that much longer than where it is (about a
thousand tokens while the text is under 16 KB, as most model outputs are; a quarter of
the text beyond: the reader is handed the whole text, and joining it at every 4 KB of a
megabyte would cost more than evaluating it). A reader reads only the text that is new
since it was last asked, so an ask costs a fixed part (joining the text, finding where the
new lines end, a few checks) plus the new text's reading; at 4 KB a step that fixed part
stays within a few per cent of what evaluating the text costs (benchmarks/streams.py: +9%
at 2 KB, +4% at 4 KB on a 7.5 KB sentinel stream), and the text is joined a bounded
number of times."""


@dataclass(frozen=True)
class StreamEnd:
    """Where a streamed output stopped: the characters read (``chars``), whether the stream
    was closed before its end (``cut``), and the definite failure it was closed at
    (``failure``; None when it ran to its end or was closed at the size cap). ``cap``:
    the most bytes the output could have taken; ``max_tokens``: the most tokens the call
    could generate, as the caller declared it (None: not declared). ``not_generated``: of
    a stream closed early, the tokens it could still have produced (``estimated``: not
    all of it reported, see ``not_generated``)."""

    chars: int
    cut: bool
    failure: Failure | None = None
    cap: int | None = None
    max_tokens: int | None = None
    not_generated: int | None = None
    estimated: bool = False


def not_generated(end: StreamEnd, tokens_out: int | None, chars_per_token: int) -> StreamEnd:
    """``end`` with the tokens a stream closed early did not generate: what the call could
    still have produced, its ceiling less the tokens it generated. The ceiling is the
    call's own limit when the caller declared it (``max_tokens``), else the output cap
    (``cap`` bytes at ``chars_per_token`` characters a token: a byte holds at most one
    character); the tokens generated are ``tokens_out`` as the provider or the command
    reported them, else the ``chars`` read at the same ratio, rounded up, as the usage
    estimate counts them. It is an estimate unless both are known (a declared limit and
    reported tokens), and in any case an upper bound: the model might have stopped
    sooner. A stream that ran to its end generated all it would: nothing is counted."""
    if not end.cut:
        return end
    if end.max_tokens is not None:
        ceiling, guessed = end.max_tokens, tokens_out is None
    elif end.cap is not None:
        ceiling, guessed = estimated_tokens(end.cap, chars_per_token), True
    else:
        return end
    generated = (
        tokens_out if tokens_out is not None else estimated_tokens(end.chars, chars_per_token)
    )
    return replace(end, not_generated=max(0, ceiling - generated), estimated=guessed)


@dataclass(frozen=True)
class Streamed:
    """What reading a stream gave: the output (its prefix when cut), where it stopped, and
    ``error`` when it gives no output to evaluate (over the cap, a chunk of no known shape,
    the stream raised: ``raised``)."""

    output: str | bytes
    end: StreamEnd
    error: str | None = None
    raised: Exception | None = None
    over_cap: bool = False
    shared: dict[str, Any] | None = None
    """What the prefix reader already read of the output, for its evaluation to reuse."""


class UnreadableChunk(Exception):
    """A chunk that is neither text nor an event of a known model client."""


class Watch:
    """One streamed output as it arrives (a new one for each attempt)."""

    def __init__(
        self,
        reader: PrefixReader | None,
        cap: int | None,
        make: Callable[[], PrefixReader | None] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self._reader = reader
        self._max_tokens = max_tokens  # the call's own limit, when the caller declared it
        # ``make``: the reader made at the first ask instead (an output shorter than
        # FIRST_STEP never needs one)
        self._make = make
        self._cap = cap
        self._parts: list[str] = []
        self._raw: bytearray | None = None  # the bytes, when the stream gives bytes
        self._decoder: codecs.IncrementalDecoder | None = None
        self._texts = False  # a chunk was text
        self._chars = 0
        self._size = 0  # bytes (UTF-8 for text)
        # the reader is asked next when this many characters have arrived
        self._ask_at = FIRST_STEP if reader is not None or make is not None else math.inf
        self.failure: Failure | None = None
        self.over_cap = False

    def feed(self, chunk: str | bytes) -> bool:
        """Take one chunk; True when the stream is to be closed now (a definite failure, or
        over the cap)."""
        if isinstance(chunk, (bytes, bytearray)):
            if self._raw is None:
                self._raw = bytearray()
                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            self._raw += chunk
            self._size += len(chunk)
            assert self._decoder is not None
            text = self._decoder.decode(bytes(chunk))
        else:
            self._texts = True
            text = chunk
            self._size += len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        if self._cap is not None and self._size > self._cap:
            self.over_cap = True
            return True
        if not text:
            return False
        self._parts.append(text)
        self._chars += len(text)
        if self._chars < self._ask_at:
            return False
        whole = "".join(self._parts)
        self._parts = [whole]
        self._ask_at = self._chars + max(STEP, self._chars >> 2)
        if self._make is not None:
            self._reader, self._make = self._make(), None
            if self._reader is None:  # the contract decides nothing on a prefix
                self._ask_at = math.inf
                return False
        assert self._reader is not None
        self.failure = self._reader.feed(whole)
        return self.failure is not None

    def output(self) -> str | bytes:
        """The output read so far: bytes when the stream gave only bytes."""
        if self._raw is not None and not self._texts:
            return bytes(self._raw)
        return "".join(self._parts)

    def end(self, cut: bool) -> StreamEnd:
        return StreamEnd(self._chars, cut, self.failure, self._cap, self._max_tokens)

    def shared(self) -> dict[str, Any] | None:
        """What the prefix reader already read of the whole output, for its evaluation to
        reuse (``EvaluationInput.shared``: a sentinel payload's fields are then read once
        in all); None when it offers nothing, or the output is not the text the
        evaluation reads (bytes, or text with a lone surrogate it cleans)."""
        offer = getattr(self._reader, "shared", None)
        if offer is None or self._raw is not None or self.failure is not None:
            return None
        text = self.output()
        if not isinstance(text, str) or clean_text(text) is not text:
            return None
        self._parts = [text]
        shared: dict[str, Any] | None = offer(text)
        return shared


def new_watch(
    pack: Pack,
    block: str,
    nonce: str | None,
    vars: Mapping[str, str],
    context: Mapping[str, Any],
    cap: int | None,
    max_tokens: int | None = None,
) -> Callable[[], Watch]:
    """A maker of a fresh ``Watch`` for each streamed output of ``block`` with these inputs
    (its contract's prefix reader, if it has one; ``cap``: bytes, None for no cap;
    ``max_tokens``: the call's own limit of tokens, when the caller declared it)."""
    params, values = pack.split_inputs(block, context, vars)
    contract = pack.contract(block)
    inputs = EvaluationInput(None, nonce, params, values)
    return lambda: Watch(None, cap, lambda: prefix_reader(contract, inputs), max_tokens)


def is_stream(value: Any) -> bool:
    """Whether a call's return value is a stream: an iterator or an async iterator (a
    generator, an SDK's stream object), not text."""
    if isinstance(value, (str, bytes, bytearray)):
        return False
    kind = type(value)
    return hasattr(kind, "__next__") or hasattr(kind, "__anext__")


def is_async_stream(value: Any) -> bool:
    return hasattr(type(value), "__anext__")


def chunk_text(chunk: Any) -> str | bytes:
    """The text of one chunk: text or bytes as they are; the text delta of an OpenAI chat
    chunk (``choices[0].delta.content``), an OpenAI Responses event
    (``response.output_text.delta``) or an Anthropic event (``content_block_delta`` with a
    ``text_delta``), as objects or as dicts; "" for their events that carry no text.
    ``UnreadableChunk`` for anything else."""
    if isinstance(chunk, str):
        return str.__str__(chunk)
    if isinstance(chunk, (bytes, bytearray)):
        return bytes(chunk)
    get: Callable[[Any, str], Any] = (
        (lambda obj, key: obj.get(key) if isinstance(obj, Mapping) else None)
        if isinstance(chunk, Mapping)
        else (lambda obj, key: getattr(obj, key, None))
    )
    choices = get(chunk, "choices")
    kind = get(chunk, "type")
    if choices is not None:
        if not choices:
            return ""  # a usage chunk
        delta = get(choices[0], "delta")
        content = None if delta is None else get(delta, "content")
        return content if isinstance(content, str) else ""
    if kind == "content_block_delta":
        delta = get(chunk, "delta")
        text = None if delta is None else get(delta, "text")
        return text if isinstance(text, str) else ""
    if kind == "response.output_text.delta":
        delta = get(chunk, "delta")
        return delta if isinstance(delta, str) else ""
    if isinstance(kind, str):
        return ""  # another event of the stream (its start, its end, a tool call...)
    raise UnreadableChunk(
        f"model call streamed a {type(chunk).__name__}: a stream gives text, bytes, or "
        "the chunks of an OpenAI or Anthropic stream"
    )


def read_stream(stream: Iterator[Any], watch: Watch) -> Streamed:
    """Read ``stream`` to its end, or close it at the first definite failure."""
    cut = False
    try:
        for chunk in stream:
            if watch.feed(chunk_text(chunk)):
                cut = True
                break
    except Exception as exc:  # the stream failed: an execution failure, as a call's raise
        _close(stream)
        return _failed(watch, exc)
    if cut:
        _close(stream)
    return _read(watch, cut)


async def aread_stream(stream: AsyncIterator[Any], watch: Watch) -> Streamed:
    """``read_stream`` of an async stream (closed with ``aclose()`` or an async
    ``close()``)."""
    cut = False
    try:
        async for chunk in stream:
            if watch.feed(chunk_text(chunk)):
                cut = True
                break
    except Exception as exc:  # the stream failed: an execution failure, as a call's raise
        await _aclose(stream)
        return _failed(watch, exc)
    if cut:
        await _aclose(stream)
    return _read(watch, cut)


def _read(watch: Watch, cut: bool) -> Streamed:
    if watch.over_cap:
        return Streamed("", watch.end(cut), over_cap=True)
    shared = None if cut else watch.shared()
    return Streamed(watch.output(), watch.end(cut), shared=shared)


def _failed(watch: Watch, exc: Exception) -> Streamed:
    if isinstance(exc, UnreadableChunk):
        return Streamed("", watch.end(True), error=str(exc))
    return Streamed("", watch.end(True), raised=exc)


def _close(stream: Any) -> None:
    """Close a stream the loop stops reading: a generator's ``close()`` runs its
    ``finally``; an SDK stream's closes its HTTP response."""
    close = getattr(stream, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # the stream is abandoned either way
            close()


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if not callable(close):
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:  # the stream is abandoned either way
        pass
