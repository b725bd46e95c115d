"""CK117-CK122: how a run ends as the UI shows it (SPEC R3.4, R5, R6.2, R8.2, R9).

The lifecycle family's later codes (issue 33), kept apart from
:mod:`.lifecycle` because each reads the run's end *and* what a later read
or the adapter's notes say about it: a stop notice the UI shows only after
a refresh (CK117, which replaces CK113: one cause, one code on every
backend), a stop by closing the stream that the backend ignored (CK118), a
failed run that leaves a tool call running (CK119), a failure the backend
reported as the answer (CK120), a final transcript holding earlier turns
(CK121), a run a content policy ended that completed silently (CK122).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..adapters import EARLIER_ROWS, REPORTED_FAILURE, WITHHELD, notes_of
from ..core import (
    DataPart,
    MediaPart,
    MessageFact,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    get_tool_call_status,
    to_run_error,
)
from ..pipeline import FactRecord
from ._compare import comparisons, ignored_stops
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, clip, make_finding
from ._shared import MAX_FRAMES, refs, rejections, route_of, run_stream, stop_notices

__all__ = ["stop_notice_message"]


def _terminal_frame(ctx: Context, session_id: str | None, run_id: str | None, kind: str) -> FactRecord | None:
    for rec in ctx.facts():
        if rec.fact.kind == kind and rec.result.accepted and rec.fact.run_id == run_id and rec.fact.session_id == session_id:
            return rec
    return None


def _quote(texts: list[str]) -> str:
    shown = list(dict.fromkeys(t for t in texts if t))
    return ", ".join(f"“{clip(t, 60)}”" for t in shown[:3]) + ("…" if len(shown) > 3 else "")


@analyzer("CK117")
def stop_notice_after_refresh(ctx: Context) -> Iterator[Finding]:
    # long-function: two sources of one cause (a sealed notice live, a notice only history holds) merged per route
    """CK117 (R9.4, R8.2; info, once per trace and route): the backend's
    notice about a stop ("cancelled by request", Hermes' "Operation
    interrupted.") never shows live and a refresh shows it.  Either the
    frame that ends the stopped run carries it and the stop sealed the run's
    output (R9: the Core drops it, A2A's ``canceled`` status message), or no
    event of the stream can carry it and only history holds it (Hermes
    ``/v1/runs`` after a stop at a tool).  The backend did nothing wrong:
    one cause, one code and one severity on every backend (decisions.md
    252).  Before issue 33 the first case was CK113 (warning), no longer
    reported."""
    routes: dict[str, dict[str, Any]] = defaultdict(lambda: {"frames": [], "runs": [], "texts": [], "how": set(), "reads": set()})
    notices = stop_notices(ctx)
    for (sid, run_id), recs in rejections(ctx, "output-sealed", lambda r: r.seq in notices):
        ex = ctx.replay.exchanges.get(recs[0].exchange_index) if recs[0].exchange_index is not None else None
        if ex is None:
            continue
        entry = routes[route_of(ex)]
        entry["frames"].extend(refs(recs))
        entry["runs"].append(f"{sid}/{run_id}")
        entry["texts"].extend(r.fact.message.text for r in recs if isinstance(r.fact, MessageFact))
        entry["how"].add("sealed")
    for c in comparisons(ctx):
        held = [d for d in c.explained if d["cause"]["code"] == "CK117"]
        if not held:
            continue
        if any(d["what"] != "stop notice" for d in held):  # a sealed notice (above) that this read holds
            ex = run_stream(ctx, c.session_id, c.run_id)
            if ex is not None:
                routes[route_of(ex)]["reads"].add(c.read)
        notes = [d for d in held if d["what"] == "stop notice"]
        ex = run_stream(ctx, c.session_id, c.run_id)
        if not notes or ex is None:
            continue
        entry = routes[route_of(ex)]
        end = _terminal_frame(ctx, c.session_id, c.run_id, "interrupted")
        if end is not None:
            entry["frames"].append(frame_ref(end.exchange_index, end.frame_index))
        entry["frames"].append(frame_ref(c.read, None))
        entry["runs"].append(f"{c.session_id}/{c.run_id}")
        entry["texts"].extend(str(d.get("text") or "") for d in notes)
        entry["how"].add("history")
        entry["reads"].add(c.read)
    for route, entry in sorted(routes.items()):
        runs = list(dict.fromkeys(entry["runs"]))
        detail = {"route": route, "runs": runs[:20], "count": len(runs), "texts": list(dict.fromkeys(entry["texts"]))[:5],
                  "how": sorted(entry["how"]), "reads": sorted(entry["reads"]), "protocol": ctx.protocol.name}
        yield make_finding(
            "CK117",
            session_id=None,
            run_id=None,
            frames=list(dict.fromkeys(entry["frames"]))[:MAX_FRAMES],
            message=stop_notice_message(detail),
            detail=detail,
            keys=[route],
            frame_in_fingerprint=False,
        )


def stop_notice_message(detail: dict[str, Any]) -> str:
    """CK117's sentence from its detail (also after the derive engine merged
    the sessions' findings of one route)."""
    how = []
    if "sealed" in detail["how"]:
        how.append("the frame that ends the run carries it, and the stop sealed the run's output (R9), so the Core drops it")
    if "history" in detail["how"]:
        how.append("no event of the stream carries it, and history holds it")
    reads = detail["reads"]
    after = (f" History read{'s' if len(reads) > 1 else ''} {', '.join(map(str, reads))} "
             f"hold{'' if len(reads) > 1 else 's'} it: the next refresh shows it." if reads else " A refresh shows it if history holds it.")
    return (f"On {detail['route']}, {detail['count']} stopped run(s) carry the backend's notice about the stop "
            f"({_quote(detail['texts']) or 'a message'}), which the UI does not show live: {'; '.join(how)}." + after
            + f" The backend did nothing wrong (a limit of how chatkit seals a stopped run and of the {detail['protocol']} protocol).")


@analyzer("CK118")
def stop_ignored(ctx: Context) -> Iterator[Finding]:
    """CK118 (R9.1; warning, per run): the client stopped a run by closing
    its stream (the route's only stop, ``stop = "close"``) and a later
    history read holds more of the answer than the UI showed at the stop:
    the backend ignored the stop and kept generating (:func:`ignored_stops`).
    Such a stop is confirmed (as ignored), so CK115 does not count the run."""
    for (sid, run_id), seen in ignored_stops(ctx).items():
        ex = ctx.replay.exchanges.get(seen["exchange"])
        route = route_of(ex) if ex is not None else "?"
        tail = seen["history_text"][len(seen["live_text"]):].strip()[-60:]
        tail = tail.split(" ", 1)[1] if " " in tail and len(tail) == 60 else tail  # from a word's start
        yield make_finding(
            "CK118",
            session_id=sid,
            run_id=run_id,
            frames=[seen["stop"], frame_ref(seen["read"], None)],
            message=f"Run {run_id} was stopped at {seen['stop']} by closing its stream (the only stop on {route}) after "
            f"{seen['shown']} characters of its answer, yet history read {seen['read']} holds {seen['held']} "
            f"(… “{tail}”): the backend ignored the stop and kept generating. The UI keeps the run "
            "running with its answer cut where the user stopped (output sealed, later sends queued); a refresh shows "
            "the whole answer from history.",
            detail={"route": route, "stop_frame": seen["stop"], "read": seen["read"], "shown_chars": seen["shown"],
                    "history_chars": seen["held"]},
            keys=[seen["stop"]],
        )


def _running_tools(msgs: Any, run_id: str) -> list[ToolCallPart]:
    return [p for m in msgs if m.run_id == run_id for p in m.parts
            if isinstance(p, ToolCallPart) and get_tool_call_status(p) == "running"]


@analyzer("CK119")
def failed_with_running_tool(ctx: Context) -> Iterator[Finding]:
    """CK119 (R6.2, R5.2; error): a run failed while a tool call it showed
    was still running (no result, no failed status): chatkit draws a tool
    card from the part's own status, so the card spins beside the failure
    card.  Says whether a later read settles the call (until a refresh) or
    not (for good).  A completion in that state is refused (CK105); a
    failure is not, so nothing else reports it."""
    for sid, s in ctx.replay.sessions.items():
        for run_id, rec in s.runs.items():
            view = s.core.snapshot.run(run_id)
            if view is None or view.status != "failed" or rec.settled is None:
                continue
            running = _running_tools(rec.settled.messages, run_id)
            if not running:
                continue
            end = _terminal_frame(ctx, sid, run_id, "failed")
            frames = [frame_ref(end.exchange_index, end.frame_index)] if end is not None else []
            frames += [f for f in (_started_at(ctx, sid, run_id, p.tool_call_id) for p in running) if f]
            err = view.error if isinstance(view.error, RunError) else to_run_error(view.error)
            later = _settled_later(ctx, sid, run_id, {p.tool_call_id for p in running})
            names = ", ".join(f"{p.tool_name} ({p.tool_call_id})" for p in running)
            if later is None:
                after = "and no later read settles it: the card spins for good, after a refresh too"
            elif later[1]:
                after = f"until a refresh: history read {later[0]} settles it"
            else:
                after = f"and history read {later[0]} still shows it running: a refresh keeps it spinning"
            yield make_finding(
                "CK119",
                session_id=sid,
                run_id=run_id,
                frames=frames,
                message=f"Run {run_id} failed ({err.code}: “{clip(err.message, 80)}”) while its tool call {names} was still "
                f"running: the UI shows the failure card with the tool card still spinning, {after}. Settle the tool call "
                "(failed, with its error) before failing the run.",
                detail={"tool_calls": [p.tool_call_id for p in running], "error": {"code": err.code, "message": err.message},
                        "settled_by_read": later[0] if later and later[1] else None},
                keys=[str(p.tool_call_id) for p in running],
            )


def _started_at(ctx: Context, sid: str, run_id: str, call_id: Any) -> str | None:
    """The frame whose message first showed the tool call."""
    for rec in ctx.facts():
        if (rec.result.accepted and isinstance(rec.fact, MessageFact) and rec.fact.run_id == run_id
                and rec.fact.session_id == sid
                and any(isinstance(p, ToolCallPart) and p.tool_call_id == call_id for p in rec.fact.message.parts)):
            return frame_ref(rec.exchange_index, rec.frame_index)
    return None


def _settled_later(ctx: Context, sid: str, run_id: str, calls: set[Any]) -> tuple[int, bool] | None:
    """The first later read that covers the run: (its exchange, whether it settles every call)."""
    for c in comparisons(ctx):
        if c.session_id != sid or c.run_id != run_id:
            continue
        parts = [p for m in c.seen for p in m.parts if isinstance(p, ToolCallPart) and p.tool_call_id in calls]
        return c.read, bool(parts) and all(get_tool_call_status(p) != "running" for p in parts)
    return None


def _noted(ctx: Context, key: str) -> Iterator[tuple[FactRecord, RuntimeMessage, Any]]:
    """Accepted messages the adapter noted ``key`` on, once per (session, run)."""
    seen: set[tuple[str, str]] = set()
    for rec in ctx.facts():
        if not isinstance(rec.fact, MessageFact) or not rec.result.accepted:
            continue
        value = notes_of(rec.fact.message).get(key)
        if value is None or (rec.fact.session_id, rec.fact.run_id) in seen:
            continue
        seen.add((rec.fact.session_id, rec.fact.run_id))
        yield rec, rec.fact.message, value


@analyzer("CK120")
def failure_as_answer(ctx: Context) -> Iterator[Finding]:
    """CK120 (R3.4, R5.1; error, per run): the backend reported a turn that
    failed (the model call failed, a content policy refused it, the model
    replied nothing) as the turn's answer and completed the run: the adapter
    notes it (``REPORTED_FAILURE``: Hermes' session stream sends the failure
    text as ``assistant.completed`` and ``run.completed`` with a transcript
    that holds no answer of the turn).  The UI shows it as a normal answer,
    no failure card; what a later read does with it (a refresh removes it)
    is this finding's, not CK201's."""
    for rec, msg, text in _noted(ctx, REPORTED_FAILURE):
        sid, run_id = rec.fact.session_id, rec.fact.run_id
        ref = frame_ref(rec.exchange_index, rec.frame_index)
        view = ctx.run_view(sid, run_id)
        status = view.status if view is not None else "unknown"
        reads = sorted({c.read for c in comparisons(ctx) if c.session_id == sid and c.run_id == run_id
                        for d in c.explained if d["cause"]["code"] == "CK120" and d["what"] == "missing in history"})
        after = (f"; history read{'s' if len(reads) > 1 else ''} {', '.join(map(str, reads))} keep{'' if len(reads) > 1 else 's'} "
                 "no answer for the turn, so a refresh removes it" if reads else "")
        shown = msg.text
        yield make_finding(
            "CK120",
            session_id=sid,
            run_id=run_id,
            frames=[ref],
            message=f"Run {run_id} failed but the backend reported it {status}, with “{clip(str(text), 100)}” as its answer "
            f"({ref}; the turn's own transcript holds no answer from the model): the UI shows "
            + (f"“{clip(shown, 60)}” " if shown and shown.strip() != str(text).strip() else "that text ")
            + f"as a normal answer, with no failure card and no retry{after}. Report the failure as one (a failed "
            "terminal with the reason).",
            detail={"reported": str(text), "shown": shown, "status": status, "reads": reads},
            keys=["reported-failure"],
        )


@analyzer("CK121")
def transcript_with_earlier_turns(ctx: Context) -> Iterator[Finding]:
    """CK121 (R8.2; warning, per run): the run's final transcript (the
    content the end of the run says is final, Hermes ``run.completed``
    ``messages[]``) carried messages of earlier turns besides the run's
    own; the adapter left them out (``EARLIER_ROWS``: stamped before the
    run began).  A client that rebuilds the answer from it, as the backend
    intends, shows earlier answers inside this one."""
    for rec, _msg, n in _noted(ctx, EARLIER_ROWS):
        ref = frame_ref(rec.exchange_index, rec.frame_index)
        yield make_finding(
            "CK121",
            session_id=rec.fact.session_id,
            run_id=rec.fact.run_id,
            frames=[ref],
            message=f"The final transcript of run {rec.fact.run_id} ({ref}) carries {n} message(s) of earlier turns "
            "besides its own: a client that rebuilds the answer from it shows those earlier answers inside this one. "
            "chatkit-trace's adapter leaves them out (stamped before the run began), so the UI shows this turn's answer only.",
            detail={"earlier_messages": n},
            keys=["earlier-rows"],
        )


def _answer_of(msgs: Any, run_id: str) -> str | None:
    """What the run shows as its answer: its visible text, ``""`` for an
    answer of tool calls, media or data only, None for no answer at all."""
    text, other = [], False
    for m in msgs:
        if m.run_id != run_id or m.role == "user":
            continue
        for p in m.parts:
            if isinstance(p, TextPart) and isinstance(p.text, str) and p.text.strip():
                text.append(p.text.strip())
            elif isinstance(p, (ToolCallPart, MediaPart, DataPart)):
                other = True
    return " ".join(text) if text else ("" if other else None)


@analyzer("CK122")
def policy_ended_silently(ctx: Context) -> Iterator[Finding]:
    """CK122 (R3.4, R5.1; warning, per run): the frame that ends a run says
    a content policy withheld or cut its output (``WITHHELD``: OpenAI
    ``finish_reason: content_filter``), and the run completed: the
    completed update has no field for the reason, so the UI shows no answer
    (or one cut short) as a finished one, with no reason.  Only where the
    wire says why: a completion with no answer and no reason on the wire is
    not reported (decisions.md 256)."""
    withheld: dict[tuple[str | None, str | None], str] = {}
    for fr in ctx.frames():
        if WITHHELD in fr.limits:
            withheld.setdefault((fr.session_id, fr.run_id), frame_ref(fr.exchange_index, fr.frame_index))
    for (sid, run_id), policy in withheld.items():
        s = ctx.replay.sessions.get(sid) if sid is not None else None
        rec = s.runs.get(run_id) if s is not None and run_id is not None else None
        view = s.core.snapshot.run(run_id) if s is not None and run_id is not None else None
        if rec is None or view is None or view.status != "completed" or rec.settled is None or run_id is None:
            continue
        answer = _answer_of(rec.settled.messages, run_id)
        shows = ("the user's message and nothing after it" if answer is None
                 else f"the answer cut short (“{clip(answer[-60:], 60)}”) as if it were complete")
        yield make_finding(
            "CK122",
            session_id=sid,
            run_id=run_id,
            frames=[policy],
            message=f"A content policy {'withheld' if answer is None else 'cut'} the answer of run {run_id} ({policy}: "
            "finish_reason content_filter) and the run completed: the completed update has no field for the reason, so "
            f"the UI shows {shows}, with no reason and no failure card. Send a visible answer (a refusal text) or fail "
            "the run with the reason.",
            detail={"withheld": policy, "answer": None if answer is None else clip(answer, 120)},
            keys=["content-policy"],
        )
