"""Live vs history for one run (SPEC R8.4; CK201, CK202).

The comparisons are the ones ``check`` and ``chatkit-trace diff`` make
(:func:`chatkit_trace.analyze.identity.comparisons`, the same code): the
run's session is replayed, and the run, as the UI had it from the live
stream just before each later history read that covers it (the read's
scope: session, run or task, page), is set beside that read's items.

What a front end draws from them: :func:`message_cells`, a message's lines
each with its tone (the viewer's side-by-side, :mod:`chatkit_trace.viewer.diff`;
the report's live-vs-history table).
"""

from __future__ import annotations

from typing import Any

from chatkit_trace.analyze.identity import (
    Comparison,
    Pair,
    cause_sentence,
    describe,
    limit_sentence,
    visible,
)
from chatkit_trace.core import RuntimeMessage

from .data import TraceData

__all__ = ["Comparison", "cause_sentence", "comparisons", "describe", "limit_sentence", "message_cells"]


def comparisons(
    data: TraceData, session_id: str, run_id: str, adapter: Any, capabilities: Any = None
) -> list[Comparison]:
    """Every comparison of ``run_id`` with a history read that covers it."""
    from chatkit_trace.analyze import Context
    from chatkit_trace.analyze.identity import comparisons as all_comparisons
    from chatkit_trace.analyze.identity import open_comparisons
    from chatkit_trace.derive import derive_exchanges

    from .replay import session_exchanges

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


def message_cells(
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
