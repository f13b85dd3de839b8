"""`rules lock`: pin every git pack reference to a commit and a content hash."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli.common import EXIT_FINDINGS, UsageFailure
from engine.core.errors import EngineError
from engine.format.gitpacks import LOCK_FILE, read_lock, start_locking, stop_locking, write_lock
from engine.format.loader import load_pack_tree
from engine.format.locate import PACK_FILE, find_pack_files


@click.command("lock")
@click.argument("pack_ref", metavar="PACK", required=False)
@click.option("--upgrade", is_flag=True, help="Resolve every reference again (moved branches).")
def lock_command(pack_ref: str | None, upgrade: bool) -> None:
    """Resolve the git packs PACK extends (`git+URL@REV#path`, also those its bases extend)
    to commit SHAs and content hashes in rules.lock beside PACK's pack file. Existing
    entries are kept unless --upgrade. Commit rules.lock: every command then uses the
    locked commits, offline once fetched.

    PACK defaults to the pack in the current folder when there is a pack.yaml here, else
    to ./rules/ (which must then hold one pack).

    \b
    Examples:
      rules lock                              # beside pack.yaml
      rules lock rules/my-pack
      rules lock rules/my-pack --upgrade      # follow moved branches and tags
    """
    if pack_ref is None:
        pack_ref = "." if (Path.cwd() / PACK_FILE).is_file() else "rules"
        if not Path(pack_ref).exists():
            raise UsageFailure(
                f"no {PACK_FILE} here and no rules/ folder: run `rules lock` beside the pack's "
                f"{PACK_FILE}, or name the pack (`rules lock PATH`)"
            )
    try:
        (pack_file, *more) = find_pack_files(pack_ref)
        if more:
            raise UsageFailure(f"{pack_ref}: lock one pack at a time (found {1 + len(more)})")
        lock_file = pack_file.parent / LOCK_FILE
        locking = start_locking(upgrade, {} if upgrade else read_lock(lock_file))
        try:
            tree = load_pack_tree(pack_file)
        finally:
            stop_locking()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    git_rules = ("path-escape", "pack-too-large")  # a fetched pack's content refused
    errors = [
        f
        for f in tree.findings
        if f.level == "error" and (f.rule.startswith("git-") or f.rule in git_rules)
    ]
    for finding in errors:
        click.echo(f"{finding.position}: [error] {finding.message} ({finding.rule})", err=True)
    if errors:
        raise SystemExit(EXIT_FINDINGS)
    write_lock(lock_file, locking.entries)
    for ref, entry in sorted(locking.entries.items()):
        click.echo(f"{ref} -> {entry['commit'][:12]} {entry['hash'][:19]}...")
    click.echo(f"wrote {lock_file} ({len(locking.entries)} git pack(s))")
