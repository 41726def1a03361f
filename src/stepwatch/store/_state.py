"""The collector's current-state tables (alerts, silences, commands, actions) and their reads.

The tables change in the transaction that writes the records that change them (``fold``), so
a read never disagrees with the records; ``rebuild`` makes them again from every record (a
store written before the tables existed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from typing import Any

import duckdb

from ..model import Event
from . import _alert_state, _audit_log, _book_state, _projection
from ._alert_state import AlertQuery, AlertRow
from ._audit_log import AuditQuery
from ._book_state import ActionQuery
from ._paging import Page, every

__all__ = ["CurrentState"]

FAMILIES = (
    _alert_state.FAMILY,
    _book_state.SILENCES,
    _book_state.COMMANDS,
    _book_state.ACTIONS,
)
#: The tables' CREATE statements, for the store's schema.
DDL = [statement for family in FAMILIES for statement in family.ddl]

Txn = Callable[[], contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]]


def fold(cur: duckdb.DuckDBPyConnection, src: str, kinds: Collection[str]) -> None:
    """Fold the new records of relation ``src`` (holding records of ``kinds``) into the tables."""
    _projection.fold(cur, FAMILIES, src, kinds)


def rebuild(cur: duckdb.DuckDBPyConnection) -> None:
    """Make every state table again from all stored records."""
    _projection.rebuild(cur, FAMILIES)


class CurrentState:
    """Reads of the state tables, each in a read transaction of its own.

    Args:
        txn: the store's transaction (a fresh cursor, committed on exit).
        head: the seq of the newest record.
    """

    def __init__(self, txn: Txn, head: Callable[[], int]) -> None:
        self._txn, self._head = txn, head

    def alert(self, alert_id: str) -> AlertRow | None:
        """One alert as it stands, by id; None for an id never stored."""
        with self._txn() as cur:
            return _alert_state.get(cur, alert_id)

    def alerts(
        self, query: AlertQuery | None = None, cursor: str | None = None, limit: int = 1000
    ) -> Page[AlertRow]:
        """A page of alerts, the latest changed first; ValueError for a bad cursor."""
        with self._txn() as cur:
            return _alert_state.page(cur, query or AlertQuery(), cursor, limit, self._head())

    def open_alerts(self, run: str | None = None) -> list[AlertRow]:
        """Every open alert (of one run), oldest transition first: what a restart picks up."""
        query = AlertQuery(run=run)
        return list(every(lambda cursor: self.alerts(query, cursor, 10_000)))[::-1]

    def open_alert_counts(self, runs: Sequence[str]) -> dict[str, int]:
        """How many alerts are open, per run among ``runs``."""
        with self._txn() as cur:
            return _alert_state.open_counts(cur, runs)

    def silences(self, now: float, include_ended: bool = False) -> list[dict[str, Any]]:
        """Silences not ended at ``now`` (or every one), in their records' shape plus
        ``expired_at``, oldest start first."""
        with self._txn() as cur:
            return _book_state.silences(cur, now, include_ended)

    def commands(self, run: str | None = None, live: bool = False) -> list[dict[str, Any]]:
        """Commands with their answers (``Command.as_json``'s shape), by run then number; with
        ``live`` only those of running runs and those still pending."""
        with self._txn() as cur:
            return _book_state.commands(cur, run, live)

    def actions(
        self, query: ActionQuery | None = None, cursor: str | None = None, limit: int = 1000
    ) -> Page[dict[str, Any]]:
        """A page of actions as they stand (``Action.as_json``'s shape), the latest changed
        first."""
        with self._txn() as cur:
            return _book_state.actions(cur, query or ActionQuery(), cursor, limit, self._head())

    def action(self, action_id: str) -> dict[str, Any] | None:
        """One action as it stands, by id; None for an id never stored."""
        with self._txn() as cur:
            return _book_state.action(cur, action_id)

    def audit(
        self, query: AuditQuery | None = None, cursor: str | None = None, limit: int = 1000
    ) -> Page[Event]:
        """A page of audit records, newest first; ValueError for a bad cursor."""
        with self._txn() as cur:
            return _audit_log.audit(cur, query or AuditQuery(), cursor, limit, self._head())
