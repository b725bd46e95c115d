"""The SQLite source of the view model: reads paged and cached, never a whole trace.

Theory of operation
-------------------
The trace file is the source of truth and may be growing (the recorder
writes it in WAL mode while we read).  Everything the screens show comes
from small indexed queries:

* the run list from the derived ``runs`` and ``findings`` tables, or, before
  a trace has been analysed, from ``exchanges`` grouped by run (one index
  seek per exchange for its frame count);
* a run's timeline (:mod:`.timeline`) holds the run's rows in the order the
  pipeline replays them (request start, frames, end of stream; key
  ``(t, exchange, kind, frame)``) compressed into *segments* of consecutive
  frames of one exchange, so random access is a bisect and memory is
  O(segments), not O(frames);
* rows are fetched a page at a time (:meth:`TraceData.page`) and kept in a
  bounded LRU cache.

Derived tables live in the trace itself, or, when the viewer analysed a
read-only trace, in a side database (:attr:`TraceData.derived_path`).  The
queries are the store's (:class:`chatkit_trace.store.TraceReader`: every
thread gets its own read-only connections); this module turns their rows
into the records of :mod:`.model`, and is one implementation of
:class:`~.source.ViewSource` (the report's replay is the other).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from chatkit_trace.pipeline import DEFAULT_SESSION, STREAMING
from chatkit_trace.store import TraceReader

from . import runs
from .model import END, LRU, NOT_ANALYSED, START, ExchangeInfo, FactCell, FindingInfo, Row, RunInfo, Timeline, frame_t
from .model import loads_json as _loads

__all__ = ["TraceData", "problem_frames", "writable"]

#: Rows a page holds (the page cache's unit).
PAGE = 128


def _exchange(row: Sequence[Any]) -> ExchangeInfo:
    return ExchangeInfo.of(*row)


class TraceData:
    """Read access to one trace (and its derived tables) for the viewer.

    :param path: the trace database.
    :param derived_path: where the derived tables are (default: the trace).
    """

    def __init__(self, path: str | Path, derived_path: str | Path | None = None) -> None:
        self.reader = TraceReader(path, derived_path)
        self.path = self.reader.path
        self.page_cache: LRU[tuple[int, int, int], tuple[Timeline, list[Row]]] = LRU(64)
        self._exchange_cache: LRU[int, ExchangeInfo] = LRU(4096)
        self._lock = threading.Lock()
        self.generation = 0  # bumped when the data changed (live tail, analysis)

    @property
    def derived_path(self) -> str:
        """Where the derived tables are (the trace itself, or a side database)."""
        return self.reader.derived_path

    def set_derived(self, path: str | Path | None) -> None:
        """Point at new derived tables (after an analysis) and drop caches."""
        self.reader.set_derived(path)
        self.invalidate()

    def invalidate(self) -> None:
        with self._lock:
            self.page_cache.clear()
            self._exchange_cache.clear()
            self.generation += 1

    def data_version(self) -> int:
        """Changes whenever another connection committed to the trace (live tail)."""
        return self.reader.data_version()

    # -- summary --------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        return self.reader.meta()

    def has_open_stream(self) -> bool:
        """A response stream without an end: the recorder may still be writing."""
        return self.reader.has_open_stream()

    def recording_pid(self) -> int | None:
        """The pid of a ``chatkit-trace record`` still writing this trace (same host), or None."""
        recordings = self.meta().get("recordings")
        if (
            not isinstance(recordings, list)
            or not recordings
            or not isinstance(recordings[-1], dict)
        ):
            return None
        pid = recordings[-1].get("pid")
        if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        except OSError:
            return None
        return pid

    def counts(self) -> dict[str, int]:
        return self.reader.counts()

    def derivation_backlog(self) -> int:
        """Frames the recorder stored and its deriver has not derived yet (0: caught up)."""
        return self.reader.derivation_backlog()

    def has_derived(self) -> bool:
        return self.reader.has_derived()

    def finding_counts(self) -> dict[str, int]:
        return self.reader.finding_counts()

    def has_findings(self) -> bool:
        return self.reader.has_findings()

    # -- exchanges -------------------------------------------------------------------

    def exchange(self, index: int) -> ExchangeInfo | None:
        ex = self._exchange_cache.get(index)
        if ex is None:
            row = self.reader.exchange_summary(index)
            if row is None:
                return None
            ex = _exchange(row)
            self._exchange_cache.put(index, ex)
        return ex

    def exchanges(
        self, *, classified: bool = False, session: str | None = None, run: tuple[str | None, str] | None = None
    ) -> list[ExchangeInfo]:
        """Exchanges in time order: the classified ones, those of a session
        (``default`` also holds those without a session id), of a run."""
        rows = self.reader.exchange_summaries(classified=classified, session=session, default_session=DEFAULT_SESSION, run=run)
        out = [_exchange(r) for r in rows]
        for ex in out:
            self._exchange_cache.put(ex.index, ex)
        return out

    def frame_count(self, exchange: int) -> int:
        return self.reader.frame_count(exchange)

    def session_signature(self, session_id: str) -> tuple[Any, ...]:
        """Changes when the session's exchanges or frames change (live tail)."""
        return self.reader.session_signature(session_id, DEFAULT_SESSION)

    def session_exchanges(self, session_id: str) -> list[ExchangeInfo]:
        return self.exchanges(classified=True, session=session_id)

    # -- runs and findings ------------------------------------------------------------

    def findings(
        self, session_id: str | None = None, run_id: str | None = None, *, trace_wide: bool = False
    ) -> list[FindingInfo]:
        return [
            FindingInfo(code, sev, rule, sid, rid, _loads(frames, []) or [], msg, fp, _loads(detail, {}) or {})
            for code, sev, rule, sid, rid, frames, msg, fp, detail in self.reader.findings(
                session_id, run_id, trace_wide=trace_wide
            )
        ]

    def runs(self) -> list[RunInfo]:
        """Every run: from the derived tables when the trace was analysed,
        else from the exchanges (status ``not analysed``).  ``connection`` is
        how the run's last stream ended (``chatkit_trace.trace.stream_state``:
        the same column as ``chatkit-trace runs``)."""
        from chatkit_trace.trace import stream_state

        runs = self._derived_runs() if self.has_derived() else self._exchange_runs()
        if runs:
            by_index = {ex.index: ex for ex in self.exchanges(classified=True)}
            for r in runs:
                r.connection = stream_state([by_index[i] for i in r.exchanges if i in by_index])
        return runs

    def _derived_runs(self) -> list[RunInfo]:
        """The derived ``runs`` table, and the runs only a finding names (the
        Core never started them: the send failed at the HTTP level, CK110), as
        :mod:`.runs` makes every line of the run list."""
        found: runs.Tallies = {}
        for g in self.reader.finding_groups():
            refs = [ref for fr in (_loads(g.frames, []) or []) for ref in (_loads(fr, []) or [])]
            found.setdefault((g.session_id, g.run_id), runs.Tally()).add(g.severity, g.code, g.n, refs)
        out = [runs.from_row(row, found.get((row.session_id, row.run_id))) for row in self.reader.runs()]
        known = {(r.session_id, r.run_id) for r in out}
        for (sid, rid), c in found.items():
            if sid is None or rid is None or (sid, rid) in known:
                continue
            exs = [e.index for e in self.exchanges(run=(sid, rid))]
            run = runs.not_started(sid, rid, exs, self.exchange, c, refs=c.refs)
            first = self.exchange(run.exchanges[0]) if run.exchanges else None
            run.replay_session = (first.session_id or DEFAULT_SESSION) if first is not None else None
            out.append(run)
        starts: dict[Any, Any] = {}
        if out:
            # order by when the run's first exchange started (runs without frames too)
            for ex in self.exchanges(classified=True):
                starts.setdefault(ex.index, ex.started_at)
        for r in out:
            t = [starts[e] for e in r.exchanges if e in starts]
            if t:
                r.first_at = min(t)
        out.sort(
            key=lambda r: (
                r.first_at if r.first_at is not None else float("inf"),
                r.session_id,
                r.run_id,
            )
        )
        return out

    def _exchange_runs(self) -> list[RunInfo]:
        groups: dict[tuple[str, str], RunInfo] = {}
        for ex in self.exchanges(classified=True):
            if ex.capability in STREAMING or ex.capability == "subscribe":
                sid = ex.session_id or DEFAULT_SESSION
                rid = ex.run_id or (
                    f"{sid}:x{ex.index}"
                    if ex.capability != "subscribe"
                    else f"subscription x{ex.index}"
                )
                r = groups.get((sid, rid))
                if r is None:
                    r = groups[(sid, rid)] = RunInfo(
                        sid, rid, NOT_ANALYSED, first_at=ex.started_at, analysed=False
                    )
                n = self.frame_count(ex.index)
                r.frames += n
                r.exchanges = r.exchanges + (ex.index,)
                end = ex.ended_at if ex.ended_at is not None else ex.started_at
                r.duration = max(r.duration or 0.0, end - (r.first_at or ex.started_at))
        return sorted(groups.values(), key=lambda r: (r.first_at or 0.0, r.session_id, r.run_id))

    def search_runs(self, text: str, limit_exchanges: int = 100_000) -> set[int]:
        """Exchanges whose frames or request body contain ``text`` (a scan: call from a worker)."""
        return self.reader.search(text, limit_exchanges)

    # -- timeline ---------------------------------------------------------------------


    def routed_frames(self, sid: str, rid: str, exchanges: list[int]) -> dict[int, set[int]]:
        """The frames of subscription ``exchanges`` the pipeline routed to run ``rid``."""
        out: dict[int, set[int]] = {}
        for e in exchanges:
            frames = self.reader.routed_frames(e, sid, rid)
            if frames is None:  # not analysed
                break
            out[e] = frames
        return out

    def frame_keys(
        self, ex: ExchangeInfo, only: set[int] | None = None
    ) -> Iterator[tuple[tuple[float, int, int, int], int]]:
        """``(key, frame)`` of ``ex``'s frames (those in ``only``) in replay order."""
        e = ex.index
        for idx, t in self.reader.frame_times(e, ex.started_at):
            if only is not None and idx not in only:
                continue
            yield (t, e, 1, idx), idx

    def end_key(self, ex: ExchangeInfo) -> tuple[float, int, int, int]:
        """Where the end of ``ex``'s response stream falls in replay order."""
        at = self.reader.last_frame_at(ex.index)
        last = max(ex.started_at, at) if at else ex.started_at
        return (max(ex.ended_at or last, last), ex.index, 2, END)

    # -- pages of rows ------------------------------------------------------------------

    def rows(self, timeline: Timeline, start: int, stop: int) -> list[Row]:
        """Rows ``[start, stop)`` of ``timeline`` (through the page cache)."""
        out: list[Row] = []
        first_page, last_page = start // PAGE, (max(start, stop - 1)) // PAGE
        for p in range(first_page, last_page + 1):
            page = self.page(timeline, p)
            lo = max(start, p * PAGE) - p * PAGE
            hi = min(stop, (p + 1) * PAGE) - p * PAGE
            out.extend(page[lo:hi])
        return out

    def row(self, timeline: Timeline, index: int) -> Row | None:
        if not 0 <= index < len(timeline):
            return None
        rows = self.rows(timeline, index, index + 1)
        return rows[0] if rows else None

    def page(self, timeline: Timeline, number: int) -> list[Row]:
        # keyed by id(): the entry keeps its timeline, so the id is never
        # another timeline's while the entry lives (a freed run's timeline
        # left its id to the next run's, which then showed the old rows)
        key = (id(timeline), self.generation, number)
        with self._lock:
            cached = self.page_cache.get(key)
        if cached is not None and cached[0] is timeline:
            return cached[1]
        rows: list[Row] = []
        for _, ex, first, count in timeline.pieces(number * PAGE, (number + 1) * PAGE):
            info = timeline.exchanges.get(ex) or self.exchange(ex)
            if info is None:
                continue
            if first == START:
                rows.append(Row(info, START, info.started_at))
            elif first == END:
                rows.append(Row(info, END, self.end_key(info)[0]))
            else:
                rows.extend(self._frame_rows(info, first, count))
        with self._lock:
            self.page_cache.put(key, (timeline, rows))
        return rows

    def _frame_rows(self, ex: ExchangeInfo, first: int, count: int) -> list[Row]:
        last = first + count - 1
        rows: dict[int, Row] = {}
        for idx, at, event, event_id, text, has_raw, direction, error in self.reader.frame_summaries(ex.index, first, last):
            rows[idx] = Row(ex, idx, frame_t(at, ex.started_at), event, event_id, text, bool(has_raw), direction or "in", _loads(error))
        results = self.reader.frame_results(ex.index, first, last)
        if results is not None:
            for idx, state, error, shadow in results:
                r = rows.get(idx)
                if r is not None:
                    r.state = state
                    r.result_error = _loads(error)
                    r.shadow = len(_loads(shadow, []) or [])
                    r.facts = []
            for idx, kind, accepted, reason, detail in self.reader.fact_cells(ex.index, first, last):
                r = rows.get(idx)
                if r is not None:
                    if r.facts is None:
                        r.facts = []
                    r.facts.append(FactCell(kind, bool(accepted), reason, detail))
        return [rows[i] for i in sorted(rows)]

    # -- one frame in full ----------------------------------------------------------------

    def frame_detail(self, exchange: int, idx: int) -> dict[str, Any] | None:
        """Everything about one frame: text, raw bytes, offsets, facts (with the fact JSON), shadow facts."""
        row = self.reader.frame_detail(exchange, idx)
        if row is None:
            return None
        at, event, event_id, text, raw, start, end, error, transport, direction = row
        out: dict[str, Any] = {
            "at": at,
            "event": event,
            "event_id": event_id,
            "text": text,
            "raw": raw,
            "start": start,
            "end": end,
            "error": _loads(error),
            "transport": transport,
            "direction": direction,
            "facts": [],
            "shadow": [],
            "state": None,
            "result_error": None,
        }
        fr = self.reader.frame_result(exchange, idx)
        if fr is not None:
            out["state"], out["result_error"] = fr[0], _loads(fr[1])
            out["shadow"] = _loads(fr[2], []) or []
            out["event_type"], out["end_marker"], out["unknown"] = fr[3], bool(fr[4]), bool(fr[5])
        out["facts"] = [
            {"kind": k, "accepted": bool(a), "reason": r, "detail": dt, "fact": _loads(f, {})}
            for k, a, r, dt, f in self.reader.frame_facts(exchange, idx)
        ]
        return out

    def exchange_detail(self, exchange: int) -> dict[str, Any] | None:
        row = self.reader.exchange_detail(exchange)
        if row is None:
            return None
        method, url, status, rqh, rqb, rsh, rsb, error, notes = row
        out: dict[str, Any] = {
            "method": method,
            "url": url,
            "status": status,
            "request_headers": _loads(rqh, []),
            "request_body": rqb,
            "response_headers": _loads(rsh, []),
            "response_body": rsb,
            "error": error,
            "notes": _loads(notes, {}),
        }
        h = self.reader.history_read(exchange)
        if h is not None:
            out["history"] = {
                "ok": bool(h[0]),
                "error": h[1],
                "rule": h[2],
                "messages": len((_loads(h[3], {}) or {}).get("messages", [])),
            }
        return out

    # -- live vs history --------------------------------------------------------------------

    def history_reads(self, session_id: str) -> list[dict[str, Any]]:
        return [
            {"exchange": e, "at": at, "ok": bool(ok), "error": err, "result": _loads(res)}
            for e, at, ok, err, res in self.reader.history_reads(session_id)
        ]

    def settled_snapshot(
        self, session_id: str, run_id: str
    ) -> tuple[dict[str, Any] | None, str | None, float | None]:
        row = self.reader.settled_snapshot(session_id, run_id)
        if row is None:
            return None, None, None
        return _loads(row[0]), row[1], row[2]

    def close(self) -> None:
        self.reader.close()


def writable(path: str | Path) -> bool:
    """Can the viewer write derived tables back into ``path``?"""
    p = Path(path)
    return os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)


def problem_frames(data: TraceData, timeline: Timeline) -> list[int]:
    """Rows of ``timeline`` that show something wrong: a rejected fact, a
    decode error, output lost after the reader stopped (sorted)."""
    refs = data.reader.problem_refs(timeline.session_id, timeline.run_id)
    refs |= data.reader.broken_frames(sorted(timeline.exchanges))
    rows = {timeline.find(e, i) for e, i in refs if e is not None and i is not None}
    return sorted(r for r in rows if r is not None)
