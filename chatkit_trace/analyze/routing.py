"""CK5xx: sessions and routing (SPEC R3.6, R10.1, R11.2, R11.5)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ..adapters import LIMITS, PASSIVE_INPUT
from ..pipeline import FrameRecord, FrameState
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, make_finding
from ._shared import passive_input_runs, reason_finding, route_of

#: Seconds within which a passive run starting after an accepted local
#: command is taken to be that command's answer under another id (CK504).
PAIRING_WINDOW = 10.0


@analyzer("CK501")
def wrong_session(ctx: Context) -> Iterator[Finding]:
    """CK501 (R10.1, R11.5): an event names another session (e.g. an A2A
    contextId that differs from the session): the Core rejects it wrong-session."""
    yield from reason_finding("CK501", "wrong-session", "{n} event(s) named another session and were rejected wrong-session.", ctx)
    for ex in ctx.exchange_records():
        by_session: dict[str | None, list[FrameRecord]] = defaultdict(list)
        for fr in ex.frames:
            if fr.state == FrameState.WRONG_SESSION:
                by_session[fr.session_id].append(fr)
        for sid, bad in by_session.items():
            other = bad[0].identity.session_id if bad[0].identity else None
            yield make_finding(
                "CK501",
                session_id=sid,
                run_id=bad[0].run_id,
                frames=[frame_ref(fr.exchange_index, fr.frame_index) for fr in bad[:20]],
                message=f"{len(bad)} subscription event(s) of session {sid} name session {other}.",
                detail={"other_session": other, "count": len(bad)},
                keys=[ex.exchange.index],
            )


@analyzer("CK502")
def unroutable(ctx: Context) -> Iterator[Finding]:
    """CK502 (R11.2, R11.7): a subscription event carries no run identity and
    cannot be routed (end and error events must carry it too)."""
    for ex in ctx.exchange_records():
        by_session: dict[str | None, list[FrameRecord]] = defaultdict(list)
        for fr in ex.frames:
            if fr.state == FrameState.UNROUTED:
                by_session[fr.session_id].append(fr)
        for sid, bad in by_session.items():
            yield make_finding(
                "CK502",
                session_id=sid,
                run_id=None,
                frames=[frame_ref(fr.exchange_index, fr.frame_index) for fr in bad[:20]],
                message=f"{len(bad)} subscription event(s) carry no run identity and cannot be routed to a run.",
                detail={"count": len(bad), "event_types": sorted({fr.event_type or "(untyped)" for fr in bad})},
                keys=[ex.exchange.index],
            )


@analyzer("CK503")
def unknown_run(ctx: Context) -> Iterator[Finding]:
    """CK503 (R3.6): a fact names a run that was never started or registered (run-not-found)."""
    yield from reason_finding("CK503", "run-not-found", "{n} fact(s) named a run that was never started or registered.", ctx)


@analyzer("CK504")
def split_run_ids(ctx: Context) -> Iterator[Finding]:
    """CK504 (R11.5): a local command and its subscription events use
    different run ids: the command was accepted without a stream (its answer
    comes through the subscription), no event ever arrived for its run id,
    and a passive run started on the session's subscription within
    :data:`PAIRING_WINDOW` seconds after it (a backend that mints its own id)."""
    passive: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for fr in ctx.frames():
        if fr.identity is not None and fr.identity.starts_run and fr.state == FrameState.ADMITTED:
            passive[fr.session_id or ""].append((fr.at, fr.identity.run_id, frame_ref(fr.exchange_index, fr.frame_index)))
    with_facts = {(f.fact.session_id, f.fact.run_id) for f in ctx.facts()}
    for ex in ctx.exchange_records():
        e = ex.exchange
        if e.capability not in ("run", "regenerate", "edit") or ex.dispatch != "accepted" or e.frames:
            continue
        if (ex.session_id, ex.run_id) in with_facts:
            continue
        later = [p for p in passive.get(ex.session_id or "", []) if e.started_at <= p[0] <= e.started_at + PAIRING_WINDOW and p[1] != ex.run_id]
        if later:
            at, other, ref = later[0]
            yield make_finding(
                "CK504",
                session_id=ex.session_id,
                run_id=ex.run_id,
                frames=[ref, frame_ref(e.index, None)],
                message=f"The local run {ex.run_id} was accepted but its answer arrived on the subscription as run {other}: "
                "the UI registers a second, passive run and the first never ends.",
                detail={"local_run": ex.run_id, "subscription_run": other, "delay_s": round(at - e.started_at, 3)},
                keys=[ex.run_id, other],
            )



@analyzer("CK505")
def passive_input_not_carried(ctx: Context) -> Iterator[Finding]:
    """CK505 (R2.6, R8.4; info, once per trace and route): a run another
    client started (a passive run) arrived on a route whose start event has
    no field for the run's input (``AdapterProtocol.event_limits``:
    ``passive-input``), so the live stream cannot show that run's user
    message; a history read that holds it is not a CK201.  A limit of the
    protocol, not a defect of the backend or of one run."""
    runs = passive_input_runs(ctx)
    if not runs:
        return
    routes: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for (sid, run), cause in runs.items():
        ex_index = int(cause["frame"].split(":", 1)[0])
        rec = ctx.replay.exchanges.get(ex_index)
        if rec is not None:
            routes[route_of(rec)].append((sid, run, cause["frame"]))
    for route, items in sorted(routes.items()):
        yield make_finding(
            "CK505",
            session_id=None,
            run_id=None,
            frames=[f for _, _, f in items[:20]],
            message=f"On {route}, {LIMITS[PASSIVE_INPUT]} (a limit of the {ctx.protocol.name} protocol, not of this "
            f"backend; {len(items)} such run(s)).",
            detail={"route": route, "limit": PASSIVE_INPUT, "runs": [f"{sid}/{run}" for sid, run, _ in items[:20]],
                    "count": len(items)},
            keys=[route, PASSIVE_INPUT],
            frame_in_fingerprint=False,
        )
