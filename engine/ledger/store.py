"""One session's view of a ledger: where it lives (a session folder's SQLite file, or a
session named inside a ledger given by URL), opened for writing or reading, with the reads
and writes the session use cases share. Every query is in the repository modules
(``attempts``, ``rounds``, ``gates``, ``conflicts``, ``choices``, ``kept``, ``prompts``,
``settings``); this module only opens, checks and delegates."""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.ledger import attempts, check, gates, kept, prompts, reviews, rounds, settings
from engine.ledger import conflicts as conflict_rows
from engine.ledger.connection import Ledger, Tx, changed, open_ledger
from engine.ledger.errors import LedgerError
from engine.ledger.url import LedgerUrl, parse_url

LEDGER_FILE = "ledger.sqlite3"
"""A session folder's ledger file."""

WRITE_ADVICE = "recording in a session needs write access to {folder} (`rules log` only reads it)"

T = TypeVar("T")


@dataclass(frozen=True)
class Place:
    """Where a session lives: the ledger's URL, the session's name in it (``''`` for a
    session folder's own ledger) and its folder, when it has one (gate logs, examples)."""

    url: LedgerUrl
    session: str
    folder: Path | None

    @property
    def label(self) -> str:
        """The session as messages name it: its folder, or ``NAME in URL`` (redacted)."""
        if self.folder is not None:
            return str(self.folder)
        return f"session {self.session!r} in {self.url}"

    @property
    def on_server(self) -> bool:
        return self.url.backend != "sqlite"

    def exists(self) -> bool:
        """Whether a SQLite ledger file is there (a server ledger: always true)."""
        return self.on_server or (self.url.path is not None and self.url.path.is_file())

    def open(self, *, read_only: bool = False) -> SessionLedger:
        """The session's ledger, opened (``SessionLedger``)."""
        return SessionLedger(self, read_only=read_only)


def locate(folder: str | Path | None, ledger: str | Path | None = None) -> Place:
    """The place of a session: without ``ledger``, ``folder``'s own ledger
    (``folder/ledger.sqlite3``); a ``ledger`` URL (SQLite or PostgreSQL) holds sessions by
    name, ``folder`` (``--session``) being that name (on SQLite also the folder the session's
    gate log and files go to). A LedgerError when ``ledger`` is no ledger URL."""
    if ledger is None or (isinstance(ledger, str) and not ledger):
        if folder is None:
            raise LedgerError("no session: give a session folder or a ledger URL")
        return Place(parse_url(Path(folder) / LEDGER_FILE), "", Path(folder))
    url = parse_url(ledger)
    if url.backend == "sqlite":  # one file may hold many sessions: by name, as on a server
        _check_folder(url)
        return Place(
            url, "" if folder is None else str(folder), None if folder is None else Path(folder)
        )
    if folder is None or not str(folder).strip():
        raise LedgerError(f"{url}: a server ledger holds sessions by name: give --session NAME")
    return Place(url, str(folder), None)


def _check_folder(url: LedgerUrl) -> None:
    """A ledger file's missing folder is created only inside the working folder: a URL such
    as sqlite:///runs/x.db (an absolute path, three slashes) must not create /runs silently."""
    assert url.path is not None
    folder = url.path.parent
    if folder.is_dir():
        return
    here = Path.cwd().resolve()
    if not folder.resolve().is_relative_to(here):
        raise LedgerError(
            f"{url}: the ledger's folder {folder} does not exist, and rules creates a missing "
            f"folder only inside the working folder ({here}): create it first, or give a "
            "path inside the working folder (sqlite:/// takes an absolute path; a relative "
            "one is written without the scheme: runs/x.db)"
        )


class SessionLedger:
    """A session in an open ledger."""

    def __init__(
        self, place: Place, *, read_only: bool = False, opened: Ledger | None = None
    ) -> None:
        """``opened``: the ledger at ``place.url`` already open and shared (a server's
        PostgreSQL pool, opened once per process); it stays open when this closes."""
        self.place = place
        self.session = place.session
        self.owned = opened is None
        self.ledger: Ledger = (
            opened
            if opened is not None
            else open_ledger(place.url, read_only=read_only, advice=WRITE_ADVICE)
        )
        self.where = str(place.url.path) if place.url.path is not None else str(place.url)
        try:
            self.check(rows=read_only)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ transactions

    def read(self, work: Callable[[Tx], T]) -> T:
        return self.ledger.read(work)

    def write(self, work: Callable[[Tx], T], single: bool = False) -> T:
        """``work`` in a write transaction (``single``: one statement, see
        ``Ledger.write``)."""
        return self.ledger.write(work, single=single)

    def close(self) -> None:
        if self.owned:
            self.ledger.close()

    def __enter__(self) -> SessionLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ checks

    def changed(self, problem: object) -> str:
        return changed(self.where, problem)

    def check(self, rows: bool) -> None:
        """LedgerError when the tables and columns this engine writes are not all there
        or, with ``rows``, a row holds a value of another type than it writes (SQLite: a
        server enforces its column types)."""
        if self.ledger.dialect != "sqlite":
            return
        found = self.read(lambda tx: check.problem(tx, rows))
        if found is not None:
            raise LedgerError(self.changed(found))

    def decoded(self, text: Any, where: str) -> Any:
        """JSON text this engine stored at ``where`` (e.g. "choices row 3"), decoded; a
        LedgerError when it is not JSON or nested too deeply to decode."""
        try:
            return json.loads(text)
        except RecursionError:
            raise LedgerError(self.changed(f"{where}: JSON nested too deeply")) from None
        except (ValueError, TypeError) as exc:
            raise LedgerError(self.changed(f"{where}: {exc}")) from None

    # ------------------------------------------------------------------- reads

    def setting(self, key: str) -> str | None:
        return self.read(lambda tx: settings.get(tx, self.session, key))

    def set_setting(self, key: str, value: str) -> None:
        self.write(lambda tx: settings.put(tx, self.session, key, value))

    def delete_setting(self, key: str) -> None:
        self.write(lambda tx: settings.delete(tx, self.session, key))

    def attempts(self) -> list[dict[str, Any]]:
        """Every attempt with its warnings, oldest first."""
        return list(self.attempt_rows(warnings=True))

    def attempt_rows(self, warnings: bool = False) -> Iterator[dict[str, Any]]:
        """Every attempt, oldest first, read in batches as the caller goes (memory stays
        constant); with ``warnings``, each with the list of its warnings' messages."""
        after = 0
        typed: check.AttemptTypes | None = None
        while True:
            names, rows, found = self.read(
                functools.partial(
                    attempts.batch, session=self.session, after=after, warnings=warnings
                )
            )
            if not rows:
                return
            if typed is None:
                typed = check.AttemptTypes(names, self.changed)
            messages: dict[Any, list[str]] = {}
            for attempt_id, message, warning_id in found:
                if type(attempt_id) is not int or type(message) is not str:
                    raise LedgerError(
                        self.changed(
                            f"warnings row {warning_id}: attempt_id or message is not what "
                            "this engine writes (an integer, text)"
                        )
                    )
                messages.setdefault(attempt_id, []).append(message)
            for row in rows:
                record = typed(row)
                record.pop("session", None)
                if warnings:
                    record["warnings"] = messages.get(record["id"], [])
                yield record
            after = rows[-1][names.index("id")]
            if not isinstance(after, int):
                return  # the type check above names such a row first

    def history(self, block: str, item: str) -> list[dict[str, Any]]:
        return self.read(lambda tx: attempts.item_history(tx, self.session, block, item))

    def latest_attempt_pack(self, block: str) -> str | None:
        return self.read(lambda tx: attempts.latest_pack(tx, self.session, block))

    def latest_conflict_pack(self) -> str | None:
        return self.read(lambda tx: conflict_rows.latest_pack(tx, self.session))

    def gate_results(self) -> list[dict[str, Any]]:
        """Every recorded gate result, oldest first (``checked``/``errors`` as lists)."""
        out = []
        for record in self.read(lambda tx: gates.results(tx, self.session)):
            record["valid"] = bool(record["valid"])
            where = f"gate_results row {record['id']}"
            record["checked"] = self.decoded(record["checked"], where)
            record["errors"] = self.decoded(record["errors"], where)
            record["artifact"] = (
                self.decoded(record["artifact"], where) if record["artifact"] is not None else None
            )
            out.append(record)
        return out

    def failed_gates(self) -> list[dict[str, Any]]:
        """The gate failure log: ``{timestamp, gate_result, reprompt_generated}`` lines."""
        return [
            {
                "timestamp": ts,
                "gate_result": self.decoded(result, f"failed_gates row {row_id}"),
                "reprompt_generated": reprompt,
            }
            for row_id, ts, result, reprompt in self.read(
                lambda tx: gates.failures(tx, self.session)
            )
        ]

    def round_counts(self, block: str, before: int | None = None) -> list[tuple[int, int, int]]:
        return self.read(lambda tx: rounds.counts(tx, self.session, block, before))

    def accepted_rounds(self, block: str) -> frozenset[int]:
        return self.read(lambda tx: rounds.accepted(tx, self.session, block))

    def accepted_outputs(self, block: str) -> dict[int, str]:
        """The kept outputs of ``block`` the session accepted, by round (the latest of a
        round); one that cannot be read is left out."""
        out: dict[int, str] = {}
        for number, compressed in self.read(
            lambda tx: kept.accepted_outputs(tx, self.session, block)
        ):
            try:
                out[number] = kept.text(compressed)
            except (ValueError, zlib.error):
                continue  # damaged: the round has no example to give
        return out

    def reviewed_outputs(self, block: str) -> list[tuple[str, int, str, str]]:
        """(text, review id, who, when) of the outputs people wrote for ``block`` when they
        edited a review of this session, newest first."""
        rows = self.read(lambda tx: reviews.reviewed_outputs(tx, self.session, block))
        return [
            (
                bytes(r["output"]).decode("utf-8", errors="surrogatepass"),
                int(r["id"]),
                str(r["resolved_by"]),
                str(r["resolved_at"]),
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ writes

    def record_gate(
        self, record: gates.GateRecord, failure: Mapping[str, Any] | None = None
    ) -> int:
        """Record one gate result and, with ``failure`` (its seed line), a line of the
        gate failure log, in one transaction."""

        def work(tx: Tx) -> int:
            gate_id = gates.insert(tx, self.session, record)
            if failure is not None:
                gates.insert_failure(
                    tx,
                    self.session,
                    str(failure["timestamp"]),
                    record.result["gate"],
                    failure["gate_result"],
                    bool(failure["reprompt_generated"]),
                )
            return gate_id

        return self.write(work)

    def note_prompt(self, attempt_id: int, prompt: Mapping[str, Any]) -> None:
        self.write(lambda tx: prompts.note_prompt(tx, attempt_id, prompt))
