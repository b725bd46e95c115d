"""``TraceReader``: read-only, paged access to a trace for the viewer.

The viewer reads from several threads while the recorder may still be
writing the file (WAL mode), and keeps derived tables it computed itself in
a side database (``derived_path``).  So every thread gets its own read-only
connection to the trace and one to the derived tables, and every query is a
small indexed one: nothing here loads a whole trace.

Derived tables may be missing or half written (a trace not analysed yet, a
side database being replaced): a read of them returns nothing instead of
raising.  Rows come back named (:mod:`._rows`: ``row.settled_by``, never a
column's position), built by SQLite's row factory.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..trace import Exchange
from ..wire import Frame
from ._db import FRAME_COLUMNS, exchange_from_row, frame_from_row
from ._rows import (
    ExchangeDetail,
    ExchangeSummary,
    FactCell,
    FindingGroup,
    FindingRow,
    FrameDetail,
    FrameFact,
    FrameResult,
    FrameResultDetail,
    FrameSummary,
    FrameTime,
    HistoryRead,
    HistoryReadAt,
    RunRow,
    SettledSnapshot,
)
from ._schema import QUEUE_TABLE

R = TypeVar("R", bound=tuple[Any, ...])

__all__ = ["EXCHANGE_SUMMARY", "TraceReader"]

#: The columns of :meth:`TraceReader.exchange_summaries`, in order.
EXCHANGE_SUMMARY = ExchangeSummary._fields
#: A subscription's cursor is the route's, else the ``Last-Event-ID`` header an
#: EventSource sends when it reconnects (``Exchange.resume_cursor``).
_CURSOR_SQL = (
    "COALESCE(cursor, CASE WHEN capability = 'subscribe' AND json_valid(request_headers) THEN"
    " (SELECT json_extract(value, '$[1]') FROM json_each(request_headers)"
    " WHERE lower(json_extract(value, '$[0]')) = 'last-event-id' AND json_extract(value, '$[1]') != '' LIMIT 1) END)"
)
_SUMMARY_SQL = "SELECT " + ", ".join(_CURSOR_SQL if c == "cursor" else c for c in EXCHANGE_SUMMARY) + " FROM exchanges"
_FRAME_COLS = ", ".join(f'"{c}"' for c in FRAME_COLUMNS)
#: A frame's place in time as the pipeline orders it: ``max(at, started_at)``, else ``started_at``.
_FRAME_T = "CASE WHEN at THEN MAX(at, ?) ELSE ? END"
_NOT_LOST = "('duplicate-event', 'no-change')"  # rejections that lose nothing


def _named(conn: sqlite3.Connection, sql: str, params: Sequence[Any], row: type[Any]) -> sqlite3.Cursor:
    """A cursor whose rows are ``row`` (a :mod:`._rows` ``NamedTuple``, built by
    SQLite's row factory; ``tuple``: plain rows, for a read that only counts
    or collects pairs)."""
    cur = conn.cursor()
    if row is not tuple:
        make = row._make
        cur.row_factory = lambda _cur, values: make(values)
    return cur.execute(sql, list(params))


def _session_filter(session: str, default_session: str | None) -> tuple[str, list[Any]]:
    """``session`` as the Core names it: ``default_session`` also holds the
    exchanges that carry no session id."""
    if session == default_session:
        return "(session_id IS NULL OR session_id = ?)", [session]
    return "session_id = ?", [session]


class TraceReader:
    """Read-only access to one trace and its derived tables.

    :param path: the trace database.
    :param derived_path: where the derived tables are (default: the trace).
    """

    def __init__(self, path: str | Path, derived_path: str | Path | None = None) -> None:
        self.path = str(Path(path).resolve())
        self.derived_path = str(derived_path) if derived_path is not None else self.path
        self._local = threading.local()
        #: exchange -> (its largest frame index, its latest frame time) (:meth:`last_frame_at`)
        self._last_at: dict[int, tuple[int | None, float | None]] = {}

    # -- connections ------------------------------------------------------------------

    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA query_only = 1")
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection to the recorded tables."""
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = self._connect(self.path)
        return c

    def _dconn(self) -> sqlite3.Connection:
        """This thread's connection to the derived tables."""
        if self.derived_path == self.path:
            return self._conn()
        c = getattr(self._local, "dconn", None)
        if c is None or getattr(self._local, "dpath", None) != self.derived_path:
            c = self._local.dconn = self._connect(self.derived_path)
            self._local.dpath = self.derived_path
        return c

    def _derived(self, sql: str, params: Sequence[Any], row: type[R]) -> list[R]:
        """Rows of a derived table, named; none when the tables are missing."""
        try:
            return _named(self._dconn(), sql, params, row).fetchall()
        except sqlite3.Error:
            return []

    def set_derived(self, path: str | Path | None) -> None:
        self.derived_path = str(path) if path is not None else self.path

    def close(self) -> None:
        """Close this thread's connections."""
        for name in ("conn", "dconn"):
            c = getattr(self._local, name, None)
            if c is not None:
                c.close()
                setattr(self._local, name, None)

    # -- the trace --------------------------------------------------------------------

    def data_version(self) -> int:
        """Changes whenever another connection committed to the trace (live tail)."""
        return int(self._conn().execute("PRAGMA data_version").fetchone()[0])

    def meta(self) -> dict[str, Any]:
        """The meta table (a value that is not JSON comes back as stored)."""
        out: dict[str, Any] = {}
        for key, value in self._conn().execute("SELECT key, value FROM meta"):
            try:
                out[key] = json.loads(value)
            except (TypeError, ValueError):
                out[key] = value
        return out

    def counts(self) -> dict[str, int]:
        """``frames`` (the highest frame rowid: cheap on a growing trace) and ``exchanges``."""
        c = self._conn()
        frames = c.execute("SELECT MAX(rowid) FROM frames").fetchone()[0] or 0
        exchanges = c.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0]
        return {"frames": frames, "exchanges": exchanges}

    def derivation_backlog(self) -> int:
        """Frames the recorder stored that its deriver has not derived yet (the
        ``derive_queue``; 0 without one): the live tail's "derivation behind"."""
        try:
            row = self._conn().execute(f"SELECT COALESCE(SUM(frames), 0) FROM {QUEUE_TABLE}").fetchone()
        except sqlite3.Error:  # a trace from before schema 2
            return 0
        return int(row[0])

    def has_open_stream(self) -> bool:
        """A response stream without an end: the recorder may still be writing."""
        row = self._conn().execute("SELECT 1 FROM exchanges WHERE transport IS NOT NULL AND end IS NULL LIMIT 1").fetchone()
        return row is not None

    # -- exchanges ----------------------------------------------------------------------

    def exchange_summary(self, index: int) -> ExchangeSummary | None:
        """One exchange's summary (``cursor``: a subscription's
        ``Last-Event-ID`` when its route names none)."""
        row: ExchangeSummary | None = _named(self._conn(), _SUMMARY_SQL + " WHERE id = ?", [index], ExchangeSummary).fetchone()
        return row

    def exchange_summaries(
        self,
        *,
        classified: bool = False,
        session: str | None = None,
        default_session: str | None = None,
        run: tuple[str | None, str] | None = None,
    ) -> list[ExchangeSummary]:
        """Exchange summaries in time order: the classified ones
        (``classified``), those of a ``session`` (see :func:`_session_filter`),
        those of a ``run`` ``(session id, run id)``."""
        parts: list[str] = []
        params: list[Any] = []
        if classified:
            parts.append("capability IS NOT NULL")
        if session is not None:
            where, p = self._session_where(session, default_session)
            parts.append(where)
            params += p
        if run is not None:
            parts.append("session_id IS ? AND run_id = ?")
            params += list(run)
        sql = _SUMMARY_SQL + (" WHERE " + " AND ".join(parts) if parts else "") + " ORDER BY started_at, id"
        return _named(self._conn(), sql, params, ExchangeSummary).fetchall()

    def session_exchanges(self, session: str, default_session: str | None) -> list[Exchange]:
        """The classified exchanges of ``session`` in time order, as
        :class:`Exchange` objects without frames (see :meth:`_session_where`:
        shared sockets that carry it included, whole)."""
        where, params = self._session_where(session, default_session)
        cur = self._conn().execute(
            f"SELECT * FROM exchanges WHERE capability IS NOT NULL AND {where} ORDER BY started_at, id", params
        )
        names = [d[0] for d in cur.description]
        return [exchange_from_row(dict(zip(names, r, strict=False))) for r in cur]

    def session_signature(self, session: str, default_session: str | None) -> tuple[Any, ...]:
        """Changes when the session's exchanges or frames change (live tail)."""
        c = self._conn()
        where, params = self._session_where(session, default_session)
        rows = c.execute(f"SELECT id, status, end, ended_at, run_id FROM exchanges WHERE {where} ORDER BY id", params).fetchall()
        ids = [r[0] for r in rows]
        frames = 0
        if ids:
            marks = ",".join("?" for _ in ids)
            frames = c.execute(f"SELECT COUNT(*) FROM frames WHERE exchange_id IN ({marks})", ids).fetchone()[0]
        return (tuple(rows), frames)

    def shared_sockets(self, session: str) -> list[int]:
        """Sockets several sessions share, filed under another session, that
        carry frames of ``session``, by id.  The derived frame results say
        which: the derive engine splits such a socket per event and records
        each session's own frames of it (``chatkit_trace.derive.TraceSessions``).
        None before the trace is derived."""
        ids = [r[0] for r in self._derived("SELECT DISTINCT exchange_id FROM frame_results WHERE session_id = ?", [session], tuple)]
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        return [
            r[0]
            for r in self._conn().execute(
                f"SELECT id FROM exchanges WHERE id IN ({marks}) AND capability = 'subscribe'"
                " AND (session_id IS NULL OR session_id != ?) ORDER BY id",
                [*ids, session],
            )
        ]

    def _session_where(self, session: str, default_session: str | None) -> tuple[str, list[Any]]:
        """The exchanges of ``session`` (:func:`_session_filter`) and the
        shared sockets that carry it (:meth:`shared_sockets`)."""
        where, params = _session_filter(session, default_session)
        shared = self.shared_sockets(session)
        if shared:
            where = f"({where} OR id IN ({','.join('?' for _ in shared)}))"
            params = [*params, *shared]
        return where, params

    def exchange_detail(self, index: int) -> ExchangeDetail | None:
        """One exchange's request and response."""
        sql = "SELECT " + ", ".join(ExchangeDetail._fields) + " FROM exchanges WHERE id = ?"
        row: ExchangeDetail | None = _named(self._conn(), sql, [index], ExchangeDetail).fetchone()
        return row

    def search(self, text: str, limit_exchanges: int = 100_000) -> set[int]:
        """Exchanges whose frames or request body contain ``text`` (a scan)."""
        like = f"%{text}%"
        c = self._conn()
        hits = {r[0] for r in c.execute("SELECT DISTINCT exchange_id FROM frames WHERE text LIKE ? LIMIT ?", [like, limit_exchanges])}
        hits |= {r[0] for r in c.execute("SELECT id FROM exchanges WHERE CAST(request_body AS TEXT) LIKE ?", [like])}
        return hits

    # -- frames ---------------------------------------------------------------------------

    def frame_count(self, exchange: int) -> int:
        row = self._conn().execute("SELECT MAX(idx) FROM frames WHERE exchange_id = ?", [exchange]).fetchone()
        return 0 if row[0] is None else row[0] + 1

    def last_frame_at(self, exchange: int) -> float | None:
        """The exchange's latest frame time.  ``MAX(at)`` reads every frame of
        the exchange (no index on it: 9-11 ms for 100k frames, and the viewer
        asks at every restore), so it is remembered per exchange until the
        exchange's largest frame index changes (an index seek: a live trace
        grows, frames are never rewritten)."""
        conn = self._conn()
        last = conn.execute("SELECT MAX(idx) FROM frames WHERE exchange_id = ?", [exchange]).fetchone()[0]
        hit = self._last_at.get(exchange)
        if hit is not None and hit[0] == last:
            return hit[1]
        at: float | None = conn.execute("SELECT MAX(at) FROM frames WHERE exchange_id = ?", [exchange]).fetchone()[0]
        self._last_at[exchange] = (last, at)
        return at

    def frames(self, exchange: int, *, start: int = 0, limit: int = 256) -> list[Frame]:
        """Frames ``start``… of an exchange, at most ``limit``."""
        rows = self._conn().execute(
            f"SELECT {_FRAME_COLS} FROM frames WHERE exchange_id = ? AND idx >= ? ORDER BY idx LIMIT ?",
            [exchange, start, limit],
        )
        return [frame_from_row(r) for r in rows]

    def frame_times(self, exchange: int, started_at: float) -> Iterator[FrameTime]:
        """An exchange's frames in replay order (``t``: the frame's time as the
        pipeline orders it), streamed."""
        yield from _named(
            self._conn(),
            f"SELECT idx, {_FRAME_T} AS t FROM frames WHERE exchange_id = ? ORDER BY t, idx",
            [started_at, started_at, exchange],
            FrameTime,
        )

    def frames_by_time(
        self, exchange: int, started_at: float, *, after: tuple[float, int] | None = None, batch: int = 256
    ) -> Iterator[tuple[float, Frame]]:
        """``(t, frame)`` of an exchange's frames in replay order (see
        :meth:`frame_times`), only those after ``(t, idx)`` when given; read
        ``batch`` rows at a time."""
        cond, params = "", []
        if after is not None:
            cond, params = " AND (t > ? OR (t = ? AND idx > ?))", [after[0], after[0], after[1]]
        cur = self._conn().execute(
            f"SELECT {_FRAME_COLS}, {_FRAME_T} AS t FROM frames WHERE exchange_id = ?{cond} ORDER BY t, idx",
            [started_at, started_at, exchange, *params],
        )
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                return
            for r in rows:
                yield r[-1], frame_from_row(r)

    def frame_summaries(self, exchange: int, first: int, last: int) -> list[FrameSummary]:
        """Frames ``first..last`` of an exchange, their text cut to 400 characters."""
        return _named(
            self._conn(),
            "SELECT idx, at, event, event_id, substr(text, 1, 400), raw IS NOT NULL, direction, error FROM frames"
            " WHERE exchange_id = ? AND idx BETWEEN ? AND ? ORDER BY idx",
            [exchange, first, last],
            FrameSummary,
        ).fetchall()

    def frame_detail(self, exchange: int, idx: int) -> FrameDetail | None:
        """One frame in full."""
        sql = "SELECT " + ", ".join(FrameDetail._fields) + " FROM frames WHERE exchange_id = ? AND idx = ?"
        row: FrameDetail | None = _named(self._conn(), sql, [exchange, idx], FrameDetail).fetchone()
        return row

    def broken_frames(self, exchanges: Sequence[int]) -> set[tuple[int, int]]:
        """``(exchange, idx)`` of the frames of ``exchanges`` the wire layer could not read."""
        if not exchanges:
            return set()
        marks = ",".join("?" for _ in exchanges)
        rows = self._conn().execute(
            f"SELECT exchange_id, idx FROM frames WHERE exchange_id IN ({marks}) AND error IS NOT NULL", list(exchanges)
        )
        return {(e, i) for e, i in rows}

    # -- derived: runs and findings -----------------------------------------------------

    def has_derived(self) -> bool:
        try:
            d = self._dconn()
            return any(d.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None for t in ("runs", "frame_results", "findings"))
        except sqlite3.Error:
            return False

    def finding_counts(self) -> dict[str, int]:
        return dict(self._derived("SELECT severity, COUNT(*) FROM findings GROUP BY severity", (), tuple))

    def has_findings(self) -> bool:
        return bool(self._derived("SELECT 1 FROM findings LIMIT 1", (), tuple))

    def findings(
        self, session: str | None = None, run: str | None = None, *, trace_wide: bool = False
    ) -> list[FindingRow]:
        """Stored findings, errors first: all, the trace-wide ones
        (``trace_wide``: no run), or those of ``session`` and ``run``."""
        sql = "SELECT " + ", ".join(FindingRow._fields) + " FROM findings"
        params: list[Any] = []
        if trace_wide:
            sql += " WHERE run_id IS NULL"
        elif session is not None:
            sql += " WHERE session_id = ? AND run_id IS ?"
            params = [session, run]
        sql += " ORDER BY CASE severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code, id"
        return self._derived(sql, params, FindingRow)

    def finding_groups(self) -> list[FindingGroup]:
        """The findings of each run, code and severity: how many, and their frames."""
        return self._derived(
            "SELECT session_id, run_id, severity, code, COUNT(*), json_group_array(frames) FROM findings"
            " GROUP BY session_id, run_id, severity, code",
            (),
            FindingGroup,
        )

    def runs(self) -> list[RunRow]:
        """Every derived run."""
        return _named(self._dconn(), "SELECT " + ", ".join(RunRow._fields) + " FROM runs", (), RunRow).fetchall()

    def settled_snapshot(self, session: str, run: str) -> SettledSnapshot | None:
        """The snapshot a run settled with, what settled it and when."""
        rows = self._derived(
            "SELECT settled_snapshot, settled_by, settled_at FROM runs WHERE session_id = ? AND run_id = ?", [session, run],
            SettledSnapshot,
        )
        return rows[0] if rows else None

    # -- derived: per frame -------------------------------------------------------------

    def routed_frames(self, exchange: int, session: str | None, run: str) -> set[int] | None:
        """The frames of a subscription the pipeline routed to ``run`` (None: no derived tables)."""
        try:
            rows = self._dconn().execute(
                "SELECT idx FROM frame_results WHERE exchange_id = ? AND session_id IS ? AND run_id = ?", [exchange, session, run]
            )
            return {r[0] for r in rows}
        except sqlite3.Error:
            return None

    def frame_results(self, exchange: int, first: int, last: int) -> list[FrameResult] | None:
        """The derived state of frames ``first..last`` (None: no derived tables)."""
        try:
            return _named(
                self._dconn(),
                "SELECT idx, state, error, shadow FROM frame_results WHERE exchange_id = ? AND idx BETWEEN ? AND ?",
                [exchange, first, last],
                FrameResult,
            ).fetchall()
        except sqlite3.Error:
            return None

    def fact_cells(self, exchange: int, first: int, last: int) -> list[FactCell]:
        """The facts of frames ``first..last``, in order."""
        return self._derived(
            "SELECT frame_idx, kind, accepted, reason, detail FROM facts WHERE exchange_id = ? AND frame_idx BETWEEN ? AND ?"
            " ORDER BY seq",
            [exchange, first, last],
            FactCell,
        )

    def frame_result(self, exchange: int, idx: int) -> FrameResultDetail | None:
        """One frame's derived state in full."""
        rows = self._derived(
            "SELECT " + ", ".join(FrameResultDetail._fields) + " FROM frame_results WHERE exchange_id = ? AND idx = ?",
            [exchange, idx],
            FrameResultDetail,
        )
        return rows[0] if rows else None

    def frame_facts(self, exchange: int, idx: int) -> list[FrameFact]:
        """One frame's facts in full, in order."""
        return self._derived(
            "SELECT kind, accepted, reason, detail, fact FROM facts WHERE exchange_id = ? AND frame_idx = ? ORDER BY seq",
            [exchange, idx],
            FrameFact,
        )

    def problem_refs(self, session: str | None, run: str | None) -> set[tuple[int, int]]:
        """``(exchange, frame)`` where a run shows something wrong: a fact
        rejected for losing something, a decode error, output decoded after
        the reader stopped."""
        refs = set(
            self._derived(
                "SELECT exchange_id, frame_idx FROM facts WHERE session_id IS ? AND run_id IS ? AND accepted = 0"
                f" AND reason NOT IN {_NOT_LOST}",
                [session, run],
                tuple,
            )
        )
        refs |= set(
            self._derived(
                "SELECT exchange_id, idx FROM frame_results WHERE session_id IS ? AND run_id IS ?"
                " AND (state = 'error' OR shadow IS NOT NULL)",
                [session, run],
                tuple,
            )
        )
        return refs

    # -- derived: history -----------------------------------------------------------------

    def history_read(self, exchange: int) -> HistoryRead | None:
        """A history read's outcome."""
        rows = self._derived("SELECT ok, error, rule, result FROM history_reads WHERE exchange_id = ?", [exchange], HistoryRead)
        return rows[0] if rows else None

    def history_reads(self, session: str) -> list[HistoryReadAt]:
        """A session's history reads in time order."""
        return self._derived(
            "SELECT exchange_id, at, ok, error, result FROM history_reads WHERE session_id = ? ORDER BY at, exchange_id",
            [session],
            HistoryReadAt,
        )
