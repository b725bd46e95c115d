"""``TraceStore``: one recording in one SQLite file (sqlite-utils underneath).

One writer (the recorder's writer thread, ``import`` or ``redecode``), any
number of readers (``check``, ``view``, ``export``).  The file runs in WAL
mode while it is written, so a viewer can follow a recording while the addon
writes it; a writer that closes it switches it back to rollback-journal mode
(:meth:`TraceStore.settle`), so a finished trace is one file and read-only
readers leave no ``-wal``/``-shm`` files next to it.

Errors for people: a path that is not SQLite, a SQLite file that is not a
trace, a trace from a newer chatkit-trace: each is a
:class:`TraceFormatError` with one sentence saying what and where.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from sqlite_utils import Database

from ..errors import TraceFormatError
from ..masking import derived_scrubber, mask_derived_json
from ..trace import Exchange
from ..wire import DecodeError, Frame
from ..wire.frames import loads
from ._schema import DERIVED_TABLES, MIGRATIONS, QUEUE_TABLE, RECORDED_TABLES, SCHEMA_VERSION, SESSION_TABLES

_T = TypeVar("_T")

#: tries of a write that finds the trace busy (:meth:`TraceStore.when_free`), pausing BUSY_PAUSE x try (0.5 s at most)
BUSY_TRIES = 40
BUSY_PAUSE = 0.02

if TYPE_CHECKING:
    from sqlite_utils.db import Table

__all__ = [
    "ALL",
    "TraceStore",
    "TraceFormatError",
    "PackedRows",
    "PendingDerivation",
    "frame_id",
    "parse_frame_id",
    "frame_from_row",
    "exchange_from_row",
    "FRAME_COLUMNS",
    "integrity_problem",
]


def frame_id(exchange_index: int, frame_index: int) -> str:
    """The stable id of a frame in findings and fixtures: ``"{exchange}:{frame}"``."""
    return f"{exchange_index}:{frame_index}"


def parse_frame_id(value: str) -> tuple[int, int]:
    a, _, b = value.partition(":")
    return int(a), int(b)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), default=str)


def _loads(value: str | None, default: Any = None) -> Any:
    if value is None:
        return default
    return json.loads(value)


_EXCHANGE_COLUMNS = (
    "id",
    "flow_id",
    "started_at",
    "ended_at",
    "method",
    "url",
    "path",
    "request_headers",
    "request_body",
    "status",
    "response_headers",
    "response_body",
    "transport",
    "end",
    "error",
    "capability",
    "session_id",
    "run_id",
    "run_id_source",
    "cursor",
    "target_run_id",
    "notes",
)
FRAME_COLUMNS = (
    "exchange_id",
    "idx",
    "transport",
    "direction",
    "at",
    "event",
    "event_id",
    "start",
    "end",
    "text",
    "raw",
    "error",
    "data_offsets",
)
_FRAME_INSERT = (
    "INSERT OR REPLACE INTO frames (" + ", ".join(f'"{c}"' for c in FRAME_COLUMNS) + ") "
    f"VALUES ({', '.join('?' for _ in FRAME_COLUMNS)})"
)


def exchange_row(ex: Exchange) -> dict[str, Any]:
    return {
        "id": ex.index,
        "flow_id": ex.flow_id,
        "started_at": ex.started_at,
        "ended_at": ex.ended_at,
        "method": ex.method,
        "url": ex.url,
        "path": ex.path,
        "request_headers": _dumps([list(h) for h in ex.request_headers]),
        "request_body": ex.request_body,
        "status": ex.status,
        "response_headers": _dumps([list(h) for h in ex.response_headers]),
        "response_body": ex.response_body,
        "transport": ex.transport,
        "end": ex.end,
        "error": ex.error,
        "capability": ex.capability,
        "session_id": ex.session_id,
        "run_id": ex.run_id,
        "run_id_source": ex.run_id_source,
        "cursor": ex.cursor,
        "target_run_id": ex.target_run_id,
        "notes": _dumps(ex.notes or {}),
    }


def frame_row(fr: Frame) -> tuple[Any, ...]:
    return (
        fr.exchange_index,
        fr.index,
        fr.transport,
        fr.direction,
        fr.at,
        fr.event,
        fr.event_id,
        fr.start,
        fr.end,
        fr.text,
        fr.raw,
        _dumps(fr.error.to_json()) if fr.error is not None else None,
        _dumps(list(fr.data_offsets)) if fr.data_offsets else None,
    )


def frame_from_row(row: Sequence[Any]) -> Frame:
    """A :class:`Frame` from a ``frames`` row (the columns of ``FRAME_COLUMNS``, in order)."""
    (ex, idx, transport, direction, at, event, event_id, start, end, text, raw, error, offsets) = row[:13]
    return Frame(
        ex,
        idx,
        transport or "sse",
        direction or "in",
        text,
        raw,
        event,
        event_id,
        start,
        end,
        at or 0.0,
        DecodeError.from_json(loads(error)) if error else None,  # type: ignore[arg-type]  # the JSON frame_row wrote
        tuple(loads(offsets)) if offsets else None,  # type: ignore[arg-type]  # the JSON frame_row wrote
    )


def exchange_from_row(row: dict[str, Any]) -> Exchange:
    """An :class:`Exchange` (without frames) from an ``exchanges`` row as a dict."""
    return Exchange(
        index=row["id"],
        method=row["method"] or "GET",
        url=row["url"] or "",
        started_at=row["started_at"] or 0.0,
        ended_at=row["ended_at"],
        request_headers=[tuple(h) for h in _loads(row["request_headers"], [])],
        request_body=row["request_body"],
        status=row["status"],
        response_headers=[tuple(h) for h in _loads(row["response_headers"], [])],
        response_body=row["response_body"],
        transport=row["transport"],
        end=row["end"],
        error=row["error"],
        capability=row["capability"],
        session_id=row["session_id"],
        run_id=row["run_id"],
        run_id_source=row["run_id_source"],
        cursor=row["cursor"],
        target_run_id=row["target_run_id"],
        flow_id=row["flow_id"],
        notes=_loads(row["notes"], {}),
    )


class PackedRows(NamedTuple):
    """One derived table's rows as column names and a tuple of values per
    row, in those columns' order: what a worker process sends back
    (:func:`chatkit_trace.derive.derive_parallel`), the names not repeated
    per row."""

    columns: tuple[str, ...]
    values: list[tuple[Any, ...]]

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> PackedRows:
        """``rows`` (column -> value, every row with the same columns in the same order), packed."""
        if not rows:
            return cls((), [])
        return cls(tuple(rows[0]), [tuple(r.values()) for r in rows])


@dataclass(frozen=True)
class PendingDerivation:
    """A session the recorder's writer changed and its deriver has not
    derived since (a ``derive_queue`` row): ``seq`` identifies the change,
    ``since`` when the oldest underived change was stored, ``frames`` how
    many frames were stored since, ``open`` whether one of the session's
    exchanges is still streaming."""

    session_id: str | None
    seq: int
    since: float
    frames: int
    open: bool = False


def _queue_key(session_id: str | None) -> str:
    return "-" if session_id is None else "s:" + session_id


#: Every session: :meth:`TraceStore.exchanges` without a session filter.
ALL: Any = type("ALL", (), {"__repr__": lambda self: "ALL"})()


def integrity_problem(path: str | Path) -> str | None:
    """SQLite's quick check of every page of the file at ``path``, opened
    read-only (nothing is written): None when it is intact, else what SQLite
    says (one line)."""
    try:
        con = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        return str(err)
    try:
        row = con.execute("PRAGMA quick_check").fetchone()
    except sqlite3.DatabaseError as err:
        return str(err)
    finally:
        con.close()
    if row and row[0] == "ok":
        return None
    return " ".join(str(row[0]).split()) if row else "no answer"  # SQLite's report spans lines


class TraceStore:
    """A trace database (see docs/trace-format.md).

    :param path: the file; ``":memory:"`` for an in-memory store (tests).
    :param create: create the file (and the schema) when it does not exist.
    :param readonly: open for reading only (``check``, ``view``).
    """

    def __init__(self, path: str | Path, *, create: bool = False, readonly: bool = False) -> None:
        self.path = str(path)
        memory = self.path == ":memory:"
        if not memory:
            p = Path(self.path)
            if p.is_dir():
                raise TraceFormatError(f"{p} is a directory, not a trace database")
            if not p.exists() and not create:
                raise FileNotFoundError(f"no trace database at {p}")
            if p.exists() and not p.is_file():
                # /dev/null, a pipe: SQLite cannot keep a database there (and
                # would fail with "disk I/O error" half way through)
                raise TraceFormatError(f"{p} is not a regular file, not a trace database")
        try:
            if readonly and not memory:
                conn = sqlite3.connect(f"file:{Path(self.path).resolve()}?mode=ro", uri=True, check_same_thread=False)
            else:
                conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            if not readonly:
                # Deleted and overwritten content is zeroed, never left in free pages
                # (docs/recording.md "Redaction": no residue on disk).
                conn.execute("PRAGMA secure_delete = ON")
            self.db = Database(conn)
            tables = set(self.db.table_names())
        except sqlite3.DatabaseError as err:
            raise TraceFormatError(f"{self.path} is not a SQLite database ({err})") from None
        self.readonly = readonly
        self._columns: dict[str, frozenset[str]] = {}
        if "meta" not in tables:
            if tables - {"_sqlite_migrations"} and not create:
                raise TraceFormatError(f"{self.path} is a SQLite database but not a chatkit-trace recording (no meta table)")
            if readonly or not create:
                # Never turn a file someone pointed a command at into a trace (a
                # zero-byte file stays zero bytes): only the recorder and import create.
                raise TraceFormatError(f"{self.path} is empty: not a chatkit-trace recording")
            if tables - {"_sqlite_migrations"}:
                raise TraceFormatError(f"{self.path} already holds other tables: refusing to turn it into a trace")
            self._init()
        else:
            self._check_version()
        if not readonly and not memory:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")

    def _init(self) -> None:
        MIGRATIONS.apply(self.db)
        from .. import __version__

        self.set_meta("schema_version", SCHEMA_VERSION)
        self.set_meta("created_at", time.time())
        self.set_meta("chatkit_trace_version", __version__)

    def _check_version(self) -> None:
        try:
            version = int(self.get_meta("schema_version", 0))
        except (TypeError, ValueError, sqlite3.DatabaseError) as err:
            raise TraceFormatError(f"{self.path}: unreadable schema version ({err})") from None
        if version > SCHEMA_VERSION:
            raise TraceFormatError(
                f"{self.path} was written by a newer chatkit-trace (schema {version}, this version reads "
                f"up to {SCHEMA_VERSION}): upgrade chatkit-trace to read it"
            )
        if version < SCHEMA_VERSION and not self.readonly:
            MIGRATIONS.apply(self.db)
            self.set_meta("schema_version", SCHEMA_VERSION)

    def _table(self, name: str) -> Table:
        """``self.db[name]`` for a table (never a view), typed as one."""
        return cast("Table", self.db[name])

    # ------------------------------------------------------------------ meta

    def set_meta(self, key: str, value: Any) -> None:
        self._table("meta").insert({"key": key, "value": json.dumps(value, default=str)}, replace=True)

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = list(self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchall())
        return json.loads(rows[0][0]) if rows else default

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta").fetchall()}

    # ------------------------------------------------------------------ recorded data

    def add_exchange(self, ex: Exchange, *, with_frames: bool = True) -> None:
        self._table("exchanges").insert(exchange_row(ex), replace=True)
        if with_frames and ex.frames:
            self.add_frames(ex.frames)

    def update_exchange(self, index: int, **fields: Any) -> None:
        row = {}
        for k, v in fields.items():
            if k in ("request_headers", "response_headers"):
                v = _dumps([list(h) for h in v])
            elif k == "notes":
                v = _dumps(v)
            row[k] = v
        self._table("exchanges").update(index, row)

    def add_frames(self, frames: Iterable[Frame]) -> None:
        self.db.conn.executemany(_FRAME_INSERT, [frame_row(f) for f in frames])

    def add_capture_error(self, where: str, message: str, *, flow_id: str | None = None, exchange_id: int | None = None) -> None:
        self._table("capture_errors").insert(
            {"at": time.time(), "flow_id": flow_id, "exchange_id": exchange_id, "where": where, "message": message}
        )

    def commit(self) -> None:
        self.db.conn.commit()

    def settle(self) -> None:
        """Checkpoint the WAL into the file and switch to rollback-journal
        mode, so a finished trace is one file: no ``-wal``/``-shm`` left next
        to it, and readers that open it read-only create none.  Skipped
        silently while another connection has the file open (a viewer
        following a live recording keeps WAL mode)."""
        if self.readonly or self.path == ":memory:":
            return
        conn = self.db.conn
        try:
            conn.commit()
            conn.execute("PRAGMA busy_timeout = 0")  # another reader: do not wait, keep WAL
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode = DELETE")
        except sqlite3.OperationalError:
            pass
        finally:
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Commit and close; a writer leaves the trace as one file (:meth:`settle`)."""
        try:
            self.db.conn.commit()
            self.settle()
        finally:
            self.db.conn.close()

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions

    def begin(self) -> None:
        """Open a transaction unless one is open (the recorder's writer batches its writes)."""
        if not self.db.conn.in_transaction:
            self.db.conn.execute("BEGIN")

    def rollback(self) -> None:
        self.db.conn.rollback()

    def when_free(self, write: Callable[[], _T]) -> _T:
        """``write()`` (one transaction that commits itself), tried again while
        the file is busy: the recorder's writer and deriver share it, and
        SQLite may refuse a write at once ("database is locked") when a read
        turns into one, without its busy timeout.  Each refused try is rolled
        back and tried again with a growing pause (:data:`BUSY_TRIES`); any
        other error, and the last refusal, propagate after the rollback."""
        for attempt in range(1, BUSY_TRIES + 1):
            try:
                return write()
            except Exception as err:
                try:
                    self.rollback()
                except sqlite3.Error:
                    pass
                if attempt == BUSY_TRIES or not _is_busy(err):
                    raise
                time.sleep(min(BUSY_PAUSE * attempt, 0.5))
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Commit what the block wrote, or roll it back when it raises."""
        with self.db.conn:
            yield

    def copy(self, path: str | Path) -> TraceStore:
        """A copy of this trace at ``path``, opened for writing (SQLite's online
        backup: consistent even while the recorder writes)."""
        dst = sqlite3.connect(str(path))
        try:
            self.db.conn.backup(dst)
        finally:
            dst.close()
        return TraceStore(path)

    # ------------------------------------------------------------------ reading

    def exchange_count(self) -> int:
        return self.db["exchanges"].count

    def mark_unfinished(self, first: int, gap: Mapping[str, Any]) -> dict[str | None, int]:
        """A recorder's writer died: every exchange from index ``first`` on
        that has no end yet gets ``gap`` in ``notes.gaps`` (``notes.incomplete``)
        and ``end = 'open'`` (still streaming when its recording stopped), in
        the open transaction; the sessions they belong to (for the deriver's
        queue)."""
        rows = self.db.execute(
            'SELECT id, session_id, notes FROM exchanges WHERE id >= ? AND ended_at IS NULL AND "end" IS NULL', [first]
        ).fetchall()
        touched: dict[str | None, int] = {}
        for index, session_id, raw in rows:
            notes = json.loads(raw) if raw else {}
            notes.setdefault("gaps", []).append(dict(gap))
            notes["incomplete"] = True
            self.db.execute('UPDATE exchanges SET notes = ?, "end" = ? WHERE id = ?', [_dumps(notes), "open", index])
            touched[session_id] = 0
        return touched

    def counts_from(self, first: int) -> dict[str, int]:
        """What the exchanges from index ``first`` on hold (one recording's
        share of a file several recordings appended to): ``exchanges``,
        ``frames``, ``runs`` (distinct session and run ids) and the file's
        ``trace_frames``."""
        ex = self.db.execute("SELECT COUNT(*) FROM exchanges WHERE id >= ?", [first]).fetchone()[0]
        runs = self.db.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT session_id, run_id FROM exchanges WHERE id >= ? AND run_id IS NOT NULL)",
            [first],
        ).fetchone()[0]
        frames = self.db.execute("SELECT COUNT(*) FROM frames WHERE exchange_id >= ?", [first]).fetchone()[0]
        total = self.db.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
        return {"exchanges": ex, "frames": frames, "runs": runs, "trace_frames": total}

    def frame_count(self) -> int:
        return self.db["frames"].count

    def next_exchange_index(self) -> int:
        row = self.db.execute("SELECT MAX(id) FROM exchanges").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def exchanges(
        self,
        *,
        with_frames: bool = False,
        session: Any = ALL,
        classified: bool | None = None,
        capability: str | None = None,
    ) -> Iterator[Exchange]:
        """Exchanges in time order (frames loaded per exchange when asked).

        ``session``: only those of this session id (None: those without
        one); ``classified``: only those a profile route matched (True) or
        none did (False); ``capability``: only those a route classified as
        it (``subscribe``: the subscriptions and sockets)."""
        where, params = _exchange_filter(session, classified, capability)
        sql = "SELECT * FROM exchanges" + (f" WHERE {where}" if where else "") + " ORDER BY started_at, id"
        yield from self._exchanges(sql, params, with_frames)

    def _exchanges(self, sql: str, params: Sequence[Any], with_frames: bool) -> Iterator[Exchange]:
        cursor = self.db.conn.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        for row in cursor:
            ex = exchange_from_row(dict(zip(names, row, strict=False)))
            if with_frames:
                ex.frames = self.frames(ex.index)
            yield ex

    def exchange(self, index: int, *, with_frames: bool = True) -> Exchange | None:
        for ex in self._exchanges("SELECT * FROM exchanges WHERE id = ?", [index], with_frames):
            return ex
        return None

    def frames(self, exchange_index: int, *, start: int = 0, limit: int | None = None) -> list[Frame]:
        cols = ", ".join(f'"{c}"' for c in FRAME_COLUMNS)
        sql = f"SELECT {cols} FROM frames WHERE exchange_id = ? AND idx >= ? ORDER BY idx"
        params: list[Any] = [exchange_index, start]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [frame_from_row(r) for r in self.db.conn.execute(sql, params)]

    def session_ids(self) -> list[str | None]:
        """The session ids of the classified exchanges (None: exchanges without
        one), in the order their first exchange started."""
        rows = self.db.execute(
            "SELECT session_id, MIN(started_at) AS t FROM exchanges WHERE capability IS NOT NULL "
            "GROUP BY session_id ORDER BY t"
        ).fetchall()
        return [r[0] for r in rows]

    def has_capability(self, capability: str) -> bool:
        """Whether an exchange was classified as ``capability`` (e.g. ``history``)."""
        row = self.db.execute("SELECT 1 FROM exchanges WHERE capability = ? LIMIT 1", [capability]).fetchone()
        return row is not None

    def has_classified(self) -> bool:
        """Whether a profile route matched any exchange."""
        return self.db.execute("SELECT 1 FROM exchanges WHERE capability IS NOT NULL LIMIT 1").fetchone() is not None

    def capture_errors(self) -> list[dict[str, Any]]:
        return list(self.db["capture_errors"].rows)

    def rows(self, table: str, *, order: str | None = None) -> Iterator[dict[str, Any]]:
        """Every row of a table of the trace (``order``: a column list)."""
        if table not in RECORDED_TABLES + DERIVED_TABLES:
            raise ValueError(f"{table!r} is not a table of the trace")
        return self.db[table].rows_where(order_by=order)

    # ------------------------------------------------------------------ the recorder's caps

    def exchange_ages(self, *, ended_before: float | None = None) -> list[tuple[int, str | None]]:
        """``(id, session_id)`` of every exchange (that ended, or started
        without ending, before ``ended_before``), oldest first."""
        if ended_before is None:
            return [tuple(r) for r in self.db.execute("SELECT id, session_id FROM exchanges ORDER BY started_at, id")]
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT id, session_id FROM exchanges WHERE coalesce(ended_at, started_at) < ? ORDER BY started_at, id",
                [ended_before],
            )
        ]

    def recorded_sizes(self, ids: Sequence[int] | None = None) -> tuple[int, int, int, int]:
        """What the recorded data of exchanges ``ids`` (all: None) weighs:
        ``(frames, bytes of their text and raw bytes, exchanges, bytes of
        their bodies, headers and URLs)``."""
        where, params = "", []
        if ids is not None:
            where = f" WHERE {{col}} IN ({','.join('?' * len(ids))})"
            params = list(ids)
        f = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(text)), 0), COALESCE(SUM(LENGTH(raw)), 0) FROM frames"
            + where.format(col="exchange_id"),
            params,
        ).fetchone()
        e = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(request_body)), 0) + COALESCE(SUM(LENGTH(response_body)), 0)"
            " + COALESCE(SUM(LENGTH(request_headers)), 0) + COALESCE(SUM(LENGTH(response_headers)), 0)"
            " + COALESCE(SUM(LENGTH(url)), 0) FROM exchanges" + where.format(col="id"),
            params,
        ).fetchone()
        return int(f[0]), int(f[1] + f[2]), int(e[0]), int(e[1])

    def delete_exchanges(self, ids: Sequence[int]) -> int:
        """Delete exchanges, their frames and the derived rows that name them
        (their sessions are re-derived), in one transaction; returns how many
        frames went."""
        frames = 0
        conn = self.db.conn
        with conn:
            for part in _chunks(ids):
                marks = ",".join("?" * len(part))
                frames += conn.execute(f"DELETE FROM frames WHERE exchange_id IN ({marks})", part).rowcount
                conn.execute(f"DELETE FROM exchanges WHERE id IN ({marks})", part)
                for table in ("facts", "frame_results", "history_reads"):
                    conn.execute(f"DELETE FROM {table} WHERE exchange_id IN ({marks})", part)
        return frames

    def delete_frames(self, exchange_index: int) -> None:
        """Drop an exchange's frames (re-classification re-makes a JSON body's frames)."""
        self.db.conn.execute("DELETE FROM frames WHERE exchange_id = ?", [exchange_index])

    # ------------------------------------------------------------------ derived data

    def clear_derived(self, *, sessions: Iterable[str] | None = None, exchanges: Iterable[int] = ()) -> None:
        """Delete derived rows (not committed: :meth:`write_derived` commits).

        Everything, findings included, by default (and the recorder's
        derivation queue: whoever clears everything derives everything);
        with ``sessions``, only the rows of those sessions and of
        ``exchanges`` (the recorder re-derives the sessions that changed)."""
        conn = self.db.conn
        if sessions is None:
            for table in DERIVED_TABLES:
                conn.execute(f"DELETE FROM {table}")
            if self._has_queue():
                conn.execute(f"DELETE FROM {QUEUE_TABLE}")
            return
        names = sorted(sessions)
        marks = ",".join("?" * len(names))
        for table in SESSION_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", names)
        for part in _chunks(list(exchanges)):
            m = ",".join("?" * len(part))
            conn.execute(f"DELETE FROM frame_results WHERE exchange_id IN ({m})", part)
            conn.execute(f"DELETE FROM facts WHERE exchange_id IN ({m})", part)

    def write_derived(
        self,
        rows: Mapping[str, Sequence[Mapping[str, Any]] | PackedRows],
        *,
        sessions: Iterable[str] | None = None,
        exchanges: Iterable[int] = (),
        done: PendingDerivation | None = None,
    ) -> None:
        """Add plain rows (column -> value) to the derived tables, in one
        transaction (a table's rows may come as :class:`PackedRows`); with
        ``sessions``, those sessions' rows (and the rows of
        ``exchanges``) are replaced in the same transaction.  Facts keep
        their order (``seq`` is assigned on insert).  ``history_reads`` is
        keyed by exchange: of a socket's several history reads (messages on
        it, of one session or several) the first is kept; the analysis
        compares every read from the replay itself.  ``done``: the queued
        change these rows derive (the recorder's deriver), settled in the
        same transaction."""
        conn = self.db.conn
        with conn:
            if done is not None:
                self._settle_derivation(done, time.time())
            if sessions is not None:
                self.clear_derived(sessions=sessions, exchanges=exchanges)
            for table, items in rows.items():
                if table not in DERIVED_TABLES or table == "findings":
                    raise ValueError(f"{table!r} is not a derived table (findings: replace_findings)")
                packed = items if isinstance(items, PackedRows) else PackedRows.of(items)
                if packed.values:
                    conn.executemany(self._insert(table, packed.columns), _masked(packed.values))

    def derived_everything(self, *, by: str = "redecode") -> None:
        """Everything was derived again (``redecode``): a recording's meta
        ``derivation`` left ``incomplete``, ``behind`` or ``stopped`` now
        says ``complete``, naming what it said before and who completed it
        (the queue was emptied by :meth:`clear_derived`)."""
        state = self.get_meta("derivation")
        if isinstance(state, dict) and state.get("state") not in ("complete", "off", None):
            settled = {**state, "state": "complete", "frames": 0, "at": time.time(), "by": by, "was": state.get("state")}
            settled.pop("reason", None)
            self.set_meta("derivation", settled)
            self.db.conn.commit()

    def replace_findings(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Replace the ``findings`` table with ``rows`` (one transaction)."""
        packed = PackedRows.of([dict(r) for r in rows])
        with self.db.conn:
            self.db.execute("DELETE FROM findings")
            if packed.values:
                self.db.conn.executemany(self._insert("findings", packed.columns), _masked(packed.values))

    # ------------------------------------------------------------------ the recorder's derivation queue

    def queue_derivation(self, frames_by_session: Mapping[str | None, int], seq: int, *, at: float | None = None) -> None:
        """The writer changed these sessions (adding so many frames each): queue
        them for the deriver, in the writer's transaction (not committed here).
        ``seq`` must grow with every call of one writer."""
        if not frames_by_session:
            return
        now = time.time() if at is None else at
        self.db.conn.executemany(
            f"INSERT INTO {QUEUE_TABLE} (key, session_id, seq, since, frames) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET seq = excluded.seq, frames = frames + excluded.frames",
            [(_queue_key(sid), sid, seq, now, n) for sid, n in frames_by_session.items()],
        )

    def derive_pending(self, session: Any = ALL) -> list[PendingDerivation]:
        """The queued sessions (or the one ``session``), oldest change first,
        each saying whether one of its exchanges is still open (no end yet)."""
        conn = self.db.conn
        if not self._has_queue():
            return []  # a schema-1 trace opened read-only
        sql = f"SELECT session_id, seq, since, frames FROM {QUEUE_TABLE}"
        params: list[Any] = []
        if session is not ALL:
            sql += " WHERE key = ?"
            params.append(_queue_key(session))
        rows = conn.execute(sql + " ORDER BY since, key", params).fetchall()
        if not rows:
            return []
        open_sessions = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT session_id FROM exchanges WHERE ended_at IS NULL AND end IS NULL AND capability IS NOT NULL"
            )
        }
        return [PendingDerivation(sid, seq, since, frames, sid in open_sessions) for sid, seq, since, frames in rows]

    def derivation_backlog(self) -> tuple[int, int]:
        """``(sessions, frames)`` the deriver has not caught up with (0, 0: none)."""
        if not self._has_queue():
            return 0, 0
        row = self.db.execute(f"SELECT COUNT(*), COALESCE(SUM(frames), 0) FROM {QUEUE_TABLE}").fetchone()
        return int(row[0]), int(row[1])

    def _settle_derivation(self, done: PendingDerivation, at: float) -> None:
        """``done`` was derived: off the queue if nothing changed since, else
        what was derived is subtracted and the rest waits (``since`` = ``at``)."""
        conn = self.db.conn
        key = _queue_key(done.session_id)
        gone = conn.execute(f"DELETE FROM {QUEUE_TABLE} WHERE key = ? AND seq = ?", [key, done.seq]).rowcount
        if not gone:
            conn.execute(
                f"UPDATE {QUEUE_TABLE} SET frames = MAX(0, frames - ?), since = ? WHERE key = ?", [done.frames, at, key]
            )

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One consistent snapshot for every read inside the block (a read
        transaction: another connection's commits meanwhile are not seen)."""
        conn = self.db.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.commit()

    def _has_queue(self) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [QUEUE_TABLE]).fetchone() is not None

    def data_version(self) -> int:
        """Changes whenever another connection committed to the file."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def _insert(self, table: str, columns: tuple[str, ...]) -> str:
        known = self._columns.get(table)
        if known is None:
            known = self._columns[table] = frozenset(self.db[table].columns_dict)
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise ValueError(f"{table} has no column {unknown[0]!r}")
        verb = "INSERT OR IGNORE" if table == "history_reads" else "INSERT"
        return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _masked(values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Derived rows with every secret masked in their texts (JSON columns stay
    JSON): the token shapes and the values this process learned
    (:mod:`chatkit_trace.masking`).  Rows are derived from masked frames, but
    decoding and joining them can put together what no frame held whole
    (a key streamed four characters at a time).  One test over the whole
    batch first: rows without a secret (nearly all) cost nothing more."""
    sc = derived_scrubber()
    if sc is None or not values:
        return values
    texts = "\x00".join(v for row in values for v in row if type(v) is str)
    if not sc.might(texts):
        return values
    out = []
    for row in values:
        if any(type(v) is str and sc.might(v) for v in row):
            row = tuple(mask_derived_json(v) if type(v) is str else v for v in row)
        out.append(row)
    return out


def _is_busy(err: BaseException) -> bool:
    """Whether ``err`` is SQLite's "database is locked" / "busy": another
    connection (the recorder's writer or deriver) is writing."""
    return isinstance(err, sqlite3.OperationalError) and ("locked" in str(err) or "busy" in str(err))


def _exchange_filter(session: Any, classified: bool | None, capability: str | None = None) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    if classified is not None:
        parts.append("capability IS NOT NULL" if classified else "capability IS NULL")
    if capability is not None:
        parts.append("capability = ?")
        params.append(capability)
    if session is None:
        parts.append("session_id IS NULL")
    elif session is not ALL:
        parts.append("session_id = ?")
        params.append(session)
    return " AND ".join(parts), params


def _chunks(ids: Sequence[int], size: int = 500) -> Iterator[list[int]]:
    for i in range(0, len(ids), size):
        yield list(ids[i : i + size])
