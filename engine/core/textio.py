"""Model outputs as text: any bytes become a string, never an exception."""

from __future__ import annotations

from typing import IO, Any


def decode_output(data: bytes | str) -> str:
    """UTF-8 with invalid bytes replaced (U+FFFD); NUL, CR and BOM are kept for the grammar."""
    if isinstance(data, str):
        return clean_text(data)
    return data.decode("utf-8", errors="replace")


_CHUNK = 1 << 20

MAX_OUTPUT_BYTES = 64 * 1024 * 1024
"""The default cap on a model output read from a file or stdin (``--max-output-bytes``)."""


def read_capped(stream: IO[Any], cap: int = MAX_OUTPUT_BYTES) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of ``stream``, read in chunks, and whether there was more
    (one byte past the cap is read to know; nothing further: /dev/zero ends at once)."""
    parts: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = stream.read(min(_CHUNK, cap + 1 - size))
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    data = b"".join(parts)
    return data[:cap], len(data) > cap


def too_large_message(cap: int) -> str:
    return (
        f"output is larger than {cap} bytes (--max-output-bytes, or the pack's "
        "limits.max_output_bytes); it was not read"
    )


def clean_text(text: str) -> str:
    """Lone surrogates (from a surrogateescape decode) become U+FFFD; RE2 needs valid UTF-8.

    Fast paths: an ASCII string (``isascii`` is O(1)) has no surrogate, and any other string
    is checked by encoding it one 1 MiB slice at a time, so a huge output is never copied
    whole unless it really holds a surrogate.
    """
    if text.isascii():
        return text
    try:
        if len(text) <= _CHUNK:
            text.encode("utf-8")
        else:
            for start in range(0, len(text), _CHUNK):
                text[start : start + _CHUNK].encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def holds_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (from a ``"\\ud800"`` escape of JSON or YAML),
    which no UTF-8 output, file name or ledger can hold."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def int_text(number: int) -> str:
    """Decimal digits of an int of any size (str() refuses over 4300 digits)."""
    try:
        return str(number)
    except ValueError:
        digits: list[str] = []
        sign, number = ("-", -number) if number < 0 else ("", number)
        while number:
            number, chunk = divmod(number, 10**1000)
            digits.append(f"{chunk:01000d}" if number else f"{chunk}")
        return sign + "".join(reversed(digits))


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def find_word(text: str, word: str) -> int:
    """Index of the first occurrence of ``word`` with no letter, digit or underscore right
    before or after it (Unicode word boundaries), or -1."""
    start = 0
    while True:
        index = text.find(word, start)
        if index < 0:
            return -1
        end = index + len(word)
        before_ok = index == 0 or not _is_word_char(text[index - 1])
        after_ok = end == len(text) or not _is_word_char(text[end])
        if before_ok and after_ok:
            return index
        start = index + 1


def clean_strings(value: Any) -> Any:
    """``value`` (JSON-like data) with ``clean_text`` applied to every string in it, keys
    included: safe to print or encode as UTF-8 whatever an input held."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_strings(k): clean_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_strings(item) for item in value]
    return value


EMPTY_OUTPUT = "EMPTY_OUTPUT"
"""The failure type of an output that is empty or only whitespace (every kind reports it)."""
NOT_TEXT = "NOT_TEXT"
"""The failure type of an output that is not text: NUL bytes (UTF-16 among others) or
mostly bytes that are not UTF-8 (every kind reports it; its text never reaches a prompt)."""

_SAMPLE = 4096
_SHOWN = 24


def output_problem(text: str) -> tuple[str, str] | None:
    """(failure type, message) when ``text`` (a decoded output) is empty or whitespace only
    (``EMPTY_OUTPUT``) or is not text (``NOT_TEXT``); None for text. Decided once here for
    every contract kind: a NUL character, or replacement characters (U+FFFD, bytes that were
    not UTF-8) for at least a quarter of the first 4096 characters, mean not text."""
    if not text or text.isspace():
        return EMPTY_OUTPUT, "the output is empty" if not text else "the output is only whitespace"
    sample = text[:_SAMPLE]
    if "\x00" in text or sample.count("\ufffd") * 4 >= len(sample) > 0:
        return NOT_TEXT, not_text_description(text)
    return None


def is_not_text(text: str) -> bool:
    problem = output_problem(text)
    return problem is not None and problem[0] == NOT_TEXT


def not_text_description(text: str) -> str:
    """What a prompt may say of an output that is not text: its size and its first
    characters escaped (``\\x00``, ``\\ufffd`` for a byte that was not UTF-8), never the
    output itself."""
    head = text[:_SHOWN].encode("ascii", "backslashreplace").decode("ascii")
    head = head.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    head = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in head)
    more = "..." if len(text) > _SHOWN else ""
    nul = " holding NUL characters" if "\x00" in text else ""
    return (
        f"the output is not text (UTF-8 expected): {len(text)} characters{nul}, starting "
        f"'{head}'{more}; it is not shown"
    )
