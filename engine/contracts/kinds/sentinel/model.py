"""The model of a sentinel contract: delimiters, fields, rules, warnings, the parse output;
and the pack's shared grammar settings (the root key ``sentinel:``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from engine.contracts.model import ContractModel
from engine.format.fields import (
    FailureRef,
    Message,
    Name,
    Pattern,
    Strict,
)
from engine.format.section import Declared, single


class Condition(Strict):
    """`field` has (or lacks) a value; used to make a rule apply only sometimes."""

    field: str
    equals: str | None = None
    present: bool | None = None


class _Rule(Strict):
    field: str | None = None
    key: str | None = None
    message: Message | None = None
    when: Condition | None = None


class EnumRule(_Rule):
    check: Literal["enum"]
    values: list[str] = Field(min_length=1)


class PatternRule(_Rule):
    check: Literal["pattern"]
    pattern: Pattern


class NonEmptyRule(_Rule):
    check: Literal["non_empty"]


class SingleLineRule(_Rule):
    check: Literal["single_line"]


class MaxLenRule(_Rule):
    check: Literal["max_len"]
    max: int = Field(ge=0, le=100_000_000)


class MinItemsRule(_Rule):
    check: Literal["min_items"]
    min: int = Field(ge=0, le=1_000_000)


class MaxItemsRule(_Rule):
    check: Literal["max_items"]
    max: int = Field(ge=0, le=1_000_000)


class UniqueRule(_Rule):
    check: Literal["unique"]


class RequiredRule(_Rule):
    check: Literal["required"]
    non_empty: bool = True


class CountMatchesRule(_Rule):
    check: Literal["count_matches"]
    section: str


class PathRule(_Rule):
    check: Literal["path"]
    chars: Pattern = "^[A-Za-z0-9_./-]+$"
    chars_message: Message | None = None
    absolute_message: Message | None = None
    traversal_message: Message | None = None


class EachRule(_Rule):
    """Split a field's value and run ``rules`` on every part, part by part."""

    check: Literal["each"]
    split: str = Field(default=",", min_length=1)
    strip: bool = True
    rules: list[ValueRule] = Field(min_length=1)
    max_parts: int | None = Field(default=None, ge=0)
    max_parts_message: Message | None = None


ValueRule = Annotated[
    EnumRule | PatternRule | NonEmptyRule | SingleLineRule | MaxLenRule | PathRule,
    Field(discriminator="check"),
]

BlockRule = Annotated[
    EnumRule
    | PatternRule
    | NonEmptyRule
    | SingleLineRule
    | MaxLenRule
    | MinItemsRule
    | MaxItemsRule
    | UniqueRule
    | RequiredRule
    | CountMatchesRule
    | PathRule
    | EachRule,
    Field(discriminator="check"),
]


class ItemSpec(Strict):
    """How one list item of a section is written and checked."""

    line_limit: int | None = Field(default=None, ge=1, le=10_000_000)
    keys: list[str] = Field(default_factory=list)
    quoted: list[str] = Field(default_factory=list)
    value: Literal["tokens", "quoted", "either"] = "tokens"
    quoted_message: Message | None = None
    rules: list[BlockRule] = Field(default_factory=list)


class FieldSpec(Strict):
    """One field of a sentinel block payload."""

    form: Literal["unquoted", "quoted", "either", "section"] = "either"
    required: bool = False
    multiline: Literal["no", "forced", "optional"] = "no"
    require_continuation: bool = False
    non_empty: bool = False
    item: ItemSpec | None = None

    @model_validator(mode="after")
    def _section_has_items(self) -> FieldSpec:
        if self.form == "section" and self.item is None:
            raise ValueError("a section field needs `item:` (how its list items are written)")
        if self.form != "section" and self.item is not None:
            raise ValueError("`item:` applies only to fields with `form: section`")
        if self.form == "section" and self.multiline != "no":
            raise ValueError("a section field cannot be multiline")
        return self


class WordWarning(Strict):
    """Warn when an item's text uses one of ``words`` as a whole word."""

    check: Literal["words"]
    section: str
    key: str
    words: list[str] = Field(min_length=1)
    lowercase: bool = True
    message: Message


class OutputKey(Strict):
    """One key of the JSON a successful parse produces."""

    key: str
    field: str | None = None
    param: str | None = None
    warnings: bool = False
    type: Literal["string", "int", "bool", "split", "items"] = "string"
    split: str = Field(default=",", min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> OutputKey:
        sources = [self.field is not None, self.param is not None, self.warnings]
        if sum(sources) != 1:
            raise ValueError("give exactly one of `field`, `param` or `warnings: true`")
        return self


class ParamSpec(Strict):
    """A value given by the caller (e.g. a criterion id) and used in the delimiters."""

    pattern: Pattern
    required: bool = True
    missing_message: Message | None = None
    invalid_message: Message | None = None
    description: str = ""


class SentinelGrammar(Strict):
    """Grammar settings shared by every sentinel contract of a pack."""

    nonce_input: Pattern = "^[0-9A-F]{6}$"
    nonce_token: Pattern = "[0-9A-F]{6}"
    max_payload_chars: int = Field(default=16000, ge=1, le=100_000_000)
    continuation_indent: str = Field(default="  ", min_length=1)
    item_prefix: str = Field(default="- ", min_length=1)
    section_header: Pattern = "^([A-Z_]+):$"
    field_line: Pattern = "^([A-Z][A-Z0-9_]*)="
    field_name: Pattern = "^[A-Z]"
    item_key: Pattern = "^[a-z][a-z_]*$"
    quote: str = Field(default='"', min_length=1, max_length=1)
    escapes: dict[str, str] = Field(
        default_factory=lambda: {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
    )
    parse_failure: FailureRef = "PARSE_ERROR"
    nonce_failure: FailureRef = "NONCE_MISMATCH"
    input_failure: FailureRef = "PARSE_ERROR"
    messages: dict[str, Message] = Field(default_factory=dict)


class SentinelContract(ContractModel):
    kind: Literal["sentinel"]
    grammar: Name | None = Field(
        default=None,
        description="take opener, closer, params, fields, rules, warnings, output and "
        "messages from this sentinel contract of the pack (shared, not copied); give none "
        "of them here but `messages`, which are added to the shared ones",
    )
    count: Literal["one", "many"] = Field(
        default="one",
        description="`one`: exactly one block (a second opener is an error); `many`: one "
        "or more complete blocks in order, each parsed on its own, the data a list",
    )
    between: Literal["blank", "text"] = Field(
        default="blank",
        description="with `count: many`, what may stand between two blocks: only blank "
        "lines, or any text",
    )
    max_blocks: int = Field(default=20, ge=1, le=1000, description="with `count: many`")
    opener: str = Field(default="", description="required unless `grammar:` is given")
    closer: str = Field(default="", description="required unless `grammar:` is given")
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    fields: dict[str, FieldSpec] = Field(
        default_factory=dict, description="required unless `grammar:` is given"
    )
    rules: list[BlockRule] = Field(default_factory=list)
    warnings: list[WordWarning] = Field(default_factory=list)
    output: list[OutputKey] = Field(default_factory=list)
    messages: dict[str, Message] = Field(default_factory=dict)

    def with_shared_grammar(self, contracts: Mapping[str, Any]) -> SentinelContract:
        """The contract with its ``grammar:`` reference filled in from the contract it names
        (when that is a sentinel contract with a grammar of its own; otherwise left for
        the kind's check to report)."""
        if self.grammar is None:
            return self
        base = contracts.get(self.grammar)
        if not isinstance(base, SentinelContract) or base.grammar is not None:
            return self
        shared = {key: getattr(base, key) for key in GRAMMAR_KEYS}
        shared["messages"] = {**base.messages, **self.messages}
        return self.model_copy(update=shared)

    @model_validator(mode="after")
    def _own_or_shared_grammar(self) -> SentinelContract:
        given = sorted((GRAMMAR_KEYS - {"messages"}) & self.model_fields_set)
        if self.grammar is not None and given:
            raise ValueError(
                f"a contract with `grammar: {self.grammar}` takes its grammar from that "
                f"contract; remove {', '.join(given)}"
            )
        if self.grammar is None:
            missing = [key for key in ("opener", "closer", "fields") if not getattr(self, key)]
            if missing:
                raise ValueError(
                    f"a sentinel contract needs {', '.join(missing)} "
                    "(or `grammar: NAME` to share another contract's grammar)"
                )
        return self


GRAMMAR_KEYS = frozenset(
    {"opener", "closer", "params", "fields", "rules", "warnings", "output", "messages"}
)
"""What a sentinel contract with ``grammar:`` takes from the contract it names."""


EachRule.model_rebuild()


def declared_grammar() -> Declared:
    """The ``sentinel:`` section in the root model (section.py names it); built from {}:
    its defaults are the grammar's."""
    return single(SentinelGrammar, default_factory=dict, validate_default=True)
