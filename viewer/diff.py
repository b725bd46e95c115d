"""Live vs history for one run, from the derived tables (SPEC R8.4; CK201, CK202).

The comparison is the one ``check`` makes (:mod:`chatkit_trace.analyze.identity`):
the live snapshot at the moment the run settled, against every later
history read of its session; run by run when history messages carry run
ids, else the settled runs' messages against the whole history.  A run that
never settled live is compared as the UI had it just before the read.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from textual.content import Content

from chatkit_trace.analyze.identity import diff_messages, visible
from chatkit_trace.core import InvalidMessageError, RuntimeMessage, message_from_json

from .data import TraceData
from .render import TONE_VAR

__all__ = ["Comparison", "comparisons", "describe", "side_by_side"]


@dataclass
class Comparison:
    history_exchange: int
    at: float
    live_label: str
    live: list[RuntimeMessage]
    history: list[RuntimeMessage]
    diffs: list[dict[str, Any]] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


def _messages(items: Any) -> list[RuntimeMessage]:
    out = []
    for m in items or []:
        try:
            out.append(message_from_json(m, "history"))
        except InvalidMessageError:
            continue
    return out


def comparisons(data: TraceData, session_id: str, run_id: str) -> list[Comparison]:
    settled, settled_by, settled_at = data.settled_snapshot(session_id, run_id)
    out: list[Comparison] = []
    for h in data.history_reads(session_id):
        result = h["result"] or {}
        if settled is not None and settled_by == "fact":
            if settled_at is not None and settled_at > h["at"] * 1000.0:
                continue
            live_all = _messages(settled.get("messages"))
            label = "live, when the run settled"
            done = {
                r["id"]
                for r in settled.get("runs", [])
                if r.get("status") in ("completed", "failed", "interrupted")
            }
        else:
            if h["exchange"] is None:
                continue
            before = _before(data, h["exchange"])
            if before is None:
                continue
            live_all = _messages(before.get("messages"))
            label = "live, just before the read"
            done = {r["id"] for r in before.get("runs", [])}
        hist_all = _messages(result.get("messages"))
        if any(m.run_id for m in hist_all):
            live = [m for m in live_all if m.run_id == run_id]
            hist = [m for m in hist_all if m.run_id == run_id]
        else:
            live = [m for m in live_all if m.run_id is None or m.run_id in done]
            hist = hist_all
        if not live and not hist:
            continue
        diffs, renamed = diff_messages(live, hist)
        out.append(
            Comparison(h["exchange"], h["at"], label, live, hist, diffs, renamed, h["error"])
        )
    return out


def _before(data: TraceData, exchange: int) -> dict[str, Any] | None:
    import json
    import sqlite3

    try:
        row = (
            data.dconn()
            .execute("SELECT before FROM history_reads WHERE exchange_id = ?", [exchange])
            .fetchone()
        )
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row and row[0] else None


def _part_text(p: Any) -> str:
    v = visible(p)
    if "text" in v:
        return str(v["text"])
    return ", ".join(f"{k}={v[k]!r}" for k in v)


def _pairs(c: Comparison) -> list[tuple[RuntimeMessage | None, RuntimeMessage | None]]:
    """Live and history messages side by side: same id, else same content, else alone."""
    hist_by_id = {m.id: m for m in c.history}
    renamed = dict(c.renamed)
    used: set[int] = set()
    pairs: list[tuple[RuntimeMessage | None, RuntimeMessage | None]] = []
    for m in c.live:
        h = hist_by_id.get(m.id)
        if h is None and m.id in renamed:
            h = hist_by_id.get(renamed[m.id])
        if h is not None and id(h) not in used:
            used.add(id(h))
            pairs.append((m, h))
        else:
            pairs.append((m, None))
    # history messages that are not paired go where they are in history order
    out: list[tuple[RuntimeMessage | None, RuntimeMessage | None]] = []
    pending = [h for h in c.history if id(h) not in used]
    for lm, hm in pairs:
        out.append((lm, hm))
    for h in pending:
        out.append((None, h))
    return out


def _cells(m: RuntimeMessage | None, other: RuntimeMessage | None) -> list[tuple[str, str]]:
    if m is None:
        return [("(missing)", "error")]
    tone = "" if other is not None and other.id == m.id and other.role == m.role else "error"
    cells = [(f"{m.role} {m.id}", tone or "primary")]
    other_parts = list(other.parts) if other is not None else []
    for i, p in enumerate(m.parts):
        o = other_parts[i] if i < len(other_parts) else None
        same = o is not None and o.id == p.id and o.type == p.type and visible(o) == visible(p)
        cells.append((f"  {p.id} [{p.type}] {_part_text(p)}", "" if same else "error"))
    return cells


def side_by_side(c: Comparison, width: int) -> Content:
    """Two columns, live | history, each difference in the error colour."""
    w = max(20, (width - 3) // 2)
    lines: list[Content] = [
        Content.assemble(
            (f"{c.live_label:<{w}}", "bold"),
            (" │ ", "$text-muted"),
            (f"history read {c.history_exchange}", "bold"),
        ),
        Content.styled("─" * w + "─┼─" + "─" * w, "$text-muted"),
    ]
    for lm, hm in _pairs(c):
        left = _cells(lm, hm)
        right = _cells(hm, lm)
        lw = [
            (t, tone)
            for text, tone in left
            for t in (textwrap.wrap(text, w, subsequent_indent="    ") or [""])
        ]
        rw = [
            (t, tone)
            for text, tone in right
            for t in (textwrap.wrap(text, w, subsequent_indent="    ") or [""])
        ]
        for i in range(max(len(lw), len(rw))):
            lt, ltone = lw[i] if i < len(lw) else ("", "")
            rt, rtone = rw[i] if i < len(rw) else ("", "")
            lines.append(
                Content.assemble(
                    (f"{lt:<{w}}", TONE_VAR.get(ltone, "")),
                    (" │ ", "$text-muted"),
                    (rt, TONE_VAR.get(rtone, "")),
                )
            )
        lines.append(Content.assemble(" " * w, (" │ ", "$text-muted")))
    return Content("\n").join(lines)


def describe(d: dict[str, Any]) -> str:
    """One line for one difference of :func:`diff_messages`."""
    what = d.get("what")
    msg = d.get("message")
    if what == "id":
        return f"message id differs: live {d['live']} vs history {d['history']} ({d.get('role')}, same content)"
    if what == "missing in history":
        return f"{msg} ({d.get('role')}) is missing in history: {d.get('text')!r}"
    if what == "extra in history":
        return f"{msg} ({d.get('role')}) is only in history: {d.get('text')!r}"
    if what == "parts":
        return f"{msg}: parts differ: live {d['live']} vs history {d['history']}"
    if what == "content":
        return f"{msg}/{d.get('part')}: {', '.join(d.get('fields', []))} differ: live {d['live']} vs history {d['history']}"
    if what == "role":
        return f"{msg}: role live {d['live']} vs history {d['history']}"
    return str(d)
