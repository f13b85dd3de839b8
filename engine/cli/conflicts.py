"""`rules conflicts`: detect, convert, waive, propose, resolve and list a session's
conflicts, and check termination against them (the pack's `conflicts:` section)."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click

from engine.cli.common import OUTPUT_CAP_HELP, UsageFailure, output_cap, parse_vars
from engine.cli.opening import block_inputs, open_pack
from engine.cli.options import (
    F,
    context_option,
    format_option,
    max_output_bytes_option,
    now_option,
    pack_option,
    var_option,
)
from engine.cli.session_options import ledger_option, session_option
from engine.core import clock
from engine.core.errors import EngineError
from engine.core.files import read_file_capped
from engine.core.textio import read_capped, too_large_message
from engine.pack.compiled import Pack
from engine.policy.conflicts.runtime import CompiledConflicts
from engine.policy.conflicts.statuses import FLAGGED, OPEN
from engine.report import render
from engine.session.conflicts import ConflictBook
from engine.session.session_ref import SessionRef

EXIT_BLOCKED = 1


_folder_option = session_option(
    "Session folder (its ledger holds the conflicts; with a PostgreSQL --ledger: the "
    "session's name in it)."
)
_ledger_option = ledger_option()


def _session_option(command: F) -> F:
    """`--session` and `--ledger`."""
    return _folder_option(_ledger_option(command))


_pack_option = pack_option(
    "Pack with the `conflicts:` rules. Default: the pack that recorded them.", required=False
)


def _rules(pack: Pack) -> CompiledConflicts:
    if pack.conflicts is None:
        raise UsageFailure(f"pack {pack.name!r} declares no `conflicts:` section")
    return pack.conflicts


def _book(session_dir: str, ledger_url: str | None, create: bool = False) -> ConflictBook:
    session = SessionRef(session_dir, ledger_url)
    with _usage_errors():
        if not create and not session.exists():
            raise UsageFailure(
                f"{session_dir}: no ledger here (run `rules conflicts detect --session "
                f"{session_dir} ...` first)"
            )
        book = ConflictBook.of(session)
    click.get_current_context().call_on_close(book.close)
    return book


def _pack_of(book: ConflictBook, pack_ref: str | None) -> Pack:
    if pack_ref is not None:
        return open_pack(pack_ref)
    recorded = book.ledger.latest_conflict_pack()
    if recorded is None:
        raise UsageFailure("no conflicts recorded in this session; give --pack")
    return open_pack(recorded)


@dataclass(frozen=True)
class _Opened:
    """A command's conflict book (the session's ledger) and the pack it names (--pack)."""

    book: ConflictBook
    pack_ref: str | None

    def rules(self) -> tuple[Pack, CompiledConflicts]:
        """The pack (--pack, else the one that recorded the conflicts) and its rules."""
        pack = _pack_of(self.book, self.pack_ref)
        return pack, _rules(pack)


def _opened(command: Callable[..., None]) -> Callable[..., None]:
    """`--session`, `--ledger` and `--pack`: ``command`` takes their conflict book and
    pack as one ``_Opened``, its first argument."""

    @functools.wraps(command)
    def opening(
        session_dir: str, ledger_url: str | None, pack_ref: str | None, **rest: Any
    ) -> None:
        command(_Opened(_book(session_dir, ledger_url), pack_ref), **rest)

    return _session_option(_pack_option(opening))


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """An ``EngineError`` within the block is a usage failure (its message, exit status 2)."""
    try:
        yield
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


@click.group("conflicts")
def conflicts_command() -> None:
    """Conflicts between an output and the items it answers (the pack's `conflicts:`).

    \b
    Examples:
      rules conflicts detect --pack my-pack --session runs/1 --context ctx.yaml out.md
      rules conflicts convert --session runs/1 ID-7
      rules conflicts propose --session runs/1 ID-3 --synthesis "..." --trade-off "..."
      rules conflicts resolve --session runs/1 ID-3 --option C --decision "..." \\
          --rationale "..." --action author="..." --now 2026-01-12T15:30:00Z
      rules conflicts list --session runs/1 --open
      rules conflicts termination --session runs/1 COMPLETE
    """


@conflicts_command.command("detect")
@pack_option("Pack with a `conflicts:` section.")
@_session_option
@context_option()
@var_option()
@format_option("conflicts")
@max_output_bytes_option("A bigger output is not read (exit 2). " + OUTPUT_CAP_HELP)
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True))
def detect_command(
    pack_ref: str,
    session_dir: str,
    ledger_url: str | None,
    context_file: str | None,
    var_pairs: tuple[str, ...],
    output_format: str,
    max_output_bytes: int | None,
    source: str,
) -> None:
    """Evaluate an output of the pack's conflict block; record its conflicts and flags.

    Prints the open conflicts in priority order (the pack's presentation) and the flags.
    Exit 1 when the output fails its contract (repair it first).
    """
    pack = open_pack(pack_ref)
    rules = _rules(pack)
    block = rules.spec.block
    cap = output_cap(max_output_bytes, pack.model.limits.max_output_bytes)
    try:
        if source == "-":
            raw, more = read_capped(sys.stdin.buffer, cap)
        else:  # a FIFO, socket or folder is refused, never waited on
            raw, more = read_file_capped(source, cap)
    except OSError as exc:
        raise UsageFailure(f"{source}: cannot read: {exc.strerror or exc}") from None
    if more:
        raise UsageFailure(f"{source}: {too_large_message(cap)}")
    with _usage_errors():
        variables, context = block_inputs(pack, block, context_file, var_pairs)
        verdict = pack.evaluate(block, raw, vars=variables, context=context, path=source)
        if verdict.status == "fail":
            click.echo(
                f"error: the output fails its contract ({verdict.failure_type}: "
                f"{verdict.error}); repair it first",
                err=True,
            )
            sys.exit(EXIT_BLOCKED)
        round_key = pack.model.session.round
        round_value = context.get(round_key) if round_key else None
        found = rules.from_verdict(
            verdict.data, context, round_value if isinstance(round_value, int) else None
        )
        book = _book(session_dir, ledger_url, create=True)
        refs = book.record(rules, found, pack_ref, block)
        records = [book.get(ref) for ref in refs]
    ordered = list(rules.ordered(records))
    click.echo(render("conflicts", output_format, pack, rules, ordered), nl=False)


@conflicts_command.command("convert")
@_opened
@click.argument("ref")
def convert_command(opened: _Opened, ref: str) -> None:
    """Make an implicit flag (an unaddressed item) a conflict with options (a user action)."""
    pack, rules = opened.rules()
    with _usage_errors():
        record = opened.book.convert(rules, ref)
    click.echo(render("conflicts", "text", pack, rules, [record]), nl=False)


@conflicts_command.command("waive")
@_session_option
@click.argument("ref")
def waive_command(session_dir: str, ledger_url: str | None, ref: str) -> None:
    """Drop a conflict or flag: it blocks nothing and is not resolved."""
    with _usage_errors():
        record = _book(session_dir, ledger_url).waive(ref)
    click.echo(f"{record['ref']}: waived")


@conflicts_command.command("propose")
@_opened
@click.argument("ref")
@click.option("--synthesis", required=True, help="The mediator's middle-ground option.")
@click.option("--trade-off", "trade_off", required=True, help="What each side gives up.")
@click.option("--addresses-both", is_flag=True, help="It answers both positions.")
def propose_command(
    opened: _Opened, ref: str, synthesis: str, trade_off: str, addresses_both: bool
) -> None:
    """Add a mediator's synthesis option to an open conflict (replaces a rule's)."""
    pack, rules = opened.rules()
    with _usage_errors():
        record = opened.book.propose(rules, ref, synthesis, trade_off, addresses_both)
    click.echo(render("conflicts", "text", pack, rules, [record]), nl=False)


@conflicts_command.command("resolve")
@_opened
@click.argument("ref")
@click.option("--option", "option", required=True, help="The chosen option's label.")
@click.option("--decision", required=True, help="What was decided.")
@click.option("--rationale", required=True, help="Why.")
@click.option("--constraints", default="", help="Conditions on the implementation.")
@click.option(
    "--action",
    "action_pairs",
    multiple=True,
    metavar="NAME=TEXT",
    help="What NAME must do now (repeatable); the names are the pack's `conflicts.actions`.",
)
@click.option("--by", "decided_by", default="User", show_default=True)
@now_option("Decision time (default: now).")
def resolve_command(
    opened: _Opened,
    ref: str,
    option: str,
    decision: str,
    rationale: str,
    constraints: str,
    action_pairs: tuple[str, ...],
    decided_by: str,
    now: str | None,
) -> None:
    """Record the user's decision on an open conflict (an option that was offered)."""
    actions = parse_vars(action_pairs, "--action")
    if actions:
        known = opened.rules()[1].spec.actions
        unknown = sorted(set(actions) - set(known))
        if unknown:
            raise UsageFailure(
                f"--action {', '.join(unknown)}: not an action of the pack "
                f"(conflicts.actions: {', '.join(known) or 'none'})"
            )
    with _usage_errors():
        stamp = clock.iso(clock.now(now))
        record = opened.book.resolve(
            ref, option, decision, rationale, constraints, actions, decided_by, stamp
        )
    click.echo(f"{record['ref']}: resolved with option {option}")


@conflicts_command.command("list")
@_opened
@click.option("--open", "open_only", is_flag=True, help="Only conflicts and flags not decided.")
@format_option("conflict_list")
def list_command(opened: _Opened, open_only: bool, output_format: str) -> None:
    """The session's conflicts in priority order."""
    rules = opened.rules()[1]
    records = [r for r in opened.book.all(rules) if not open_only or r["status"] in (OPEN, FLAGGED)]
    click.echo(render("conflict_list", output_format, records), nl=False)


@conflicts_command.command("termination")
@_opened
@click.argument("state")
def termination_command(opened: _Opened, state: str) -> None:
    """Whether the unresolved conflicts allow a termination STATE.

    Exit 0 allowed, 1 blocked (reasons listed), the pack's warn exit (4) allowed with a
    warning that needs acknowledgement.
    """
    rules = opened.rules()[1]
    table = rules.spec.termination
    if table is not None and state not in table.states:
        raise UsageFailure(
            f"unknown termination state {state!r} (states: {', '.join(table.states)})"
        )
    unresolved = [r for r in opened.book.all(rules) if r["status"] == OPEN]
    outcome = rules.termination(state, unresolved)
    for reason in outcome.reasons:
        click.echo(reason)
    click.echo(f"{state}: {outcome.outcome}")
    if outcome.outcome == "blocked":
        sys.exit(EXIT_BLOCKED)
    if outcome.outcome == "warn" and table is not None:
        sys.exit(table.warn_exit)
