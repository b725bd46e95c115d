"""What a replay and its findings become in the trace: plain rows, one dict
(column -> value) per row, per derived table.  The store writes them
(:meth:`chatkit_trace.store.TraceStore.write_derived`,
:meth:`~chatkit_trace.store.TraceStore.replace_findings`) without knowing
where they came from."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..analyze import Finding
from ..core import MessageFact, ReasoningPart, RuntimeMessage, RunView, Snapshot, TextPart, thaw
from ..pipeline import FactRecord, FrameRecord, HistoryRecord, ReaderStop, Replay, RunRecord

__all__ = ["RunSummary", "derived_rows", "fact_summary", "finding_rows", "run_summaries", "reader_stops", "unstarted_runs", "wait_span"]

Rows = dict[str, list[dict[str, Any]]]


#: ``json.dumps(value, separators=(",", ":"), default=str)``'s C encoder, made
#: once (json.dumps makes an encoder and its C half per call: about half of
#: the call's cost, once per fact row).  No circular-reference check: rows
#: are JSON values built from frozen facts, never circular.
_ENCODE = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
) if json.encoder.c_make_encoder is not None else None  # type: ignore[attr-defined]


def _dumps(value: Any) -> str:
    if _ENCODE is None or type(value) is not dict:
        return json.dumps(value, separators=(",", ":"), default=str)
    return "".join(_ENCODE(value, 0))


def fact_summary(fact: Any) -> dict[str, Any]:
    """What the trace stores of a fact: everything but a message's content,
    which is summarised (part ids, types, text lengths) so a long answer sent
    as whole messages does not grow the file quadratically.  The full fact is
    always recomputable from the frames (``redecode``)."""
    if type(fact) is MessageFact and type(fact.message) is RuntimeMessage and not fact.message.extra:
        return _message_summary(fact)
    data: dict[str, Any] = fact.to_json()
    for key in ("kind", "sessionId", "runId", "eventId"):  # already columns of the row
        data.pop(key, None)
    message = data.get("message")
    if isinstance(message, dict):
        data["message"] = {
            "id": message.get("id"),
            "role": message.get("role"),
            "parts": [
                [p.get("id"), p.get("type"), len(p["text"]) if isinstance(p.get("text"), str) else None]
                for p in message.get("parts", [])
                if isinstance(p, dict)
            ],
            "summary": True,
        }
    return data


def _message_summary(fact: MessageFact) -> dict[str, Any]:
    """:func:`fact_summary` of a message fact without rendering its message
    (a long answer's text is neither joined nor copied): the same dict."""
    data = _base_summary(fact)
    message = fact.message
    parts = []
    for p in message.parts:
        if (type(p) is TextPart or type(p) is ReasoningPart) and not p.extra:
            parts.append([p.id, p.type, p.text_length])
        else:
            j = p.to_json() if hasattr(p, "to_json") else thaw(p)
            if isinstance(j, dict):
                parts.append([j.get("id"), j.get("type"), len(j["text"]) if isinstance(j.get("text"), str) else None])
    data["message"] = {"id": message.id, "role": message.role, "parts": parts, "summary": True}
    return data


def _base_summary(fact: Any) -> dict[str, Any]:
    """A fact's JSON fields other than its kind, ids and payload, in ``to_json``'s order."""
    data: dict[str, Any] = {}
    if fact.source_sequence is not None:
        data["sourceSequence"] = fact.source_sequence
    if fact.position is not None:
        data["position"] = thaw(fact.position)
    if fact.at is not None:
        data["at"] = fact.at
    return data


def _run_part(snapshot: Any, run_id: str) -> dict[str, Any]:
    """The part of a snapshot that belongs to one run (its messages and view):
    what the live-vs-history comparison needs, without repeating the whole
    session per run."""
    data: dict[str, Any] = snapshot.to_json()
    data["messages"] = [m for m in data["messages"] if m.get("runId") == run_id]
    data["runs"] = [r for r in data["runs"] if r.get("id") == run_id]
    return data


@dataclass
class RunSummary:
    """One run of a replay as the recorder's log line, ``runs`` and the
    ``runs`` table count it."""

    session_id: str
    view: RunView
    record: RunRecord | None
    #: times of the frames the replay attributed to the run
    frame_times: list[float] = field(default_factory=list)
    facts: int = 0
    #: facts rejected for a contract violation (not idempotently)
    violations: int = 0
    #: every rejection, by reason (idempotent ones included)
    rejections: Counter[str] = field(default_factory=Counter)

    @property
    def run_id(self) -> str:
        return self.view.id

    #: When the user's wait began and the end they saw (:func:`wait_span`).
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def exchanges(self) -> list[int]:
        return list(self.record.exchanges) if self.record is not None else []

    @property
    def duration(self) -> float:
        """How long the user waited for the run (:func:`wait_span`), seconds."""
        if self.started_at is None or self.ended_at is None:
            return 0.0
        return max(0.0, self.ended_at - self.started_at)


#: Exchanges that start a run: the user's wait begins with their request.
_STARTS = ("run", "regenerate", "edit", "resume")


def wait_span(
    exchanges: Iterable[Any], frame_times: Iterable[float], stops: Mapping[int, float] | None = None
) -> tuple[float | None, float | None]:
    """``(start, end)`` of a run as the user waited for it (decisions.md 278):
    from the request that started it (else its first frame: a run another
    client started) to the end the user saw: where the UI's reader stopped
    on a stream (``stops``: exchange index -> the terminal frame's time),
    else the response's end (an HTTP 500 after the backend's retries is one
    error body, 9.7 s after the request), else its last frame."""
    times = list(frame_times)
    own = [e for e in exchanges if e.capability in _STARTS]
    start = min((e.started_at for e in own), default=min(times, default=None))
    if start is None:
        return None, None
    stops = stops or {}
    ends = [stops.get(e.index, e.ended_at) for e in own]
    seen = [t for t in ends if t is not None]
    if stops:
        cut = max(stops.values())
        times = [t for t in times if t <= cut]  # frames after the terminal: the reader had stopped
    end = max([*times, *seen], default=start)
    return start, max(start, end)


def reader_stops(replay: Replay, indexes: Iterable[int]) -> dict[int, float]:
    """Where the UI's reader stopped at a terminal frame, per exchange: its time."""
    out: dict[int, float] = {}
    for i in indexes:
        rec = replay.exchanges.get(i)
        if rec is None or rec.reader_stop is None or rec.reader_stop[0] != ReaderStop.TERMINAL:
            continue
        at = next((fr.at for fr in rec.frames if fr.frame_index == rec.reader_stop[1]), None)
        if at is not None:
            out[i] = at
    return out


def run_summaries(replay: Replay) -> list[RunSummary]:
    """Every run of every session of ``replay``, in the Core's order."""
    frames: dict[tuple[str | None, str | None], list[float]] = {}
    for fr in replay.frames:
        frames.setdefault((fr.session_id, fr.run_id), []).append(fr.at)
    facts: dict[tuple[str, str], tuple[list[int], Counter[str]]] = {}
    for f in replay.facts:
        counts, rejections = facts.setdefault((f.fact.session_id, f.fact.run_id), ([0, 0], Counter()))
        counts[0] += 1
        counts[1] += int(f.result.violation)
        if not f.result.accepted:
            rejections[f.result.reason.value if f.result.reason is not None else "rejected"] += 1
    out = []
    for sid, s in replay.sessions.items():
        for view in s.run_views():
            (n, violations), rejections = facts.get((sid, view.id), ([0, 0], Counter()))
            rec = s.runs.get(view.id)
            times = frames.get((sid, view.id), [])
            indexes = rec.exchanges if rec else []
            own = [replay.exchanges[i].exchange for i in indexes if i in replay.exchanges]
            start, end = wait_span(own, times, reader_stops(replay, indexes))
            out.append(RunSummary(sid, view, rec, times, n, violations, rejections, start, end))
    return out


def unstarted_runs(replay: Replay) -> list[tuple[str, RunRecord, float | None, float | None]]:
    """Runs the Core never started (a request that failed or was refused,
    R2.2: status ``not started``), with their wait span: ``(session, record,
    start, end)``, in the order they were sent."""
    out = []
    for sid, s in replay.sessions.items():
        shown = {v.id for v in s.run_views()}
        for rid, rec in s.runs.items():
            if rid in shown:
                continue
            own = [replay.exchanges[i] for i in rec.exchanges if i in replay.exchanges]
            if any(x.dispatch == "refused" for x in own):
                start, end = wait_span([x.exchange for x in own], [])
                out.append((sid, rec, start, end))
    return sorted(out, key=lambda r: r[2] if r[2] is not None else 0.0)


def derived_rows(replay: Replay) -> Rows:
    """``replay``'s facts, frame results, runs, sessions and history reads as rows."""
    return {
        "facts": [_fact_row(f) for f in replay.facts],
        "frame_results": [_frame_row(fr) for fr in replay.frames],
        "runs": [_run_row(r) for r in run_summaries(replay)],
        "sessions": [_session_row(sid, s.core.snapshot) for sid, s in replay.sessions.items()],
        "history_reads": [_history_row(sid, h) for sid, s in replay.sessions.items() for h in s.history],
    }


def _fact_row(f: FactRecord) -> dict[str, Any]:
    return {
        "exchange_id": f.exchange_index,
        "frame_idx": f.frame_index,
        "session_id": f.fact.session_id,
        "run_id": f.fact.run_id,
        "kind": f.fact.kind,
        "event_id": f.fact.event_id,
        "accepted": int(f.result.accepted),
        "reason": None if f.result.reason is None else f.result.reason.value,
        "detail": f.result.detail,
        "snapshot_version": f.snapshot_version,
        "fact": _dumps(fact_summary(f.fact)),
    }


def _frame_row(fr: FrameRecord) -> dict[str, Any]:
    error = fr.error
    return {
        "exchange_id": fr.exchange_index,
        "idx": fr.frame_index,
        "state": fr.state,
        "session_id": fr.session_id,
        "run_id": fr.run_id,
        "error": None
        if error is None
        else _dumps(error.to_json() if hasattr(error, "to_json") else {"kind": "decode", "message": str(error)}),
        "unknown": int(fr.unknown),
        "event_type": fr.event_type,
        "end_marker": int(fr.end_marker),
        "shadow": _dumps([fact_summary(f) for f in fr.shadow]) if fr.shadow else None,
    }


def _session_row(session_id: str, snap: Snapshot) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "status": snap.session_status,
        "runs": len(snap.runs),
        "messages": len(snap.messages),
        "snapshot": _dumps(snap.to_json()),
    }


def _history_row(session_id: str, h: HistoryRecord) -> dict[str, Any]:
    return {
        "exchange_id": h.exchange_index,
        "session_id": session_id,
        "at": h.at,
        "ok": int(bool(h.command and h.command.ok)),
        "error": h.error or (h.command.error if h.command and not h.command.ok else None),
        "rule": h.command.rule if h.command else None,
        "result": _dumps(h.result.to_json()) if h.result is not None else None,
        "before": _dumps(h.before.to_json()),
        "after": _dumps(h.after.to_json()),
    }


def _run_row(r: RunSummary) -> dict[str, Any]:
    view, rec, times = r.view, r.record, r.frame_times
    return {
        "session_id": r.session_id,
        "run_id": view.id,
        "status": view.status,
        "origin": view.origin,
        "phase": view.phase,
        "connection": view.connection,
        "error": _dumps(view.error.to_json()) if view.error else None,
        "interrupt_reason": view.interrupt_reason,
        "created_at": view.created_at,
        "settled_at": rec.settled_at if rec else None,
        "settled_by": rec.settled_by if rec else None,
        "exchanges": _dumps(rec.exchanges if rec else []),
        "frames": len(times),
        "facts": r.facts,
        "rejected": r.violations,
        # the user's wait: from the run's request to the end they saw (decisions.md 278)
        "first_at": r.started_at,
        "last_at": r.ended_at,
        "settled_snapshot": _dumps(_run_part(rec.settled, view.id)) if rec and rec.settled else None,
    }


def finding_rows(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """The ``findings`` table's rows."""
    return [
        {
            "code": f.code,
            "severity": f.severity,
            "rule": f.rule,
            "session_id": f.session_id,
            "run_id": f.run_id,
            "frames": json.dumps(f.frames),
            "fingerprint": f.fingerprint,
            "message": f.message,
            "detail": json.dumps(f.detail, default=str),
        }
        for f in findings
    ]
