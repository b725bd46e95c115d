"""Resumed subscriptions (R11.6): a reconnect with a cursor is a resume of the
session's event sequence.

A subscription that starts with a cursor (the route's ``cursor``: the
``Last-Event-ID`` header an ``EventSource`` sends when it reconnects, or a
query form such as ``?lastEventId=``) asks the backend to replay the
session's channel from right after that event, completely and in order, then
go on live.  The pipeline routes each of its events to its own run, as on
any subscription; this module judges the stream as one resume of the
session, per session:

* **where the cursor is**: the event with that id the client received last
  before reconnecting (on the session's earlier subscription streams, else on
  a run's own stream, else in a history read that lists event ids,
  ``AdapterProtocol.history_event_ids``).  Cursors are compared only for
  equality (R11.6);
* **what came at or before it**: the earlier part of every stream or history
  list that holds the cursor's event, every subscription stream of the
  session that ended before that stream started, and, along a chain of
  reconnects, what came before the earlier cursor;
* **what must follow it**: the later part of every stream or history list
  that holds the cursor's event: the events the resumed stream must replay,
  in that order (those that precede an event it did replay, and those the
  trace saw before the reconnect);  and, when every earlier subscription
  stream of the session counted its ids by one (1, 2, 3 …), the next number
  after the cursor (the skip is then visible from the ids alone;
  docs/decisions.md).

What the resumed stream repeats, skips or reorders is one CK404 per resumed
stream, its decisive frame the first wrong event; the Core's rejections and
the factory's duplicates those repeated frames cause are this finding's, not
CK101's or CK403's (one cause, one verdict), and a later history read that
holds what a skip lost names CK404 as the cause instead of CK201.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..pipeline import FrameState
from ._context import Context, frame_ref

__all__ = ["ResumeCheck", "Problem", "session_resumes", "repeat_frames", "skip_causes", "STREAM_CAPS"]

#: Exchanges whose frames are events of the session's channel or of one run.
STREAM_CAPS = ("subscribe", "run", "resume", "regenerate", "edit")

Key = tuple[str | None, str]


@dataclass(frozen=True)
class Item:
    """One event with an outer id: where it was seen, its run and its id."""

    exchange: int
    frame: int | None  # None: listed by a history read
    run: str | None
    id: str
    at: float

    @property
    def key(self) -> Key:
        return (self.run, self.id)

    @property
    def ref(self) -> str:
        return frame_ref(self.exchange, self.frame)


@dataclass
class Source:
    """An ordered list of events: one stream, or one run in one history read."""

    kind: str  # subscription | stream | history
    exchange: int
    items: list[Item]
    started_at: float
    ended_at: float
    cursor: str | None = None
    #: On a socket: the frame of the ``resubscribe`` message this part of the
    #: session's stream starts with (None: the whole exchange).
    frame: int | None = None

    @property
    def key(self) -> tuple[int, int | None]:
        return (self.exchange, self.frame)

    def last_index(self, key: Key) -> int | None:
        for i in range(len(self.items) - 1, -1, -1):
            if self.items[i].key == key:
                return i
        return None

    @property
    def label(self) -> str:
        if self.kind == "history":
            return f"history read {self.exchange}"
        if self.frame is not None:
            return f"subscription {self.exchange} (from the resubscribe message {frame_ref(self.exchange, self.frame)})"
        return f"{'subscription' if self.kind == 'subscription' else 'stream'} {self.exchange}"


@dataclass
class Problem:
    kind: str  # repeat | skip | reorder
    item: Item  # the decisive event on the resumed stream
    #: skip: the missing event; reorder: the later event that should have come first
    other: Key | None = None
    evidence: str | None = None
    #: reorder: where that later event came
    later: Item | None = None

    def sentence(self, cursor: str) -> str:
        run = f" (run {self.item.run})" if self.item.run else ""
        if self.kind == "repeat":
            return f"repeats event {self.item.id!r}{run} at {self.item.ref}, which the client already had"
        if self.kind == "skip":
            assert self.other is not None
            orun = f" (run {self.other[0]})" if self.other[0] else ""
            return (f"skips event {self.other[1]!r}{orun}: {self.item.id!r} at {self.item.ref} came in its place "
                    f"({self.evidence})")
        assert self.other is not None
        at = f" (at {self.later.ref})" if self.later is not None else ""
        return (f"sends event {self.item.id!r}{run} at {self.item.ref} before {self.other[1]!r}{at}, which should "
                f"precede it ({self.evidence})")


@dataclass
class ResumeCheck:
    """One resumed subscription and what it did wrong (empty ``problems``: a correct resume)."""

    session_id: str
    exchange: int
    cursor: str
    #: ``Last-Event-ID`` header, or ``query`` / ``route`` (the profile's cursor),
    #: or a socket's ``resubscribe`` message
    cursor_from: str
    #: where the client had received the cursor's event (None: nowhere in the trace)
    anchor: Item | None
    anchor_source: str | None
    started_at: float
    problems: list[Problem] = field(default_factory=list)
    #: events of the resumed stream at or before the cursor
    repeats: list[Item] = field(default_factory=list)
    #: events after the cursor the resumed stream never carried: (run, id)
    skipped: list[Key] = field(default_factory=list)
    reordered: list[Item] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    #: On a socket: the frame of the ``resubscribe`` message (None: a reconnect).
    frame: int | None = None

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None


def _int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _sources(ctx: Context, session_id: str) -> list[Source]:
    out: list[Source] = []
    protocol = ctx.protocol
    lists_ids = protocol.implements("history_event_ids")
    for rec in ctx.exchange_records():
        e = rec.exchange
        socket = e.capability == "subscribe"
        # a socket several sessions share holds frames of several sessions: each frame says whose
        if rec.session_id != session_id and not (socket and any(fr.session_id == session_id for fr in rec.frames)):
            continue
        if e.failed:
            continue
        if socket:
            out.extend(_subscription_sources(rec, session_id))
        elif e.capability in STREAM_CAPS:
            items = []
            for fr in rec.frames:
                # the event id the pipeline used: the outer SSE id, or a WebSocket message's own
                if fr.state in ("outgoing", "ignored", "history") or not fr.event_id:
                    continue
                run = rec.run_id or fr.run_id
                items.append(Item(e.index, fr.frame_index, run, fr.event_id, fr.at))
            if items:
                end = e.ended_at if e.ended_at is not None else items[-1].at
                out.append(Source("stream", e.index, items, e.started_at, end))
        elif e.capability == "history" and lists_ids:
            try:
                listed = protocol.history_event_ids(e.response_json(), session_id) or {}
            except Exception:  # noqa: BLE001 - a history body the adapter cannot read
                continue
            for run, ids in listed.items():
                items = [Item(e.index, None, str(run), str(i), e.started_at) for i in ids if i is not None]
                if items:
                    out.append(Source("history", e.index, items, e.started_at, e.ended_at or e.started_at))
    return out


def _subscription_sources(rec: Any, session_id: str) -> list[Source]:
    """A subscription's events of one session: one source, or on a socket one
    per ``resubscribe`` message of the session (each a resume from its cursor,
    the socket's own cursor for the part before the first)."""
    e = rec.exchange
    end = e.ended_at
    parts: list[Source] = [Source("subscription", e.index, [], e.started_at, end or e.started_at, e.resume_cursor)]
    for fr in rec.frames:
        if fr.session_id != session_id:
            continue
        cmd = fr.command
        if cmd is not None and cmd.capability == "resubscribe":
            parts[-1].ended_at = fr.at
            parts.append(Source("subscription", e.index, [], fr.at, end or fr.at, cmd.cursor, fr.frame_index))
            continue
        if fr.state in ("outgoing", "ignored", "history") or not fr.event_id:
            continue
        parts[-1].items.append(Item(e.index, fr.frame_index, fr.run_id, fr.event_id, fr.at))
    for p in parts:
        if p.items and end is None:
            p.ended_at = max(p.ended_at, p.items[-1].at)
    return [p for p in parts if p.items]


class _Session:
    def __init__(self, ctx: Context, session_id: str) -> None:
        self.ctx = ctx
        self.session_id = session_id
        self.sources = _sources(ctx, session_id)
        self._before: dict[tuple[int, int | None], set[Key]] = {}

    def anchor(self, r: Source) -> tuple[Item, Source] | None:
        """The event with the cursor's id the client had last before reconnecting."""
        cursor = r.cursor
        for kind in ("subscription", "stream", "history"):
            best: tuple[Item, Source] | None = None
            for s in self.sources:
                if s is r or s.kind != kind or s.started_at > r.started_at:
                    continue
                for it in s.items:
                    if it.id == cursor and (kind == "history" or it.at <= r.started_at):
                        if best is None or it.at >= best[0].at:
                            best = (it, s)
            if best is not None:
                return best
        return None

    def before(self, r: Source, anchor: tuple[Item, Source] | None, depth: int = 0) -> set[Key]:
        """Events the session's channel carried at or before ``r``'s cursor."""
        cached = self._before.get(r.key)
        if cached is not None:
            return cached
        out: set[Key] = set()
        self._before[r.key] = out  # a cycle of cursors ends here
        if anchor is None:
            return out
        item, home = anchor
        for s in self.sources:
            if s is r:
                continue
            pos = s.last_index(item.key)
            if pos is not None and (s.kind == "history" or s.items[pos].at <= r.started_at):
                out.update(it.key for it in s.items[: pos + 1])
        if home.kind == "subscription":
            for s in self.sources:
                if s.kind == "subscription" and s is not r and s is not home and s.ended_at <= home.started_at:
                    out.update(it.key for it in s.items)
            if home.cursor and depth < 50:
                out.update(self.before(home, self.anchor(home), depth + 1))
        return out

    def counting(self, r: Source) -> list[int] | None:
        """The ids of the session's earlier subscription streams when every one
        counted by one (the evidence for reading a gap as a skip), else None."""
        steps = 0
        seen: list[int] = []
        for s in self.sources:
            if s.kind != "subscription" or s is r or s.started_at >= r.started_at:
                continue
            ints = [_int(it.id) for it in s.items if it.at <= r.started_at]
            if any(v is None for v in ints):
                return None
            for a, b in zip(ints, ints[1:], strict=False):
                if b - a != 1:  # type: ignore[operator]
                    return None
                steps += 1
            seen.extend(ints)  # type: ignore[arg-type]
        return seen if steps >= 2 else None

    @staticmethod
    def _reorder(out: ResumeCheck, items: list[Item], rank: Any, why: str) -> None:
        """The first event that came before one it should follow (the first
        wrong position), once per resumed stream."""
        if out.reordered:
            return
        ranks = [rank(it) for it in items]
        low = [0] * len(items)  # the lowest rank from i on
        m = None
        for i in range(len(items) - 1, -1, -1):
            m = ranks[i] if m is None or ranks[i] < m else m
            low[i] = m
        for i in range(len(items) - 1):
            if low[i + 1] < ranks[i]:
                j = next(j for j in range(i + 1, len(items)) if ranks[j] == low[i + 1])
                out.problems.append(Problem("reorder", items[i], items[j].key, why, items[j]))
                out.reordered.extend(items[i : j + 1])
                return

    def check(self, r: Source) -> ResumeCheck:
        # long-function: one session's resume check as one walk over its sources
        e = self.ctx.exchanges[r.exchange]
        cursor = r.cursor or ""
        header = e.header("Last-Event-ID")
        if r.frame is not None:
            cursor_from = f"the resubscribe message {frame_ref(r.exchange, r.frame)}"
        else:
            cursor_from = "Last-Event-ID header" if header == cursor else ("query" if e.cursor and e.cursor in e.url else "the route's cursor")
        found = self.anchor(r)
        out = ResumeCheck(self.session_id, r.exchange, cursor, cursor_from, found[0] if found else None,
                          found[1].label if found else None, r.started_at, frame=r.frame)
        before = self.before(r, found)
        # 1. repeats: what the client had at or before the cursor, and whatever
        # precedes the cursor's own event on the resumed stream.
        at_cursor: int | None = None
        unique_ids = len({it.id for it in r.items}) == len(r.items)
        for i, it in enumerate(r.items):
            if (found is not None and it.key == found[0].key) or (found is None and unique_ids and it.id == cursor):
                at_cursor = i
        repeats = [it for i, it in enumerate(r.items) if it.key in before or (at_cursor is not None and i <= at_cursor)]
        rep = {(it.exchange, it.frame) for it in repeats}
        rest = [it for it in r.items if (it.exchange, it.frame) not in rep]
        out.repeats = repeats
        out.problems.extend(Problem("repeat", it) for it in repeats)
        if repeats:
            out.evidence.append(f"the client had them before reconnecting ({found[1].label})" if found else
                                f"the resumed stream carries the cursor's own event {cursor!r}")
        # 2. what must follow the cursor, from every list that holds its event
        r_keys = {it.key for it in r.items}
        r_ids = {it.id for it in r.items}
        missing: dict[Key, Problem] = {}
        if found is not None:
            for s in self.sources:
                if s is r:
                    continue
                pos = s.last_index(found[0].key)
                if pos is None or (s.kind != "history" and s.items[pos].at > r.started_at):
                    continue
                suffix = s.items[pos + 1 :]
                present = [k for k, it in enumerate(suffix) if it.key in r_keys]
                last = present[-1] if present else -1
                for k, it in enumerate(suffix):
                    emitted = s.started_at < r.started_at if s.kind == "history" else it.at < r.started_at
                    if it.key in r_keys or it.key in missing or not (k < last or emitted):
                        continue
                    nxt = next((suffix[j].key for j in range(k + 1, len(suffix)) if suffix[j].key in r_keys), None)
                    where = next((x for x in rest if x.key == nxt), None) if nxt is not None else None
                    where = where or (rest[0] if rest else r.items[-1])
                    why = (f"{s.label} holds it after the cursor" if s.kind == "history"
                           else f"{s.label} carried it after the cursor")
                    missing[it.key] = Problem("skip", where, it.key, why)
                # 3. reorders against this list
                order = {it.key: k for k, it in enumerate(suffix)}
                self._reorder(out, [it for it in rest if it.key in order], lambda it: order[it.key],  # noqa: B023 - called at once, inside this iteration
                              f"{s.label} has them the other way round")
        # 4. ids that count by one: the number after the cursor comes next
        c = _int(cursor)
        counted = self.counting(r) if c is not None else None
        ints = [_int(it.id) for it in rest]
        if counted is not None and c is not None and rest and all(v is not None for v in ints):
            steady = all(b - a == 1 for a, b in zip(ints, ints[1:], strict=False))  # type: ignore[operator]
            first = ints[0]
            assert first is not None
            if first > c + 1 and steady:
                runs = {it.id: it.run for s in self.sources for it in s.items}
                shown = f"{counted[0]}…{counted[-1]}" if len(counted) > 3 else ", ".join(map(str, counted))
                for n in range(c + 1, min(first, c + 51)):
                    key = (runs.get(str(n)), str(n))
                    if str(n) in r_ids or any(k[1] == str(n) for k in missing):
                        continue
                    missing[key] = Problem("skip", rest[0], key, f"the session's ids counted by one before: {shown}")
            self._reorder(out, rest, lambda it: _int(it.id), "the session's ids count by one")
        out.skipped = list(missing)
        out.problems.extend(missing.values())
        if missing:
            out.evidence.extend(sorted({p.evidence for p in missing.values() if p.evidence}))
        at = {(it.exchange, it.frame): k for k, it in enumerate(r.items)}
        kind_order = {"repeat": 0, "skip": 1, "reorder": 2}
        out.problems.sort(key=lambda p: (at.get((p.item.exchange, p.item.frame), 1 << 30), kind_order[p.kind]))
        return out


def session_resumes(ctx: Context) -> list[ResumeCheck]:
    """Every subscription of the trace that starts with a cursor, judged as a
    resume of its session's event sequence (cached on the context)."""
    cached = ctx.cache.get("session_resumes")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    out: list[ResumeCheck] = []
    sessions: dict[str, _Session] = {}
    for rec in ctx.exchange_records():
        e = rec.exchange
        if e.capability != "subscribe" or e.failed:
            continue
        # a reconnect with a cursor, or on a socket a resubscribe message with one
        resumed = {rec.session_id} if e.resume_cursor and rec.session_id is not None else set()
        resumed |= {fr.session_id for fr in rec.frames if fr.command is not None
                    and fr.command.capability == "resubscribe" and fr.command.cursor and fr.session_id is not None}
        for sid in sorted(resumed):
            s = sessions.get(sid)
            if s is None:
                s = sessions[sid] = _Session(ctx, sid)
            for r in s.sources:
                # the resumed stream carried no event with an id: nothing to judge
                if r.exchange == e.index and r.kind == "subscription" and r.cursor:
                    out.append(s.check(r))
    ctx.cache["session_resumes"] = out
    return out


def repeat_frames(ctx: Context) -> set[tuple[int, int | None]]:
    """``(exchange, frame)`` of every event a resumed subscription repeated or
    sent out of order: what the Core and the factory did with them is
    CK404's to report (one cause, one verdict)."""
    cached = ctx.cache.get("resume_repeat_frames")
    if cached is None:
        cached = ctx.cache["resume_repeat_frames"] = {
            (it.exchange, it.frame) for c in session_resumes(ctx) for it in (*c.repeats, *c.reordered)
        }
    return cached


def skip_causes(ctx: Context) -> dict[tuple[str, str | None], dict[str, Any]]:
    """(session, run) -> the resume that skipped or reordered events of that
    run (the cause of what a later history read holds and the live stream
    never showed, or showed in another order)."""
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for c in session_resumes(ctx):
        for p in c.problems:
            if p.kind == "skip" and p.other is not None:
                out.setdefault((c.session_id, p.other[0] or p.item.run), {
                    "code": "CK404", "reason": "skipped by a resume", "frame": p.item.ref, "at": c.started_at,
                })
            elif p.kind == "reorder":
                for it in c.reordered:
                    out.setdefault((c.session_id, it.run), {
                        "code": "CK404", "reason": "reordered by a resume", "frame": p.item.ref, "at": c.started_at,
                    })
    return out


def what_the_ui_did(ctx: Context, check: ResumeCheck) -> tuple[str, dict[str, int]]:
    """What chatkit did with the repeated events: a sentence and the counts."""
    rep = {(it.exchange, it.frame) for it in check.repeats}
    counts: Counter[str] = Counter()
    for it in check.repeats:
        fr = ctx.replay.frame(it.exchange, it.frame) if it.frame is not None else None
        if fr is None:
            continue
        if fr.state == FrameState.DUPLICATE:
            counts["dropped as duplicates"] += 1
        elif any(f.result.reason is not None and f.result.reason.value == "terminal-sealed" for f in fr.facts):
            counts["rejected terminal-sealed (their run had ended)"] += 1
        elif any(f.result.violation for f in fr.facts):
            counts["rejected"] += 1
        elif any(f.result.accepted for f in fr.facts):
            counts["admitted again"] += 1
        else:
            counts["decoded to nothing"] += 1
    del rep
    if not counts:
        return "", {}
    parts = ", ".join(f"{n} {what}" for what, n in counts.most_common())
    return f" chatkit: {parts}; a client that does not de-duplicate shows them twice.", dict(counts)
