"""Live vs history for one run (SPEC R8.4; CK201, CK202).

The comparisons are the ones ``check`` and ``chatkit-trace diff`` make
(:func:`chatkit_trace.analyze.identity.comparisons`, the same code): the
run's session is replayed, and the run, as the UI had it from the live
stream just before each later history read that covers it (the read's
scope: session, run or task, page), is set beside that read's items.
"""

from __future__ import annotations

import textwrap
from typing import Any

from textual.content import Content

from chatkit_trace.analyze.identity import (
    Comparison,
    Pair,
    cause_sentence,
    describe,
    limit_sentence,
    visible,
)
from chatkit_trace.core import RuntimeMessage
from chatkit_trace.views.data import TraceData

from .render import TONE_VAR

__all__ = ["Comparison", "cause_sentence", "comparisons", "describe", "limit_sentence", "side_by_side"]


def comparisons(
    data: TraceData, session_id: str, run_id: str, adapter: Any, capabilities: Any = None
) -> list[Comparison]:
    """Every comparison of ``run_id`` with a history read that covers it."""
    from chatkit_trace.analyze import Context
    from chatkit_trace.analyze.identity import comparisons as all_comparisons
    from chatkit_trace.analyze.identity import open_comparisons
    from chatkit_trace.derive import derive_exchanges
    from chatkit_trace.views.replay import session_exchanges

    exchanges = session_exchanges(data, session_id)
    for ex in exchanges:
        ex.frames = list(ex.frames)
    # a socket several sessions share: this session's own frames of it (as the engine replays it)
    derived = derive_exchanges(exchanges, adapter, capabilities=capabilities, analyse=False, only={session_id})
    ctx = Context(derived.replay, {e.index: e for e in exchanges}, adapter)
    # the judged ones, and (as ``diff``) the latest read of a run none was judged against
    return [x for x in all_comparisons(ctx) + open_comparisons(ctx) if x.run_id == run_id]


def _part_text(p: Any) -> str:
    import json

    v = visible(p)
    if "text" in v:
        return str(v["text"])
    return ", ".join(f"{k}: {json.dumps(v[k], ensure_ascii=False, default=str)}" for k in v)


def _cells(
    m: RuntimeMessage | None, other: RuntimeMessage | None, empty: str, c: Comparison | None = None, *, live: bool = True
) -> list[tuple[str, str]]:
    """A message's lines, each with its tone: ``error`` where it differs from
    ``other`` as the comparison ``c`` counts it (``live``: ``m`` is the live
    side).  Without ``c``: any other id, type or visible content."""
    if m is None:
        return [(empty, "error")]
    if c is not None:
        pair = Pair(m, other) if live else Pair(other, m)
        head = c.head_differs(pair)
    else:
        head = other is None or other.id != m.id or other.role != m.role
    cells = [(f"{m.role} {m.id}", "error" if head else "primary")]
    other_parts = list(other.parts) if other is not None else []
    for i, p in enumerate(m.parts):
        o = other_parts[i] if i < len(other_parts) else None
        if c is not None:
            differs = c.part_differs(p, o) if live else c.part_differs(o, p)
        else:
            differs = not (o is not None and o.id == p.id and o.type == p.type and visible(o) == visible(p))
        cells.append((f"  {p.id} [{p.type}] {_part_text(p)}", "error" if differs else ""))
    return cells


def side_by_side(c: Comparison, width: int) -> Content:
    """Two columns, live | history, each difference in the error colour.

    Recorded text goes in as plain text (``Content.assemble``), never as markup."""
    w = max(20, (width - 3) // 2)
    live_head = f"live, as of {'frame' if c.live_at and c.live_at[1] is not None else 'request'} " + (
        ":".join(str(x) for x in c.live_at if x is not None) if c.live_at else "?"
    ) + f" (run {c.how})"
    lines: list[Content] = [
        Content.assemble(
            (f"{live_head[:w]:<{w}}", "bold"),
            (" │ ", "$text-muted"),
            (c.title, "bold"),
        ),
        Content.styled("─" * w + "─┼─" + "─" * w, "$text-muted"),
    ]
    missing = "(missing in history)" if c.scope != "page" else "(not in this page)"
    for pair in c.pairs:
        left = _cells(pair.live, pair.history, "(not shown live)", c)
        right = _cells(pair.history, pair.live, missing, c, live=False)
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
