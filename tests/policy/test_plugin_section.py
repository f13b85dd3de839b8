"""A policy section from outside the engine: a toy ``owners:`` section (block -> owning team)
defined here, registered through the registry API and through an entry point of a small
distribution, checked, tested, evaluated and described like the engine's own sections."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import Field

from conftest import PackMaker, run_cli
from engine.core.errors import EngineError
from engine.pack import sections as registry
from engine.pack.loaded import load_pack
from engine.pack.sections import rulepack_model
from engine.plugins import FindingRule, register_section, unregister_section

if TYPE_CHECKING:
    from engine.plugins import Compiling, PackChecker, Rulepack


UNKNOWN_OWNED_BLOCK = FindingRule(
    "unknown-owned-block",
    "`owners:` names a block the pack has no contract for.",
    "Name a block declared under `contracts:`.",
)


class OwnersSection:
    """``owners: {BLOCK: team-name}``: every key names a contract of the pack."""

    key = "owners"
    annotation = dict[str, str]
    default = Field(default_factory=dict, description="block -> the team that owns it")
    types: Mapping[str, Any] = MappingProxyType({})

    def check(self, pack: Rulepack, checker: PackChecker) -> None:
        for block in getattr(pack, "owners", {}):
            if block not in pack.contracts:
                checker.add(
                    UNKNOWN_OWNED_BLOCK,
                    f"owners names {block!r}, which is no contract of the pack",
                    ("owners", block),
                    "name a block declared under `contracts:`",
                    is_key=True,
                )

    def compile(self, pack: Rulepack, compiling: Compiling) -> Any:
        return dict(getattr(pack, "owners", {}))


OWNERS = OwnersSection()

PACK = """\
rulepack: owned
extends: [builtin:core]
contracts:
  answer:
    kind: text
    min_chars: 3
owners:
  {owned}: platform-team
tests:
  - name: a long enough answer passes
    block: answer
    input: "hello"
    expect: {{ok: true}}
  - name: a short one fails
    block: answer
    input: "hi"
    expect: {{ok: false}}
"""


@pytest.fixture
def owners() -> Iterator[None]:
    register_section(OWNERS)
    yield
    unregister_section("owners")


def test_a_registered_section_is_checked_tested_evaluated_and_described(
    owners: None, make_pack: PackMaker, tmp_path: Path
) -> None:
    good = make_pack(PACK.format(owned="answer"), name="good")
    checked = run_cli("check", str(good))
    assert checked.exit_code == 0, checked.output
    assert " 0 errors" in checked.output

    tested = run_cli("test", str(good))
    assert tested.exit_code == 0, tested.output

    output = tmp_path / "out.txt"
    output.write_text("hello there", encoding="utf-8")
    evaluated = run_cli(
        "eval", "--pack", str(good), "--block", "answer", "--format", "json", str(output)
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.output)["verdict"]["status"] == "pass"

    assert load_pack(good).section("owners") == {"answer": "platform-team"}

    schema = json.loads(run_cli("schema").output)
    assert schema["properties"]["owners"]["description"] == "block -> the team that owns it"
    assert list(schema["properties"])[-1] == "owners"  # after the engine's own keys


def test_a_pack_with_a_section_from_outside_has_no_image(
    owners: None, make_pack: PackMaker
) -> None:
    """The section's code may read its model other than by its fields: a pack composed
    with it is loaded and checked by every command, never read back from an image."""
    from engine.pack.image import pack_image

    assert pack_image(load_pack(make_pack(PACK.format(owned="answer"), name="owned"))) is None


def test_a_wrong_key_gets_the_sections_own_finding(owners: None, make_pack: PackMaker) -> None:
    bad = make_pack(PACK.format(owned="anwser"), name="bad")
    checked = run_cli("check", str(bad), "--format", "json")
    assert checked.exit_code == 1, checked.output
    [finding] = json.loads(checked.output)["packs"][0]["findings"]
    assert finding["rule"] == "unknown-owned-block"
    assert finding["message"] == "owners names 'anwser', which is no contract of the pack"
    assert finding["line"] == 8


def test_without_the_section_the_key_is_unknown(make_pack: PackMaker) -> None:
    assert "owners" not in rulepack_model().model_fields
    folder = make_pack(PACK.format(owned="answer"), name="plain")
    checked = run_cli("check", str(folder), "--format", "json")
    assert checked.exit_code == 1
    rules = [f["rule"] for f in json.loads(checked.output)["packs"][0]["findings"]]
    assert rules == ["unknown-key"]


DISTRIBUTED_MODULE = """\
from pydantic import Field

from engine.plugins import FindingRule

UNOWNED = FindingRule("owners-unknown-block", "An owner of no block.", "Name a block.")


class OwnersSection:
    key = "owners"
    annotation = dict[str, str]
    default = Field(default_factory=dict)
    types = {}

    def check(self, pack, checker):
        for block in pack.owners:
            if block not in pack.contracts:
                checker.add(UNOWNED, f"owners names {block!r}", ("owners", block))

    def compile(self, pack, compiling):
        return dict(pack.owners)


OWNERS = OwnersSection()
"""


@pytest.fixture
def owners_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution installed on the path (a module and its dist-info) whose entry point
    of group ``rules_engine.sections`` names the toy section."""
    site = tmp_path / "site"
    (site / "toy_owners-0.1.dist-info").mkdir(parents=True)
    (site / "toy_owners-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-owners\nVersion: 0.1\n", encoding="utf-8"
    )
    (site / "toy_owners-0.1.dist-info" / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nowners = toy_owners:OWNERS\n", encoding="utf-8"
    )
    (site / "toy_owners.py").write_text(DISTRIBUTED_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry._sections, "loaded_entry_points", False)
    yield
    unregister_section("owners")
    sys.modules.pop("toy_owners", None)


def test_a_section_of_an_installed_distribution_is_registered(
    owners_distribution: None, make_pack: PackMaker
) -> None:
    assert "owners" in [section.key for section in registry.sections()]
    bad = make_pack(PACK.format(owned="anwser"), name="bad")
    checked = run_cli("check", str(bad), "--format", "json")
    rules = [f["rule"] for f in json.loads(checked.output)["packs"][0]["findings"]]
    assert rules == ["owners-unknown-block"]
    listed = json.loads(run_cli("check", "--list-rules", "--format", "json").stdout)
    assert {
        "id": "owners-unknown-block",
        "description": "An owner of no block.",
        "fix": "Name a block.",
    } in listed


def test_the_engines_sections_are_registered_in_the_order_of_the_roots_keys() -> None:
    keys = [section.key for section in registry.sections()]
    root = [key for key in rulepack_model().model_fields if key in keys]
    assert keys == root
    assert keys[0] == "severities" and keys[-1] == "tests"
    with pytest.raises(EngineError, match="'gates' is already registered"):
        register_section(GatesLike())


class GatesLike(OwnersSection):
    key = "gates"
