"""The one parse entry point of a pack: ``Pack`` and the cached ``ParsingPack`` share it.

Parsing a block means: find the block's parser (an unknown block is an ``EngineError``
naming the known ones), make the output and its inputs clean text (the output decoded,
lone surrogates replaced in text, nonce and params), and run the parser. A pack says how it
finds a block's parser; the rest is here, once. This module imports nothing heavy: a warm
`rules parse` goes through it without YAML, pydantic or Jinja2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from engine.core.textio import clean_text, decode_output

if TYPE_CHECKING:  # a Protocol class costs start-up time; type checkers alone need it
    from engine.core.results import ParseResult

    class BlockParser(Protocol):
        """What parses one block: a compiled contract, or a parser rebuilt from cache."""

        def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult: ...


class Parsing:
    """The parse side of a pack: ``parse`` (and the batch parser) over ``block_parser``."""

    def block_parser(self, block: str) -> BlockParser:
        """The parser of ``block``; ``EngineError`` when the pack cannot parse it."""
        raise NotImplementedError

    def required_params(self, block: str) -> tuple[str, ...]:
        """The params a caller must give for ``block``."""
        raise NotImplementedError

    def parse(
        self,
        block: str,
        text: str | bytes,
        nonce: str | None = None,
        vars: Mapping[str, str] | None = None,
    ) -> ParseResult:
        """Deterministically parse one block of ``text``; never raises for any text."""
        parser = self.block_parser(block)
        params = {k: clean_text(v) for k, v in (vars or {}).items()}
        return parser.parse(
            decode_output(text), None if nonce is None else clean_text(nonce), params
        )
