"""Turning trace data into something to read: compact frame text, fact
results, the chat a snapshot shows, frame details and raw bytes.

Panels use Textual :class:`~textual.content.Content` markup with theme
variables (``$text-error`` …) so every colour follows the light or dark
theme; virtual lists get plain strings plus a *tone* per span and map tones
to their component styles.
"""

from __future__ import annotations

import json
from typing import Any

from textual.content import Content

from chatkit_trace.core import (
    ABSENT,
    DataPart,
    MediaPart,
    ReasoningPart,
    RuntimeMessage,
    RunView,
    Snapshot,
    TextPart,
    ToolCallPart,
    get_tool_call_status,
    thaw,
)
from chatkit_trace.pipeline import PROBLEM_STATES, READER_STOPPED, FrameState
from chatkit_trace.views import END, NOT_ANALYSED, START, Row
from chatkit_trace.visible import visible

__all__ = [
    "IDEMPOTENT",
    "STATUS_TONE",
    "compact",
    "esc",
    "facts_cells",
    "frame_cells",
    "hexdump",
    "messages_content",
    "short_json",
    "snapshot_content",
    "snapshot_header",
]

IDEMPOTENT = ("duplicate-event", "no-change")
#: status -> tone (a component style of the lists, a theme colour in panels)
#: How a frame's state reads in the facts column where the frame has no
#: facts (:class:`chatkit_trace.pipeline.FrameState`; any other: its name).
STATE_LABEL: dict[str, str] = {
    FrameState.ADMITTED: "no facts",
    FrameState.EMPTY: "no event",
    FrameState.DUPLICATE: "duplicate id",
    FrameState.WRONG_SESSION: "wrong session",
    **{state: state.replace("-", " ") for state in READER_STOPPED},
}

STATUS_TONE = {
    "completed": "success",
    "failed": "error",
    "interrupted": "warning",
    "outcome unknown": "error",
    "running": "accent",
    "queued": "muted",
    NOT_ANALYSED: "muted",
    "not started": "warning",
    "recording incomplete": "warning",
}
TONE_VAR = {
    "error": "$text-error",
    "warning": "$text-warning",
    "success": "$text-success",
    "accent": "$text-accent",
    "primary": "$text-primary",
    "muted": "$text-muted",
    "lost": "$text-error",
    "": "",
}


#: A recorded backslash inside markup.  Textual's markup has no escape for a
#: backslash, and one right before a tag (recorded ``C:\`` then ``[/dim]``)
#: would escape that tag: :func:`esc` writes this private-use character
#: instead and :func:`markup` puts the backslash back after parsing (one
#: character for one, so every span keeps its place).
BACKSLASH = "\ue000"


def esc(text: Any) -> str:
    """Escape ``text`` for Content markup (parse the result with :func:`markup`);
    its control characters are shown as escapes (``\\x1b``), never sent to the terminal."""
    return visible(str(text)).replace("\\", BACKSLASH).replace("[", r"\[")


def markup(text: str) -> Content:
    """``Content.from_markup`` for markup whose recorded parts went through
    :func:`esc`: every recorded character shows as it was recorded."""
    content = Content.from_markup(text)
    if BACKSLASH in content.plain:
        content = Content(content.plain.replace(BACKSLASH, "\\"), list(content.spans))
    return content


def short_json(value: Any, limit: int = 80) -> str:
    try:
        s = json.dumps(
            thaw(value) if value is not ABSENT else None,
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,
        )
    except (TypeError, ValueError):
        s = repr(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


#: Keys that say which envelope a frame is rather than what it carries: shown last.
BOILERPLATE = ("id", "object", "created", "model", "system_fingerprint", "service_tier", "jsonrpc")


def _tidy(value: Any, depth: int = 0) -> Any:
    """Null fields dropped, envelope keys last: what a frame carries comes first."""
    if isinstance(value, dict):
        items = [
            (k, _tidy(v, depth + 1))
            for k, v in value.items()
            if v is not None and not (k == "index" and v == 0)
        ]
        if depth == 0:
            items.sort(key=lambda kv: kv[0] in BOILERPLATE)
        return dict(items)
    if isinstance(value, list):
        return [_tidy(v, depth + 1) for v in value]
    return value


def compact(text: str | None, limit: int = 300) -> str:
    """One line of a frame's text: JSON minified (nulls dropped, envelope keys last), whitespace collapsed."""
    if text is None:
        return ""
    s = text.strip()
    if s[:1] in "{[" and len(s) < 100_000:
        try:
            s = json.dumps(_tidy(json.loads(s)), separators=(",", ":"), ensure_ascii=False)
        except ValueError:
            pass
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


# --------------------------------------------------------------------------- list cells

Cell = tuple[str, str]  # (text, tone)


def frame_cells(row: Row) -> list[Cell]:
    """The frame column of a timeline row."""
    ex = row.exchange
    if row.idx == START:
        status = "…" if ex.status is None else str(ex.status)
        what = ex.capability or "?"
        tone = "error" if ex.status is None or (ex.status or 0) >= 400 else "accent"
        extra = ""
        if ex.capability in ("resume", "subscribe") and ex.cursor:
            extra = f" after {ex.cursor}"  # a subscription with a cursor resumes the session (R11.6)
        elif ex.capability in ("abort", "status") and ex.run_id:
            extra = f" {ex.run_id}"
        return [(f"▶ {what}{extra} ", "primary"), (f"{ex.method} {ex.path} → {status}", tone)]
    if row.idx == END:
        end = ex.end or "complete"
        tone = "muted" if end == "complete" else "warning"
        text = f"■ end of {'subscription' if ex.capability == 'subscribe' else 'stream'}: {end}"
        if ex.error:
            text += f" ({ex.error})"
        return [(text, tone)]
    out: list[Cell] = []
    if row.direction == "out":
        out.append(("→ ", "muted"))
    if row.event:
        out.append((f"{row.event} ", "primary"))
    if row.frame_error is not None and row.text is None:
        out.append((f"<{row.frame_error.get('kind', 'error')}>", "error"))
    elif row.text is None and row.has_raw:
        out.append(("<binary>", "muted"))
    else:
        out.append((compact(row.text) or "(empty)", "muted" if not row.text else ""))
    return out


def facts_cells(row: Row) -> list[Cell]:
    """What the frame became: its facts and each one's admission result."""
    if row.idx == START:
        return []
    if row.idx == END:
        return []
    if row.facts is None and row.state is None:
        if row.frame_error is not None:
            return [(f"✗ {row.frame_error.get('kind', 'error')}", "error")]
        return [("·", "muted")]
    out: list[Cell] = []
    state = row.state or ""
    if row.result_error is not None or state == FrameState.ERROR:
        kind = (row.result_error or row.frame_error or {}).get("kind", "error")
        out.append((f"✗ decode {kind}", "error"))
    facts = row.facts or []
    groups: list[tuple[str, bool, str | None, int]] = []
    for f in facts:
        if (
            groups
            and groups[-1][0] == f.kind
            and groups[-1][1] == f.accepted
            and groups[-1][2] == f.reason
        ):
            k, a, r, n = groups[-1]
            groups[-1] = (k, a, r, n + 1)
        else:
            groups.append((f.kind, f.accepted, f.reason, 1))
    for kind, accepted, reason, n in groups:
        times = f"×{n} " if n > 1 else ""
        if accepted:
            out.append((f"{kind} {times}✓", "success"))
        elif reason in IDEMPOTENT:
            out.append((f"{kind} {times}· {reason}", "muted"))
        else:
            out.append((f"{kind} {times}✗ {reason}", "error"))
    if row.shadow:
        where = (
            state.replace("after-", "after ") if state.startswith("after-") else "reader stopped"
        )
        out.append((f"lost {row.shadow} ({where})", "error"))
    elif not facts and not out:
        label = STATE_LABEL.get(state, state or "·")
        tone = "warning" if state in PROBLEM_STATES else "muted"
        out.append((label, tone))
    return _join(out)


def _join(cells: list[Cell]) -> list[Cell]:
    out: list[Cell] = []
    for i, c in enumerate(cells):
        if i:
            out.append((", ", "muted"))
        out.append(c)
    return out


def fact_line(kind: str, accepted: bool, reason: str | None, detail: str | None) -> str:
    if accepted:
        return f"[$text-success]✓[/] {esc(kind)} [$text-muted]accepted[/]"
    tone = "$text-muted" if reason in IDEMPOTENT else "$text-error"
    text = f"[{tone}]✗ {esc(kind)} rejected: [b]{esc(reason)}[/b][/]"
    if detail:
        text += f" [$text-muted]({esc(detail)})[/]"
    return text


# --------------------------------------------------------------------------- the chat


def run_line(view: RunView | None, run_id: str) -> str:
    if view is None:
        # not in the UI's snapshot: not started yet, or a refresh that does not
        # name the settled run dropped it with its messages (decisions.md 272)
        return f"[b]run {esc(run_id)}[/b] [$text-muted]not shown: not started yet, or a history read dropped it[/]"
    from chatkit_trace.views import display_status

    status = display_status(view.status, view.connection)
    tone = TONE_VAR.get(STATUS_TONE.get(status, ""), "")
    conn = {"none": "no connection", "disconnected": "connection lost"}.get(
        view.connection, view.connection
    )
    conn_tone = "$text-error" if view.connection == "disconnected" else ""
    parts = [
        f"[b]run {esc(view.id)}[/b]",
        f"[{tone} b]{esc(status)}[/]" if tone else f"[b]{esc(status)}[/b]",
        f"[$text-muted]phase[/] {esc(view.phase)}",
        f"[{conn_tone}]{esc(conn)}[/]" if conn_tone else esc(conn),
        f"[$text-muted]{esc(view.origin)}[/]",
    ]
    line = "  ".join(parts[:2]) + "  " + " · ".join(parts[2:])
    if view.error is not None:
        line += f"\n  [$text-error]error {esc(view.error.code)}: {esc(view.error.message)}[/]"
    if view.interrupt_reason:
        line += f"\n  [$text-warning]interrupted: {esc(view.interrupt_reason)}[/]"
    if view.abort is not None:
        a = view.abort
        line += f"\n  [$text-warning]stop requested[/] [$text-muted]remote {esc(a.remote)}{', output sealed' if a.output_sealed else ''}[/]"
    if view.work_items:
        items = ", ".join(
            f"{esc(k)} {esc(getattr(v, 'status', v))}" for k, v in view.work_items.items()
        )
        line += f"\n  [$text-muted]work items:[/] {items}"
    return line


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"… ({len(text) - limit} characters earlier)\n" + text[-limit:]


def part_lines(part: Any, text_limit: int = 4000) -> list[str]:
    if isinstance(part, ReasoningPart):
        text = part.text if isinstance(part.text, str) else repr(part.text)
        return [f"[$text-muted i]thinking: {esc(_tail(text, text_limit))}[/]"]
    if isinstance(part, TextPart):
        text = part.text if isinstance(part.text, str) else repr(part.text)
        return [esc(_tail(text, text_limit)) if text else "[$text-muted](empty text)[/]"]
    if isinstance(part, ToolCallPart):
        status = get_tool_call_status(part)
        tone = {
            "running": "$text-warning",
            "completed": "$text-success",
            "failed": "$text-error",
        }.get(status, "$text-muted")
        lines = [
            f"[b]⚙ {esc(part.tool_name)}[/b] [$text-muted]{esc(part.tool_call_id)}[/] [{tone}]{esc(status)}[/]"
        ]
        if part.args is not ABSENT:
            lines.append(f"  [$text-muted]args[/] {esc(short_json(part.args, 200))}")
        if part.partial_result is not ABSENT:
            lines.append(f"  [$text-muted]partial[/] {esc(short_json(part.partial_result, 200))}")
        if part.result is not ABSENT:
            lines.append(f"  [$text-muted]result[/] {esc(short_json(part.result, 200))}")
        if part.error is not ABSENT:
            err = part.error.to_json() if hasattr(part.error, "to_json") else part.error
            lines.append(f"  [$text-error]error {esc(short_json(err, 200))}[/]")
        return lines
    if isinstance(part, DataPart):
        return [f"[$text-accent]▦ {esc(part.kind)}[/] {esc(short_json(part.data, 200))}"]
    if isinstance(part, MediaPart):
        name = "" if part.name is ABSENT else f" {part.name}"
        return [f"[$text-accent]▣ media {esc(part.mime_type)}{esc(name)}[/]"]
    return [esc(short_json(getattr(part, "to_json", lambda: part)()))]


def message_lines(m: RuntimeMessage, *, current: bool, show_ids: bool = True) -> list[str]:
    role = str(m.role)
    if role == "system" and m.parts and all(isinstance(p, DataPart) for p in m.parts):
        # a session event (R7.4): ordered by arrival, not part of the answer
        kinds = ", ".join(f"{p.kind} {short_json(p.data, 60)}" for p in m.parts)  # type: ignore[union-attr]
        return [f"[$text-muted]── session event: {esc(kinds)} ──[/]"]
    tone = {
        "user": "$text-primary",
        "assistant": "$text-accent",
        "system": "$text-warning",
        "tool": "$text-secondary",
    }.get(role, "")
    head = f"[b {tone}]{esc(role)}[/]" if tone else f"[b]{esc(role)}[/b]"
    if show_ids:
        head += f" [$text-muted]{esc(m.id)}[/]"
    lines = [head]
    for p in m.parts:
        pid = (
            f"[$text-muted]{esc(p.id)}[/] "
            if show_ids and len(m.parts) > 1 and not isinstance(p, ToolCallPart)
            else ""
        )
        pl = part_lines(p)
        if pl:
            lines.append("  " + pid + pl[0].replace("\n", "\n  "))
            lines.extend("  " + x.replace("\n", "\n  ") for x in pl[1:])
    if not m.parts:
        lines.append("  [$text-muted](no parts)[/]")
    if not current:
        lines = [f"[dim]{x}[/dim]" for x in lines]
    return lines


def snapshot_header(snap: Snapshot | None, run_id: str) -> Content:
    """The run's status line(s): status, phase, connection, origin, error, stop, other runs."""
    if snap is None:
        return markup("[$text-muted]computing the snapshot…[/]")
    lines = [run_line(snap.run(run_id), run_id)]
    others = [r for r in snap.runs if r.id != run_id]
    if others:
        from chatkit_trace.views import display_status

        shown = ", ".join(
            f"{esc(r.id)} {esc(display_status(r.status, r.connection))}" for r in others[-4:]
        )
        more = f" (+{len(others) - 4})" if len(others) > 4 else ""
        lines.append(f"[$text-muted]other runs: {shown}{more}[/]")
    hist = " · history loaded" if snap.history.loaded else ""
    lines.append(
        f"[$text-muted]session {esc(snap.session_id)}: {esc(snap.session_status)}{hist} · version {snap.version}[/]"
    )
    return markup("\n".join(lines))


def messages_content(
    snap: Snapshot | None, run_id: str, *, context: int = 2, max_messages: int = 40
) -> Content:
    """The chat the UI would show: the run's messages and a little context before them."""
    if snap is None:
        return Content("")
    lines: list[str] = []
    messages = list(snap.messages)
    mine = [i for i, m in enumerate(messages) if m.run_id == run_id]
    if mine:
        lo = max(0, mine[0] - context)
        hi = mine[-1] + 1
    else:
        lo, hi = max(0, len(messages) - context), len(messages)
    if hi - lo > max_messages:
        lo = hi - max_messages
    if lo > 0:
        lines.append(f"[$text-muted]… {lo} earlier message(s)[/]")
    if not messages:
        lines.append("[$text-muted](no messages yet)[/]")
    for m in messages[lo:hi]:
        lines.extend(message_lines(m, current=m.run_id == run_id or m.run_id is None))
        lines.append("")
    if hi < len(messages):
        lines.append(f"[$text-muted]… {len(messages) - hi} later message(s)[/]")
    return markup("\n".join(lines).rstrip("\n"))


def snapshot_content(snap: Snapshot | None, run_id: str) -> Content:
    """Header and chat together (plain text for tests and the bench)."""
    if snap is None:
        return snapshot_header(snap, run_id)
    return Content("\n").join(
        [snapshot_header(snap, run_id), Content(""), messages_content(snap, run_id)]
    )


# --------------------------------------------------------------------------- bytes


def hexdump(data: bytes, limit: int = 4096) -> str:
    out = []
    for off in range(0, min(len(data), limit), 16):
        chunk = data[off : off + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{off:08x}  {hexes:<47}  {text}")
    if len(data) > limit:
        out.append(f"… {len(data) - limit} more bytes")
    return "\n".join(out)


def sse_block(event: str | None, event_id: str | None, text: str | None) -> str:
    """The SSE event as it was on the wire (field lines; comments and retry are not stored)."""
    lines = []
    if event:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    for line in (text or "").split("\n"):
        lines.append(f"data: {line}")
    return "\n".join(lines) + "\n\n"


def pretty(text: str | None, limit: int = 80) -> str:
    """A frame's text for the detail panel: indented JSON when it is JSON."""
    if text is None:
        return ""
    s = text
    try:
        s = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    lines = s.split("\n")
    if len(lines) > limit:
        lines = lines[:limit] + [f"… {len(lines) - limit} more lines"]
    return "\n".join(lines)


def severity_letter(sev: str) -> str:
    return {"error": "E", "warning": "W", "info": "I"}.get(sev, "?")


SEVERITY_TONE = {"error": "error", "warning": "warning", "info": "accent"}
