"""Write what the pipeline derived (facts, frame results, runs, sessions,
history reads) into a trace's derived tables."""

from __future__ import annotations

import json
from typing import Any

from ..pipeline import Replay
from ._db import TraceStore

__all__ = ["write_replay"]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def fact_summary(fact: Any) -> dict[str, Any]:
    """What the trace stores of a fact: everything but a message's content,
    which is summarised (part ids, types, text lengths) so a long answer sent
    as whole messages does not grow the file quadratically.  The full fact is
    always recomputable from the frames (``redecode``)."""
    data = fact.to_json()
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


def _run_part(snapshot: Any, run_id: str) -> dict[str, Any]:
    """The part of a snapshot that belongs to one run (its messages and view):
    what the live-vs-history comparison needs, without repeating the whole
    session per run."""
    data = snapshot.to_json()
    data["messages"] = [m for m in data["messages"] if m.get("runId") == run_id]
    data["runs"] = [r for r in data["runs"] if r.get("id") == run_id]
    return data


def write_replay(store: TraceStore, replay: Replay, *, append: bool = False) -> None:
    """Write ``replay``'s results into the derived tables (one transaction).

    By default the tables are replaced; ``append=True`` adds to them (a
    trace analysed one session at a time).  Facts keep their admission order
    (``seq`` is assigned on insert).
    """
    db = store.db
    with db.conn:
        if not append:
            store.clear_derived()
        db.conn.executemany(
            "INSERT INTO facts (exchange_id, frame_idx, session_id, run_id, kind, event_id, accepted, reason,"
            " detail, snapshot_version, fact) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    f.exchange_index,
                    f.frame_index,
                    f.fact.session_id,
                    f.fact.run_id,
                    f.fact.kind,
                    f.fact.event_id,
                    int(f.result.accepted),
                    None if f.result.reason is None else f.result.reason.value,
                    f.result.detail,
                    f.snapshot_version,
                    _dumps(fact_summary(f.fact)),
                )
                for f in replay.facts
            ],
        )
        db.conn.executemany(
            "INSERT INTO frame_results (exchange_id, idx, state, session_id, run_id, error, unknown, event_type,"
            " end_marker, shadow) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    fr.exchange_index,
                    fr.frame_index,
                    fr.state,
                    fr.session_id,
                    fr.run_id,
                    None
                    if fr.error is None
                    else _dumps(fr.error.to_json() if hasattr(fr.error, "to_json") else {"kind": "decode", "message": str(fr.error)}),
                    int(fr.unknown),
                    fr.event_type,
                    int(fr.end_marker),
                    _dumps([fact_summary(f) for f in fr.shadow]) if fr.shadow else None,
                )
                for fr in replay.frames
            ],
        )
        run_rows = []
        frames_per_run: dict[tuple[str | None, str | None], list[float]] = {}
        for fr in replay.frames:
            frames_per_run.setdefault((fr.session_id, fr.run_id), []).append(fr.at)
        facts_per_run: dict[tuple[str, str], list[int]] = {}
        for f in replay.facts:
            c = facts_per_run.setdefault((f.fact.session_id, f.fact.run_id), [0, 0])
            c[0] += 1
            c[1] += int(f.result.violation)
        for sid, s in replay.sessions.items():
            snap = s.core.snapshot
            for view in snap.runs:
                rec = s.runs.get(view.id)
                times = frames_per_run.get((sid, view.id), [])
                counts = facts_per_run.get((sid, view.id), [0, 0])
                run_rows.append(
                    {
                        "session_id": sid,
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
                        "facts": counts[0],
                        "rejected": counts[1],
                        "first_at": min(times) if times else None,
                        "last_at": max(times) if times else None,
                        "settled_snapshot": _dumps(_run_part(rec.settled, view.id)) if rec and rec.settled else None,
                    }
                )
            db["sessions"].insert(
                {
                    "session_id": sid,
                    "status": snap.session_status,
                    "runs": len(snap.runs),
                    "messages": len(snap.messages),
                    "snapshot": _dumps(snap.to_json()),
                }
            )
            for h in s.history:
                db["history_reads"].insert(
                    {
                        "exchange_id": h.exchange_index,
                        "session_id": sid,
                        "at": h.at,
                        "ok": int(bool(h.command and h.command.ok)),
                        "error": h.error or (h.command.error if h.command and not h.command.ok else None),
                        "rule": h.command.rule if h.command else None,
                        "result": _dumps(h.result.to_json()) if h.result is not None else None,
                        "before": _dumps(h.before.to_json()),
                        "after": _dumps(h.after.to_json()),
                    },
                    # a socket's history reads share its exchange id (the table's key):
                    # the first is kept; the analysis reads the replay's own records
                    ignore=getattr(h, "frame_index", None) is not None,
                )
        if run_rows:
            db["runs"].insert_all(run_rows)
