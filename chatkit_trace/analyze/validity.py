"""CK3xx: message and error validity (SPEC R3.7, R4.5, R5, R6.4, R7)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..adapters import LIMITS, REASONING, TOOL_ARGS, TOOL_RESULT, fallback_sent
from ..core import (
    ABSENT,
    BUILTIN_DATA_KINDS,
    DataPart,
    FailedFact,
    MessageFact,
    RunError,
    ToolCallPart,
    thaw,
    to_run_error,
)
from ._compare import comparisons, consequence_sentence, consequences
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, make_finding
from ._shared import refs, rejections, route_of, run_stream

UNIQUE_RULES = ("part-id-unique", "message-id-unique")  # reported as CK205


@analyzer("CK301")
def invalid_messages(ctx: Context) -> Iterator[Finding]:
    """CK301 (R3.7, R4, R7): a message fails validation; the detail names the
    rule.  A live message is dropped alone; a history batch is rejected whole."""
    for (sid, run_id), recs in rejections(ctx, "invalid-message", lambda r: r.result.detail not in UNIQUE_RULES):
        rules = sorted({r.result.detail or "?" for r in recs})
        found = consequences(ctx, sid, run_id, "CK301")
        yield make_finding(
            "CK301",
            session_id=sid,
            run_id=run_id,
            frames=refs(recs),
            message=f"{len(recs)} live message(s) broke validation ({', '.join(rules)}) and were dropped."
            + consequence_sentence(found),
            detail={"rules": rules, "count": len(recs), "source": "live", **({"history_consequence": found} if found else {})},
            keys=rules,
        )
    for sid, s in ctx.replay.sessions.items():
        for h in s.history:
            if h.command is not None and not h.command.ok and h.command.reason == "invalid-message" and h.command.rule not in UNIQUE_RULES:
                yield make_finding(
                    "CK301",
                    session_id=sid,
                    run_id=None,
                    frames=[frame_ref(h.exchange_index, None)],
                    message=f"History read {h.exchange_index} holds an invalid "
                    f"{'run snapshot' if str(h.command.rule).startswith('run-snapshot') else 'message'} ({h.command.rule}): "
                    "the whole batch is rejected and the session shows nothing.",
                    detail={"rule": h.command.rule, "error": h.command.error, "source": "history"},
                    keys=[h.exchange_index, h.command.rule],
                )


@analyzer("CK302")
def unusable_errors(ctx: Context) -> Iterator[Finding]:
    """CK302 (R5.1, R5.3): a failure reaches the UI without a reason from the
    backend: no usable code (the Core falls back to ``UNKNOWN``; a numeric
    code included: decisions.md 4), an empty message, or a message the
    adapter had to supply (``fallback_error``: the finding reports what the
    backend sent, whatever fallback the UI shows); a run's failure, or a tool
    call's (``ToolCallPart.error``, decisions.md 100)."""
    tools: set[tuple[str, str, str]] = set()
    for rec in ctx.facts():
        if isinstance(rec.fact, MessageFact) and rec.result.accepted:
            for part in getattr(rec.fact.message, "parts", ()):
                if not isinstance(part, ToolCallPart) or part.error is ABSENT:
                    continue
                err = to_run_error(part.error)
                raw = part.error
                raw_code = raw.code if isinstance(raw, RunError) else raw.get("code") if isinstance(raw, Mapping) else None
                key = (rec.fact.session_id, rec.fact.run_id, str(part.tool_call_id))
                if err.code == "UNKNOWN" and raw_code != "UNKNOWN" and key not in tools:
                    tools.add(key)
                    yield make_finding(
                        "CK302",
                        session_id=rec.fact.session_id,
                        run_id=rec.fact.run_id,
                        frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                        message=f"Tool call {part.tool_call_id} failed with an error that has {_unusable(raw)}; "
                        f"the UI shows UNKNOWN: {err.message!r}.",
                        detail={"tool_call": part.tool_call_id, "raw": err.cause},
                        keys=["tool", str(part.tool_call_id)],
                    )
        if isinstance(rec.fact, FailedFact) and rec.result.accepted:
            err = to_run_error(rec.fact.error)
            fallback, sent = fallback_sent(rec.fact.error)
            if err.code == "UNKNOWN" and not (isinstance(rec.fact.error, Mapping) and rec.fact.error.get("code") == "UNKNOWN"):
                # An empty message is as unusable as a missing code: the Core
                # reads both alike (decisions.md 273).
                message = (
                    f"The run failed with an error that has {_unusable(rec.fact.error)}: the Core falls back to "
                    f"UNKNOWN and the failure card shows {err.message!r}."
                )
                detail = {"raw": err.cause if err.cause is not ABSENT else None}
            elif fallback:
                message = (
                    f"The run failed and the backend sent no reason ({_sent(sent)}): the failure card shows only the "
                    f"adapter's fallback {err.message!r}."
                )
                detail = {"sent": sent, "shown": {"code": err.code, "message": err.message}}
            else:
                continue
            yield make_finding(
                "CK302",
                session_id=rec.fact.session_id,
                run_id=rec.fact.run_id,
                frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                message=message,
                detail=detail,
                keys=["failed"],
            )


def _unusable(raw: object) -> str:
    """What makes an error unusable (R5.1), in the words of the finding."""
    if isinstance(raw, RunError):
        raw = raw.to_json()
    if not isinstance(raw, Mapping):
        sent = "nothing" if raw is None else json.dumps(thaw(raw), default=str)[:80]
        return f"no code and no message (the backend sent {sent})"
    code, text = raw.get("code", ABSENT), raw.get("message", ABSENT)
    wrong = []
    if code is ABSENT or code is None:
        wrong.append("no code")
    elif not isinstance(code, str):
        wrong.append(f"a {type(code).__name__} code {code!r} (codes are strings)")
    elif not code.strip():
        wrong.append("an empty code")
    if text is ABSENT or text is None:
        wrong.append("no message")
    elif not isinstance(text, str):
        wrong.append(f"a {type(text).__name__} message")
    elif not text.strip():
        wrong.append("an empty message")
    retryable = raw.get("retryable", None)
    if retryable is not None and not isinstance(retryable, bool):
        wrong.append(f"retryable {retryable!r} (not a boolean)")
    return " and ".join(wrong) or "no usable code or message"


def _sent(value: object) -> str:
    if value is None:
        return "no error text at all"
    text = json.dumps(thaw(value), default=str)
    return f"error {text[:80]}"


@analyzer("CK303")
def input_not_visible(ctx: Context) -> Iterator[Finding]:
    """CK303 (R4.5): the user's input was not visible before the first
    assistant content: no projection at dispatch and no echo before the answer."""
    users: set[tuple[str, str]] = set()
    answered: set[tuple[str, str]] = set()
    projected = {
        (ex.session_id, ex.run_id)
        for ex in ctx.exchange_records()
        if ex.exchange.capability in ("run", "regenerate", "edit") and ex.projected
    }
    local = {
        (ex.session_id, ex.run_id)
        for ex in ctx.exchange_records()
        if ex.exchange.capability in ("run", "regenerate", "edit") and ex.dispatch == "accepted"
    }
    for ex in ctx.exchange_records():  # run messages on a socket (the route's commands)
        for key, run in ex.socket_runs.items():
            if run.dispatch == "accepted":
                local.add(key)
                if run.projected:
                    projected.add(key)
    for rec in ctx.facts():
        if not rec.result.accepted or not isinstance(rec.fact, MessageFact):
            continue
        key = (rec.fact.session_id, rec.fact.run_id)
        role = rec.fact.message.role
        if role == "user":
            users.add(key)
        elif role in ("assistant", "tool") and key not in answered:
            answered.add(key)
            if key in local and key not in projected and key not in users:
                yield make_finding(
                    "CK303",
                    session_id=key[0],
                    run_id=key[1],
                    frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                    message=f"The answer of run {key[1]} appeared before the user's own message: the adapter projects no "
                    "input and the backend does not echo it first.",
                    detail={"first_answer": rec.fact.message.id},
                    keys=[rec.fact.message.id],
                )


@analyzer("CK304")
def ambiguous_tool_results(ctx: Context) -> Iterator[Finding]:
    """CK304 (R6.4): a tool result is ambiguous: a tool call reported
    ``completed`` with no result (absent), where an empty result must be
    ``null``."""
    seen: set[tuple[str, str]] = set()
    for rec in ctx.facts():
        if not rec.result.accepted or not isinstance(rec.fact, MessageFact):
            continue
        for p in rec.fact.message.parts:
            if isinstance(p, ToolCallPart) and p.status == "completed" and p.result is ABSENT:
                key = (rec.fact.session_id, p.tool_call_id)
                if key in seen:
                    continue
                seen.add(key)
                yield make_finding(
                    "CK304",
                    session_id=rec.fact.session_id,
                    run_id=rec.fact.run_id,
                    frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                    message=f"Tool call {p.tool_call_id!r} is reported completed with no result: an empty result must be "
                    "null, an absent one means still running.",
                    detail={"tool_call_id": p.tool_call_id, "tool_name": p.tool_name, "message": rec.fact.message.id},
                    keys=[p.tool_call_id],
                )


@analyzer("CK305")
def reserved_data_kinds(ctx: Context) -> Iterator[Finding]:
    """CK305 (R7.2): a backend uses a data kind in the reserved ``chatkit.``
    namespace that is not one of the SDK's built-ins."""
    seen: set[str] = set()
    for rec in ctx.facts():
        if not rec.result.accepted or not isinstance(rec.fact, MessageFact):
            continue
        for p in rec.fact.message.parts:
            if (
                isinstance(p, DataPart)
                and isinstance(p.kind, str)
                and p.kind.startswith("chatkit.")
                and p.kind not in BUILTIN_DATA_KINDS
                and p.kind not in seen
            ):
                seen.add(p.kind)
                yield make_finding(
                    "CK305",
                    session_id=rec.fact.session_id,
                    run_id=rec.fact.run_id,
                    frames=[frame_ref(rec.exchange_index, rec.frame_index)],
                    message=f"Data kind {p.kind!r} is in the reserved chatkit. namespace but is not an SDK built-in: "
                    "the SDK may claim the name later.",
                    detail={"kind": p.kind, "builtins": sorted(BUILTIN_DATA_KINDS)},
                    keys=[p.kind],
                )


@analyzer("CK306")
def protocol_limits(ctx: Context) -> Iterator[Finding]:
    """CK306 (R6.4; info, once per trace, route and limit): the protocol has
    no field for something chatkit models (``AdapterProtocol.event_limits``:
    Hermes ``tool.completed`` has no result).  A limit of the protocol, not a
    defect of the backend: the adapter models the traffic consistently and
    this says what it costs the user, never per run."""
    yield from _limit_findings(ctx, "CK306", TOOL_RESULT)


@analyzer("CK307")
def tool_args_limit(ctx: Context) -> Iterator[Finding]:
    """CK307 (R6.1; info, once per trace and route): the protocol has no
    field for a tool call's arguments (``AdapterProtocol.event_limits``
    ``tool-args``: Hermes ``/v1/runs`` ``tool.started`` carries only the
    tool's name and a preview).  The UI shows the call without arguments; a
    history that has them fills them in, which is no live/history
    difference (CK201)."""
    yield from _limit_findings(ctx, "CK307", TOOL_ARGS)


#: A limit the run's own later frames can make good -> the tool-call field they fill in.
_HEALED_FIELD = {TOOL_RESULT: "result", TOOL_ARGS: "args"}


def _healed(ctx: Context, session_id: str | None, run_id: str | None, wanted: str) -> bool:
    """Whether the run's live stream made the limit good before it ended: a
    later frame of the same run (Hermes' session-stream ``run.completed``
    transcript) gave every tool call of the run the field the limited event
    had no room for, so the UI ends up showing it (decisions.md 255)."""
    fieldname = _HEALED_FIELD.get(wanted)
    s = ctx.replay.sessions.get(session_id) if session_id is not None else None
    rec = s.runs.get(run_id) if s is not None and run_id is not None else None
    if fieldname is None or rec is None or rec.live is None:
        return False
    tools = [p for m in rec.live.messages if m.run_id == run_id for p in m.parts if isinstance(p, ToolCallPart)]
    if not tools:
        return False
    if fieldname == "result":
        return all(p.result is not ABSENT and p.result is not None for p in tools)
    return all(p.args is not ABSENT for p in tools)


@analyzer("CK308")
def reasoning_limit(ctx: Context) -> Iterator[Finding]:
    """CK308 (R4.1, R8.4; info, once per trace and route): the run's stream
    has no event for the model's reasoning (``AdapterProtocol.event_limits``
    ``reasoning``: Hermes ``/v1/runs``, whose ``reasoning.available``
    repeats the answer's text) and a later history read holds it.  The UI
    shows the answer without it until a refresh; the difference is no CK201
    (it is set apart as a limit).  Stated only where a read showed it."""
    routes: dict[str, dict[str, list[Any]]] = {}
    for c in comparisons(ctx):
        if not any(x["code"] == "CK308" for d in c.limited for x in d.get("limit", [])):
            continue
        ex = run_stream(ctx, c.session_id, c.run_id)
        if ex is None:
            continue
        entry = routes.setdefault(route_of(ex), {"frames": [], "reads": [], "runs": []})
        limited = [fr for fr in ex.frames if REASONING in fr.limits]
        entry["frames"] += [frame_ref(c.read, None)] + [frame_ref(fr.exchange_index, fr.frame_index) for fr in limited[:1]]
        entry["reads"].append(c.read)
        entry["runs"].append(f"{c.session_id}/{c.run_id}")
    for route, entry in sorted(routes.items()):
        yield make_finding(
            "CK308",
            session_id=None,
            run_id=None,
            frames=list(dict.fromkeys(entry["frames"]))[:20],
            message=f"On {route}, {LIMITS[REASONING]} (a limit of the {ctx.protocol.name} protocol, not of this backend).",
            detail={"route": route, "limit": REASONING, "reads": sorted(set(entry["reads"])), "runs": entry["runs"][:20]},
            keys=[route, REASONING],
            frame_in_fingerprint=False,
        )


def _limit_findings(ctx: Context, code: str, wanted: str) -> Iterator[Finding]:
    routes: dict[str, list[str]] = {}
    healed: dict[tuple[str | None, str | None], bool] = {}
    for fr in ctx.frames():
        if wanted not in fr.limits:
            continue  # another limit is another code (codes never change meaning)
        rec = ctx.replay.exchanges.get(fr.exchange_index)
        if rec is None:
            continue
        key = (fr.session_id, fr.run_id)
        if key not in healed:
            healed[key] = _healed(ctx, fr.session_id, fr.run_id, wanted)
        if healed[key]:
            continue
        routes.setdefault(route_of(rec), []).append(frame_ref(fr.exchange_index, fr.frame_index))
    for route, frames in sorted(routes.items()):
        cost = LIMITS.get(wanted, wanted)
        yield make_finding(
            code,
            session_id=None,
            run_id=None,
            frames=frames[:20],
            message=f"On {route}, {cost} (a limit of the {ctx.protocol.name} protocol, not of this backend).",
            detail={"route": route, "limit": wanted, "events": len(frames)},
            keys=[route, wanted],
            frame_in_fingerprint=False,
        )
