"""CK4xx: event stream mechanics (SPEC R2.4, R2.5, R3.2, R3.6, R11.6, R11.7)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from ..pipeline import STREAMING, ExchangeRecord, FrameRecord, FrameState
from ._compare import consequence_sentence, consequences
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, make_finding
from ._shared import reason_finding, rejections, route_of

if TYPE_CHECKING:
    from ..wire.errors import DecodeError


@analyzer("CK401")
def no_outer_event_ids(ctx: Context) -> Iterator[Finding]:
    """CK401 (R3.2, R11.7; info, once per trace and route): events carry no
    outer event id (SSE ``id:``), so neither deduplication nor resume can work."""
    routes: dict[str, list[tuple[ExchangeRecord, FrameRecord]]] = defaultdict(list)
    for ex in ctx.exchange_records():
        if ex.exchange.capability not in STREAMING + ("subscribe",):
            continue
        # the ids the pipeline used: the outer SSE id, or on a WebSocket the
        # event's own (identify_event), this replay's frames only
        incoming = [fr for fr in ex.frames if fr.state not in ("outgoing", "ignored") and _has_text(ex, fr.frame_index)]
        if incoming and not any(fr.event_id for fr in incoming):
            routes[route_of(ex)].append((ex, incoming[0]))
    for route, items in sorted(routes.items()):
        first, fr = items[0]
        ws = first.exchange.transport == "ws"
        what = ("carry no event id (a WebSocket message has no SSE id, and the adapter's identify_event names "
                "none)" if ws else "carry no SSE id")
        yield make_finding(
            "CK401",
            session_id=None,
            run_id=None,
            frames=[frame_ref(fr.exchange_index, fr.frame_index)],
            message=f"Events on {route} {what}: the UI cannot deduplicate them or resume after a dropped "
            "connection (a limitation of this protocol or backend).",
            detail={"route": route, "exchanges": len(items), "transport": first.exchange.transport},
            keys=[route],
            frame_in_fingerprint=False,
        )


def _has_text(ex: ExchangeRecord, index: int) -> bool:
    """Whether the recorded frame ``index`` of an exchange record is text."""
    frames = ex.exchange.frames
    f = frames[index] if index < len(frames) and frames[index].index == index else next((f for f in frames if f.index == index), None)
    return f is not None and f.text is not None


@analyzer("CK402")
def sequence_regressed(ctx: Context) -> Iterator[Finding]:
    """CK402 (R3.2): a source sequence went backwards (source-sequence-regressed)."""
    yield from reason_finding("CK402", "source-sequence-regressed", "{n} fact(s) carried a source sequence lower than an earlier one.", ctx)


@analyzer("CK403")
def duplicates_dropped(ctx: Context) -> Iterator[Finding]:
    """CK403 (R3.6; info): duplicate events were dropped idempotently (count
    and ids).  Not the repeats of a resumed subscription (CK404's)."""
    from .resume import repeat_frames

    repeated = repeat_frames(ctx)
    per_run: dict[tuple[str | None, str | None], list[tuple[str, str]]] = defaultdict(list)
    for fr in ctx.frames():
        if fr.state == FrameState.DUPLICATE and (fr.exchange_index, fr.frame_index) not in repeated:
            # the id the pipeline used (on a WebSocket the event's own)
            per_run[(fr.session_id, fr.run_id)].append((frame_ref(fr.exchange_index, fr.frame_index), fr.event_id or "?"))
    for key, recs in rejections(ctx, "duplicate-event"):
        per_run[key].extend((frame_ref(r.exchange_index, r.frame_index), r.fact.event_id or "?") for r in recs)
    for (sid, run_id), items in per_run.items():
        ids = sorted({eid for _, eid in items})
        yield make_finding(
            "CK403",
            session_id=sid,
            run_id=run_id,
            frames=[f for f, _ in items[:20]],
            message=f"{len(items)} duplicate event(s) were dropped idempotently (ids {', '.join(ids[:5])}).",
            detail={"count": len(items), "event_ids": ids},
            keys=["dup"],
        )


def _run_event_ids(ctx: Context, session_id: str | None, run_id: str, before: float, exclude: int) -> list[str]:
    """Outer event ids of a run's incoming frames, in arrival order, seen before ``before``."""
    seen: list[str] = []
    for fr in ctx.frames():
        if fr.exchange_index == exclude or fr.session_id != session_id or fr.run_id != run_id or fr.at > before:
            continue
        ex = ctx.exchanges.get(fr.exchange_index)
        if ex is None:
            continue
        frame = ex.frames[fr.frame_index]
        if frame.direction == "in" and frame.event_id and frame.event_id not in seen:
            seen.append(frame.event_id)
    return seen


@analyzer("CK404")
def resume_order(ctx: Context) -> Iterator[Finding]:
    """CK404 (R11.6): after a resume from cursor X, the replay must start right
    after X, contain every event the trace saw after X, in order, and not
    interleave with live events of the same run (cursors are compared only
    for equality, never ordered by size).  A subscription that starts with a
    cursor (``Last-Event-ID``) is a resume of the session's event sequence,
    judged as one per resumed stream (:mod:`.resume`)."""
    yield from _subscription_resumes(ctx)
    for rec in ctx.exchange_records():
        e = rec.exchange
        if e.capability != "resume" or e.cursor is None or e.failed or rec.run_id is None:
            continue
        seen = _run_event_ids(ctx, rec.session_id, rec.run_id, e.started_at, e.index)
        frames = [f for f in e.frames if f.direction == "in" and f.event_id]
        if not frames or e.cursor not in seen:
            continue
        expected = seen[seen.index(e.cursor) + 1 :]
        before = set(seen[: seen.index(e.cursor) + 1])
        problems: list[tuple[str, str]] = []
        replay_ids = [f.event_id for f in frames]
        if expected and replay_ids[0] != expected[0]:
            problems.append((frame_ref(e.index, frames[0].index), f"replay starts at {replay_ids[0]!r}, not right after the cursor at {expected[0]!r}"))
        stale = [f for f in frames if f.event_id in before]
        if stale:
            problems.append((frame_ref(e.index, stale[0].index), f"replay repeats {stale[0].event_id!r}, which is at or before the cursor {e.cursor!r}"))
        missing = [eid for eid in expected if eid not in replay_ids]
        if missing:
            problems.append((frame_ref(e.index, frames[-1].index), f"replay skips {len(missing)} event(s) seen after the cursor: {', '.join(missing[:5])}"))
        order = [eid for eid in replay_ids if eid in expected]
        if order != [eid for eid in expected if eid in order]:
            bad = next(i for i, (a, b) in enumerate(zip(order, [x for x in expected if x in order], strict=False)) if a != b)
            f = next(f for f in frames if f.event_id == order[bad])
            problems.append((frame_ref(e.index, f.index), f"replay is out of order: {order[bad]!r} came before an earlier event"))
        live_started = None
        for f in frames:
            if f.event_id not in expected and f.event_id not in before:
                live_started = live_started or f
            elif live_started is not None and f.event_id in expected:
                problems.append((frame_ref(e.index, f.index), f"replayed event {f.event_id!r} came after live event {live_started.event_id!r}"))
                break
        if problems:
            problems.sort(key=lambda p: int(p[0].split(":")[1]))
            yield make_finding(
                "CK404",
                session_id=rec.session_id,
                run_id=rec.run_id,
                frames=[p[0] for p in problems],
                message=f"The resume of run {rec.run_id} from {e.cursor!r} did not replay completely and in order: "
                f"{problems[0][1]}.",
                detail={"cursor": e.cursor, "expected": expected[:50], "replayed": replay_ids[:50], "problems": [p[1] for p in problems]},
                keys=[e.index, e.cursor],
            )


def _subscription_resumes(ctx: Context) -> Iterator[Finding]:
    from .resume import session_resumes, what_the_ui_did

    for c in session_resumes(ctx):
        first = c.first
        if first is None:
            continue
        run_id = first.other[0] if first.kind == "skip" and first.other is not None and first.other[0] else first.item.run
        had = f", received at {c.anchor.ref}" if c.anchor is not None else ", an id the trace holds nowhere before"
        counts = []
        if c.repeats:
            counts.append(f"{len(c.repeats)} event(s) at or before the cursor repeated")
        if c.skipped:
            counts.append(f"{len(c.skipped)} event(s) after it skipped")
        if c.reordered:
            counts.append(f"{len(c.reordered)} event(s) out of order")
        ui, handled = what_the_ui_did(ctx, c)
        if c.skipped:
            ui += " The UI never shows what the skipped event(s) carried."
            runs = {k[0] or first.item.run for k in c.skipped}
            found = [f for run in sorted(r for r in runs if r) for f in consequences(ctx, c.session_id, run, "CK404")]
            ui += consequence_sentence(found).replace("what the UI dropped", "what the skipped event(s) carried")
        frames = [first.item.ref] + ([c.anchor.ref] if c.anchor is not None else []) + [p.item.ref for p in c.problems[1:20]]
        yield make_finding(
            "CK404",
            session_id=c.session_id,
            run_id=run_id,
            frames=frames,
            message=f"The subscription of session {c.session_id} resumed after {c.cursor!r} ({c.cursor_from}{had}) "
            f"but {first.sentence(c.cursor)}. In all, {', '.join(counts)}.{ui}",
            detail={
                "cursor": c.cursor,
                "cursor_from": c.cursor_from,
                "cursor_seen_at": c.anchor.ref if c.anchor is not None else None,
                "first_wrong": {"kind": first.kind, "frame": first.item.ref, "event_id": first.item.id, "run": first.item.run,
                                **({"missing": first.other[1]} if first.kind == "skip" and first.other else {})},
                "repeated": [it.id for it in c.repeats[:50]],
                "skipped": [k[1] for k in c.skipped[:50]],
                "reordered": [it.id for it in c.reordered[:50]],
                "evidence": c.evidence,
                "ui": handled,
                "stream": "subscription",
            },
            keys=[c.exchange, c.cursor] + ([c.frame] if c.frame is not None else []),
        )


@analyzer("CK405")
def undecodable_frames(ctx: Context) -> Iterator[Finding]:
    """CK405 (R2.5): a frame could not be decoded (bad SSE framing, bad JSON,
    wrong envelope); chatkit's reader stops there.  The detail has the
    bytes' location."""
    for ex in ctx.exchange_records():
        errors = [fr for fr in ex.frames if fr.state == FrameState.ERROR]
        if not errors:
            continue
        fr = errors[0]
        err = fr.error
        loc = cast("DecodeError", err).to_json() if hasattr(err, "to_json") else {"message": str(err)}
        after = sum(1 for f in ex.frames if f.state == FrameState.AFTER_ERROR)
        yield make_finding(
            "CK405",
            session_id=ex.session_id,
            run_id=ex.run_id,
            frames=[frame_ref(fr.exchange_index, fr.frame_index)],
            message=f"Frame {fr.exchange_index}:{fr.frame_index} could not be decoded ({loc.get('kind', 'decode')}: "
            f"{loc.get('message')}); the UI stops reading this response there"
            + (f" and never sees the {after} frame(s) after it." if after else "."),
            detail={"error": loc, "frames_after": after},
            keys=[ex.exchange.index, fr.frame_index],
        )


@analyzer("CK406")
def unknown_event_types(ctx: Context) -> Iterator[Finding]:
    """CK406 (R2.4; info, once per trace): frames of an unknown event type were ignored (count per type)."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for fr in ctx.frames():
        if fr.unknown and fr.state == FrameState.ADMITTED:
            t = fr.event_type or "(untyped)"
            counts[t] += 1
            first.setdefault(t, frame_ref(fr.exchange_index, fr.frame_index))
    if counts:
        yield make_finding(
            "CK406",
            session_id=None,
            run_id=None,
            frames=[first[t] for t, _ in counts.most_common(10)],
            message=f"{sum(counts.values())} frame(s) of {len(counts)} event type(s) decoded to nothing and were ignored "
            f"({', '.join(f'{t} x{n}' for t, n in counts.most_common(5))}).",
            detail={"types": dict(counts)},
            keys=["trace"],
            frame_in_fingerprint=False,
        )
