"""CK6xx: timing (what users feel); thresholds are options (seconds)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ..pipeline import STREAMING, ExchangeRecord, FrameRecord, FrameState
from ..wire import Frame
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, make_finding


class _Timed(Protocol):
    """A frame or a frame record: when it arrived."""

    @property
    def at(self) -> float: ...


def _incoming(ex: ExchangeRecord) -> list[Frame]:
    return [f for f in ex.exchange.frames if f.direction == "in" and f.text is not None]


@analyzer("CK601")
def slow_first_event(ctx: Context) -> Iterator[Finding]:
    """CK601 (info): the time from request to first event is above the
    threshold (``--first-event``, default 2 s)."""
    limit = ctx.options.first_event
    for ex in ctx.exchange_records():
        if ex.exchange.capability not in STREAMING:
            continue
        frames = _incoming(ex)
        if not frames:
            continue
        wait = frames[0].at - ex.exchange.started_at
        if wait > limit:
            yield make_finding(
                "CK601",
                session_id=ex.session_id,
                run_id=ex.run_id,
                frames=[frame_ref(ex.exchange.index, frames[0].index)],
                message=f"The first event came {wait:.2f} s after the request (threshold {limit:g} s).",
                detail={"seconds": round(wait, 3), "threshold": limit},
                keys=[ex.exchange.index],
            )


@analyzer("CK602")
def stalls(ctx: Context) -> Iterator[Finding]:
    """CK602 (info): a stall, a gap between consecutive events of a live run
    above the threshold (``--stall``, default 5 s); the longest per stream."""
    limit = ctx.options.stall
    for ex in ctx.exchange_records():
        if ex.exchange.capability not in STREAMING + ("subscribe",):
            continue
        if ex.exchange.capability == "subscribe" and ex.socket_runs:
            yield from _run_stalls(ex, limit)
            continue
        stall = _longest_gap(_incoming(ex), limit)
        if stall is not None:
            gap, a, b, stalls = stall
            yield make_finding(
                "CK602",
                session_id=ex.session_id,
                run_id=ex.run_id,
                frames=[frame_ref(ex.exchange.index, b.index), frame_ref(ex.exchange.index, a.index)],
                message=f"The stream stalled for {gap:.2f} s between two events (threshold {limit:g} s).",
                detail={"seconds": round(gap, 3), "threshold": limit, "stalls": stalls},
                keys=[ex.exchange.index],
            )


def _longest_gap(frames: Sequence[_Timed], limit: float) -> tuple[float, Any, Any, int] | None:
    """The longest gap between consecutive frames when it exceeds ``limit``:
    ``(seconds, frame before, frame after, gaps over the limit)``."""
    gaps = [(b.at - a.at, a, b) for a, b in zip(frames, frames[1:], strict=False)]
    if not gaps:
        return None
    gap, a, b = max(gaps, key=lambda g: g[0])
    if gap <= limit:
        return None
    return gap, a, b, sum(1 for g in gaps if g[0] > limit)


def _run_stalls(ex: ExchangeRecord, limit: float) -> Iterator[Finding]:
    """On a subscription (a socket): the gaps between consecutive events of
    each run it carried, from the run's start until its end on the stream
    (a quiet socket between runs is no stall)."""
    per_run: dict[tuple[str | None, str], list[FrameRecord]] = {}
    for fr in ex.frames:
        if fr.state == FrameState.OUTGOING or fr.run_id is None:
            continue
        per_run.setdefault((fr.session_id, fr.run_id), []).append(fr)
    for (sid, run_id), frames in per_run.items():
        stall = _longest_gap(frames, limit)
        if stall is not None:
            gap, a, b, stalls = stall
            yield make_finding(
                "CK602",
                session_id=sid,
                run_id=run_id,
                frames=[frame_ref(b.exchange_index, b.frame_index), frame_ref(a.exchange_index, a.frame_index)],
                message=f"The stream stalled for {gap:.2f} s between two events of run {run_id} (threshold {limit:g} s).",
                detail={"seconds": round(gap, 3), "threshold": limit, "stalls": stalls},
                keys=[ex.exchange.index, run_id],
            )
