"""The rulepack format, version 1, as pydantic models.

Every model is frozen and forbids unknown keys, so a key written where it does not apply is
a finding. Strings that point at something else carry a ``Ref`` marker in their annotation;
`rules check` walks the models and resolves each marked value generically (see semantics.py).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FORMAT_VERSION = 1


class Ref(str, Enum):
    """What a marked string refers to; `rules check` resolves each kind."""

    FAILURE_TYPE = "failure type"
    SEVERITY = "severity"
    TEMPLATE = "template"
    CONTRACT = "contract"
    ACTION = "action"
    FILE = "file"
    PATTERN = "pattern"
    EXPRESSION = "expression"
    MESSAGE = "message"
    CONTEXT_KEY = "context key"
    ITEM_PART = "item part"
    GATE_EXPRESSION = "gate decision expression"
    DETECT_EXPRESSION = "detection expression"
    ITEM_EXPRESSION = "item expression"


FailureRef = Annotated[str, Ref.FAILURE_TYPE]
SeverityRef = Annotated[str, Ref.SEVERITY]
TemplateRef = Annotated[str, Ref.TEMPLATE]
ContractRef = Annotated[str, Ref.CONTRACT]
ActionRef = Annotated[str, Ref.ACTION]
PackPath = Annotated[str, Ref.FILE]
Pattern = Annotated[str, Ref.PATTERN]
Expression = Annotated[str, Ref.EXPRESSION]
Message = Annotated[str, Ref.MESSAGE]
ContextKeyRef = Annotated[str, Ref.CONTEXT_KEY]
ItemPartRef = Annotated[str, Ref.ITEM_PART]
ITEM_PARTS = ("nonce", "params")  # item parts besides context keys (SessionKeys.item)

Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$", max_length=100)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# --------------------------------------------------------------------------- vocabulary


class FailureType(Strict):
    """One kind of failure: how bad it is, whether a retry can help, what to tell the model."""

    severity: SeverityRef = "HIGH"
    retriable: bool = True
    explain: str = ""
    description: str = ""


class ActionSpec(Strict):
    """An action a decision can take. The engine knows the standard ones; packs may add more."""

    final: bool = True
    exit_code: int = Field(default=1, ge=0, le=125)
    description: str = ""


class ContextKey(Strict):
    """A context key the pack reads, with its type."""

    type: Literal["string", "int", "number", "bool", "list", "map", "path", "any"] = "string"
    items: Literal["string", "int", "number", "bool", "map", "any"] | None = None
    required: bool = False
    default: Any = None
    env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable read when no value is given (before `default`)",
    )
    description: str = ""


class TemplateSpec(Strict):
    """A Jinja2 template file of the pack and what it is used for."""

    file: PackPath
    purpose: Literal[
        "repair",
        "retry",
        "escalation",
        "reprompt",
        "artifact",
        "example",
        "log",
        "presentation",
        "conflicts",
        "initial",
    ] = "repair"
    format: Literal["md", "jsonl", "json", "text"] = Field(
        default="md",
        description="what the template writes; `rules log --format` picks log templates by it",
    )
    description: str = ""


# --------------------------------------------------------------------------- sentinel grammar


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


class _Contract(Strict):
    description: str = ""
    contract_text: PackPath | None = None


class SentinelContract(_Contract):
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


def share_grammars(contracts: dict[str, Any]) -> dict[str, Any]:
    """The contracts with every ``grammar:`` reference filled in from the contract it names
    (when that is a sentinel contract with a grammar of its own; otherwise left for
    ``rules check`` to report)."""
    out = dict(contracts)
    for name, contract in contracts.items():
        if not isinstance(contract, SentinelContract) or contract.grammar is None:
            continue
        base = contracts.get(contract.grammar)
        if isinstance(base, SentinelContract) and base.grammar is None:
            shared = {key: getattr(base, key) for key in GRAMMAR_KEYS}
            shared["messages"] = {**base.messages, **contract.messages}
            out[name] = contract.model_copy(update=shared)
    return out


class _Check(Strict):
    tier: Literal["structure", "content"] = "structure"
    level: Literal["error", "warning"] = "error"
    fail: FailureRef
    message: Message | None = None


class PresentCheck(_Check):
    """The output file exists (when the output was given as a path)."""

    check: Literal["present"]


class NonEmptyCheck(_Check):
    """The output holds more than whitespace."""

    check: Literal["non_empty"]


class RequireTextCheck(_Check):
    """The output contains ``text`` (a heading, a marker) verbatim."""

    check: Literal["require_text"]
    text: str = Field(min_length=1)


class AnyOfCheck(_Check):
    """The output contains at least one of ``any``."""

    check: Literal["any_of"]
    any: list[str] = Field(min_length=1)


class MinRefsCheck(_Check):
    """At least ``min`` distinct ids of kind ``ids`` are referenced."""

    check: Literal["min_refs"]
    ids: str
    min: int = Field(default=1, ge=0)


class RefsExistCheck(_Check):
    """Every referenced id of kind ``ids`` is in the context list ``known``."""

    check: Literal["refs_exist"]
    ids: str
    known: str


class SectionCharsCheck(_Check):
    """Each referenced id's section (``heading`` + id up to the next ``## ``) has ``min`` chars."""

    check: Literal["min_section_chars"]
    ids: str
    heading: str = Field(min_length=1)
    min: int = Field(ge=0)


class SectionMarker(Strict):
    """Text every matched section must contain, and the failure when it does not."""

    text: str = Field(min_length=1)
    fail: FailureRef
    message: Message | None = Field(
        default=None, description="`{id}` (the section's id) and `{text}` are filled"
    )


class ItemWhere(Strict):
    """A condition on a context-list item: its ``key`` is one of ``in``."""

    key: str = Field(min_length=1)
    in_: list[Any] = Field(alias="in", min_length=1)


class SimilarPosition(Strict):
    """A warning when the output seems to propose again a position that was decided
    against: at least ``ratio`` of the keywords of the decision item's ``field`` are in the
    output (keywords as for soft matching), unless the item's ``unless`` key has one of its
    values (e.g. the option that took that position)."""

    field: str = Field(min_length=1)
    unless: ItemWhere | None = None
    ratio: float = Field(default=0.6, gt=0, le=1)
    stop_words: list[str] = Field(default_factory=list)
    message: Message


class DecidedSections(Strict):
    """Sections on ids that were already decided fail: the ids are the ``key`` of the items
    of the context list ``items`` (absent from the context: nothing is decided)."""

    items: ContextKeyRef
    key: str = "id"
    fail: FailureRef
    message: Message = "{id} was already decided"
    similar: SimilarPosition | None = None


class SectionsCheck(_Check):
    """Sections found by a heading pattern, each checked on its own, in document order.

    A section starts at a line matching ``heading`` (not inside a fenced code block unless
    ``in_fences``) and runs to the next line starting with ``until``, or the end. Its id is
    ``id`` with ``{0}`` (the whole match) and ``{1}``, ``{2}``... (capture groups) filled.
    Per section, in this order: the id is in the context list ``known`` (``fail`` and
    ``message``; items of the list are strings, or maps whose ``known_key`` holds the id),
    then each of ``markers`` is in the section. ``fields`` extract the first capture group
    of a pattern searched in the section (stripped); the sections become verdict data under
    ``name``: a list of ``{id, <field>: value or null}``.
    """

    check: Literal["sections"]
    tier: Literal["structure", "content"] = "content"
    name: Name
    heading: Pattern
    id: str = Field(default="{0}", min_length=1)
    until: str = Field(default="## ", min_length=1)
    in_fences: bool = False
    known: ContextKeyRef | None = None
    known_key: str | None = None
    decided: DecidedSections | None = Field(
        default=None,
        description="checked after `known`, before the markers: a section on a decided id "
        "fails; `similar` warns about a rejected position proposed again",
    )
    markers: list[SectionMarker] = Field(default_factory=list)
    fields: dict[Name, Pattern] = Field(default_factory=dict)


class SoftMatch(Strict):
    """When an item without an explicit reference counts as softly matched: the share of the
    keywords of its ``summary`` found in the output is at least ``ratio``, or the value of
    its ``phrase`` key (or ``location`` key) appears in the output verbatim. Keywords are
    lower-case runs of letters and digits, minus ``stop_words``."""

    ratio: float = Field(default=0.5, ge=0, le=1)
    summary: str | None = "summary"
    phrase: str | None = None
    location: str | None = None
    stop_words: list[str] = Field(default_factory=list)
    effect: Literal["suppress", "warn"] = "suppress"
    message: Message | None = Field(
        default=None, description="the warning of `effect: warn` (default: the check's)"
    )
    confidence: str = "MEDIUM"
    reason: str = "soft match: the output may address this item"


class CoverageCheck(_Check):
    """Every item of the context list ``items`` that matches ``where`` is referenced: by one
    of the ``referenced_by`` texts (``{id}`` filled) or as the id of a section matched by a
    sections check named in ``sections``; otherwise a finding (``{id}`` and the item's keys
    are filled in ``message``). ``soft`` declares the fallback matching. With ``name``, the
    covered items become verdict data: ``{id, match: explicit | soft | none}``."""

    check: Literal["coverage"]
    tier: Literal["structure", "content"] = "content"
    name: Name | None = None
    items: ContextKeyRef
    key: str = "id"
    where: ItemWhere | Annotated[str, Ref.ITEM_EXPRESSION] | None = None
    referenced_by: list[str] = Field(default_factory=list)
    sections: list[str] = Field(default_factory=list)
    soft: SoftMatch | None = None

    @model_validator(mode="after")
    def _some_reference(self) -> CoverageCheck:
        if not self.referenced_by and not self.sections:
            raise ValueError("give `referenced_by` or `sections`: how an item is referenced")
        return self


MarkdownCheck = Annotated[
    PresentCheck
    | NonEmptyCheck
    | RequireTextCheck
    | AnyOfCheck
    | MinRefsCheck
    | RefsExistCheck
    | SectionCharsCheck
    | SectionsCheck
    | CoverageCheck,
    Field(discriminator="check"),
]


class IdKind(Strict):
    """A kind of id the output references, found by ``pattern``."""

    pattern: Pattern
    description: str = ""


class MarkdownContract(_Contract):
    kind: Literal["markdown"]
    ids: dict[str, IdKind] = Field(default_factory=dict)
    checks: list[MarkdownCheck] = Field(default_factory=list)


class JsonContract(_Contract):
    """A JSON output checked against a JSON Schema file of the pack."""

    kind: Literal["json"]
    schema_file: PackPath
    extract: Literal["whole", "fenced", "first"] = "whole"
    """Where the JSON is: the whole output, the first ```json fenced block, or the first
    balanced object or array (prose around it ignored)."""
    many: Literal["one", "list", "jsonl"] = "one"
    """One document, each element of a top-level array, or one document per line."""
    max_chars: int = Field(default=8 * 1024 * 1024, ge=1, le=256 * 1024 * 1024)
    max_depth: int = Field(default=200, ge=1, le=900)
    max_errors: int = Field(default=100, ge=1, le=10_000)
    max_documents: int = Field(default=10_000, ge=1, le=1_000_000)
    """The most documents a ``list`` or ``jsonl`` output may hold (more: a parse failure)."""
    parse_failure: FailureRef = "PARSE_ERROR"
    schema_failure: FailureRef = "SCHEMA_ERROR"


class TextRule(Strict):
    """A pattern the output must contain (``require``) or must not (``forbid``)."""

    pattern: Pattern
    message: Message | None = None
    fail: FailureRef | None = None


class TextContract(_Contract):
    """Plain text with bounds on its size and lines, and required or forbidden patterns."""

    kind: Literal["text"]
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=1)
    min_lines: int | None = Field(default=None, ge=0)
    max_lines: int | None = Field(default=None, ge=1)
    pattern: Pattern | None = None
    """A pattern the output must contain (a shorthand for one ``require`` rule)."""
    require: list[TextRule] = Field(default_factory=list)
    forbid: list[TextRule] = Field(default_factory=list)
    messages: dict[str, Message] = Field(default_factory=dict)
    """Wording of the size and line messages by id (min_chars, max_chars, min_lines,
    max_lines, pattern, require, forbid); ``{name}`` placeholders."""
    fail: FailureRef = "WRONG_FORMAT"


Contract = Annotated[
    SentinelContract | MarkdownContract | JsonContract | TextContract,
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- policy


class Guard(Strict):
    """Skip the repair (go straight to the after-failure policy) when ``when`` is true."""

    name: str = Field(min_length=1)
    when: Expression
    reason: str = ""


class Truncation(Strict):
    strategy: Literal["head_tail", "head", "none"] = "head_tail"
    max_chars: int = Field(default=8000, ge=0, le=100_000_000)
    head: int = Field(default=4000, ge=0, le=100_000_000)
    tail: int = Field(default=4000, ge=0, le=100_000_000)
    marker: str = "[...truncated...]"

    @model_validator(mode="after")
    def _fits(self) -> Truncation:
        if self.strategy == "head_tail" and self.head + self.tail > self.max_chars:
            raise ValueError("head + tail must not exceed max_chars")
        return self


class AttemptPolicy(Strict):
    """The decision taken on attempt ``attempt`` when it fails and a repair is still allowed:
    which action, which template, with a micro-hint or not (attempt 1 = the original output)."""

    attempt: int = Field(ge=1, le=100)
    action: ActionRef = "REPAIR"
    template: TemplateRef | None = None
    hint: bool = True


class AfterFailure(Strict):
    action: ActionRef
    template: TemplateRef | None = None
    default: Any = None
    log: Literal["none", "info", "warning", "error"] = "none"
    reason: str = ""
    menu: str | None = Field(
        default=None,
        description="the menu (a name of `menus:`) whose options the user answers with "
        "`rules choose` after this final action",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"action": value} if isinstance(value, str) else value


class Trigger(Strict):
    """The trigger row of one block: when to repair, how often, what then."""

    contract: ContractRef | None = None
    on: list[FailureRef] = Field(default_factory=list)
    max_attempts: int = Field(default=1, ge=0, le=100)
    action: ActionRef = "REPAIR"
    template: TemplateRef | None = None
    attempts: list[AttemptPolicy] = Field(default_factory=list)
    skip_when: list[Guard] = Field(default_factory=list)
    stop_on_repeat: bool = False
    truncate: Truncation = Field(default_factory=Truncation)
    normalize: list[Literal["ascii_quotes", "strip_bom", "crlf"]] = Field(default_factory=list)
    modifications: dict[FailureRef, TemplateRef] = Field(default_factory=dict)
    default_modification: str = "Please review your output and try again."
    after_failure: AfterFailure = Field(default_factory=lambda: AfterFailure(action="CYCLE_FAIL"))
    description: str = ""


class Hint(Strict):
    """A one-line hint for the model, chosen when the error matches ``match``."""

    match: Pattern
    hint: str = Field(min_length=1)
    blocks: list[ContractRef] = Field(default_factory=list)


# ------------------------------------------------------------------ examples, limits, gates


class CanonicalExample(Strict):
    """A tier-1 example: a file of the pack, or a section of a document named in the context."""

    file: PackPath | None = None
    from_context: str | None = None
    heading: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> CanonicalExample:
        if (self.file is None) == (self.from_context is None):
            raise ValueError("give exactly one of `file` or `from_context` (with `heading`)")
        if self.from_context is not None and not self.heading:
            raise ValueError("`from_context` needs `heading`: the section to extract")
        return self


class ScoreRule(Strict):
    """Points for a session example: when it contains text, per referenced id (capped),
    when its length is in a band, or when it references an id from a context list."""

    points: int = Field(ge=-1000, le=1000)
    failure: list[FailureRef] = Field(default_factory=list)
    contains: str | None = None
    per_id: str | None = None
    max: int | None = Field(default=None, ge=0)
    length_min: int | None = Field(default=None, ge=0)
    length_max: int | None = Field(default=None, ge=0)
    references_any_of: str | None = None
    ids: str | None = None


class SessionExamples(Strict):
    """Tier 2: earlier rounds' outputs in the session folder, most recent first.

    The session folder and the current round are the context keys named under the pack's
    ``session:``. ``path`` and the ``exclude_if_exists`` / ``require_exists`` patterns are
    relative to the session folder and may use ``{n}`` / ``{n:03d}`` (the round) and
    ``{block}``. ``provenance`` is shown above the example with ``{round}`` and ``{ids}``:
    the ids of kind ``provenance_ids`` the example references (``provenance_no_ids`` when
    it references none).
    """

    path: str = Field(min_length=1)
    exclude_if_exists: list[str] = Field(default_factory=list)
    exclude_rounds_from: str | None = None
    require_exists: list[str] = Field(default_factory=list)
    require_rounds_from: str | None = None
    validated_in_ledger: bool = False
    scoring: list[ScoreRule] = Field(default_factory=list)
    provenance: str
    provenance_ids: str | None = None
    provenance_no_ids: str = ""


class Budgets(Strict):
    retry_tokens: int = Field(default=2000, ge=1)
    initial_tokens: int = Field(default=1000, ge=1)
    chars_per_token: int = Field(default=4, ge=1, le=100)


class SelectionStep(Strict):
    """One tier to try, with the source line shown above the example."""

    tier: Literal["canonical", "session", "template", "none"]
    source: str = ""
    id_list: Literal["no", "prepend", "append"] = "no"


class Examples(Strict):
    """Examples attached to retry prompts: tiers, selection per failure type, budgets.

    A selection step with ``id_list`` adds the list held by the context key
    ``id_list_context`` under ``id_list_header``, before or after the example.
    """

    budgets: Budgets = Field(default_factory=Budgets)
    canonical: dict[str, list[CanonicalExample]] = Field(default_factory=dict)
    session: SessionExamples | None = None
    templates: dict[str, PackPath] = Field(default_factory=dict)
    selection: dict[str, list[SelectionStep]] = Field(default_factory=dict)
    priority_sections: list[str] = Field(default_factory=list)
    id_list_context: ContextKeyRef | None = None
    id_list_header: str = ""
    truncation_notice: str = "\n\n[Example truncated for length]"


class RateCount(Strict):
    """What a block's rate limits count in an output, and against what.

    ``count``: the number of matches of ``pattern`` in the output (the id is capture group
    ``id_group``; 0 is the whole match). With ``items`` (a context list), the items are the
    list's entries for which ``where`` holds (``item`` is the entry); ``total`` is their
    number, and with ``only_items`` only matches whose id is an item's id (``item_id``: the
    key of a map entry; a string entry is its own id) count.
    """

    pattern: Pattern
    id_group: int = Field(default=0, ge=0, le=99)
    items: ContextKeyRef | None = None
    item_id: str = "id"
    where: Annotated[str, Ref.ITEM_EXPRESSION] | None = None
    only_items: bool = True
    distinct: bool = False


class RateWindow(Strict):
    """The window of a block's limits: the last ``rounds`` rounds (the current included),
    summed; a window limit applies only when at least ``min_rounds`` rounds are known."""

    rounds: int = Field(default=3, ge=1, le=1000)
    min_rounds: int = Field(default=3, ge=1, le=1000)


class RateLimit(Strict):
    """One limit: ``value`` of the round (or the window) compared with ``threshold``; when
    it holds, the decision's action becomes ``action``. ``message`` and ``recommendation``
    use the figures as ``{name}`` or ``{name:spec}`` (Python format specs, e.g.
    ``{ratio:.0%}``): count, total, ratio, threshold, rounds, round."""

    name: Name
    over: Literal["round", "window"] = "round"
    value: Literal["count", "ratio"] = "count"
    compare: Literal[">", ">="] = ">"
    threshold: float = Field(ge=0)
    action: ActionRef
    message: Message
    recommendation: Message = ""
    presentation: TemplateRef | None = None


class RateLimits(Strict):
    """A block's rate limits: what is counted, the window, and the limits in order (the
    first that holds decides; none holding leaves the decision as it is)."""

    count: RateCount
    window: RateWindow = Field(default_factory=RateWindow)
    limits: list[RateLimit] = Field(min_length=1)
    otherwise: Name | None = Field(
        default=None,
        description="the outcome reported in the decision's `limit` when no limit holds "
        "(e.g. ALLOW, with the round's figures); the decision's action is unchanged. "
        "Omitted: no `limit` object then",
    )


class GateSchema(Strict):
    """A JSON Schema file of the pack that gate outputs are checked against."""

    file: PackPath
    description: str = Field(
        default="",
        description="shown in reprompts next to a required schema that no output satisfied",
    )


class DetectRule(Strict):
    """Which schema an output is: every condition given must hold (first rule wins)."""

    schema_name: str = Field(
        alias="schema",
        description="the schema (under `gates.schemas`) "
        "an output matching this rule is checked against",
    )
    has: list[str] = Field(
        default_factory=list, description="top-level keys that must all be present"
    )
    key: str | None = Field(default=None, description="discriminator key; with `equals`")
    equals: Any = None
    when: Annotated[str, Ref.DETECT_EXPRESSION] | None = Field(
        default=None, description="an expression over `output` (and the context)"
    )

    @model_validator(mode="after")
    def _some_condition(self) -> DetectRule:
        if not self.has and self.key is None and self.when is None:
            raise ValueError("give at least one of `has`, `key` (with `equals`) or `when`")
        if self.key is None and "equals" in self.model_fields_set:
            raise ValueError("`equals` needs `key`")
        return self


class GateRule(Strict):
    """An ordered decision rule of the gates: the first whose ``when`` holds decides."""

    when: Annotated[str, Ref.GATE_EXPRESSION]
    action: ActionRef
    reason: str = ""


class GateArtifact(Strict):
    """A JSON document built for an action (from a template of purpose `artifact`) and
    validated against one of the gate schemas before it is printed or written."""

    template: TemplateRef
    schema_name: str = Field(alias="schema")


class Gates(Strict):
    """Quality gates: required schemas per gate, detection, validation, decision, reprompt."""

    schemas: dict[str, GateSchema] = Field(default_factory=dict)
    steps: dict[str, list[str]] = Field(
        default_factory=dict,
        description="gate name -> the schemas its outputs must include (each at least once, valid)",
    )
    detect: list[DetectRule] = Field(default_factory=list)
    max_retry: int = Field(default=3, ge=0, le=1000)
    decide: list[GateRule] = Field(default_factory=list)
    reprompt: TemplateRef | None = Field(
        default=None,
        description="template (purpose `reprompt`) printed when the action is not PROCEED",
    )
    output_file: str = Field(
        default="",
        description="Jinja2 template of the path an output is resubmitted "
        "from; sees `gate` and `retry`",
    )
    artifacts: dict[ActionRef, GateArtifact] = Field(default_factory=dict)
    log: str = Field(
        default="",
        description="failure log (JSON lines), relative to the session folder; empty: no log file",
    )


class Expectation(Strict):
    ok: bool | None = None
    status: Literal["pass", "warn", "fail"] | None = None
    failure: FailureRef | None = None
    message: str | None = None
    data: Any = None
    warnings: list[str] | None = None
    action: ActionRef | None = None
    data_includes: dict[str, Any] | None = Field(
        default=None,
        description="keys the verdict's data must hold with these values (null: absent); "
        "`data` compares the whole data",
    )
    valid: bool | None = Field(default=None, description="a gate case: the gate's verdict")
    errors: list[str] | None = Field(default=None, description="a gate case: its errors, in order")
    rule: str | None = Field(
        default=None, description="what decided: pass, exhausted, attempt:K, guard:NAME, ..."
    )
    prompt: str | None = Field(
        default=None,
        description="a golden file (relative to the case's folder) the rendered prompt must "
        "equal; `rules test --update` writes it",
    )


class PackTest(Strict):
    """One case of the pack's own tests (`rules test`): an output and what it must give."""

    name: str = Field(min_length=1)
    block: ContractRef | None = None
    gate: str | None = Field(
        default=None,
        description="instead of a block: a quality gate (a name of `gates.steps`) run on the "
        "input's JSON documents",
    )
    retry: int = Field(default=0, ge=0, description="a gate case's retry count")
    now: str | None = Field(default=None, description="a gate case's clock, ISO 8601")
    input: str | None = None
    input_file: PackPath | None = None
    nonce: str | None = None
    vars: dict[str, str] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    attempt: int = Field(default=1, ge=1)
    error: str | None = Field(
        default=None,
        description="an error another tool reported for the output (as `rules eval --error`)",
    )
    expect: Expectation

    @model_validator(mode="after")
    def _one_input(self) -> PackTest:
        if (self.input is None) == (self.input_file is None):
            raise ValueError("give exactly one of `input` or `input_file`")
        if (self.block is None) == (self.gate is None):
            raise ValueError("give exactly one of `block` or `gate`")
        return self


# --------------------------------------------------------------------------- the pack


class SessionKeys(Strict):
    """Which of the pack's context keys tell the engine about the session (all optional),
    and whether a session keeps its outputs."""

    folder: ContextKeyRef | None = Field(
        default=None,
        description="the folder holding earlier rounds' outputs (example "
        "tier 2) and, when it has one, the ledger whose accepted rounds count",
    )
    round: ContextKeyRef | None = Field(
        default=None,
        description="the current round number: recorded with each attempt "
        "in the ledger, and the start of example tier 2's search",
    )
    decided: ContextKeyRef | None = Field(
        default=None,
        description="receives the session's resolved conflicts ([{id, option, summary, "
        "decision, rationale, <fields>...}]) unless the context already gives it",
    )
    history: ContextKeyRef | None = Field(
        default=None,
        description="earlier rounds' counts of a block's rate limits, "
        "[[round, count, total], ...], used when no session ledger holds them",
    )
    prompt: ContextKeyRef | None = Field(
        default=None,
        description="receives the text of `rules run --prompt` unless the context already gives it",
    )
    item: list[ItemPartRef] = Field(
        default_factory=lambda: ["nonce", "params"],
        min_length=1,
        description="what identifies an item, whose attempts are counted together (with its "
        "block): `nonce`, `params` (the block's --var values) and context keys; a new value "
        "of any of them is a new item whose first output is attempt 1 (e.g. [round])",
    )
    keep_outputs: bool = Field(
        default=False,
        description="keep every output a session evaluates with this pack in its ledger, "
        "compressed, as `--keep-outputs` does: `rules export` and `rules backtest` replay them",
    )


class SynthesisRule(Strict):
    """A middle-ground option: when ``field`` of a conflict contains one of ``contains``
    (case-insensitive), the synthesis option proposes ``proposal`` (``{field}`` of the
    conflict filled in) with its trade-off."""

    field: str = Field(min_length=1)
    contains: list[str] = Field(min_length=1)
    proposal: Message
    trade_off: Message = ""
    addresses_both: bool = False


class ConflictOption(Strict):
    """One option offered for a conflict, in the order listed."""

    label: str = Field(pattern=r"^[A-Z]$")
    name: str = Field(min_length=1, description="whose position it is, e.g. the author")
    text: Message = Field(default="", description="the option, `{field}` of the conflict filled")
    implicit_text: Message | None = Field(
        default=None, description="the text for a conflict converted from an implicit flag"
    )
    trade_off: Message = ""
    synthesis: bool = Field(
        default=False,
        description="the synthesis option: offered when a synthesis rule matches or a "
        "mediator proposed one (`rules conflicts propose`); text and trade-off come from there",
    )
    when: Annotated[str, Ref.ITEM_EXPRESSION] | None = Field(
        default=None, description="offered only when this holds (an expression over `item`)"
    )
    recommended: Annotated[str, Ref.ITEM_EXPRESSION] | None = Field(
        default=None,
        description="recommended when this holds (`item.synthesis` is the synthesis found)",
    )


class TerminationRule(Strict):
    """What an unresolved conflict of this severity does to each termination state."""

    severity: str = Field(min_length=1)
    blocks: list[str] = Field(default_factory=list)
    warns: list[str] = Field(
        default_factory=list, description="allowed with a warning that needs acknowledgement"
    )


class Termination(Strict):
    states: list[str] = Field(min_length=1)
    rules: list[TerminationRule] = Field(default_factory=list)
    warn_exit: int = Field(default=4, ge=3, le=125)


class ConflictRules(Strict):
    """Conflicts between a block's output and the items of a context list: explicit (a
    sections check of the block matched the item) or implicit (a coverage check found the
    item unaddressed; becomes a conflict when the user converts it), with options, an order,
    a presentation, a decisions record and a termination table."""

    block: ContractRef
    explicit: str = Field(min_length=1, description="verdict data of a `sections` check")
    implicit: str | None = Field(default=None, description="verdict data of a `coverage` check")
    items: ContextKeyRef
    item_id: str = "id"
    item_fields: dict[str, str] = Field(
        default_factory=dict, description="conflict field -> key of the context item"
    )
    section_fields: dict[str, str] = Field(
        default_factory=dict, description="conflict field -> field of the matched section"
    )
    severity: str = Field(default="severity", description="the item key holding the severity")
    severity_order: list[str] = Field(min_length=1)
    options: list[ConflictOption] = Field(min_length=2)
    min_options: int = Field(default=2, ge=1)
    max_options: int = Field(default=4, ge=1, le=26)
    synthesis: list[SynthesisRule] = Field(default_factory=list)
    actions: list[Name] = Field(
        default_factory=list,
        description="who a resolution asks to act: `rules conflicts resolve --action "
        "NAME=TEXT` takes these names (the decisions template reads `actions.NAME`)",
    )
    termination: Termination | None = None
    presentation: TemplateRef
    decisions: TemplateRef


class Limits(Strict):
    """Bounds a pack may set for its own outputs and model commands; a command-line option
    wins over them, and without either the engine's defaults hold (README "Limits")."""

    max_output_bytes: int | None = Field(
        default=None,
        ge=1,
        le=1024**3,
        description="the largest output read (`--max-output-bytes`); a bigger one is "
        "OUTPUT_TOO_LARGE",
    )
    model_timeout: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="seconds before `rules run` stops the model command (`--timeout`)",
    )


class ChoiceEffect(Strict):
    """What choosing an option does (exactly one key)."""

    status: str | None = Field(
        default=None,
        max_length=40,
        description="record this status for the item's block in its round (e.g. SKIP)",
    )
    retry: int | None = Field(
        default=None,
        ge=1,
        le=10,
        description="allow this many more attempts; `--text` goes into the next prompt "
        "(the `user_context` variable)",
    )
    end: ActionRef | None = Field(default=None, description="end the item with this action")
    pause: bool = Field(default=False, description="pause the session until `--resume`")

    @model_validator(mode="after")
    def _one_effect(self) -> ChoiceEffect:
        given = [self.status is not None, self.retry is not None, self.end is not None, self.pause]
        if sum(given) != 1:
            raise ValueError("give exactly one of `status`, `retry`, `end` or `pause: true`")
        return self


class ChoiceOption(Strict):
    key: Name
    label: str = Field(min_length=1)
    effect: ChoiceEffect


class Menu(Strict):
    """The options a final decision offers the user (`rules choose ITEM OPTION`), numbered
    from 1 in this order."""

    options: list[ChoiceOption] = Field(min_length=1, max_length=20)


class StatusRule(Strict):
    """When ``block`` gets ``status`` in a round, ``then_block`` gets ``then_status`` if its
    status then is one of ``if_status`` (by default: it has a valid output)."""

    block: ContractRef
    status: str
    then_block: ContractRef
    then_status: str
    if_status: list[str] = Field(default_factory=lambda: ["ok", "partial"])


class AllFailed(Strict):
    """When every block of ``rounds.blocks`` ends a round in one of ``statuses``."""

    statuses: list[str] = Field(min_length=1)
    action: ActionRef
    message: Message = Field(description="shown as the decision's reason; {round} is filled in")


class Rounds(Strict):
    """Round statuses per block (`ok`, `partial`, `failed`, `pending`, or a status a
    choice records), shown by log templates and used for `all_failed`."""

    blocks: list[ContractRef] = Field(min_length=1)
    follow: list[StatusRule] = Field(default_factory=list)
    all_failed: AllFailed | None = None


class Rulepack(Strict):
    """A rulepack: vocabulary, contracts, policies and the pack's own tests."""

    rulepack: Name
    version: str = Field(default="0.0.0", pattern=r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
    format: int = Field(default=FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    requires: str = Field(default=">=0.1", pattern=r"^\s*(([<>]=?|==|!=)\s*\d+(\.\d+)*\s*,?\s*)+$")
    description: str = ""
    extends: list[str] = Field(default_factory=list)
    severities: dict[str, int] = Field(default_factory=dict)
    failure_types: dict[str, FailureType] = Field(default_factory=dict)
    actions: dict[str, ActionSpec] = Field(default_factory=dict)
    context: dict[str, ContextKey] = Field(default_factory=dict)
    session: SessionKeys = Field(default_factory=SessionKeys)
    sentinel: SentinelGrammar = Field(default_factory=SentinelGrammar)
    contracts: dict[str, Contract] = Field(default_factory=dict)
    triggers: dict[ContractRef, Trigger] = Field(default_factory=dict)
    hints: list[Hint] = Field(default_factory=list)
    templates: dict[str, TemplateSpec] = Field(default_factory=dict)
    examples: Examples = Field(default_factory=Examples)
    rate_limits: dict[ContractRef, RateLimits] = Field(
        default_factory=dict,
        description="per block: limits on counts in its outputs, "
        "per round and over a window of rounds",
    )
    gates: Gates = Field(default_factory=Gates)
    conflicts: ConflictRules | None = None
    prompts: dict[ContractRef, TemplateRef] = Field(
        default_factory=dict,
        description="per block: the template (purpose `initial`) of its first prompt, which "
        "`rules prompt` renders with the decisions of the previous round",
    )
    menus: dict[Name, Menu] = Field(default_factory=dict)
    rounds: Rounds | None = None
    limits: Limits = Field(default_factory=Limits)
    tests: list[PackTest] = Field(default_factory=list)


EachRule.model_rebuild()


def declared_default_failures(contract: BaseModel) -> list[tuple[str, str]]:
    """(setting, failure type) of a contract's failure-type settings left at their default."""
    names = [
        n
        for n, f in type(contract).model_fields.items()
        if Ref.FAILURE_TYPE in f.metadata and n not in contract.model_fields_set
    ]
    return [(n, getattr(contract, n)) for n in names]
