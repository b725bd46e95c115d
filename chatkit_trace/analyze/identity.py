"""CK2xx: identity and isomorphism (SPEC R4.2-R4.4, R8.4, R10.2)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..adapters import HISTORY_IDS, LIMITS
from ..core import (
    DeltaFact,
    MessageFact,
    ReasoningPart,
    RuntimeMessage,
    TextPart,
)
from ._compare import (
    Comparison,
    Pair,
    cause_sentence,
    comparisons,
    consequences,
    describe,
    diff_messages,
    diff_pairs,
    difference_detail,
    limit_sentence,
    open_comparisons,
    pair_run,
    visible,
)
from ._context import Context, analyzer, frame_ref
from ._finding import Finding, clip, make_finding
from ._shared import refs, rejections, route_of

__all__ = [
    "Comparison",
    "Pair",
    "cause_sentence",
    "clip",
    "comparisons",
    "consequences",
    "describe",
    "diff_messages",
    "diff_pairs",
    "limit_sentence",
    "open_comparisons",
    "pair_run",
    "visible",
]


def _limitation_note(ctx: Context) -> str | None:
    return getattr(ctx.protocol, "history_limitation", None)


@analyzer("CK207")
def history_id_limit(ctx: Context) -> Iterator[Finding]:
    """CK207 (R8.4, R4.3; info, once per trace and route): the protocol's
    history never carries the ids the live stream used
    (``AdapterProtocol.history_limits`` names ``history-ids``: Hermes
    ``/api/sessions/{id}/messages`` rows have integer ids and no run).  A
    limit of the protocol, not a defect of the backend: live and history
    are paired by run and position, real content differences stay CK201,
    and no id difference is reported per run (CK201/CK202).  Stated only
    where a read covered a run the live stream carried."""
    routes: dict[str, list[str]] = {}
    for c in comparisons(ctx):
        h = c.history
        if HISTORY_IDS not in getattr(h, "limits", ()):
            continue
        rec = ctx.replay.exchanges.get(h.exchange_index)
        if rec is None:
            continue
        frames = routes.setdefault(route_of(rec), [])
        ref = frame_ref(h.exchange_index, None)
        if ref not in frames:
            frames.append(ref)
    for route, frames in sorted(routes.items()):
        yield make_finding(
            "CK207",
            session_id=None,
            run_id=None,
            frames=frames[:20],
            message=f"On {route}, {LIMITS[HISTORY_IDS]}. Live and history are compared by run and position "
            f"(a limit of the {ctx.protocol.name} protocol, not of this backend).",
            detail={"route": route, "limit": HISTORY_IDS, "reads": len(frames)},
            keys=[route, HISTORY_IDS],
            frame_in_fingerprint=False,
        )


@analyzer("CK201")
def history_not_isomorphic(ctx: Context) -> Iterator[Finding]:
    """CK201 (R8.4): a history read differs from what the live stream showed
    of a run it covers (the read's scope: session, run or task, page),
    however the run was settled: a message missing or extra, a message id,
    part id, part type or visible content differs.  The live side is the
    run as the UI had it just before the read.  Messages pair by id first,
    then by run and position, never by text alone across runs; history
    messages that name no run (Hermes rows) go to the runs turn by turn.
    Every message of the run is compared, the user's too; where the
    protocol's history cannot carry the live ids (``history-ids``, CK207)
    only content differences count.  A run is compared with the first read
    that covers it after its last live frame (a later read finds the UI
    showing that read's copy).  A difference an earlier rejection in the same
    run explains (output-sealed, terminal-sealed, invalid message) is
    reported on that rejection, not here."""
    for c in comparisons(ctx):
        sid, run_id, h = c.session_id, c.run_id, c.history
        diffs = c.diffs
        if not diffs:
            continue
        detail: dict[str, Any] = {
            "history_exchange": h.exchange_index,
            "scope": c.scope,
            "run_settled": c.how,
            "baseline": c.baseline,
            "differences": [difference_detail(d) for d in diffs[:30]],
        }
        if c.explained:
            detail["explained_elsewhere"] = [{"message": d.get("message"), "by": d["cause"]["code"]} for d in c.explained]
        note = _limitation_note(ctx)
        if note:
            detail["protocol_limitation"] = note
        first = diffs[0]
        decisive = frame_ref(h.exchange_index, None)
        frames = [decisive]
        if c.live_at is not None:
            frames.append(frame_ref(*c.live_at))
        first_run = ctx.first_frame_of_run(sid, run_id) if run_id else None
        if first_run and first_run not in frames:
            frames.append(first_run)
        yield make_finding(
            "CK201",
            session_id=sid,
            run_id=run_id,
            frames=frames,
            message=f"History read {h.exchange_index} ({c.scope} scope) differs from live run {run_id} ({c.how}): "
            f"{len(diffs)} difference(s); first: {describe(first)}",
            detail=detail,
            keys=[h.exchange_index] + [d.get("message") for d in diffs[:5]],
        )


@analyzer("CK202")
def same_content_different_ids(ctx: Context) -> Iterator[Finding]:
    """CK202 (R4.3): the same message (same run, same place, same content)
    carries different ids in two observations: live vs a history read that
    covers its run, or two history reads of the same scope.  Equal text in
    different runs is never the same message."""
    for c in comparisons(ctx):
        sid, run_id, h = c.session_id, c.run_id, c.history
        renamed = c.renamed
        if renamed:
            yield make_finding(
                "CK202",
                session_id=sid,
                run_id=run_id,
                frames=[frame_ref(h.exchange_index, None)],
                message=f"The same message of run {run_id} has different ids live and in history read {h.exchange_index} "
                f"({c.scope} scope): " + ", ".join(f"{a} vs {b}" for a, b in renamed[:3])
                + (f" and {len(renamed) - 3} more" if len(renamed) > 3 else "") + ".",
                detail={"pairs": [{"live": a, "history": b} for a, b in renamed], "observations": ["live", f"history:{h.exchange_index}"],
                        "scope": c.scope},
                keys=[a for a, _ in renamed],
            )
    for sid, s in ctx.replay.sessions.items():
        reads = [h for h in s.history if h.result is not None]
        for first, second in zip(reads, reads[1:], strict=False):
            renamed = _read_vs_read(first, second)
            if renamed:
                yield make_finding(
                    "CK202",
                    session_id=sid,
                    run_id=None,
                    frames=[frame_ref(second.exchange_index, None), frame_ref(first.exchange_index, None)],
                    message=f"History reads {first.exchange_index} and {second.exchange_index} give the same message "
                    "different ids: " + ", ".join(f"{a} vs {b}" for a, b in renamed[:3]) + ".",
                    detail={
                        "pairs": [{"first": a, "second": b} for a, b in renamed],
                        "observations": [f"history:{first.exchange_index}", f"history:{second.exchange_index}"],
                    },
                    keys=[a for a, _ in renamed],
                )


def _read_vs_read(a: Any, b: Any) -> list[tuple[str, str]]:
    """Same messages under other ids in two reads: by id, then by run and
    position, only over what both reads cover (same scope, same run)."""
    if a.scope != b.scope or (a.scope == "run" and a.run_id != b.run_id):
        return []
    groups_a: dict[str | None, list[RuntimeMessage]] = {}
    groups_b: dict[str | None, list[RuntimeMessage]] = {}
    for m in a.result.messages:
        groups_a.setdefault(m.run_id, []).append(m)
    for m in b.result.messages:
        groups_b.setdefault(m.run_id, []).append(m)
    by_id = {m.id: m for m in b.result.messages}
    renamed: list[tuple[str, str]] = []
    for run, msgs in groups_a.items():
        other = groups_b.get(run)
        if not other:
            continue
        _, r = diff_pairs(pair_run(msgs, other, {k: v for k, v in by_id.items() if v.run_id == run}), complete=False)
        renamed.extend(r)
    return renamed


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
        key: tuple[str, Any] = (fact.session_id, getattr(fact, "message_id", None) or getattr(getattr(fact, "message", None), "id", ""))
        grown: str | None = None
        if isinstance(fact, DeltaFact):
            current = parts.get(key, [])
            ids = [p.id for p in current]
            if fact.part_id in ids and ids.index(fact.part_id) != len(ids) - 1:
                grown = fact.part_id  # appended to although later parts exist
        elif isinstance(fact, MessageFact):
            new = list(fact.message.parts)
            if len(new) > 1:  # a part grows across a segment boundary only when later parts exist
                old = {p.id: p for p in parts.get(key, [])}
                for i, p in enumerate(new):
                    before = old.get(p.id)
                    if (
                        isinstance(p, (TextPart, ReasoningPart))
                        and isinstance(before, (TextPart, ReasoningPart))
                        and any(q.id in old for q in new[i + 1 :])  # (cheap: usually no later part)
                        and not p.same_text(before)
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
        carried: list[Any] = [getattr(r.fact, "message", None) for r in recs]
        ids = sorted({m.id for m in carried if isinstance(getattr(m, "id", None), str)})
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
