"""What the first lines of a streamed sentinel output already decide.

Only complete lines are read (a line is decided once its LF has arrived), each once: the
delimiters are searched in the new lines only, and the payload's new lines are read into
fields where the last reading stopped (``FieldReader`` keeps its state between steps). A
failure is given only when no text that could follow can mend it:

* a second opener (or more blocks than a contract of several allows), a second closer;
* a closer before any opener (what follows is an opener after it, or none at all);
* the opener's nonce not the expected one, or not the closer's;
* a payload already longer than ``max_payload_chars``;
* a payload line that already broke the grammar (an unknown field, a bad value, a tab),
  read as the whole parse reads it, a multi-line field at the end left open.

Each payload line is read once while the stream arrives, and a stream that ends without a
definite failure hands that reading to its evaluation (``shared``), which reads only the
lines that came after: a streamed output's fields are read once in all, as a returned
one's are, so the checks cost little more than finding the new lines' ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.contracts.kinds.sentinel.compiler import CompiledContract
from engine.contracts.kinds.sentinel.delimiters import DelimiterLine
from engine.contracts.kinds.sentinel.failures import Reject
from engine.contracts.kinds.sentinel.runtime import FieldReader
from engine.core.results import Failure

Found = list[tuple[int, int, str]]
CountFailure = Callable[[str, Found, str, str, DelimiterLine, Found], Reject]
Payload = Callable[[str, str, DelimiterLine, DelimiterLine], tuple[list[str], int]]


class SentinelPrefix:
    """One streamed output of a sentinel contract, read as it arrives."""

    def __init__(
        self,
        compiled: CompiledContract,
        delimiters: tuple[DelimiterLine, DelimiterLine],
        nonce: str,
        count_failure: CountFailure,
        payload: Payload,
        reading_key: str | None,
    ) -> None:
        self._compiled = compiled
        self._opener, self._closer = delimiters
        self._nonce = nonce
        self._count_failure = count_failure
        self._payload = payload
        self._reading_key = reading_key
        self._scanned = 0  # the text up to here (whole lines) has been searched
        self._openers: Found = []
        self._closers: Found = []
        self._fields = FieldReader(compiled)
        self._read_to = -1  # the payload's lines up to here were read (-1: no opener yet)
        self._payload_chars = 0  # of the lines read, CRs left out, each with its LF
        self._failed = False

    def feed(self, text: str) -> Failure | None:
        end = text.rfind("\n", self._scanned) + 1
        if end <= self._scanned:
            return None
        new = text[self._scanned : end]
        for delimiter, found in ((self._opener, self._openers), (self._closer, self._closers)):
            found.extend((start + self._scanned, stop + self._scanned, nonce)
                         for start, stop, nonce in delimiter.find(new))  # fmt: skip
        self._scanned = end
        try:
            self._decide(text, end)
        except Reject as rejected:
            self._failed = True
            return rejected.failure
        return None

    def _decide(self, text: str, end: int) -> None:
        """Raise the ``Reject`` the lines up to ``end`` already decide, if any."""
        contract, report = self._compiled, self._compiled.report
        openers, closers = self._openers, self._closers
        if contract.many:
            if len(openers) > contract.max_blocks:
                raise report.fail("block_count", count=len(openers), max=contract.max_blocks)
            return
        if len(openers) > 1 or (closers and not openers):
            complete = text[:end].replace("\r", "")
            raise self._count_failure(
                "opener_count", openers, complete, self._nonce, self._opener, closers
            )
        if len(closers) > 1:
            complete = text[:end].replace("\r", "")
            raise self._count_failure(
                "closer_count", closers, complete, self._nonce, self._closer, openers
            )
        if not openers:
            return
        open_start, open_end, open_nonce = openers[0]
        if closers:
            if closers[0][0] < open_start:
                raise report.fail("order")
            if closers[0][2] != open_nonce:
                raise report.fail("nonce_pair", opener=open_nonce, closer=closers[0][2])
        if open_nonce != self._nonce:
            raise report.fail(
                "nonce_expected", kind="nonce", found=open_nonce, expected=self._nonce
            )
        if closers:
            return  # a whole block: the evaluation of the whole output reads it
        # the complete lines after the opener not read yet, each with its LF
        start = open_end + 1 if self._read_to < 0 else self._read_to
        self._read_to = max(start, end)
        if end <= start:
            return
        new = text[start:end]
        if "\r" in new:
            new = new.replace("\r", "")
        self._payload_chars += len(new)
        size = self._payload_chars - 1  # the payload lines joined with LF
        if size > contract.max_payload_chars:
            raise report.fail("payload_too_large", max=contract.max_payload_chars, size=size)
        try:
            self._fields.read(new[:-1].split("\n"))
        except Reject as rejected:
            line = text.count("\n", 0, open_start) + 1
            raise report.shifted(rejected, line) from None

    def shared(self, text: str) -> dict[str, Any] | None:
        """The reading of the whole output ``text`` (what ``feed`` was given grown to its
        end) as ``SentinelParser.read`` gives it, keyed for ``EvaluationInput.shared``:
        the lines ``feed`` read are not read again. None when the output fails (its
        evaluation reads it whole and says how) or the contract reads several blocks."""
        if self._reading_key is None or self._failed or not self._scanned:
            return None  # nothing read: the evaluation reads it all as it would anyway
        fields = self._fields
        try:
            payload, _ = self._payload(text, self._nonce, self._opener, self._closer)
            if fields.lines > len(payload):
                return None  # not the text feed was given: nothing to reuse
            fields.read(payload[fields.lines :])
            reading = fields.end()
        except Reject:
            return None
        finally:
            self._failed = True  # the reader's state is spent
        return {self._reading_key: reading}


def sentinel_prefix(
    compiled: CompiledContract,
    delimiters: Callable[[str, Mapping[str, str]], tuple[DelimiterLine, DelimiterLine]],
    nonce: str,
    params: Mapping[str, str],
    count_failure: CountFailure,
    payload: Payload,
    reading_key: str | None,
) -> SentinelPrefix | None:
    """A reader of a streamed output with these inputs, or None when the inputs themselves
    fail (the whole evaluation says so; nothing of the stream is decided)."""
    try:
        bound = delimiters(nonce, params)
    except Reject:
        return None
    return SentinelPrefix(compiled, bound, nonce, count_failure, payload, reading_key)
