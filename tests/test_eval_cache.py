"""The compiled-pack cache of the commands that load a whole pack (`rules eval`, `render`,
`gate`): the same output from the cache as from a load, and an entry is never used once a
file of the pack has changed or the entry is damaged."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO, SCRIPTS

BAD = REPO / "examples" / "sentinel" / "verdict_bad.txt"


def _rules(cache: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [str(SCRIPTS / "rules"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **(env or {})},
    )
    return done.returncode, done.stdout + done.stderr


def _verdict(command: str, pack: str) -> tuple[str, ...]:
    return (command, "--pack", pack, "--block", "VERDICT", "--nonce", "4F2C9A", "--var",
            "criterion=AC1", str(BAD))  # fmt: skip


def test_eval_render_and_gate_from_the_cache_print_what_a_load_prints(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    todo = str(REPO / "examples" / "quality-gate" / "todo.json")
    gate = ("gate", "--pack", "quality-gate", "--stage", "PLAN", todo, "--now", "2026-01-05")
    for args in (_verdict("eval", "sentinel"), _verdict("render", "sentinel"), gate):
        cold = _rules(cache, *args)
        warm = _rules(cache, *args)
        off = _rules(cache, *args, env={"RULES_NO_CACHE": "1"})
        assert cold == warm == off, args
        assert cold[0] == {"eval": 3, "render": 0, "gate": 3}[args[0]], cold
    assert len(list(cache.glob("pack-*.json"))) == 2  # sentinel, quality-gate


def test_an_entry_is_not_used_once_the_pack_changed_or_is_damaged(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    pack = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    status, shown = _rules(cache, *_verdict("render", str(pack)))
    assert status == 0 and "format-repair agent" in shown
    template = pack / "templates" / "format_repair.md.j2"
    template.write_text("CHANGED {{ parser_error }}\n", encoding="utf-8")
    assert _rules(cache, *_verdict("render", str(pack))) == (
        0,
        "CHANGED line 1: ANSWER must be unquoted\n",
    )
    pack_file = pack / "pack.yaml"
    pack_file.write_text(pack_file.read_text(encoding="utf-8") + "\nbroken: [\n", encoding="utf-8")
    status, shown = _rules(cache, *_verdict("eval", str(pack)))
    assert status == 2 and "error:" in shown  # the pack's error, not the remembered pack
    [entry] = cache.glob("pack-*.json")
    entry.write_text("{damaged", encoding="utf-8")
    assert _rules(cache, *_verdict("eval", "sentinel"))[0] == 3  # REPAIR
