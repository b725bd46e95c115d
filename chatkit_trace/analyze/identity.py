"""CK2xx: identity and isomorphism (SPEC R4.2-R4.4, R8.4, R10.2)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import (
    ABSENT,
    DataPart,
    MediaPart,
    ReasoningPart,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    get_tool_call_status,
    thaw,
)
from ..core import DeltaFact, MessageFact
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, make_finding
from .lifecycle import refs, rejections

__all__ = ["visible", "diff_messages"]


def visible(part: Any) -> dict[str, Any]:
    """What the UI shows of a part (the content R8.4 compares)."""
    if isinstance(part, (TextPart, ReasoningPart)):
        return {"text": part.text}
    if isinstance(part, ToolCallPart):
        out: dict[str, Any] = {"toolName": part.tool_name, "status": get_tool_call_status(part)}
        if part.args is not ABSENT:
            out["args"] = thaw(part.args)
        if part.result is not ABSENT:
            out["result"] = thaw(part.result)
        if part.error is not ABSENT:
            out["error"] = part.error.to_json() if hasattr(part.error, "to_json") else thaw(part.error)
        return out
    if isinstance(part, DataPart):
        return {"kind": part.kind, "data": thaw(part.data)}
    if isinstance(part, MediaPart):
        return {"mimeType": part.mime_type, "source": thaw(part.source), "name": thaw(part.name) if part.name is not ABSENT else None}
    return {}


def _content_key(msg: RuntimeMessage) -> tuple:
    return (msg.role, tuple((p.type, repr(sorted(visible(p).items()))) for p in msg.parts))


def _short(value: Any, limit: int = 120) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 3] + "..."
    return value


def diff_messages(
    live: Sequence[RuntimeMessage],
    history: Sequence[RuntimeMessage],
    candidates: Sequence[RuntimeMessage] = (),
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """A structural diff: which message, which part, expected (live) vs seen (history).

    Returns the differences and the id pairs whose content is equal but ids
    differ (CK202).  Messages pair by id first, then by equal content;
    ``candidates`` are further history messages (e.g. of a run id history
    renamed) that a live message may pair with by content, without being
    reported as extra when nothing pairs with them.
    """
    diffs: list[dict[str, Any]] = []
    renamed: list[tuple[str, str]] = []
    hist_by_id = {m.id: m for m in history}
    live_ids = {m.id for m in live}
    unpaired_live = [m for m in live if m.id not in hist_by_id]
    unpaired_hist = [m for m in history if m.id not in live_ids]
    for m in live:
        h = hist_by_id.get(m.id)
        if h is None:
            continue
        if m.role != h.role:
            diffs.append({"message": m.id, "what": "role", "live": m.role, "history": h.role})
        lp = [(p.id, p.type) for p in m.parts]
        hp = [(p.id, p.type) for p in h.parts]
        if lp != hp:
            lids, hids = [p[0] for p in lp], [p[0] for p in hp]
            if [p[1] for p in lp] == [p[1] for p in hp] and [visible(p) for p in m.parts] == [visible(p) for p in h.parts]:
                renamed.extend((f"{m.id}/{a}", f"{m.id}/{b}") for a, b in zip(lids, hids) if a != b)
            diffs.append({"message": m.id, "what": "parts", "live": [f"{i}:{t}" for i, t in lp], "history": [f"{i}:{t}" for i, t in hp]})
            continue
        for lpart, hpart in zip(m.parts, h.parts):
            lv, hv = visible(lpart), visible(hpart)
            if lv != hv:
                keys = sorted(k for k in set(lv) | set(hv) if lv.get(k) != hv.get(k))
                diffs.append(
                    {
                        "message": m.id,
                        "part": lpart.id,
                        "what": "content",
                        "fields": keys,
                        "live": {k: _short(lv.get(k)) for k in keys},
                        "history": {k: _short(hv.get(k)) for k in keys},
                    }
                )
    remaining = list(unpaired_hist)
    spare = [c for c in candidates if c.id not in live_ids]
    for m in unpaired_live:
        key = _content_key(m)
        match = next((h for h in remaining if _content_key(h) == key), None)
        if match is not None:
            remaining.remove(match)
        else:
            match = next((h for h in spare if _content_key(h) == key), None)
            if match is not None:
                spare.remove(match)
        if match is not None:
            renamed.append((m.id, match.id))
            diffs.append({"message": m.id, "what": "id", "live": m.id, "history": match.id, "role": m.role})
        else:
            diffs.append({"message": m.id, "what": "missing in history", "role": m.role, "text": _short(m.text)})
    for h in remaining:
        diffs.append({"message": h.id, "what": "extra in history", "role": h.role, "text": _short(h.text)})
    return diffs, renamed


@dataclass
class Comparison:
    """One live run (as it settled) against one later history read."""

    session_id: str
    run_id: str | None
    record: Any
    history: Any
    live: list[RuntimeMessage]
    seen: list[RuntimeMessage]
    #: History messages of runs the live trace does not know (a renamed run):
    #: candidates for pairing by content (CK202), never reported as extra here.
    candidates: list[RuntimeMessage]

    def diff(self) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        return diff_messages(self.live, self.seen, self.candidates)


def _comparisons(ctx: Context) -> Iterator[Comparison]:
    """Every run settled live against every later history read of its session.

    When the history's messages carry run ids, a run's live messages are
    compared with that run's history messages; otherwise the live snapshot
    at the last settle before the read (settled runs only) is compared with
    the whole history, once per read.
    """
    for sid, s in ctx.replay.sessions.items():
        live_runs = [(rid, rec) for rid, rec in s.runs.items() if rec.settled is not None and rec.settled_by == "fact"]
        known = {rid for rid, rec in s.runs.items() if rec.exchanges}  # runs the live traffic carried
        for h in s.history:
            if h.result is None:
                continue
            before = [(rid, rec) for rid, rec in live_runs if rec.settled_at is None or rec.settled_at <= h.at * 1000.0]
            if not before:
                continue
            hist = list(h.result.messages)
            if any(m.run_id for m in hist):
                strangers = [m for m in hist if m.run_id not in known]
                lives = {rid: [m for m in rec.settled.messages if m.run_id == rid] for rid, rec in before}
                # Messages pair by id across runs first: a backend may file a
                # follow-up turn under the first run's id (A2A's taskId).
                claimed = {m.id: rid for rid, msgs in lives.items() for m in msgs}
                for run_id, rec in before:
                    live = lives[run_id]
                    if not live:
                        continue
                    seen = [
                        m
                        for m in hist
                        if claimed.get(m.id) == run_id or (m.id not in claimed and m.run_id == run_id)
                    ]
                    yield Comparison(sid, run_id, rec, h, live, seen, strangers)
            else:
                run_id, rec = max(before, key=lambda item: item[1].settled_at or 0.0)
                snap = rec.settled
                done = {r.id for r in snap.runs if r.terminal}
                live = [m for m in snap.messages if m.run_id is None or m.run_id in done]
                yield Comparison(sid, run_id, rec, h, live, hist, [])


def _limitation_note(ctx: Context) -> str | None:
    return getattr(ctx.protocol, "history_limitation", None)


@analyzer("CK201")
def history_not_isomorphic(ctx: Context) -> Iterator[Finding]:
    """CK201 (R8.4): history after a settled run differs from the live
    snapshot at the moment it settled: a message missing or extra, a message
    id, part id, part type or visible content differs.  Every message of the
    run is compared, the user's too; a protocol that cannot give the client
    the server's ids says so in the detail (``history_limitation``)."""
    for c in _comparisons(ctx):
        sid, run_id, h = c.session_id, c.run_id, c.history
        diffs, _ = c.diff()
        if not diffs:
            continue
        detail: dict[str, Any] = {"history_exchange": h.exchange_index, "differences": diffs[:30]}
        note = _limitation_note(ctx)
        if note:
            detail["protocol_limitation"] = note
        first = diffs[0]
        where = first.get("part") and f"{first['message']}/{first['part']}" or first["message"]
        decisive = frame_ref(h.exchange_index, None)
        yield make_finding(
            "CK201",
            session_id=sid,
            run_id=run_id,
            frames=[decisive] + ([ctx.first_frame_of_run(sid, run_id)] if ctx.first_frame_of_run(sid, run_id) else []),
            message=f"History read {h.exchange_index} differs from the live run {run_id} ({len(diffs)} difference(s), "
            f"first: {first['what']} at {where}): a refresh will flicker or show content twice.",
            detail=detail,
            keys=[h.exchange_index] + [d.get("message") for d in diffs[:5]],
        )


@analyzer("CK202")
def same_content_different_ids(ctx: Context) -> Iterator[Finding]:
    """CK202 (R4.3): the same content carries different ids in two
    observations: live vs history, or two history reads."""
    for c in _comparisons(ctx):
        sid, run_id, h = c.session_id, c.run_id, c.history
        _, renamed = c.diff()
        if renamed:
            yield make_finding(
                "CK202",
                session_id=sid,
                run_id=run_id,
                frames=[frame_ref(h.exchange_index, None)],
                message=f"The same content has different ids live and in history read {h.exchange_index}: "
                + ", ".join(f"{a} vs {b}" for a, b in renamed[:3])
                + ".",
                detail={"pairs": [{"live": a, "history": b} for a, b in renamed], "observations": ["live", f"history:{h.exchange_index}"]},
                keys=[a for a, _ in renamed],
            )
    for sid, s in ctx.replay.sessions.items():
        reads = [h for h in s.history if h.result is not None]
        for first, second in zip(reads, reads[1:]):
            _, renamed = diff_messages(list(first.result.messages), list(second.result.messages))
            if renamed:
                yield make_finding(
                    "CK202",
                    session_id=sid,
                    run_id=None,
                    frames=[frame_ref(second.exchange_index, None), frame_ref(first.exchange_index, None)],
                    message=f"History reads {first.exchange_index} and {second.exchange_index} give the same content "
                    "different ids: " + ", ".join(f"{a} vs {b}" for a, b in renamed[:3]) + ".",
                    detail={"pairs": [{"first": a, "second": b} for a, b in renamed], "observations": [f"history:{first.exchange_index}", f"history:{second.exchange_index}"]},
                    keys=[a for a, _ in renamed],
                )


_RANDOM_ID = re.compile(
    r"(?i)(?:[0-9a-f]{8}-[0-9a-f]{4}-[14][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"  # UUID v1/v4
    r"|(?<![0-9a-z])[0-7][0-9a-hjkmnp-tv-z]{25}(?![0-9a-z])"  # ULID
    r"|(?<![\d.])1[5-9]\d{11}(?:\.\d+)?(?![\d.])"  # epoch milliseconds 2017-2033, a fraction allowed
    r"|(?<![\d.])1[5-9]\d{8}(?:\.\d+)?(?![\d.])"  # epoch seconds 2017-2033 (msg-1796133309.305464)
    r"|[0-9a-f]{24,})"  # long random hex
)


@analyzer("CK203")
def random_looking_ids(ctx: Context) -> Iterator[Finding]:
    """CK203 (R4.3, info, once per trace): ids look generated from time or
    randomness and no second observation (history read) shows them stable.

    Conservative: at least two distinct live message ids must look like a
    UUIDv1/v4, a ULID, an epoch timestamp in seconds or milliseconds (a
    fraction allowed) or 24+ hex digits, and the
    trace must hold no history read at all; ids that merely *contain* the
    run id (``assistant:{runId}``) still count only when the random-looking
    part is not the run id chatkit itself chose."""
    has_history = ctx.options.trace_has_history
    if has_history is None:
        has_history = any(s.history for s in ctx.replay.sessions.values())
    if has_history:
        return
    suspicious: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for rec in ctx.facts():
        if not rec.result.accepted or not isinstance(rec.fact, MessageFact):
            continue
        mid = rec.fact.message.id
        if mid in seen or not isinstance(mid, str):
            continue
        seen.add(mid)
        stripped = mid.replace(rec.fact.run_id, "") if rec.fact.run_id else mid
        if _RANDOM_ID.search(stripped):
            suspicious.append((mid, rec.fact.session_id, frame_ref(rec.exchange_index, rec.frame_index)))
    if len(suspicious) >= 2:
        yield make_finding(
            "CK203",
            session_id=None,
            run_id=None,
            frames=[f for _, _, f in suspicious[:5]],
            message=f"{len(suspicious)} message ids look generated from time or randomness (e.g. {suspicious[0][0]}) and "
            "no history read shows them stable: record a refresh to check R4.3.",
            detail={"examples": [m for m, _, _ in suspicious[:10]], "count": len(suspicious)},
            keys=["trace"],
            frame_in_fingerprint=False,
        )


@analyzer("CK204")
def segment_reuse(ctx: Context) -> Iterator[Finding]:
    """CK204 (R4.4): a part id reused across a segment boundary (text, tool,
    text): a text or reasoning part grows although other parts were opened
    after it, so the Core merges the new content into the old segment."""
    parts: dict[tuple[str, str], list[Any]] = {}
    reported: set[tuple[str, str, str]] = set()
    for rec in ctx.facts():
        if not rec.result.accepted:
            continue
        fact = rec.fact
        key = (fact.session_id, getattr(fact, "message_id", None) or getattr(getattr(fact, "message", None), "id", ""))
        grown: str | None = None
        if isinstance(fact, DeltaFact):
            current = parts.get(key, [])
            ids = [p.id for p in current]
            if fact.part_id in ids and ids.index(fact.part_id) != len(ids) - 1:
                grown = fact.part_id  # appended to although later parts exist
        elif isinstance(fact, MessageFact):
            old = {p.id: p for p in parts.get(key, [])}
            new = list(fact.message.parts)
            for i, p in enumerate(new):
                before = old.get(p.id)
                if (
                    isinstance(p, (TextPart, ReasoningPart))
                    and isinstance(before, (TextPart, ReasoningPart))
                    and p.text != before.text
                    and any(q.id in old for q in new[i + 1 :])
                ):
                    grown = p.id
                    break
            parts[key] = new
        if isinstance(fact, DeltaFact):
            cur = parts.get(key)
            if cur is not None:
                parts[key] = [p.append(fact.delta) if p.id == fact.part_id and hasattr(p, "append") else p for p in cur]
        if grown is not None and (fact.session_id, key[1], grown) not in reported:
            reported.add((fact.session_id, key[1], grown))
            yield make_finding(
                "CK204",
                session_id=fact.session_id,
                run_id=fact.run_id,
                frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                message=f"Part {grown!r} of message {key[1]!r} grew after later parts were opened: its id is reused "
                "across a segment boundary, so new text merges into an old segment.",
                detail={"message": key[1], "part": grown},
                keys=[key[1], grown],
            )


@analyzer("CK205")
def duplicate_ids(ctx: Context) -> Iterator[Finding]:
    """CK205 (R4.2): a duplicate message id within a session (a message of
    another run, or twice in a history batch) or part id within a message."""
    for (sid, run_id), recs in rejections(ctx, "invalid-message", lambda r: r.result.detail == "part-id-unique"):
        yield make_finding(
            "CK205", session_id=sid, run_id=run_id, frames=refs(recs),
            message=f"{len(recs)} message(s) repeat a part id within the message ({recs[0].result.detail}).",
            detail={"rule": recs[0].result.detail, "count": len(recs)}, keys=["part"],
        )
    # A whole message carrying another run's message id (seed 000 §4.1: the
    # whole message is rejected, reported as an invalid message; decisions.md 97).
    for (sid, run_id), recs in rejections(ctx, "invalid-message", lambda r: r.result.detail == "message-id-unique"):
        ids = sorted({m.id for m in (getattr(r.fact, "message", None) for r in recs) if isinstance(getattr(m, "id", None), str)})
        yield make_finding(
            "CK205", session_id=sid, run_id=run_id, frames=refs(recs),
            message=f"Run {run_id} reuses the id of another run's message ({', '.join(ids[:3])}): the whole message "
            "is rejected and the UI never shows it.",
            detail={"rule": "message-id-unique", "messages": ids, "count": len(recs)}, keys=["message", *ids[:3]],
        )
    for (sid, run_id), recs in rejections(ctx, "invalid-transition", lambda r: "belongs to run" in (r.result.detail or "")):
        yield make_finding(
            "CK205", session_id=sid, run_id=run_id, frames=refs(recs),
            message=f"Run {run_id} reuses a message id of another run: {recs[0].result.detail}.",
            detail={"detail": recs[0].result.detail, "count": len(recs)}, keys=["message", recs[0].result.detail],
        )
    for sid, s in ctx.replay.sessions.items():
        for h in s.history:
            if h.command is not None and not h.command.ok and h.command.rule in ("message-id-unique", "part-id-unique"):
                yield make_finding(
                    "CK205", session_id=sid, run_id=None, frames=[frame_ref(h.exchange_index, None)],
                    message=f"History read {h.exchange_index} repeats an id ({h.command.rule}); the whole batch is rejected.",
                    detail={"rule": h.command.rule, "error": h.command.error}, keys=[h.exchange_index],
                )


@analyzer("CK206")
def replaced_content_in_history(ctx: Context) -> Iterator[Finding]:
    """CK206 (R10.2): after regenerate/edit, history still contains the
    replaced run or anything after it."""
    records = list(ctx.exchange_records())
    for i, ex in enumerate(records):
        e = ex.exchange
        if e.capability not in ("regenerate", "edit") or e.failed:
            continue
        target = e.target_run_id
        order: list[str] = []
        for prev in records[:i]:
            if prev.session_id == ex.session_id and prev.run_id and prev.exchange.capability in ("run", "regenerate", "edit") and prev.run_id not in order:
                order.append(prev.run_id)
        if target is None and order:
            target = order[-1]
        if target not in order:
            continue
        removed = set(order[order.index(target) :])
        for later in records[i + 1 :]:
            h = later.history
            if h is None or h.result is None or later.session_id != ex.session_id:
                continue
            stale = [m.id for m in h.result.messages if m.run_id in removed]
            if stale:
                yield make_finding(
                    "CK206",
                    session_id=ex.session_id,
                    run_id=ex.run_id,
                    frames=[frame_ref(later.exchange.index, None), frame_ref(e.index, None)],
                    message=f"After {e.capability} of run {target}, history read {later.exchange.index} still holds "
                    f"{len(stale)} replaced message(s) ({', '.join(stale[:3])}): old content reappears on refresh.",
                    detail={"replaced_runs": sorted(removed), "stale_messages": stale},
                    keys=[later.exchange.index, target],
                )
