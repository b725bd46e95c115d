"""Live vs history side by side, drawn (SPEC R8.4; CK201, CK202).

The comparisons and each message's cells are the view model's
(:mod:`chatkit_trace.views.diff`, the report draws the same cells); this
module lays them out in two columns for the terminal.
"""

from __future__ import annotations

import textwrap

from textual.content import Content

from chatkit_trace.views.diff import Comparison, message_cells

from .render import TONE_VAR

__all__ = ["side_by_side"]


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
        left = message_cells(pair.live, pair.history, "(not shown live)", c)
        right = message_cells(pair.history, pair.live, missing, c, live=False)
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
