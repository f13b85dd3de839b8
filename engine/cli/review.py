"""`rules review`: the review queue of a session, from the command line (list, show,
claim, release, approve, edit, reject)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import open_pack
from engine.cli.options import F, pack_option
from engine.cli.session_options import ledger_option, session_option
from engine.cli.types import BoundedInt
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES, read_capped, too_large_message
from engine.report import reviews as shown
from engine.session.review import (
    DEFAULT_CLAIM_SECONDS,
    STATES,
    OutputRefused,
    Resolution,
    ReviewRefused,
    claim_review,
    list_reviews,
    release_review,
    resolve_review,
    show_review,
)
from engine.session.session_ref import SessionRef

EXIT_REFUSED = 1
"""A claim or resolution refused: taken by another, resolved already, an edit that fails
the contract."""

BY_ENV = "RULES_REVIEW_BY"

_folder_option = session_option(
    "Session folder (its ledger holds the reviews; with a PostgreSQL --ledger: the "
    "session's name in it)."
)
_ledger_option = ledger_option()
_format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
)
_by_option = click.option(
    "--by",
    envvar=BY_ENV,
    default=lambda: os.environ.get("USER") or None,
    metavar="NAME",
    help=f"Who resolves or claims (recorded with the decision). Default: ${BY_ENV}, else $USER.",
)


_hook_pack_option = pack_option(
    "The review's pack, to call its `reviews.webhook` (if it declares one).", required=False
)


def _common(command: F) -> F:
    return _folder_option(_ledger_option(_format_option(command)))


@click.group("review")
def review_group() -> None:
    """Resolve the decisions a person reviews (NEEDS_HUMAN, or the pack's `reviews.actions`).

    Exit status: 0 done, 1 refused (claimed by another, resolved already, an edited output
    that fails the block's contract), 2 usage (no such review or session).

    `approve ID` lets the last output stand, `edit ID --pack P --output FILE` replaces it
    (it must pass the block's contract), `reject ID --reason TEXT` ends the item with the
    pack's `reviews.on_reject` action.

    \b
    Examples:
      rules run --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 \\
          -- cat out.txt                     # NEEDS_HUMAN: opens review 1
      rules review list                      # the open reviews of .rules-session/
      rules review show 1
      rules review claim 1 --by alice
      sed 's/"YES"/YES/; s/[“”]/"/g' out.txt \\
          | rules review edit 1 --by alice --pack sentinel --output -
      rules review list --state resolved
    """


@contextmanager
def _refusals() -> Iterator[None]:
    """A refusal as its exit status: 1 when the review is not free to change, 2 when the
    session or review does not exist or the ledger cannot be used."""
    try:
        yield
    except ReviewRefused as exc:
        if exc.kind == "not-found":
            raise UsageFailure(str(exc)) from None
        click.echo(f"error: {exc}", err=True)
        if isinstance(exc, OutputRefused):
            for failure in exc.verdict.failures[1:]:  # the first is in the message
                click.echo(f"  {failure.type}: {failure.message}", err=True)
        raise SystemExit(EXIT_REFUSED) from None
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def _session(session_dir: str, ledger_url: str | None) -> SessionRef:
    ref = SessionRef(session_dir, ledger_url)
    with _refusals():
        if not ref.exists():
            raise UsageFailure(f"{session_dir}: no ledger here, so no reviews")
    return ref


def _print(output_format: str, document: Any, text: Callable[[Any], str]) -> None:
    if output_format == "json":
        click.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(text(document), nl=False)


def _who(by: str | None) -> str:
    if not by:
        raise UsageFailure(f"say who you are: --by NAME (or set ${BY_ENV})")
    return by


@review_group.command("list")
@_common
@click.option(
    "--state",
    "states",
    type=click.Choice(STATES),
    multiple=True,
    help="The states to list (repeatable). Default: open and claimed.",
)
def list_command(
    session_dir: str, ledger_url: str | None, output_format: str, states: tuple[str, ...]
) -> None:
    """The session's reviews, oldest first (overdue ones take their fallback first)."""
    ref = _session(session_dir, ledger_url)
    with _refusals():
        found = list_reviews(ref, states or ("open", "claimed"))
    _print(output_format, {"reviews": found}, lambda d: shown.queue_text(d["reviews"]))


@review_group.command("show")
@_common
@click.argument("review", type=BoundedInt(min=1))
def show_command(session_dir: str, ledger_url: str | None, output_format: str, review: int) -> None:
    """One review: its item, its attempts with their outputs, failures and prompts."""
    ref = _session(session_dir, ledger_url)
    with _refusals():
        found = show_review(ref, review)
    _print(output_format, found, shown.review_text)


@review_group.command("claim")
@_common
@_by_option
@click.option(
    "--for",
    "seconds",
    type=BoundedInt(min=1, max=86_400),
    default=DEFAULT_CLAIM_SECONDS,
    show_default=True,
    help="Seconds the claim holds; after that anyone may claim the review.",
)
@click.argument("review", type=BoundedInt(min=1))
def claim_command(
    session_dir: str,
    ledger_url: str | None,
    output_format: str,
    by: str | None,
    seconds: int,
    review: int,
) -> None:
    """Claim a review: nobody else may resolve it while the claim holds (of many claiming
    at once, exactly one gets it; the others exit 1)."""
    ref = _session(session_dir, ledger_url)
    with _refusals():
        found = claim_review(ref, review, _who(by), seconds)
    _print(output_format, found, shown.changed_text)


@review_group.command("release")
@_common
@_by_option
@click.argument("review", type=BoundedInt(min=1))
def release_command(
    session_dir: str, ledger_url: str | None, output_format: str, by: str | None, review: int
) -> None:
    """Give a claim back: the review is open to others again."""
    ref = _session(session_dir, ledger_url)
    with _refusals():
        found = release_review(ref, review, _who(by))
    _print(output_format, found, shown.changed_text)


def _resolve(
    session_dir: str,
    ledger_url: str | None,
    output_format: str,
    review: int,
    resolution: Resolution,
    pack_ref: str | None = None,
) -> None:
    ref = _session(session_dir, ledger_url)
    pack = open_pack(pack_ref, cached=True) if pack_ref else None
    with _refusals():
        found = resolve_review(pack, ref, review, resolution)
    for warning in found.get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)
    _print(output_format, found, shown.changed_text)


def _resolution_command(
    name: str,
    kind: str,
    reason_option: Callable[[Callable[..., None]], Callable[..., None]],
    help: str,
) -> click.Command:
    """``rules review NAME``: resolve the review as ``kind`` with no new output; the pack,
    when given, is only for its webhook."""

    @review_group.command(name, help=help)
    @_common
    @_by_option
    @_hook_pack_option
    @reason_option
    @click.argument("review", type=BoundedInt(min=1))
    def resolve(
        session_dir: str,
        ledger_url: str | None,
        output_format: str,
        by: str | None,
        pack_ref: str | None,
        reason: str | None,
        review: int,
    ) -> None:
        resolution = Resolution(kind, _who(by), None, reason)
        _resolve(session_dir, ledger_url, output_format, review, resolution, pack_ref)

    return resolve


approve_command = _resolution_command(
    "approve",
    "approved",
    click.option("--reason", help="Why, recorded with the decision."),
    "Approve: the item's last output stands (the item ends with PROCEED).",
)


@review_group.command("edit")
@_common
@_by_option
@pack_option("The review's pack: the edited output must pass its block's contract.")
@click.option(
    "--output",
    "output_file",
    required=True,
    metavar="FILE",
    help="The corrected output (UTF-8; - reads stdin).",
)
@click.option("--reason", help="Why, recorded with the decision.")
@click.argument("review", type=BoundedInt(min=1))
def edit_command(
    session_dir: str,
    ledger_url: str | None,
    output_format: str,
    by: str | None,
    pack_ref: str,
    output_file: str,
    reason: str | None,
    review: int,
) -> None:
    """Replace the output: it must pass the block's contract (else exit 1, nothing
    changed); it becomes the item's accepted output and an example of the reviewed tier."""
    text = _read_output(output_file)
    _resolve(
        session_dir,
        ledger_url,
        output_format,
        review,
        Resolution("edited", _who(by), text, reason),
        pack_ref,
    )


reject_command = _resolution_command(
    "reject",
    "rejected",
    click.option("--reason", required=True, help="Why the item is rejected (recorded)."),
    "Reject: the item ends with the pack's `reviews.on_reject` action.",
)


def _read_output(name: str) -> str:
    """The edited output's text: UTF-8, at most MAX_OUTPUT_BYTES."""
    try:
        if name == "-":
            data, more = read_capped(sys.stdin.buffer, MAX_OUTPUT_BYTES)
        else:
            with Path(name).open("rb") as handle:
                data, more = read_capped(handle, MAX_OUTPUT_BYTES)
    except OSError as exc:
        raise UsageFailure(f"{name}: cannot read the output: {exc.strerror or exc}") from None
    if more:
        raise UsageFailure(f"{name}: {too_large_message(MAX_OUTPUT_BYTES)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageFailure(
            f"{name}: the output is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
