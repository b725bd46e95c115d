"""Helpers several analyzer families share (rejections grouped per run, a
route's label, the stop notices, the passive runs' causes): below every
analyzer module and the history comparison (:mod:`._compare`), so none of
them imports another."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..adapters import PASSIVE_INPUT
from ..core import TERMINAL_KINDS
from ..pipeline import STREAMING, ExchangeRecord, FactRecord, ReaderStop
from ..trace import Exchange
from ._context import Context, frame_ref
from ._finding import Finding, make_finding

__all__ = ["MAX_FRAMES", "Ending", "end_states", "passive_input_runs", "reason_finding", "refs", "rejections", "route_of", "run_stream", "stop_notices"]


MAX_FRAMES = 20


def rejections(ctx: Context, reason: str, keep: Callable[[FactRecord], bool] = lambda rec: True) -> Iterator[tuple[tuple[str, str], list[FactRecord]]]:
    """Facts rejected for ``reason``, grouped per (session, run), in order.
    Not those of events a resumed subscription repeated: CK404 reports the
    resume, and what the Core did with its repeats (one cause, one verdict)."""
    from .resume import repeat_frames

    repeated = repeat_frames(ctx)
    groups: dict[tuple[str, str], list[FactRecord]] = defaultdict(list)
    for rec in ctx.facts():
        if rec.result.reason is not None and rec.result.reason.value == reason and keep(rec) \
                and (rec.exchange_index, rec.frame_index) not in repeated:
            groups[(rec.fact.session_id, rec.fact.run_id)].append(rec)
    yield from groups.items()


def refs(records: Iterable[FactRecord]) -> list[str]:
    out: list[str] = []
    for r in records:
        ref = frame_ref(r.exchange_index, r.frame_index)
        if ref not in out:
            out.append(ref)
        if len(out) >= MAX_FRAMES:
            break
    return out


def reason_finding(code: str, reason: str, message: str, ctx: Context, keep: Callable[[FactRecord], bool] = lambda rec: True) -> Iterator[Finding]:
    for (sid, run_id), recs in rejections(ctx, reason, keep):
        first = recs[0]
        yield make_finding(
            code,
            session_id=sid,
            run_id=run_id,
            frames=refs(recs),
            message=message.format(n=len(recs), detail=first.result.detail or reason, kind=first.fact.kind),
            detail={
                "reason": reason,
                "count": len(recs),
                "first": {"kind": first.fact.kind, "event_id": first.fact.event_id, "detail": first.result.detail},
            },
            keys=[first.fact.kind, first.result.detail or ""],
        )


@dataclass
class Ending:
    """A stream that ended while a run it carried had no conclusion from it:
    a run's own stream (run, resume, regenerate, edit), or a subscription
    (an SSE subscription, a socket) that closed or broke with the run open."""

    #: The stream's exchange record.
    rec: ExchangeRecord
    session_id: str | None
    run_id: str
    #: The run's last frame on the stream (``exchange:frame``), or the exchange.
    last: str
    #: An end-of-reader marker on a run's own stream (frame index).
    end_marker_frame: int | None = None
    #: The stream is a subscription (its runs are ``SocketRun``s).
    subscription: bool = False

    @property
    def exchange(self) -> Exchange:
        return self.rec.exchange

    @property
    def index(self) -> int:
        return self.rec.exchange.index


def end_states(ctx: Context) -> Iterator[Ending]:
    """Streams that ended while a run they carried had no conclusion from that stream."""
    for ex in ctx.exchange_records():
        e = ex.exchange
        if e.capability == "subscribe":
            if e.end is None or e.end == "open" or (ex.reader_stop is not None and ex.reader_stop[0] == ReaderStop.ERROR):
                continue
            for run in ex.socket_runs.values():
                if run.concluded or ctx.run_view(run.session_id, run.run_id) is None:
                    continue  # a run the Core never knew is CK503's
                yield Ending(ex, run.session_id, run.run_id, frame_ref(e.index, run.last_frame), subscription=True)
            continue
        if e.capability not in STREAMING or ex.run_id is None or ex.concluded or ex.dispatch == "refused":
            continue
        if ex.reader_stop is not None and ex.reader_stop[0] == ReaderStop.ERROR:
            continue  # CK405 reports why the reader stopped
        last = frame_ref(e.index, e.frames[-1].index) if e.frames else frame_ref(e.index, None)
        yield Ending(ex, ex.session_id, ex.run_id, last, ex.end_marker_frame)


def stop_notices(ctx: Context) -> set[int]:
    """Sequence numbers of output-sealed messages that came in the same frame
    as the run's accepted terminal after an acknowledged stop: the backend's
    notice about the stop (A2A's ``canceled`` status message), not output it
    kept producing."""
    cached = ctx.cache.get("stop_notices")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    terminal_frames = {
        (r.fact.session_id, r.fact.run_id, r.exchange_index, r.frame_index)
        for r in ctx.facts()
        if r.result.accepted and r.fact.kind in TERMINAL_KINDS and r.frame_index is not None
    }
    out = {
        r.seq
        for r in ctx.facts()
        if r.result.reason is not None
        and r.result.reason.value == "output-sealed"
        and r.fact.kind == "message"
        and (r.fact.session_id, r.fact.run_id, r.exchange_index, r.frame_index) in terminal_frames
    }
    ctx.cache["stop_notices"] = out
    return out


_ID_SEGMENT = re.compile(r"^[0-9a-f-]{8,}$|^\d+$", re.I)


def route_of(ex: ExchangeRecord) -> str:
    """A route label without its ids: ``GET /sessions/{id}/runs/{id}/events``."""
    e = ex.exchange
    parts = []
    for seg in e.path.split("/"):
        ids = (ex.session_id, ex.run_id, e.session_id, e.run_id)
        parts.append("{id}" if seg and (seg in ids or _ID_SEGMENT.match(seg)) else seg)
    return f"{e.method} {'/'.join(parts) or '/'}"


def run_stream(ctx: Context, session_id: str | None, run_id: str | None) -> ExchangeRecord | None:
    """The last stream (a run's own, or a subscription) that carried the run."""
    s = ctx.replay.sessions.get(session_id) if session_id is not None else None
    rec = s.runs.get(run_id) if s is not None and run_id is not None else None
    found = None
    for i in rec.exchanges if rec is not None else ():
        ex = ctx.replay.exchanges.get(i)
        if ex is not None and (ex.exchange.capability in STREAMING or ex.exchange.capability == "subscribe"):
            found = ex
    return found


def passive_input_runs(ctx: Context) -> dict[tuple[str, str], dict[str, Any]]:
    """Passive runs (R2.6: started by another client, registered from the
    subscription) whose start event the protocol gives no field for the
    input (``PASSIVE_INPUT``): (session, run) -> the cause CK505 names."""
    cached = ctx.cache.get("passive_input_runs")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    local = {
        (ex.session_id, ex.run_id)
        for ex in ctx.exchange_records()
        if ex.exchange.capability in ("run", "regenerate", "edit") and ex.run_id is not None
    }
    # run messages on a socket (the route's commands) start local runs too
    local |= {key for ex in ctx.exchange_records() for key, run in ex.socket_runs.items() if run.command_frame is not None}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for fr in ctx.frames():
        if PASSIVE_INPUT not in fr.limits or fr.run_id is None or fr.session_id is None:
            continue
        if fr.identity is None or not fr.identity.starts_run or (fr.session_id, fr.run_id) in local:
            continue
        out.setdefault((fr.session_id, fr.run_id), {
            "code": "CK505", "reason": "the protocol cannot carry a passive run's input",
            "frame": frame_ref(fr.exchange_index, fr.frame_index), "at": fr.at,
        })
    ctx.cache["passive_input_runs"] = out
    return out
