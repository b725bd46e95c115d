"""The trace database's schema and its migrations (docs/trace-format.md).

One SQLite file per recording.  Recorded tables (``exchanges``, ``frames``,
``capture_errors``, ``meta``) are the source of truth; derived tables
(``facts``, ``frame_results``, ``runs``, ``sessions``, ``history_reads``,
``findings``) are recomputed from them by ``chatkit-trace redecode`` and
``check``.  Migrations are registered with sqlite-utils' ``Migrations`` and
run in order; a file whose schema is newer than this version refuses to
open with a message that says to upgrade.

``derive_queue`` (schema 2) is the recorder's bookkeeping between its two
processes (docs/recording.md): the writer names each session whose recorded
rows changed, with how many frames it added, in the transaction that
stores them; the deriver takes a session off when its derived rows are
written (in that transaction).  What is left in it is derivation that has
not caught up yet: the next recording into the file, or ``redecode``,
derives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

if TYPE_CHECKING:
    from sqlite_utils.db import Table

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "RECORDED_TABLES", "DERIVED_TABLES", "SESSION_TABLES", "QUEUE_TABLE"]

SCHEMA_VERSION = 2
RECORDED_TABLES = ("meta", "exchanges", "frames", "capture_errors")
DERIVED_TABLES = ("facts", "frame_results", "runs", "sessions", "history_reads", "findings")
#: The derived tables whose rows name their session (re-derived a session at a time).
SESSION_TABLES = ("facts", "frame_results", "runs", "sessions", "history_reads")
#: The recorder's derivation backlog (schema 2): a session per row.
QUEUE_TABLE = "derive_queue"

MIGRATIONS = Migrations("chatkit_trace")


def _table(db: Database, name: str) -> Table:
    """``db[name]`` for a table (never a view), typed as one."""
    return cast("Table", db[name])


@MIGRATIONS(name="0001_initial")
def _initial(db: Database) -> None:
    # long-function: the initial schema: one CREATE statement per table
    _table(db, "meta").create({"key": str, "value": str}, pk="key")
    _table(db, "exchanges").create(
        {
            "id": int,
            "flow_id": str,
            "started_at": float,
            "ended_at": float,
            "method": str,
            "url": str,
            "path": str,
            "request_headers": str,  # JSON list of [name, value]
            "request_body": bytes,
            "status": int,
            "response_headers": str,
            "response_body": bytes,
            "transport": str,
            "end": str,
            "error": str,
            "capability": str,
            "session_id": str,
            "run_id": str,
            "run_id_source": str,
            "cursor": str,
            "target_run_id": str,
            "notes": str,  # JSON object
        },
        pk="id",
    )
    _table(db, "exchanges").create_index(["session_id", "run_id"])
    _table(db, "exchanges").create_index(["started_at"])
    _table(db, "frames").create(
        {
            "exchange_id": int,
            "idx": int,
            "transport": str,
            "direction": str,
            "at": float,
            "event": str,
            "event_id": str,
            "start": int,
            "end": int,
            "text": str,
            "raw": bytes,
            "error": str,  # JSON DecodeError
            "data_offsets": str,  # JSON list
        },
        pk=("exchange_id", "idx"),
    )
    _table(db, "frames").create_index(["at"])
    _table(db, "capture_errors").create(
        {"id": int, "at": float, "flow_id": str, "exchange_id": int, "where": str, "message": str}, pk="id"
    )
    # Derived tables --------------------------------------------------------------
    _table(db, "facts").create(
        {
            "seq": int,
            "exchange_id": int,
            "frame_idx": int,
            "session_id": str,
            "run_id": str,
            "kind": str,
            "event_id": str,
            "accepted": int,
            "reason": str,
            "detail": str,
            "snapshot_version": int,
            "fact": str,  # JSON (Fact.to_json)
        },
        pk="seq",
    )
    _table(db, "facts").create_index(["exchange_id", "frame_idx"])
    _table(db, "facts").create_index(["session_id", "run_id"])
    _table(db, "frame_results").create(
        {
            "exchange_id": int,
            "idx": int,
            "state": str,
            "session_id": str,
            "run_id": str,
            "error": str,
            "unknown": int,
            "event_type": str,
            "end_marker": int,
            "shadow": str,  # JSON list of facts never admitted (after the reader stopped)
        },
        pk=("exchange_id", "idx"),
    )
    _table(db, "frame_results").create_index(["session_id", "run_id"])
    _table(db, "runs").create(
        {
            "session_id": str,
            "run_id": str,
            "status": str,
            "origin": str,
            "phase": str,
            "connection": str,
            "error": str,
            "interrupt_reason": str,
            "created_at": float,
            "settled_at": float,
            "settled_by": str,
            "exchanges": str,
            "frames": int,
            "facts": int,
            "rejected": int,
            "first_at": float,
            "last_at": float,
            "settled_snapshot": str,  # JSON snapshot at the moment it settled
        },
        pk=("session_id", "run_id"),
    )
    _table(db, "sessions").create(
        {"session_id": str, "status": str, "runs": int, "messages": int, "snapshot": str}, pk="session_id"
    )
    _table(db, "history_reads").create(
        {
            "exchange_id": int,
            "session_id": str,
            "at": float,
            "ok": int,
            "error": str,
            "rule": str,
            "result": str,  # JSON HistoryResult as decoded
            "before": str,  # JSON snapshot before the refresh
            "after": str,
        },
        pk="exchange_id",
    )
    _table(db, "findings").create(
        {
            "id": int,
            "code": str,
            "severity": str,
            "rule": str,
            "session_id": str,
            "run_id": str,
            "frames": str,  # JSON list of "exchange:frame"
            "fingerprint": str,
            "message": str,
            "detail": str,  # JSON
        },
        pk="id",
    )
    _table(db, "findings").create_index(["session_id", "run_id"])
    _table(db, "findings").create_index(["code"])


@MIGRATIONS(name="0002_derive_queue")
def _derive_queue(db: Database) -> None:
    # ``key``: "s:" + the session id, "-" for exchanges without one (a primary
    # key cannot hold NULL once).  ``seq`` grows with every change the writer
    # stores; ``since``: when the oldest change not derived yet was stored;
    # ``frames``: frames stored since the session was last derived.
    _table(db, QUEUE_TABLE).create({"key": str, "session_id": str, "seq": int, "since": float, "frames": int}, pk="key")
