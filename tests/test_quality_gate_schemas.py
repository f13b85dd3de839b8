"""The quality-gate pack's nine JSON Schemas (seed 004's SCHEMA_DESCRIPTIONS) and their examples.

Each schema is a valid Draft 2020-12 schema with local ``$ref``s only, its example validates,
and the listed mutations of the examples fail with the expected keyword at the expected place.
The handoff and recovery schemas accept exactly what seed 004's reprompt TEMPLATE builds.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from conftest import REPO

PACK = REPO / "rules" / "quality-gate"
SCHEMAS = PACK / "schemas"
EXAMPLES = PACK / "examples"

# Seed 004, SCHEMA_DESCRIPTIONS, verbatim: each schema's title.
SEED_DESCRIPTIONS = {
    "todo": "Task with 17 fields: id, content, status, priority, metadata.*",
    "evidence": "Proof with id (E-{stage}-{task}-{seq}), type, claim, location, verified",
    "review_gate": "Gate result with stage, agent, criteria_checked[], approved, action",
    "conflict": "Dispute with id, type, parties[], positions[], resolution",
    "metrics": "Stats with workflow_id, stages.*, agents.*, evidence.*, quality.*",
    "skill": "Capability with name, source, purpose, interface, tested, evidence_location",
    "handoff": "Transfer with from_agent, to_agent, context.*, instructions",
    "startup": "Init check with mcp_verified, scheduler_active, memory_ok, env_ready",
    "recovery": "Rollback with id, trigger, rollback_to, state_before/after, resume_stage",
}
STAGES = ["PLAN", "REVIEW", "DISRUPT", "IMPLEMENT", "TEST", "VALIDATE", "LEARN"]
NAMES = sorted(SEED_DESCRIPTIONS)


def load_schema(name: str) -> dict[str, Any]:
    text = (SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def load_example(name: str) -> Any:
    return json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))


def _refuse(uri: str) -> Resource[Any]:
    raise LookupError(f"remote $ref retrieval refused: {uri}")


def validator(name: str) -> Draft202012Validator:
    """A validator that asserts formats and can never fetch anything."""
    schema = load_schema(name)
    registry: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]
    return Draft202012Validator(
        schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, (*path, i))


# --------------------------------------------------------------------------- the files


def test_one_schema_and_one_example_per_seed_description() -> None:
    assert sorted(p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.json")) == NAMES
    assert sorted(p.stem for p in EXAMPLES.glob("*.json")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://rules-engine.invalid/quality-gate/{name}.schema.json"
    assert schema["title"] == SEED_DESCRIPTIONS[name]
    assert schema["description"].strip()
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("name", NAMES)
def test_schema_refs_are_local_and_resolve(name: str) -> None:
    schema = load_schema(name)
    uri = schema["$id"]
    registry: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]
    registry = registry.with_resource(uri, DRAFT202012.create_resource(schema))
    resolver = registry.resolver(base_uri=uri)
    refs = []
    for path, node in walk(schema):
        if not isinstance(node, dict):
            continue
        if path:  # a nested $id would move the base URI of the refs below it
            assert "$id" not in node, path
        for key in ("$ref", "$dynamicRef"):
            if isinstance(node.get(key), str):
                refs.append(node[key])
    assert refs, "the schemas share their definitions through #/$defs"
    for ref in refs:
        assert ref.startswith("#/$defs/"), ref
        resolver.lookup(ref)  # raises if it does not resolve inside the file


def test_shared_definitions_are_identical_in_every_schema() -> None:
    """The files repeat their common $defs (no cross-file refs); the copies must agree."""
    seen: dict[str, tuple[str, Any]] = {}
    for name in NAMES:
        for key, definition in load_schema(name).get("$defs", {}).items():
            first = seen.setdefault(key, (name, definition))
            assert definition == first[1], f"$defs/{key} differs in {name} and {first[0]}"
    assert seen["stage"][1]["enum"] == STAGES


@pytest.mark.parametrize("name", NAMES)
def test_example_validates(name: str) -> None:
    errors = [e.message for e in validator(name).iter_errors(load_example(name))]
    assert errors == []


# --------------------------------------------------------------------------- todo


def test_todo_has_exactly_17_fields() -> None:
    """17 = id, content, status, priority + the metadata.* fields (metadata is their
    container), as the seed's description counts them; the description lists all 17."""
    schema = load_schema("todo")
    top = [k for k in schema["properties"] if k != "metadata"]
    meta = list(schema["properties"]["metadata"]["properties"])
    assert top == ["id", "content", "status", "priority"]
    fields = top + [f"metadata.{k}" for k in meta]
    assert len(fields) == 17
    assert schema["description"].count("metadata.") >= 13
    for field in fields:
        assert re.search(rf"\b{re.escape(field)}\b", schema["description"]), field
    assert schema["properties"]["metadata"]["additionalProperties"] is False


def test_todo_missing_success_criteria_is_the_seeds_error() -> None:
    """The seed's EXAMPLE_OUTPUT says ``[todo] Missing: metadata.success_criteria``: one
    ``required`` error at /metadata naming success_criteria, and nothing else."""
    todo = load_example("todo")
    del todo["metadata"]["success_criteria"]
    errors = list(validator("todo").iter_errors(todo))
    assert [(e.validator, list(e.absolute_path)) for e in errors] == [("required", ["metadata"])]
    assert "'success_criteria'" in errors[0].message
    assert "success_criteria" in load_schema("todo")["properties"]["metadata"]["required"]


# --------------------------------------------------------------------------- mutations

Mutation = Callable[[Any], None]


def drop(*path: Any) -> Mutation:
    def apply(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        del doc[path[-1]]

    return apply


def put(*path: Any, value: Any) -> Mutation:
    def apply(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value

    return apply


def both(*mutations: Mutation) -> Mutation:
    def apply(doc: Any) -> None:
        for mutation in mutations:
            mutation(doc)

    return apply


def unwrap(key: str) -> Mutation:
    def apply(doc: Any) -> None:
        inner = doc.pop(key)
        doc.update(inner)

    return apply


H = ("handoff",)
C = ("handoff", "context")
R = ("recovery",)

# (schema, what, mutation, keyword expected, instance path of that error)
MUTATIONS: list[tuple[str, str, Mutation, str, tuple[Any, ...]]] = [
    (
        "todo",
        "no success_criteria",
        drop("metadata", "success_criteria"),
        "required",
        ("metadata",),
    ),
    (
        "todo",
        "empty success_criteria",
        put("metadata", "success_criteria", value=[]),
        "minItems",
        ("metadata", "success_criteria"),
    ),
    (
        "todo",
        "blank criterion",
        put("metadata", "success_criteria", value=["  "]),
        "pattern",
        ("metadata", "success_criteria", 0),
    ),
    ("todo", "no metadata", drop("metadata"), "required", ()),
    ("todo", "no status", drop("status"), "required", ()),
    ("todo", "status not in enum", put("status", value="done"), "enum", ("status",)),
    ("todo", "priority not in enum", put("priority", value="urgent"), "enum", ("priority",)),
    (
        "todo",
        "stage not in the table",
        put("metadata", "stage", value="DEPLOY"),
        "enum",
        ("metadata", "stage"),
    ),
    (
        "todo",
        "an 18th field",
        put("metadata", "owner", value="Sonnet"),
        "additionalProperties",
        ("metadata",),
    ),
    ("todo", "an unknown top-level key", put("due", value="tomorrow"), "additionalProperties", ()),
    ("todo", "id with a dash", put("id", value="T-042"), "pattern", ("id",)),
    (
        "todo",
        "created_at not ISO 8601",
        put("metadata", "created_at", value="2026-01-04 06:30"),
        "pattern",
        ("metadata", "created_at"),
    ),
    (
        "todo",
        "relative file path",
        put("metadata", "files", value=["webhooks/client.py"]),
        "pattern",
        ("metadata", "files", 0),
    ),
    (
        "todo",
        "bad evidence id",
        put("metadata", "evidence_ids", value=["E-1"]),
        "pattern",
        ("metadata", "evidence_ids", 0),
    ),
    (
        "todo",
        "duplicate dependency",
        put("metadata", "dependencies", value=["T1", "T1"]),
        "uniqueItems",
        ("metadata", "dependencies"),
    ),
    ("evidence", "seq not three digits", put("id", value="E-IMPLEMENT-T042-1"), "pattern", ("id",)),
    (
        "evidence",
        "stage in lower case",
        put("id", value="E-implement-T042-001"),
        "pattern",
        ("id",),
    ),
    (
        "evidence",
        "stage not in the table",
        put("id", value="E-DEPLOY-T042-001"),
        "pattern",
        ("id",),
    ),
    ("evidence", "no E- prefix", put("id", value="IMPLEMENT-T042-001"), "pattern", ("id",)),
    (
        "evidence",
        "id with a trailing newline",
        put("id", value="E-IMPLEMENT-T042-001\n"),
        "pattern",
        ("id",),
    ),
    (
        "evidence",
        "relative location",
        put("location", value=".workflow/evidence/e1.txt"),
        "pattern",
        ("location",),
    ),
    (
        "evidence",
        "home-relative location",
        put("location", value="~/evidence/e1.txt"),
        "pattern",
        ("location",),
    ),
    ("evidence", "verified as a string", put("verified", value="yes"), "type", ("verified",)),
    ("evidence", "no verified", drop("verified"), "required", ()),
    ("evidence", "no claim", drop("claim"), "required", ()),
    ("evidence", "type not in enum", put("type", value="hunch"), "enum", ("type",)),
    (
        "evidence",
        "timestamp not ISO 8601",
        put("timestamp", value="04/01/2026 06:30"),
        "pattern",
        ("timestamp",),
    ),
    (
        "evidence",
        "timestamp without offset",
        put("timestamp", value="2026-01-04T06:30:00"),
        "pattern",
        ("timestamp",),
    ),
    (
        "evidence",
        "month 13",
        put("timestamp", value="2026-13-04T06:30:00Z"),
        "pattern",
        ("timestamp",),
    ),
    (
        "evidence",
        "hour 24",
        put("timestamp", value="2026-01-04T24:30:00Z"),
        "pattern",
        ("timestamp",),
    ),
    (
        "evidence",
        "timestamp with a trailing newline",
        put("timestamp", value="2026-01-04T06:30:00Z\n"),
        "pattern",
        ("timestamp",),
    ),
    ("evidence", "bad sha256", put("sha256", value="abc"), "pattern", ("sha256",)),
    ("review_gate", "action not in enum", put("action", value="MAYBE"), "enum", ("action",)),
    ("review_gate", "approved but STOP", put("action", value="STOP"), "const", ("action",)),
    ("review_gate", "not approved but PROCEED", put("approved", value=False), "enum", ("action",)),
    (
        "review_gate",
        "no criteria",
        put("criteria_checked", value=[]),
        "minItems",
        ("criteria_checked",),
    ),
    (
        "review_gate",
        "criterion neither text nor object",
        put("criteria_checked", value=[3]),
        "anyOf",
        ("criteria_checked", 0),
    ),
    ("review_gate", "stage not in the table", put("stage", value="DEPLOY"), "enum", ("stage",)),
    ("review_gate", "no agent", drop("agent"), "required", ()),
    ("review_gate", "approved as a string", put("approved", value="true"), "type", ("approved",)),
    ("conflict", "one party", put("parties", value=["Sonnet"]), "minItems", ("parties",)),
    (
        "conflict",
        "one position",
        put("positions", value=[{"party": "A", "position": "x"}]),
        "minItems",
        ("positions",),
    ),
    (
        "conflict",
        "resolved without rationale",
        drop("resolution", "rationale"),
        "required",
        ("resolution",),
    ),
    ("conflict", "type not in enum", put("type", value="personal"), "enum", ("type",)),
    ("conflict", "bad id", put("id", value="7"), "pattern", ("id",)),
    ("conflict", "no resolution", drop("resolution"), "required", ()),
    (
        "metrics",
        "stage key not in the table",
        put("stages", "DEPLOY", value={"status": "pending"}),
        "enum",
        ("stages",),
    ),
    (
        "metrics",
        "pass_rate above 1",
        put("quality", "pass_rate", value=1.5),
        "maximum",
        ("quality", "pass_rate"),
    ),
    (
        "metrics",
        "negative count",
        put("evidence", "total", value=-1),
        "minimum",
        ("evidence", "total"),
    ),
    ("metrics", "no workflow_id", drop("workflow_id"), "required", ()),
    ("metrics", "no quality", drop("quality"), "required", ()),
    (
        "skill",
        "relative evidence_location",
        put("evidence_location", value="evidence/s.txt"),
        "pattern",
        ("evidence_location",),
    ),
    ("skill", "tested as a string", put("tested", value="true"), "type", ("tested",)),
    ("skill", "no interface", drop("interface"), "required", ()),
    ("skill", "name with spaces", put("name", value="HTTP retry"), "pattern", ("name",)),
    ("handoff", "no memory_refs", drop(*C, "memory_refs"), "required", C),
    ("handoff", "no instructions", drop(*H, "instructions"), "required", H),
    (
        "handoff",
        "a key the seed does not have",
        put(*H, "priority", value="high"),
        "additionalProperties",
        H,
    ),
    (
        "handoff",
        "deadline not ISO 8601",
        put(*H, "deadline", value="in 30 minutes"),
        "pattern",
        (*H, "deadline"),
    ),
    (
        "handoff",
        "blockers not strings",
        put(*C, "blockers", value=[1]),
        "type",
        (*C, "blockers", 0),
    ),
    (
        "handoff",
        "completed_stages not a list",
        put(*C, "completed_stages", value="PLAN"),
        "type",
        (*C, "completed_stages"),
    ),
    (
        "handoff",
        "stage in lower case",
        put(*C, "current_stage", value="implement"),
        "pattern",
        (*C, "current_stage"),
    ),
    ("handoff", "without the handoff wrapper", unwrap("handoff"), "required", ()),
    ("handoff", "empty to_agent", put(*H, "to_agent", value=""), "minLength", (*H, "to_agent")),
    ("startup", "memory_ok as a string", put("memory_ok", value="ok"), "type", ("memory_ok",)),
    ("startup", "no env_ready", drop("env_ready"), "required", ()),
    ("startup", "unknown check", put("gpu_ok", value=True), "additionalProperties", ()),
    (
        "recovery",
        "id with separators",
        put(*R, "id", value="R-2026-01-04T06:30:00"),
        "pattern",
        (*R, "id"),
    ),
    (
        "recovery",
        "id without seconds",
        put(*R, "id", value="R-20260104T0630"),
        "pattern",
        (*R, "id"),
    ),
    (
        "recovery",
        "id without prefix",
        put(*R, "id", value="20260104T063000"),
        "pattern",
        (*R, "id"),
    ),
    ("recovery", "success as a string", put(*R, "success", value="false"), "type", (*R, "success")),
    ("recovery", "no resume_stage", drop(*R, "resume_stage"), "required", R),
    (
        "recovery",
        "rollback_to null",
        put(*R, "rollback_to", value=None),
        "type",
        (*R, "rollback_to"),
    ),
    (
        "recovery",
        "trigger not snake_case",
        put(*R, "trigger", value="Quality Gate"),
        "pattern",
        (*R, "trigger"),
    ),
    (
        "recovery",
        "a key the seed does not have",
        put(*R, "reason", value="x"),
        "additionalProperties",
        R,
    ),
    ("recovery", "without the recovery wrapper", unwrap("recovery"), "required", ()),
    (
        "review_gate",
        "both rules at once",
        both(put("action", value="STOP"), drop("agent")),
        "required",
        (),
    ),
]


@pytest.mark.parametrize(
    ("name", "mutation", "keyword", "where"),
    [pytest.param(n, m, k, w, id=f"{n}: {what}") for n, what, m, k, w in MUTATIONS],
)
def test_mutation_fails(
    name: str, mutation: Mutation, keyword: str, where: tuple[Any, ...]
) -> None:
    doc = copy.deepcopy(load_example(name))
    mutation(doc)
    assert doc != load_example(name)
    errors = list(validator(name).iter_errors(doc))
    found = [(e.validator, tuple(e.absolute_path)) for e in errors]
    assert (keyword, where) in found, found


def test_mutations_cover_every_schema() -> None:
    assert sorted({name for name, *_ in MUTATIONS}) == NAMES


# --------------------------------------------------------------------------- seed artifacts

# Seed 004's TEMPLATE, its HANDOFF and RECOVERY blocks verbatim: str.format syntax
# ({{ }} are literal braces); list values are filled in as JSON.
SEED_HANDOFF = """
  {{
    "handoff": {{
      "from_agent": "{current_agent}",
      "to_agent": "Opus",
      "timestamp": "{timestamp}",
      "context": {{
        "user_objective": "{objective}",
        "current_stage": "{stage}",
        "completed_stages": {completed_stages},
        "todos_remaining": {todos_remaining},
        "evidence_collected": {evidence_collected},
        "blockers": {errors},
        "assumptions": [],
        "memory_refs": []
      }},
      "instructions": "Quality gate failed after {max_retry} attempts. Review and fix.",
      "expected_output": "Valid {stage} output passing all schema validations",
      "deadline": "{deadline}"
    }}
  }}
"""
SEED_RECOVERY = """
  {{
    "recovery": {{
      "id": "R-{timestamp_compact}",
      "trigger": "quality_gate_critical_failure",
      "rollback_to": "{last_checkpoint}",
      "state_before": "{state_path}/before.json",
      "state_after": "{state_path}/after.json",
      "success": false,
      "resume_stage": "{stage}"
    }}
  }}
"""


def seed_context(now: datetime, stage: str = "IMPLEMENT", **overrides: Any) -> dict[str, Any]:
    """The context of the seed's generate_reprompt, with its defaults for the environment."""
    context: dict[str, Any] = {
        "stage": stage,
        "max_retry": 3,
        "timestamp": now.isoformat(),
        "timestamp_compact": now.strftime("%Y%m%dT%H%M%S"),
        "errors": json.dumps(
            ["[todo] Missing: metadata.success_criteria", "Missing required schema: evidence"]
        ),
        "current_agent": "Sonnet",  # AGENT_ID default
        "objective": "",  # USER_OBJECTIVE default
        "completed_stages": json.dumps([]),
        "todos_remaining": json.dumps([]),
        "evidence_collected": json.dumps([]),
        "last_checkpoint": "",
        "state_path": f".workflow/state/{stage.lower()}",
        "deadline": (now + timedelta(minutes=30)).isoformat(),
    }
    context.update(overrides)
    return context


NOWS = [
    datetime(2026, 1, 4, 6, 30, tzinfo=timezone.utc),
    datetime(2026, 1, 4, 6, 30, 0, 123456, tzinfo=timezone.utc),
    datetime(2026, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5))),
]


@pytest.mark.parametrize("now", NOWS, ids=str)
@pytest.mark.parametrize("stage", STAGES)
def test_the_seeds_handoff_and_recovery_validate(now: datetime, stage: str) -> None:
    context = seed_context(now, stage)
    handoff = json.loads(SEED_HANDOFF.format(**context))
    recovery = json.loads(SEED_RECOVERY.format(**context))
    assert [e.message for e in validator("handoff").iter_errors(handoff)] == []
    assert [e.message for e in validator("recovery").iter_errors(recovery)] == []


def test_the_seeds_handoff_with_workflow_state_validates() -> None:
    """Completed stages, pending todos and evidence may be names/ids or whole objects."""
    now = NOWS[0]
    todo, evidence = load_example("todo"), load_example("evidence")
    context = seed_context(
        now,
        objective="Make webhook delivery survive provider outages",
        current_agent="Haiku",
        completed_stages=json.dumps(["PLAN", {"stage": "REVIEW", "action": "PROCEED"}]),
        todos_remaining=json.dumps([todo, "T043"]),
        evidence_collected=json.dumps([evidence["id"], evidence]),
        last_checkpoint="checkpoint-REVIEW-20260104T060255",
    )
    handoff = json.loads(SEED_HANDOFF.format(**context))
    recovery = json.loads(SEED_RECOVERY.format(**context))
    assert [e.message for e in validator("handoff").iter_errors(handoff)] == []
    assert [e.message for e in validator("recovery").iter_errors(recovery)] == []


def test_handoff_and_recovery_keys_are_the_seeds() -> None:
    context = seed_context(NOWS[0])
    handoff = json.loads(SEED_HANDOFF.format(**context))["handoff"]
    recovery = json.loads(SEED_RECOVERY.format(**context))["recovery"]
    h_schema = load_schema("handoff")["properties"]["handoff"]
    r_schema = load_schema("recovery")["properties"]["recovery"]
    assert list(h_schema["properties"]) == list(handoff)
    assert h_schema["required"] == list(handoff)
    assert list(h_schema["properties"]["context"]["properties"]) == list(handoff["context"])
    assert h_schema["properties"]["context"]["required"] == list(handoff["context"])
    assert list(r_schema["properties"]) == list(recovery)
    assert r_schema["required"] == list(recovery)


# --------------------------------------------------------------------------- timestamps

GOOD_TIMES = [
    "2026-01-04T06:30:00Z",
    "2026-01-04T06:30:00+00:00",
    "2026-01-04T06:30:00.123456+00:00",
    "2026-02-28T23:59:59-05:30",
    "2016-12-31T23:59:60Z",
]
BAD_TIMES = [
    "2026-01-04",
    "2026-01-04T06:30Z",
    "2026-01-04T06:30:00",
    "2026-01-04 06:30:00Z",
    "2026-1-4T06:30:00Z",
    "2026-01-04T06:30:00+0000",
    "2026-01-32T06:30:00Z",
    "2026-00-04T06:30:00Z",
    "2026-01-04T06:60:00Z",
    "2026-01-04T06:30:00z",
    " 2026-01-04T06:30:00Z",
    "2026-01-04T06:30:00Z\n",
    "1767508200",
]


@pytest.mark.parametrize("value", GOOD_TIMES + BAD_TIMES)
def test_timestamp_definition(value: str) -> None:
    definition = load_schema("evidence")["$defs"]["timestamp"]
    assert definition["format"] == "date-time"
    ok = not list(Draft202012Validator(definition).iter_errors(value))
    assert ok is (value in GOOD_TIMES)
