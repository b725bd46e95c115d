"""CK1xx: run lifecycle and terminal facts (SPEC R2.2, R2.5, R3.2, R3.4-R3.6, R6.5, R9)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from ..core import OUTPUT_KINDS, TERMINAL_KINDS, DeltaFact, Fact
from ..pipeline import STREAMING, ExchangeRecord, FactRecord, FrameRecord, FrameState, ReaderStop
from ..trace import Exchange, run_status
from ._compare import consequence_sentence, consequences, ignored_stops
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, clip, make_finding
from ._shared import (
    MAX_FRAMES,
    Ending,
    end_states,
    reason_finding,
    refs,
    rejections,
    route_of,
    stop_notices,
)
from ._wire import wire_event, wire_sentence


@analyzer("CK101")
def output_after_terminal(ctx: Context) -> Iterator[Finding]:
    # long-function: CK101 and its exceptions (resume repeats, stop notices, history consequences) in one verdict read top to bottom
    """CK101 (R3.5, R2.5a): output for a run after its terminal.

    On a direct run stream the reader stopped at the terminal (or, for a
    resume of a run already settled, never started), so the frames after it
    were decoded only in the shadow: any of them carrying output the UI does
    not show (a delta, a message that differs from the one on screen, a
    work item) is output lost to the UI.  On a subscription the Core rejected
    it ``terminal-sealed`` (a second terminal frame included).  Frames
    without output (usage, ``[DONE]``, keepalives, a repeated terminal on a
    direct stream, a replay of what is already shown) are not findings.
    """
    for ex in ctx.exchange_records():
        if ex.reader_stop is None or ex.reader_stop[0] not in (ReaderStop.TERMINAL, ReaderStop.SETTLED):
            continue
        settled = ex.reader_stop[0] == ReaderStop.SETTLED
        seen = _seen_event_ids(ctx, ex)
        lost = [
            fr
            for fr in ex.frames
            if fr.state in (FrameState.AFTER_TERMINAL, FrameState.AFTER_SETTLED)
            and _new_event(ctx, fr.exchange_index, fr.frame_index, seen, need_id=settled)
            and any(_is_output(f) for f in fr.shadow)
        ]
        if not lost:
            continue
        kinds = sorted({f.kind for fr in lost for f in fr.shadow if f.kind in OUTPUT_KINDS})
        if ex.reader_stop[0] == ReaderStop.TERMINAL:
            term = frame_ref(ex.exchange.index, ex.reader_stop[1])
            said = wire_event(ctx, term)
            message = (
                f"{len(lost)} frame(s) of output arrived after the run's terminal frame {term}"
                f"{f' (on the wire: `{said}`)' if said else ''}; the UI's reader had stopped there, so this output is lost."
            )
            extra = [term]
        else:
            term = None
            message = (
                f"A resume of run {ex.run_id}, which had already settled, carried {len(lost)} frame(s) of output "
                "the UI does not show: the backend kept producing after its terminal."
            )
            extra = []
        note, more = _history_note(ctx, ex.session_id, ex.run_id, "CK101")
        yield make_finding(
            "CK101",
            session_id=ex.session_id,
            run_id=ex.run_id,
            frames=[frame_ref(fr.exchange_index, fr.frame_index) for fr in lost[:MAX_FRAMES]] + extra,
            message=message + note,
            detail={"terminal_frame": term, "lost_frames": len(lost), "lost_kinds": kinds, "stream": "direct", **more},
            keys=["direct"],
        )
    seen_by_exchange: dict[int, set[str]] = {}

    def same_event(rec: FactRecord) -> bool:
        # The adapter decoded the terminal frame into its terminal update
        # *followed by* output: the Core admitted the terminal and rejected
        # the rest terminal-sealed (an adapter bug; the backend sent the
        # output in time).
        record = ctx.replay.exchanges.get(rec.exchange_index) if rec.exchange_index is not None else None
        return (
            record is not None
            and record.reader_stop is not None
            and record.reader_stop[0] == ReaderStop.TERMINAL
            and rec.frame_index == record.reader_stop[1]
        )

    def sealed(rec: FactRecord) -> bool:
        ex = ctx.exchanges.get(rec.exchange_index) if rec.exchange_index is not None else None
        if ex is not None and ex.capability == "subscribe":
            return rec.fact.kind in OUTPUT_KINDS or rec.fact.kind in TERMINAL_KINDS
        if same_event(rec):
            return False  # reported below, with the adapter named as the cause
        # A second reader of the same run (a recorded client resuming a run
        # whose stream is still open): only new output counts, told apart from
        # replays by outer ids.
        if not _is_output(rec.fact) or rec.exchange_index is None:
            return False
        seen = seen_by_exchange.get(rec.exchange_index)
        if seen is None:
            record = ctx.replay.exchanges.get(rec.exchange_index)
            seen = seen_by_exchange[rec.exchange_index] = _seen_event_ids(ctx, record) if record is not None else set()
        return _new_event(ctx, rec.exchange_index, rec.frame_index, seen, need_id=True)

    for (sid, run_id), recs in rejections(ctx, "terminal-sealed", sealed):
        note, more = _history_note(ctx, sid, run_id, "CK101")
        yield make_finding(
            "CK101",
            session_id=sid,
            run_id=run_id,
            frames=refs(recs),
            message=f"{len(recs)} fact(s) arrived for run {run_id} after its terminal and were rejected "
            "terminal-sealed (the console shows terminal-sealed)." + note,
            detail={"reason": "terminal-sealed", "count": len(recs), "kinds": sorted({r.fact.kind for r in recs}), "stream": "subscription", **more},
            keys=["sealed"],
        )
    for (sid, run_id), recs in rejections(ctx, "terminal-sealed", same_event):
        term = frame_ref(recs[0].exchange_index, recs[0].frame_index)
        yield make_finding(
            "CK101",
            session_id=sid,
            run_id=run_id,
            frames=refs(recs),
            message=f"{len(recs)} fact(s) of run {run_id} came after the terminal decoded from the same frame {term} "
            "and were rejected terminal-sealed: the adapter emitted output after the run's terminal update, so the UI "
            "drops it (the console shows terminal-sealed); emit output before the terminal.",
            detail={
                "reason": "terminal-sealed",
                "count": len(recs),
                "kinds": sorted({r.fact.kind for r in recs}),
                "stream": "same-event",
                "terminal_frame": term,
            },
            keys=["same-event"],
        )


def _seen_event_ids(ctx: Context, ex: ExchangeRecord) -> set[str]:
    """Outer event ids of the run's frames delivered before this exchange's
    reader stopped: on its other exchanges, and on this one up to the stop."""
    out: set[str] = set()
    stop = ex.reader_stop[1] if ex.reader_stop is not None else -1
    out.update(f.event_id for f in ex.exchange.frames[: max(stop, -1) + 1] if f.event_id)
    for other in ctx.exchange_records():
        if other.exchange.index == ex.exchange.index or other.run_id != ex.run_id or other.session_id != ex.session_id:
            continue
        if other.exchange.started_at <= ex.exchange.started_at:
            out.update(f.event_id for f in other.exchange.frames if f.event_id)
    return out


def _new_event(ctx: Context, exchange_index: int | None, frame_index: int | None, seen: set[str], *, need_id: bool) -> bool:
    """Whether a frame is a new event rather than a replay of one already
    delivered (same outer id).  A decoder's state is released at the
    terminal, so content cannot tell replays apart; outer ids can.  With
    ``need_id`` (a resume chatkit would never have made), a frame without an
    id is not counted: replay and new output cannot be told apart."""
    ex = ctx.exchanges.get(exchange_index) if exchange_index is not None else None
    frame = ex.frames[frame_index] if ex is not None and frame_index is not None and frame_index < len(ex.frames) else None
    event_id = frame.event_id if frame is not None else None
    if event_id is None:
        return not need_id
    return event_id not in seen


def _is_output(fact: Fact) -> bool:
    if isinstance(fact, DeltaFact):
        return bool(fact.delta)
    return fact.kind in OUTPUT_KINDS



def _continued_later(ctx: Context, end: Ending) -> bool:
    """A later request continued the same run (the OpenAI tool loop)."""
    ex = end.rec
    for other in ctx.exchange_records():
        if other.exchange.index != ex.exchange.index and other.run_id == end.run_id and other.session_id == end.session_id:
            if other.exchange.started_at >= ex.exchange.started_at and other.dispatch in ("continued",):
                return True
            if other.exchange.capability == "resume" and other.exchange.started_at >= ex.exchange.started_at:
                return True
    return False


def concluded_routes(ctx: Context) -> dict[str, int]:
    """Per route (``route_of``): how many runs a *completed* event on a stream
    of that route concluded.  Only a normal end counts as evidence that the
    protocol has one: stock ADK ends a run that failed with an error event
    and one that succeeded with nothing."""
    cached = ctx.cache.get("concluded_routes")
    if cached is not None:
        return cached  # type: ignore[no-any-return]

    def completed(sid: str | None, run: str | None) -> bool:
        view = ctx.run_view(sid, run) if sid is not None and run is not None else None
        return view is not None and view.status == "completed"

    out: dict[str, int] = defaultdict(int)
    for ex in ctx.exchange_records():
        cap = ex.exchange.capability
        if cap == "subscribe":
            n = sum(1 for r in ex.socket_runs.values() if r.concluded and completed(r.session_id, r.run_id))
        else:
            n = int(cap in STREAMING and ex.concluded and completed(ex.session_id, ex.run_id))
        if n:
            out[route_of(ex)] += n
    routes = ctx.cache["concluded_routes"] = dict(out)
    return routes


def _paused_for_client(frames: Sequence[FrameRecord]) -> str | None:
    """The frame where this stream handed its run to the client: the last
    phase it set was ``awaiting-input`` (the OpenAI tool loop's
    ``finish_reason: tool_calls``, ADK long-running tools, a Hermes
    approval request) and nothing after it on the stream changed the phase
    back.  None when the stream did not end waiting for the client.
    ``frames``: the stream's frame records (on a subscription, the run's)."""
    at: str | None = None
    for fr in frames:
        for rec in fr.facts:
            if not rec.result.accepted:
                continue
            if rec.fact.kind == "phase":
                phase = getattr(rec.fact, "phase", None)
                at = frame_ref(fr.exchange_index, fr.frame_index) if phase == "awaiting-input" else None
            elif rec.fact.kind in TERMINAL_KINDS:
                at = None
    return at


@analyzer("CK102", "CK104", "CK112", "CK114", "CK116")
def ended_without_conclusion(ctx: Context) -> Iterator[Finding]:
    # long-function: four codes that split one decision (CK102/104/112/114); together so each case excludes the others
    """CK104 (R3.4): an end-of-reader marker (``[DONE]``, A2A ``final``,
    Hermes ``done``) arrived with no conclusion before it: the adapter would
    have to invent an outcome.  Not when a later request continues the run
    (``finish_reason: tool_calls`` and the tool loop).

    CK102 (R3.4, R2.5): a stream ended cleanly while its run had no
    conclusion and nothing later (history, status read) settled it;
    superseded by CK104 when a marker came first.  A subscription (an SSE
    subscription, a socket) that closes while a run it carried has no
    conclusion counts as that run's stream.

    CK112 (R3.4; info, once per trace and route): streams ended cleanly
    without a conclusion and only a later history or status read settled
    their runs: the UI showed them running until then (a run the user
    stopped is CK106's, R9.1: history confirming a stop is the design).
    A protocol without
    an end-of-run event (stock ADK) has this on every run, and an adapter
    that does not decode its protocol's end of run too.

    CK114 (R3.4; info): the stream ended waiting for the client (its last
    phase ``awaiting-input``: tool results the client runs, an approval) and
    the recording holds no later request that continues the run.  That is
    the protocol working as designed, not a stream without a conclusion: the
    backend handed the run to the client, so nothing of CK102/CK104/CK112 is
    said about it.

    CK116 (R3.4; warning, per run): the same as CK112 on a route where other
    runs of the session *did* end with a completed event: the protocol has a
    normal end of run and the backend did not send it for this run (a
    backend defect, not a limit of the protocol).  Failed or interrupted
    ends do not count (stock ADK sends an error event, never a completion).
    """
    by_history: dict[str, list[tuple[Ending, str]]] = defaultdict(list)
    for end in end_states(ctx):
        e = end.exchange
        if _continued_later(ctx, end):
            continue
        settled = ctx.settled_later(end.session_id, end.run_id)
        if end.subscription:
            run_frames = [fr for fr in end.rec.frames if fr.run_id == end.run_id and fr.session_id == end.session_id]
        else:
            run_frames = end.rec.frames
        paused = _paused_for_client(run_frames) if e.end == "complete" else None
        if paused is not None:
            if settled is None:
                yield make_finding(
                    "CK114",
                    session_id=end.session_id,
                    run_id=end.run_id,
                    frames=[paused],
                    message=f"The stream of run {end.run_id} ended at {paused} waiting for the client (tool results or "
                    "an answer it must send), and the recording holds no later request that continues the run: the UI "
                    "shows the run waiting until the client sends it.",
                    detail={"paused_at": paused, "end": e.end},
                    keys=[e.index],
                )
            continue
        if end.end_marker_frame is not None:
            marker = frame_ref(e.index, end.end_marker_frame)
            yield make_finding(
                "CK104",
                session_id=end.session_id,
                run_id=end.run_id,
                frames=[marker],
                message=f"The stream signalled its end at {marker} without a conclusion (no completed, failed or "
                "interrupted before it): the spinner never stops unless something invents an outcome."
                + wire_sentence(ctx, marker, what="the end signal"),
                detail={"marker_frame": marker, "settled_later_by": settled},
                keys=[e.index],
            )
            continue
        if e.end == "complete" and settled in ("history", "status"):
            view = ctx.run_view(end.session_id, end.run_id)
            if view is None or view.abort is None:  # a stopped run settled by history is R9.1's path (CK106)
                by_history[route_of(end.rec)].append((end, settled))
        if e.end == "complete" and settled is None:
            if end.subscription:
                what = "its subscription" if e.transport != "ws" else "its socket"
                closed = f"closed ({_close(e)})"
                message = (f"Run {end.run_id} had no conclusion when {what} {closed}, and nothing later settled it: "
                           "its outcome stays unknown (the UI shows it running).")
            else:
                message = (f"The stream of run {end.run_id} ended cleanly without a conclusion (no completed, failed or "
                           "interrupted) and nothing later settled the run: its outcome stays unknown.")
            message += wire_sentence(ctx, end.last)
            yield make_finding(
                "CK102",
                session_id=end.session_id,
                run_id=end.run_id,
                frames=[end.last],
                message=message,
                detail={"frames": len(e.frames), "end": e.end, "stream": "subscription" if end.subscription else "direct",
                        **({"close_code": e.notes.get("close_code")} if e.transport == "ws" else {})},
                keys=[e.index],
            )
    concluded = concluded_routes(ctx)
    for route, items in sorted(by_history.items()):
        if concluded.get(route):
            for end, how in items:
                read = _settling_read(ctx, end.session_id, end.run_id)
                yield make_finding(
                    "CK116",
                    session_id=end.session_id,
                    run_id=end.run_id,
                    frames=[end.last] + ([read] if read else []),
                    message=f"Run {end.run_id} got no terminal event on {route}, although {concluded[route]} other run(s) "
                    f"of this session on this route ended with a completed event: only a later {how} read settled it, so "
                    "until a refresh the UI shows it running (the backend did not send this run's end).",
                    detail={"route": route, "settled_by": how, "read": read, "concluded_on_route": concluded[route],
                            "end": end.exchange.end},
                    keys=[route, end.index],
                )
            continue
        first = items[0][0]
        yield make_finding(
            "CK112",
            session_id=None,
            run_id=None,
            frames=[first.last],
            message=f"{len(items)} run(s) on {route} ended their stream without a conclusion and only a later "
            f"{items[0][1]} read settled them: until a refresh the UI shows them running (no completed, failed or "
            "interrupted came from the stream; if the protocol has an end-of-run event, the adapter does not decode it)."
            + wire_sentence(ctx, first.last),
            detail={"route": route, "runs": [f"{end.session_id}/{end.run_id}" for end, _ in items[:20]], "count": len(items)},
            keys=[route],
            frame_in_fingerprint=False,
        )


def _close(e: Exchange) -> str:
    code = (e.notes or {}).get("close_code")
    if e.transport == "ws" and code is not None:
        return f"close code {code}"
    return "cleanly"


def _settling_read(ctx: Context, session_id: str | None, run_id: str) -> str | None:
    """The read (``exchange`` or ``exchange:frame``) that settled a run, if a read did."""
    s = ctx.replay.sessions.get(session_id) if session_id is not None else None  # None: no such session
    rec = s.runs.get(run_id) if s is not None else None
    if s is None or rec is None or rec.settled_at is None:
        return None
    for h in s.history:
        if h.at == rec.settled_at:
            return frame_ref(h.exchange_index, h.frame_index)
    return None


@analyzer("CK103")
def connection_broke(ctx: Context) -> Iterator[Finding]:
    """CK103 (R3.4, R12): the connection broke mid-run (reset, timeout,
    client gone), a run's own stream or a subscription (a socket) carrying
    it.  Says whether a later resume or history settled the run."""
    for end in end_states(ctx):
        e = end.exchange
        if e.end not in ("reset", "timeout", "client-gone", "error") or (not end.subscription and end.rec.stopped_by_close):
            continue  # a client leaving a stream whose stop is closing it is the UI's stop (CK115)
        settled = ctx.settled_later(end.session_id, end.run_id)
        if end.subscription and settled == "fact":
            continue  # a later subscription (a reconnect, another tab) carried the run's end: the UI recovered
        resumed = any(
            o.exchange.capability == "resume" and o.run_id == end.run_id and o.exchange.started_at >= e.started_at
            for o in ctx.exchange_records()
        )
        how = {"fact": "a later stream concluded it", "history": "a later history read settled it", "status": "a later status read settled it"}
        after = (
            f"; {how.get(settled, 'it was settled later')}"
            if settled
            else ("; a resume followed but nothing concluded it" if resumed else "; nothing settled it")
        )
        note, more = _history_note(ctx, end.session_id, end.run_id, "CK103")
        if note:
            note = note.replace("what the UI dropped", "what the cut stream did not deliver or the backend did not keep") \
                .replace("the next refresh will show it", "the next refresh replaces the live copy with it")
        what = f"The connection of run {end.run_id} broke mid-run ({e.end})"
        if end.subscription:
            carrier = "socket" if e.transport == "ws" else "subscription"
            code = e.notes.get("close_code") if e.transport == "ws" else None
            what = (f"The {carrier} carrying run {end.run_id} broke mid-run ({e.end}"
                    + (f", close code {code}" if code is not None else "") + ")")
        yield make_finding(
            "CK103",
            session_id=end.session_id,
            run_id=end.run_id,
            frames=[end.last],
            message=f"{what}{after}." + note,
            detail={"end": e.end, "error": e.error, "resumed": resumed, "settled_by": settled,
                    "stream": "subscription" if end.subscription else "direct", **more},
            keys=[e.index],
        )


@analyzer("CK115")
def stop_by_close_unconfirmed(ctx: Context) -> Iterator[Finding]:
    """CK115 (R9.1; info, once per trace and route): on a route whose stop
    is closing the stream (``Route.stop = "close"``: stock ADK, OpenAI chat
    completions and Responses, the Hermes session chat stream, AG-UI) the
    client closed a run's stream mid-run, which is the UI's stop, and
    nothing later settled the run: the protocol has no way to confirm such a
    stop (no terminal follows a closed stream) and no history read settled
    it.  A limit of the protocol, not a broken connection (no CK103).  Not a
    run a later read shows the backend kept generating (CK118)."""
    routes: dict[str, list[ExchangeRecord]] = defaultdict(list)
    ignored = ignored_stops(ctx)
    for ex in ctx.exchange_records():
        if not ex.stopped_by_close or ex.session_id is None or ex.run_id is None:
            continue
        view = ctx.run_view(ex.session_id, ex.run_id)
        if view is not None and view.terminal:
            continue  # a later read (ADK's INVOCATION_ABORTED) confirmed it
        if (ex.session_id, ex.run_id) in ignored:
            continue  # a later read shows the backend kept generating: CK118
        routes[route_of(ex)].append(ex)
    for route, exs in sorted(routes.items()):
        frames = []
        for ex in exs:
            e = ex.exchange
            ref = frame_ref(e.index, e.frames[-1].index) if e.frames else frame_ref(e.index, None)
            if ref not in frames:
                frames.append(ref)
        yield make_finding(
            "CK115",
            session_id=None,
            run_id=None,
            frames=frames[:MAX_FRAMES],
            message=f"{len(exs)} run(s) on {route} were stopped by closing their stream (the only stop this route has) "
            "and nothing confirmed the stop: no terminal can follow a closed stream and no history read settled them, "
            "so the UI shows them running, output sealed, until a refresh (a limit of the protocol, not of this backend).",
            detail={"route": route, "runs": [f"{ex.session_id}/{ex.run_id}" for ex in exs[:20]], "count": len(exs)},
            keys=[route],
            frame_in_fingerprint=False,
        )


@analyzer("CK105")
def completed_with_running_tool(ctx: Context) -> Iterator[Finding]:
    """CK105 (R6.5, R3.6): a run completed while a tool call was still running (active-work)."""
    for f in reason_finding(
        "CK105",
        "active-work",
        "The backend concluded the run as completed while a tool call was still running ({detail}): the Core rejects "
        "that completion (active-work), so the run is not completed.",
        ctx,
    ):
        # say how the run stands in the one vocabulary (RUN_STATUSES), and what the wire sent
        view = ctx.run_view(f.session_id, f.run_id) if f.run_id else None
        status = run_status(view.status, view.connection) if view is not None else run_status(None)
        said = wire_event(ctx, f.frames[0] if f.frames else None)
        wire = f" On the wire the completion was `{said}`." if said else ""
        f.message += f" The run stays {status} and the tool spins forever.{wire}"
        yield f


#: What may end a stopped run, the expected one first (CK106's wire words).
_STOP_ENDS = ("interrupted", "completed", "failed")


@analyzer("CK106")
def stop_without_end(ctx: Context) -> Iterator[Finding]:
    """CK106 (R9.1, R9.4): a stop was accepted but no terminal of any kind
    followed and nothing settled the run.  A completed/failed terminal before
    the stop's acknowledgement is a valid race (R9.5), not a finding."""
    for ex in ctx.exchange_records():
        e = ex.exchange
        if e.capability == "subscribe":
            # a stop sent as a client message on a socket (the route's messages)
            for fr in ex.frames:
                cmd = fr.command
                if cmd is None or cmd.capability != "abort" or cmd.run_id is None or fr.session_id is None:
                    continue
                view = ctx.run_view(fr.session_id, cmd.run_id)
                if view is None or view.terminal or view.abort is None:
                    continue
                ref = frame_ref(fr.exchange_index, fr.frame_index)
                yield make_finding(
                    "CK106",
                    session_id=fr.session_id,
                    run_id=cmd.run_id,
                    frames=[ref],
                    message=f"The stop of run {cmd.run_id} was sent on the socket ({ref}) but no terminal followed and "
                    "nothing settled the run: Stop does nothing." + wire_sentence(ctx, kinds=_STOP_ENDS),
                    detail={"abort_frame": ref, "run_status": view.status},
                    keys=[ref],
                )
            continue
        if e.capability != "abort" or e.failed or ex.session_id is None or e.run_id is None:
            continue
        view = ctx.run_view(ex.session_id, e.run_id)
        if view is None or view.terminal:
            continue
        yield make_finding(
            "CK106",
            session_id=ex.session_id,
            run_id=e.run_id,
            frames=[frame_ref(e.index, None)],
            message=f"The stop of run {e.run_id} was accepted (HTTP {e.status}) but no terminal followed and nothing "
            "settled the run: Stop does nothing." + wire_sentence(ctx, kinds=_STOP_ENDS),
            detail={"abort_exchange": e.index, "status": e.status, "run_status": view.status},
            keys=[e.index],
        )



def _history_note(ctx: Context, sid: str | None, run_id: str | None, code: str) -> tuple[str, dict[str, Any]]:
    found = consequences(ctx, sid, run_id, code)
    if not found:
        return "", {}
    return consequence_sentence(found), {"history_consequence": found}


@analyzer("CK107")
def output_after_stop(ctx: Context) -> Iterator[Finding]:
    """CK107 (R3.6, R9): output after the acknowledged stop sealed the run
    (output-sealed): the backend kept producing.  A notice carried by the
    terminal frame itself is CK117.  When a later history read holds what
    was dropped, the finding says so (and CK201 does not repeat it)."""
    notices = stop_notices(ctx)
    for f in reason_finding(
        "CK107", "output-sealed", "{n} output fact(s) arrived after the backend acknowledged the stop (output-sealed): "
        "the backend kept producing and the UI drops it.", ctx, lambda r: r.seq not in notices,
    ):
        note, extra = _history_note(ctx, f.session_id, f.run_id, "CK107")
        f.message += note
        f.detail.update(extra)
        yield f


@analyzer("CK108")
def forbidden_transition(ctx: Context) -> Iterator[Finding]:
    """CK108 (R3.6): a fact the run state machine forbids (invalid-transition):
    a delta to a missing message or part, or to a non-text part, or a
    forbidden phase/status change.  Message-id takeovers are CK205."""
    yield from reason_finding(
        "CK108",
        "invalid-transition",
        "{n} fact(s) were rejected invalid-transition: {detail}.",
        ctx,
        lambda r: "belongs to run" not in (r.result.detail or ""),
    )


@analyzer("CK109")
def work_item_without_id(ctx: Context) -> Iterator[Finding]:
    """CK109 (R3.2a): a work item (tool call) without an id."""
    yield from reason_finding("CK109", "missing-work-item-id", "{n} work item(s) had no id (missing-work-item-id).", ctx)


#: What the UI does when a request of this capability fails at the HTTP level (R2.2).
_UI_ON_FAILURE = {
    "run": "the UI shows a send error and removes the user's message (the run was never accepted)",
    "regenerate": "the UI shows an error and puts the replaced answer back",
    "edit": "the UI shows an error and puts the replaced turn back",
    "resume": "the run stays disconnected until a refresh settles it",
    "history": "the refresh fails and the UI keeps what it showed",
    "subscribe": "the UI receives nothing on this subscription",
}


def _error_text(e: Exchange) -> str | None:
    """The server's error message in a failed response's JSON body, if any."""
    try:
        doc = e.response_json()
    except Exception:  # noqa: BLE001 - not JSON
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        err = err.get("message")
    if isinstance(doc, dict) and err is None:
        err = doc.get("message") or doc.get("detail")
    return err.strip() if isinstance(err, str) and err.strip() else None


@analyzer("CK110")
def http_failure(ctx: Context) -> Iterator[Finding]:
    """CK110 (R2.2): a run, resume or history request failed at the HTTP
    level (status >= 400 or no response): chatkit shows a send error, not a
    failed run."""
    for ex in ctx.exchange_records():
        e = ex.exchange
        if e.capability not in ("run", "regenerate", "edit", "resume", "history", "subscribe") or not e.failed:
            continue
        what = f"HTTP {e.status}" if e.status is not None else f"no response ({e.error or e.end or 'connection failed'})"
        said = _error_text(e)
        if said:
            what += f": “{clip(said, 120)}”"
        yield make_finding(
            "CK110",
            session_id=ex.session_id,
            run_id=ex.run_id,
            frames=[frame_ref(e.index, None)],
            message=f"The {e.capability} request {e.method} {e.path} did not complete ({what}): "
            + ("the run this request continued gets no answer and stays open." if ex.dispatch == "continued"
               else f"{_UI_ON_FAILURE[e.capability]}."),
            detail={"status": e.status, "error": e.error, "capability": e.capability},
            keys=[e.index],
        )


@analyzer("CK111")
def fact_without_event_id(ctx: Context) -> Iterator[Finding]:
    """CK111 (R3.2): a fact without an event id reached the Core (an adapter bug)."""
    yield from reason_finding("CK111", "missing-event-id", "{n} fact(s) reached the Core without an event id.", ctx)
