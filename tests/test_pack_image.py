"""`rules eval`, `rules render` and `rules gate` start from an image of the compiled pack: the
same results as from a load, never used once the pack (or a file it names) has changed or the
image is not the cache's own, and a warm start imports neither YAML nor pydantic."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, SCRIPTS, heavy_imports
from engine.core.frozen import Frozen
from engine.pack.image import pack_image, thawed_pack
from engine.pack.loaded import load_pack
from engine.pack.selftests import run_pack_tests

SHIPPED = sorted(p.name for p in (REPO / "rules").iterdir() if (p / "pack.yaml").is_file())
VERDICT = ["--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1"]
BAD = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")


def _rules(
    cache: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "rules"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **(env or {})},
    )


def _outcome(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


def _images(cache: Path) -> list[Path]:
    return sorted(cache.glob("pack-*.json")) if cache.is_dir() else []


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_pack_read_back_from_its_image_passes_its_own_tests(name: str) -> None:
    """Every case of the pack's own tests (verdicts, decisions, golden prompts, gates) gives
    the same result from the image, written as JSON and read back, as from the load."""
    pack = load_pack(name)
    image = pack_image(pack)
    assert image is not None
    thawed = thawed_pack(json.loads(json.dumps(image)))
    assert isinstance(thawed.model, Frozen)
    assert thawed.model.model_dump() == pack.model.model_dump(mode="json")
    loaded_results = [(r.name, r.passed, r.problems, r.action) for r in run_pack_tests(pack)]
    thawed_results = [(r.name, r.passed, r.problems, r.action) for r in run_pack_tests(thawed)]
    assert thawed_results == loaded_results
    assert all(passed for _, passed, _, _ in loaded_results)


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "--pack", "sentinel", *VERDICT, "--format", "json", BAD],
        ["render", "--pack", "sentinel", *VERDICT, BAD],
        ["eval", "--pack", "gap-review", "--block", "engineer", "--format", "json", BAD],
        [
            "gate",
            "--pack",
            "quality-gate",
            "--stage",
            "PLAN",
            "--now",
            "2026-01-02T03:04:05Z",
            str(REPO / "examples" / "quality-gate" / "todo.json"),
        ],
    ],
    ids=["eval", "render", "eval-markdown", "gate"],
)
@pytest.mark.heavy
def test_a_command_from_the_image_says_what_it_says_without_a_cache(
    tmp_path: Path, command: list[str]
) -> None:
    cache = tmp_path / "cache"
    cold = _rules(cache, *command)
    assert len(_images(cache)) == 1
    warm = _rules(cache, *command)
    off = _rules(cache, *command, env={"RULES_NO_CACHE": "1"})
    assert _outcome(cold) == _outcome(warm) == _outcome(off)
    assert "internal error" not in warm.stderr


@pytest.mark.heavy
def test_a_warm_eval_and_render_import_no_yaml_or_pydantic(tmp_path: Path) -> None:
    """Jinja2 they need (guards and templates are Jinja2 expressions); nothing else heavy."""
    cache = tmp_path / "cache"
    _rules(cache, "eval", "--pack", "sentinel", *VERDICT, BAD)
    for command in ("eval", "render"):
        args = [command, "--pack", "sentinel", *VERDICT, BAD]
        assert heavy_imports(args, cache) == ["jinja2"], command


def _sentinel_copy(folder: Path) -> Path:
    """The sentinel pack copied into ``folder`` (with the core pack it extends)."""
    pack = folder / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    shutil.copytree(REPO / "rules" / "core", folder / "core")
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    (pack / "pack.yaml").write_text(
        text.replace("extends: [builtin:core]", "extends: [../core]"), encoding="utf-8"
    )
    return pack


@pytest.mark.heavy
def test_an_image_written_in_one_folder_serves_a_command_run_in_another(tmp_path: Path) -> None:
    """Positions name files relative to the working folder: an image keeps where the files
    are, and a command run elsewhere finds them and shows them relative to its own."""
    pack = _sentinel_copy(tmp_path / "packs")
    cache = tmp_path / "cache"
    first, second = tmp_path / "x" / "y", tmp_path / "z"
    first.mkdir(parents=True)
    second.mkdir()
    render = [str(SCRIPTS / "rules"), "render", "--pack", str(pack), *VERDICT, BAD]
    env = {**os.environ, "RULES_CACHE_DIR": str(cache)}
    outcomes = []
    for folder in (first, second):
        done = subprocess.run(
            render, cwd=folder, env=env, capture_output=True, text=True, timeout=60
        )
        outcomes.append(_outcome(done))
    assert len(_images(cache)) == 1
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 0, outcomes[0][2]


@pytest.mark.heavy
def test_editing_the_pack_or_a_template_it_names_is_seen_at_once(tmp_path: Path) -> None:
    pack = _sentinel_copy(tmp_path)
    cache = tmp_path / "cache"
    render = ["render", "--pack", str(pack), *VERDICT, BAD]
    first = _rules(cache, *render)
    assert first.returncode == 0, first.stderr
    template = pack / "templates" / "format_repair.md.j2"
    template.write_text("EDITED {{ block_type }}\n", encoding="utf-8")
    assert _rules(cache, *render).stdout == "EDITED VERDICT\n"
    (pack / "pack.yaml").write_text("rulepack: [broken\n", encoding="utf-8")
    broken = _rules(cache, *render)
    assert broken.returncode == 2
    assert "pack.yaml:2:1: invalid YAML" in broken.stderr


@pytest.mark.parametrize(
    "forge",
    [
        lambda image: image["model"]["triggers"]["VERDICT"].update(max_attempts="x"),
        lambda image: image.update(models=[]),
        lambda image: image.update(model=[]),
    ],
    ids=["a-field-of-the-wrong-type", "no-models", "no-model"],
)
@pytest.mark.heavy
def test_an_image_not_signed_with_the_cache_key_is_not_used(tmp_path: Path, forge: object) -> None:
    """The key is the cache folder's own: an image changed by anyone, with its digest
    recomputed as a checksum, is passed over and the pack loaded afresh."""
    import hashlib

    cache = tmp_path / "cache"
    command = ["eval", "--pack", "sentinel", *VERDICT, "--format", "json", BAD]
    first = _rules(cache, *command)
    [image] = _images(cache)
    entry = json.loads(image.read_text(encoding="utf-8"))
    data = json.loads(entry["data"])
    forge(data)  # type: ignore[operator]
    entry["data"] = json.dumps(data)
    entry["digest"] = hashlib.sha256(entry["data"].encode()).hexdigest()
    image.write_text(json.dumps(entry), encoding="utf-8")
    again = _rules(cache, *command)
    assert _outcome(again) == _outcome(first)


@pytest.mark.heavy
def test_the_cache_key_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _rules(cache, "eval", "--pack", "sentinel", *VERDICT, BAD)
    mode = stat.S_IMODE((cache / "key").stat().st_mode)
    assert mode == 0o600
