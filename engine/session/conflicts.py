"""The conflicts of a session, in its ledger: recorded, converted, waived, given a
mediator's option, resolved; and the resolutions, for the decisions record and the next
prompt. What a conflict is, its options and its order come from engine.policy.conflicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.errors import EngineError
from engine.ledger import conflicts as rows
from engine.ledger.attempts import now
from engine.ledger.connection import Tx
from engine.ledger.store import SessionLedger
from engine.policy.conflicts.runtime import IMPLICIT, CompiledConflicts
from engine.policy.conflicts.statuses import FLAGGED, OPEN, RESOLVED, WAIVED
from engine.session.session_ref import SessionRef


class ConflictError(EngineError):
    """A conflict command that cannot be done (unknown id, wrong state, option not offered)."""


def _row(ledger: SessionLedger, row: Any) -> dict[str, Any]:
    record = dict(row)
    where = f"conflicts row {record['id']}"
    record["fields"] = ledger.decoded(record["fields"], where)
    record["options"] = ledger.decoded(record["options"], where)
    record["proposal"] = ledger.decoded(record["proposal"], where) if record["proposal"] else None
    record["converted"] = bool(record["converted"])
    return record


class ConflictBook:
    """The conflicts table of one ledger."""

    def __init__(self, ledger: SessionLedger) -> None:
        self.ledger = ledger
        self.session = ledger.session

    @classmethod
    def of(cls, session: SessionRef) -> ConflictBook:
        """The conflicts of ``session``, its ledger opened for writing (created when it has
        none yet; the caller closes it: ``book.close()``)."""
        return cls(SessionLedger(session.place()))

    def close(self) -> None:
        self.ledger.close()

    # ------------------------------------------------------------------ reads

    def all(self, rules: CompiledConflicts | None = None) -> list[dict[str, Any]]:
        """Every conflict, in priority order when ``rules`` are given, else as recorded."""
        found = [
            _row(self.ledger, r) for r in self.ledger.read(lambda tx: rows.all_of(tx, self.session))
        ]
        for record in found:
            record["resolution"] = self._resolution(record["id"])
        return list(rules.ordered(found)) if rules else found  # type: ignore[arg-type]

    def get(self, ref: str) -> dict[str, Any]:
        row = self.ledger.read(lambda tx: rows.get(tx, self.session, ref))
        if row is None:
            known = self.ledger.read(lambda tx: rows.refs(tx, self.session))
            raise ConflictError(
                f"no conflict {ref!r} in this session"
                + (f" (conflicts: {', '.join(known)})" if known else " (none recorded yet)")
            )
        record = _row(self.ledger, row)
        record["resolution"] = self._resolution(record["id"])
        return record

    def _resolution(self, conflict_id: int) -> dict[str, Any] | None:
        record = self.ledger.read(lambda tx: rows.resolution(tx, conflict_id))
        if record is None:
            return None
        record["actions"] = self.ledger.decoded(
            record["actions"], f"resolutions row {record['id']}"
        )
        return record

    def resolutions(
        self, rules: CompiledConflicts, round_number: int | None = None
    ) -> list[dict[str, Any]]:
        """The resolved conflicts (of ``round_number``, or all), in priority order, each
        with its resolution."""
        return [
            c
            for c in self.all(rules)
            if c["status"] == RESOLVED and (round_number is None or c["round"] == round_number)
        ]

    # ------------------------------------------------------------------ writes

    def record(
        self,
        rules: CompiledConflicts,
        conflicts: Sequence[Mapping[str, Any]],
        pack: str,
        block: str,
    ) -> list[str]:
        """Record the conflicts a verdict holds: explicit ones open with their options,
        implicit ones as flags. One conflict per id: a conflict already decided is kept as
        it is; an open one or a flag is updated. The ids recorded, in order."""
        stamp = now()

        def work(tx: Tx) -> list[str]:
            refs = []
            for conflict in conflicts:
                implicit = conflict["type"] == IMPLICIT
                options = [] if implicit else rules.options_for(conflict)
                status = rows.status(tx, self.session, conflict["ref"])
                if status in (RESOLVED, WAIVED):
                    continue
                if status == OPEN and implicit:
                    continue  # an open conflict is not turned back into a flag
                values = (
                    pack,
                    block,
                    conflict["type"],
                    FLAGGED if implicit else OPEN,
                    conflict["severity"],
                    conflict["round"],
                    conflict["number"],
                    json.dumps(conflict["fields"], ensure_ascii=False),
                    json.dumps(options, ensure_ascii=False),
                    stamp,
                )
                if status is None:
                    rows.insert(tx, self.session, conflict["ref"], values, stamp)
                else:
                    rows.replace(tx, self.session, conflict["ref"], values)
                refs.append(conflict["ref"])
            return refs

        return self.ledger.write(work)

    def convert(self, rules: CompiledConflicts, ref: str) -> dict[str, Any]:
        """A user turns an implicit flag into a conflict with options."""
        record = self.get(ref)
        if record["status"] != FLAGGED:
            raise ConflictError(f"{ref} is {record['status']}, not a flag: only flags convert")
        options = rules.options_for(record)
        self._update(ref, status=OPEN, converted=1, options=json.dumps(options))
        return self.get(ref)

    def waive(self, ref: str) -> dict[str, Any]:
        record = self.get(ref)
        if record["status"] in (RESOLVED, WAIVED):
            raise ConflictError(f"{ref} is already {record['status']}")
        self._update(ref, status=WAIVED)
        return self.get(ref)

    def propose(
        self,
        rules: CompiledConflicts,
        ref: str,
        synthesis: str,
        trade_off: str,
        addresses_both: bool,
    ) -> dict[str, Any]:
        """A mediator's synthesis option where no rule gave one."""
        record = self._open(ref)
        proposal = {
            "proposal": synthesis,
            "trade_off": trade_off,
            "addresses_both": addresses_both,
            "source": "mediator",
        }
        options = rules.options_for(record, proposal)
        if not any(
            o["label"] in {p.label for p in rules.spec.options if p.synthesis} for o in options
        ):
            raise ConflictError(
                f"{ref} has no room for a synthesis option (at most "
                f"{rules.spec.max_options} options)"
            )
        self._update(
            ref, options=json.dumps(options, ensure_ascii=False), proposal=json.dumps(proposal)
        )
        return self.get(ref)

    def resolve(
        self,
        ref: str,
        option: str,
        decision: str,
        rationale: str,
        constraints: str = "",
        actions: Mapping[str, str] | None = None,
        decided_by: str = "User",
        decided_at: str | None = None,
    ) -> dict[str, Any]:
        record = self._open(ref)
        offered = [o["label"] for o in record["options"]]
        if option not in offered:
            raise ConflictError(
                f"option {option} was not offered for {ref} (offered: {', '.join(offered)})"
            )
        values = (
            option,
            decision,
            rationale,
            constraints,
            json.dumps(dict(actions or {}), ensure_ascii=False),
            decided_by,
            decided_at or now(),
        )
        self.ledger.write(
            lambda tx: rows.resolve(tx, self.session, record["id"], ref, values, RESOLVED, now())
        )
        return self.get(ref)

    def _open(self, ref: str) -> dict[str, Any]:
        record = self.get(ref)
        if record["status"] == FLAGGED:
            raise ConflictError(f"{ref} is a flag: convert it first (`rules conflicts convert`)")
        if record["status"] != OPEN:
            raise ConflictError(f"{ref} is already {record['status']}")
        return record

    def _update(self, ref: str, **values: Any) -> None:
        self.ledger.write(lambda tx: rows.update(tx, self.session, ref, now(), **values))


def decision_items(book: ConflictBook, rules: CompiledConflicts) -> list[dict[str, Any]]:
    """The resolved conflicts as context items: the conflict's fields, then id, severity,
    round, type, and the resolution (option, decision, rationale, constraints, actions,
    decided_by, decided_at), in priority order."""
    items = []
    for record in book.resolutions(rules):
        resolution = record["resolution"] or {}
        items.append(
            {
                **record["fields"],
                "id": record["ref"],
                "severity": record["severity"],
                "round": record["round"],
                "type": record["type"],
                **{k: v for k, v in resolution.items() if k not in ("id", "conflict_id")},
            }
        )
    return items
