"""`rules init`: scaffold a pack folder that passes `rules check` and `rules test` as created."""

from __future__ import annotations

import re
from pathlib import Path

import click

from engine.cli.common import UsageFailure
from engine.core.resources import data_dir
from engine.format.schema import rulepack_schema_text
from engine.pack.sections import rulepack_model

KINDS = ("sentinel", "markdown", "json", "tool_call")

_SENTINEL = """\
contracts:
  ANSWER:
    kind: sentinel
    description: One answer to one question, as a delimited block.
    contract_text: contracts/answer.v1.md
    params:
      question: {{pattern: '^Q[0-9]+$', description: "the question's id, e.g. Q1"}}
    opener: "<<<ANSWER:V1:{{question}}:NONCE={{nonce}}>>>"
    closer: "<<<END_ANSWER:{{question}}:NONCE={{nonce}}>>>"
    fields:
      DECISION: {{form: unquoted, required: true}}
      REASON: {{form: quoted, required: true}}
    rules:
      - {{check: enum, field: DECISION, values: ["YES", "NO"], message: DECISION must be YES or NO}}
      - {{check: non_empty, field: REASON}}
    output:
      - {{key: question, param: question}}
      - {{key: decision, field: DECISION}}
      - {{key: reason, field: REASON}}
"""

_MARKDOWN = """\
contracts:
  ANSWER:
    kind: markdown
    description: A short report with a summary and a decision.
    contract_text: contracts/answer.v1.md
    checks:
      - {{check: non_empty, fail: EMPTY_OUTPUT, message: The report is empty}}
      - {{check: require_text, text: "## Summary", fail: WRONG_FORMAT,
          message: "Missing required header: '## Summary'"}}
      - {{check: require_text, text: "**Decision:**", fail: WRONG_FORMAT,
          message: "Missing required: '**Decision:**'"}}
"""

_JSON = """\
contracts:
  ANSWER:
    kind: json
    description: One answer as a JSON object.
    schema_file: schemas/answer.schema.json
    contract_text: contracts/answer.v1.md
"""

_TOOL_CALL = """\
contracts:
  ANSWER:
    kind: tool_call
    description: One call of one of two tools, in any client's shape.
    min_calls: 1
    max_calls: 1
    tools:
      get_weather:
        description: The weather forecast for a city.
        parameters:
          type: object
          required: [city, unit]
          additionalProperties: false
          properties:
            city: {{type: string, minLength: 1}}
            unit: {{enum: [celsius, fahrenheit]}}
            days: {{type: integer, minimum: 1, maximum: 14}}
      search_web:
        description: Search the web.
        parameters:
          type: object
          required: [query]
          additionalProperties: false
          properties:
            query: {{type: string}}
        conditions:
          - check: "arguments.query | trim | length >= 3"
            message: "`query` must say what to search for, in 3 characters or more"
"""

_TRIGGERS = """
triggers:
  ANSWER:
    on: [{failures}]
    max_attempts: 1
    template: repair
    after_failure: NEEDS_HUMAN
"""

_REPAIRED = {
    "sentinel": "PARSE_ERROR, NONCE_MISMATCH, EMPTY_OUTPUT, NOT_TEXT",
    "markdown": "EMPTY_OUTPUT, NOT_TEXT, WRONG_FORMAT",
    "json": "PARSE_ERROR, SCHEMA_ERROR, EMPTY_OUTPUT, NOT_TEXT",
    "tool_call": "PARSE_ERROR, SCHEMA_ERROR, WRONG_FORMAT, EMPTY_OUTPUT, NOT_TEXT",
}
"""The failure types the trigger of each kind's block repairs."""

_HEADER = """\
# yaml-language-server: $schema={schema}
#
# {name}: made by `rules init`. Check it with `rules check {name}`, test it with
# `rules test {name}`; `rules explain --pack ./{name}` shows its decisions.
rulepack: {name}
version: 0.1.0
description: A {kind} pack made by rules init.
extends: [builtin:core]

"""

_TAIL = """
# The question or task the model answers: the first prompt shows it, and so do repairs.
# `rules run --var task=...` or engine.run(context={{"task": ...}}) gives it.
context:
  task: {{type: string, default: "", description: the question or task the model answers}}

templates:
  first: {{file: templates/first.md.j2, purpose: initial}}
  repair: {{file: templates/repair.md.j2, purpose: repair}}

# The first prompt of each block: what `rules run` and engine.run send when given no prompt.
prompts:
  ANSWER: first

# An example of a valid answer (to another question), shown in repair prompts. A token is
# taken as 3 characters (prompt budgets, example budgets): what small models' tokenizers
# make of prompts with symbols and code.
examples:
  budgets: {{chars_per_token: 3}}
  canonical:
    ANSWER: [{{file: examples/{example}}}]
  selection:
    default:
      - {{tier: canonical, source: a valid answer to another question}}

# The most tokens a repair prompt may take: set it to your model's context less the room its
# answer needs. Over it, the example is left out first, then the output.
limits:
  prompt_budget: {{tokens: 1800, drop: [example, original_output]}}
"""

_FIRST = """\
{{ task | trim }}

Write your answer so that it follows this contract exactly:
{{ format_contract }}
"""

_REPAIR = """\
{% if task %}
{{ task | trim }}

{% endif %}
Your previous {{ block_type }} output broke its contract ({{ failure_type }}):
{% set errors %}
{% for failure in failures %}
- {{ failure.message }}{{ " (at " ~ failure.path ~ ")" if failure.path else "" }}
{% endfor %}
{% endset %}
{{ errors.rstrip("\n") | fence("errors") }}

{% if example %}
LEAD
{% set shown = example | replace("0A0A0A", nonce) %}
{% if params.question is defined %}
{% set shown = shown | replace(":Q0:", ":" ~ params.question ~ ":") %}
{% endif %}
{{ shown | trim }}
{% else %}
Your previous output:
{{ original_output | fence("previous output") }}

Write it again so that it follows this contract exactly:
{{ format_contract }}
{% endif %}

Write only your WHAT{{ ' for the question "' ~ (task | trim) ~ '"' if task else "" }}:
"""
"""The repair prompt of a new pack. Measured on a small model (benchmarks/repair_yield.py):
the task, what was wrong and an example to copy the form of work; the previous output and the
contract's placeholders in the same prompt get copied back instead. ``LEAD`` introduces the
example (``_LEADS``)."""

_LEADS = {
    "json": "{{ format_contract | trim }} Example, for another question:",
}
"""What introduces the example, by kind. A JSON contract's text is one sentence without
placeholders, so the repair restates it there: SmolLM2-135M wrote `"No"` for `"NO"`, and
copied the form of the example only when the sentence said "in capital letters"
(benchmarks/repair_yield.py: 6 of 6 JSON repairs passed, 0 of 6 before). A sentinel or
markdown contract holds placeholders, which a small model copies: it is left out."""
_LEAD = "Example of a valid answer to another question:"

_WHAT = {
    "sentinel": "ANSWER block",
    "markdown": "report",
    "json": "JSON object",
    "tool_call": "tool call",
}

_EXAMPLES = {
    "sentinel": (
        "answer.txt",
        '<<<ANSWER:V1:Q0:NONCE=0A0A0A>>>\nDECISION=NO\nREASON="The log shows two failing '
        'tests"\n<<<END_ANSWER:Q0:NONCE=0A0A0A>>>\n',
    ),
    "markdown": (
        "answer.md",
        "## Summary\nThe log shows two failing tests.\n\n**Decision:** fix them first\n",
    ),
    "json": ("answer.json", '{"decision": "NO", "reason": "The log shows two failing tests"}\n'),
    "tool_call": (
        "answer.json",
        '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}\n',
    ),
}

_CONTRACT_TEXT = {
    "sentinel": """\
ANSWER block, version 1: one block, nothing else.

<<<ANSWER:V1:{question}:NONCE={nonce}>>>
DECISION=<YES or NO, unquoted>
REASON="<one line, double-quoted>"
<<<END_ANSWER:{question}:NONCE={nonce}>>>
""",
    "markdown": """\
A markdown report:

## Summary
<what you found>

**Decision:** <what to do>
""",
    "json": """\
Answer with one JSON object and nothing else, with two keys: "decision", in capital letters,\
 "YES" or "NO"; and "reason", one sentence of your own.
""",
}

_GOOD = {
    "sentinel": (
        "good.txt",
        '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION=YES\nREASON="The tests pass on CI"\n'
        "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n",
        "nonce: 4F2C9A\nvars: {question: Q1}\n"
        "expect: {status: pass, action: PROCEED,\n"
        '         data: {question: Q1, decision: "YES", reason: The tests pass on CI}}\n',
    ),
    "markdown": (
        "good.md",
        "## Summary\nThe tests pass on CI.\n\n**Decision:** ship it\n",
        "expect: {status: pass, action: PROCEED}\n",
    ),
    "json": (
        "good.json",
        '{"decision": "YES", "reason": "The tests pass on CI"}\n',
        "expect: {status: pass, action: PROCEED}\n",
    ),
    "tool_call": (
        "good.json",
        '{"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": '
        '"get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"unit\\": \\"celsius\\"}"}}]}\n',
        "expect: {status: pass, action: PROCEED}\n",
    ),
}

_BAD = {
    "sentinel": (
        "- name: a quoted decision is repaired once\n  block: ANSWER\n"
        '  input: "<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\\nDECISION=\\"YES\\"\\nREASON=\\"The tests pass '
        'on CI\\"\\n<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\\n"\n'
        "  nonce: 4F2C9A\n  vars: {question: Q1}\n"
        "  expect: {status: fail, failure: PARSE_ERROR, action: REPAIR}\n"
    ),
    "markdown": (
        "- name: a report without its summary is repaired once\n  block: ANSWER\n"
        '  input: "**Decision:** ship it\\n"\n'
        "  expect: {status: fail, failure: WRONG_FORMAT, action: REPAIR}\n"
    ),
    "json": (
        "- name: a reason that is missing is repaired once\n  block: ANSWER\n"
        '  input: \'{"decision": "YES"}\'\n'
        "  expect: {status: fail, failure: SCHEMA_ERROR, action: REPAIR}\n"
    ),
    "tool_call": (
        "- name: a misspelt tool is repaired once\n  block: ANSWER\n"
        '  input: \'[{"type": "tool_use", "id": "toolu_1", "name": "get_wether",\n'
        '    "input": {"city": "Paris", "unit": "celsius"}}]\'\n'
        "  expect: {status: fail, failure: SCHEMA_ERROR, action: REPAIR}\n"
    ),
}

_SCHEMA = """\
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["decision", "reason"],
  "additionalProperties": false,
  "properties": {
    "decision": {"enum": ["YES", "NO"]},
    "reason": {"type": "string", "minLength": 1}
  }
}
"""

_EXTENSIONS = {"sentinel": "txt", "markdown": "md", "json": "json", "tool_call": "json"}

_REPAIR_TEMPLATES = {"tool_call": "tool_call_repair.md.j2"}
"""Kinds whose repair template is a shared one of the engine's prompts/ folder."""


SCHEMA_FILE = "rulepack.schema.json"
"""The copy of the format's JSON Schema written into a new pack, which its modeline names."""


def scaffold(folder: Path, name: str, kind: str) -> list[Path]:
    """Write the pack files of a new ``kind`` pack called ``name`` into ``folder``: the
    schema its editors' modeline names is a copy in the pack folder (see ``init_command``)."""
    body = {"sentinel": _SENTINEL, "markdown": _MARKDOWN, "json": _JSON, "tool_call": _TOOL_CALL}[
        kind
    ]
    good_name, good_text, good_expect = _GOOD[kind]
    files = {
        "pack.yaml": _HEADER.format(schema=SCHEMA_FILE, name=name, kind=kind)
        + body.format()
        + _TRIGGERS.format(failures=_REPAIRED[kind])
        + _TAIL.format(example=_EXAMPLES[kind][0]),
        SCHEMA_FILE: rulepack_schema_text(rulepack_model()),
        "templates/first.md.j2": _FIRST,
        "templates/repair.md.j2": _repair_template(kind),
        # a tool-call contract writes its own text, from its tools
        **({"contracts/answer.v1.md": _CONTRACT_TEXT[kind]} if kind in _CONTRACT_TEXT else {}),
        f"examples/{_EXAMPLES[kind][0]}": _EXAMPLES[kind][1],
        f"tests/ANSWER/{good_name}": good_text,
        f"tests/ANSWER/{good_name}.yaml": good_expect,
        "tests/cases.yaml": _BAD[kind],
    }
    if kind == "json":
        files["schemas/answer.schema.json"] = _SCHEMA
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _repair_template(kind: str) -> str:
    """The repair template of a new ``kind`` pack: a shared one of prompts/, or the generic
    one worded for the kind."""
    shared = _REPAIR_TEMPLATES.get(kind)
    if shared is not None:
        return (data_dir("prompts") / shared).read_text(encoding="utf-8")
    return _REPAIR.replace("WHAT", _WHAT[kind]).replace("LEAD", _LEADS.get(kind, _LEAD))


@click.command("init")
@click.argument("name")
@click.option("--kind", type=click.Choice(KINDS), default="sentinel", show_default=True)
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False),
    default=".",
    help="Where to create the pack folder NAME (default: here).",
)
def init_command(name: str, kind: str, parent: str) -> None:
    """Create a pack folder NAME: pack.yaml (with the schema modeline for editors), a
    contract and its text, a trigger, a repair template, and two test cases (a passing
    fixture and a failing case) that `rules test` runs.

    The modeline names rulepack.schema.json, a copy of the format's JSON Schema written
    into the pack folder: a path relative to the pack, so it stays valid when the pack is
    committed and cloned elsewhere (a path into the engine's installation would not, and
    the schema has no URL that resolves). Commit it with the pack; after upgrading the
    engine, refresh it with `rules schema > NAME/rulepack.schema.json`.

    \b
    Examples:
      rules init my-pack                  # a sentinel block
      rules init reports --kind markdown --dir rules/
      rules init answers --kind json && rules check answers && rules test answers
      rules init calls --kind tool_call   # tool calls checked against declared tools

    Exit status: 0 created, 2 NAME exists or is not a valid pack name.
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,99}", name):
        raise UsageFailure(
            f"{name!r}: a pack name starts with a letter and holds letters, digits, '_', '.' "
            "and '-'"
        )
    folder = Path(parent) / name
    if folder.exists():
        raise UsageFailure(f"{folder}: already exists; nothing was written")
    written = scaffold(folder, name, kind)
    for path in written:
        click.echo(f"created {path}")
    click.echo(f"next: rules check {folder} && rules test {folder}")
