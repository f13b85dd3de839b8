"""Model outputs as text: any bytes become a string, never an exception."""

from __future__ import annotations


def decode_output(data: bytes | str) -> str:
    """UTF-8 with invalid bytes replaced (U+FFFD); NUL, CR and BOM are kept for the grammar."""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")
