"""The history comparison (SPEC R4.2-R4.4, R8.4): what each history read
shows of the messages the UI received live, and why they differ (the
rejection that dropped a message live, a route limit, a broken stream).

The CK2xx analyzers (:mod:`.identity`) report it; the CK1xx, CK3xx and CK4xx
analyzers name its consequences ("a refresh shows it").  It sits below every
analyzer module, above :mod:`._shared`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..adapters import HISTORY_IDS, REASONING, REPORTED_FAILURE, STOP_NOTICE, TOOL_ARGS, TOOL_RESULT, notes_of
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
from ..pipeline import FrameState, HistoryRecord, ReaderStop
from ._context import Context, frame_ref
from ._finding import clip
from ._shared import end_states, passive_input_runs, stop_notices

__all__ = [
    "CAUSE_REASONS",
    "Comparison",
    "Pair",
    "cause_sentence",
    "clip",
    "comparisons",
    "consequence_sentence",
    "consequences",
    "describe",
    "diff_messages",
    "diff_pairs",
    "difference_detail",
    "ignored_stops",
    "limit_sentence",
    "open_comparisons",
    "pair_run",
    "settles",
    "visible",
]


def visible(part: Any) -> dict[str, Any]:
    """What the UI shows of a part (the content R8.4 compares).  Text is
    compared without the whitespace at its ends, which the UI does not show
    (a backend that stores a stopped answer stripped shows the same text)."""
    if isinstance(part, (TextPart, ReasoningPart)):
        return {"text": part.text.strip() if isinstance(part.text, str) else part.text}
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


def _content_key(msg: RuntimeMessage) -> tuple[Any, ...]:
    return (msg.role, tuple((p.type, repr(sorted(visible(p).items()))) for p in msg.parts))


def _short(value: Any, limit: int = 120) -> Any:
    if isinstance(value, str):
        return clip(value, limit)
    return value


def _sequence_runs(run_id: str) -> str:
    """The backend task a run belongs to: ``{task}:turn{k}`` is a turn of ``task``."""
    return _TURN.sub("", run_id)


_TURN = re.compile(r":turn\d+$")


@dataclass
class Pair:
    """A live message and its counterpart in history (either may be None).

    ``how``: ``id`` (same message id), ``position`` (same run, same place,
    another id) or None (no counterpart)."""

    live: RuntimeMessage | None
    history: RuntimeMessage | None
    how: str | None = None


def _align(live: list[RuntimeMessage], hist: list[RuntimeMessage]) -> list[tuple[RuntimeMessage, RuntimeMessage]]:
    """Pair the messages of one run that no id paired, by position: equal
    content first (in order), then the rest of each gap in order, same role."""
    import difflib

    a = [_content_key(m) for m in live]
    b = [_content_key(m) for m in hist]
    out: list[tuple[RuntimeMessage, RuntimeMessage]] = []
    i = j = 0
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        gl, gh = live[i : block.a], hist[j : block.b]
        out.extend((x, y) for x, y in zip(gl, gh, strict=False) if x.role == y.role)
        out.extend(zip(live[block.a : block.a + block.size], hist[block.b : block.b + block.size], strict=False))
        i, j = block.a + block.size, block.b + block.size
    return out


def pair_run(live: Sequence[RuntimeMessage], hist: Sequence[RuntimeMessage], by_id: dict[str, RuntimeMessage]) -> list[Pair]:
    """Pairs of one run in display order (history's order, live-only ones where they were)."""
    paired = {m.id: by_id[m.id] for m in live if m.id in by_id}
    rest_live = [m for m in live if m.id not in paired]
    taken = {id(h) for h in paired.values()}
    rest_hist = [h for h in hist if id(h) not in taken]
    partner: dict[int, tuple[RuntimeMessage, str]] = {id(h): (lm, "id") for lm, h in ((m, paired[m.id]) for m in live if m.id in paired)}
    for lm, h in _align(rest_live, rest_hist):
        partner[id(h)] = (lm, "position")
    used: set[int] = set()
    partnered = {id(lm) for lm, _ in partner.values()}
    order = {id(m): k for k, m in enumerate(live)}
    out: list[Pair] = []
    k = 0
    for h in hist:
        got = partner.get(id(h))
        if got is None:
            out.append(Pair(None, h))
            continue
        lm, how = got
        while k < order[id(lm)]:
            if id(live[k]) not in used and id(live[k]) not in partnered:
                out.append(Pair(live[k], None))
                used.add(id(live[k]))
            k += 1
        out.append(Pair(lm, h, how))
        used.add(id(lm))
    for m in live:
        if id(m) not in used and id(m) not in partnered:
            out.append(Pair(m, None))
    return out


def diff_pairs(
    pairs: Sequence[Pair], *, complete: bool = True, ids: bool = True
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The differences of paired messages (dicts; :func:`describe` says each in
    a sentence) and the id pairs of the same message (same run, same place,
    same content) under different ids (CK202).  ``complete``: the read claims
    to hold the whole run (not a page), so a live message without a
    counterpart is missing.  ``ids=False``: the protocol's history never
    carries the live ids (``history-ids``, CK207), so a message paired by
    run and position is compared by content only: another id is neither a
    difference nor a rename."""
    diffs: list[dict[str, Any]] = []
    renamed: list[tuple[str, str]] = []
    for p in pairs:
        m, h = p.live, p.history
        if h is None:
            if complete and m is not None:
                diffs.append({"message": m.id, "what": "missing in history", "role": m.role, "run": m.run_id, "text": m.text})
            continue
        if m is None:
            diffs.append({"message": h.id, "what": "extra in history", "role": h.role, "run": h.run_id, "text": h.text})
            continue
        if p.how == "position":
            same = _content_key(m) == _content_key(h)
            if ids:
                if same:
                    renamed.append((m.id, h.id))
                diffs.append({"message": m.id, "what": "id", "live": m.id, "history": h.id, "role": m.role, "run": m.run_id, "same_content": same})
            if same:
                continue
        if m.role != h.role:
            diffs.append({"message": m.id, "what": "role", "live": m.role, "history": h.role})
        lp = [(q.id, q.type) for q in m.parts]
        hp = [(q.id, q.type) for q in h.parts]
        if lp != hp:
            if [q[1] for q in lp] == [q[1] for q in hp] and [visible(q) for q in m.parts] == [visible(q) for q in h.parts]:
                renamed.extend((f"{m.id}/{a}", f"{h.id}/{b}") for (a, _), (b, _) in zip(lp, hp, strict=False) if a != b)
            diffs.append({"message": m.id, "what": "parts", "live": [f"{i}:{t}" for i, t in lp], "history": [f"{i}:{t}" for i, t in hp]})
            continue
        for lpart, hpart in zip(m.parts, h.parts, strict=False):
            lv, hv = visible(lpart), visible(hpart)
            if lv != hv:
                keys = sorted(k for k in set(lv) | set(hv) if _field_differs(k, lv, hv) and not _settled_field(k, lpart, hpart))
                if not keys:
                    continue
                diffs.append(
                    {
                        "message": m.id,
                        "part": lpart.id,
                        "what": "content",
                        "fields": keys,
                        # a field one side does not have is left out (absent is not null: R6.4)
                        "live": {k: lv[k] for k in keys if k in lv},
                        "history": {k: hv[k] for k in keys if k in hv},
                    }
                )
    return diffs, renamed


def _field_differs(key: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (key in a) != (key in b) or a.get(key) != b.get(key)


#: What a read that settles a tool call the live stream left running changes.
_SETTLING_FIELDS = frozenset({"status", "result", "error"})


def settles(live: Any, history: Any) -> bool:
    """A tool call the live stream left running that the read shows settled
    (completed, failed or cancelled): history completing the run's final
    content (R8.2; a stopped run's aborted tool: R9.4), not a difference."""
    return (
        isinstance(live, ToolCallPart)
        and isinstance(history, ToolCallPart)
        and get_tool_call_status(live) == "running"
        and get_tool_call_status(history) != "running"
    )


def _settled_field(key: str, live: Any, history: Any) -> bool:
    return key in _SETTLING_FIELDS and settles(live, history)


def diff_messages(
    live: Sequence[RuntimeMessage],
    history: Sequence[RuntimeMessage],
    candidates: Sequence[RuntimeMessage] = (),
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Live against history as one run: pairs by id, then by position
    (:func:`pair_run`); ``candidates`` are ignored (kept for callers)."""
    by_id = {m.id: m for m in history}
    return diff_pairs(pair_run(list(live), list(history), by_id))


def _value(v: Any, limit: int | None) -> str:
    if isinstance(v, dict) and len(v) == 1 and "text" in v:
        v = v["text"]
    if isinstance(v, _Absent):
        return "absent"
    if isinstance(v, str):
        return "“" + clip(v, limit) + "”"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x, limit)}" for k, x in v.items()) + "}"
    return clip(json.dumps(v, ensure_ascii=False, default=str), limit)


def _around(live: str, hist: str, limit: int | None) -> tuple[str, str, int | None]:
    """Both texts as shown in a sentence: whole when they fit, else a window
    of each from a little before their first difference (both clipped alike
    would often read the same); and where that difference is (None: both
    shown whole)."""
    if limit is None or (len(live) <= limit and len(hist) <= limit):
        return live, hist, None
    at = 0
    n = min(len(live), len(hist))
    while at < n and live[at] == hist[at]:
        at += 1
    start = max(0, at - max(8, min(40, limit // 3)))
    space = live.rfind(" ", max(0, start - 12), start + 1)
    if start and space > 0:
        start = space + 1
    lead = "…" if start else ""
    return lead + clip(live[start:], limit), lead + clip(hist[start:], limit), at


class _Absent:
    """A field one side of a difference does not have (printed ``absent``)."""

    def __repr__(self) -> str:
        return "absent"


_ABSENT_FIELD = _Absent()


def _sides(d: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A content difference's two sides with every field named: a field one
    side does not have is ``absent`` there (not ``null``: R6.4)."""
    fields = list(d.get("fields", []))
    live, hist = d.get("live", {}), d.get("history", {})
    return ({k: live[k] if k in live else _ABSENT_FIELD for k in fields},
            {k: hist[k] if k in hist else _ABSENT_FIELD for k in fields})


def _a(word: Any) -> str:
    return "an" if str(word)[:1].lower() in "aeiou" else "a"


def describe(d: Mapping[str, Any], limit: int | None = 120) -> str:
    """One difference (:func:`diff_pairs`) as a sentence; text clipped to
    ``limit`` characters with an ellipsis (None: whole)."""
    what = d.get("what")
    msg = d.get("message")
    role = d.get("role")
    text = d.get("text")
    said = f": {_value(text, limit)}" if text else ""
    if what == "missing in history":
        if d.get("run_open"):
            return (f"The live {role} message {msg}{said} is missing in history, which did not settle the run: the UI keeps "
                    "it while the run stays open, and a reload removes it.")
        return f"The live {role} message {msg}{said} is missing in history: a refresh removes it."
    if what == "extra in history":
        return f"History holds {_a(role)} {role} message {msg}{said} that the live stream never showed: a refresh adds it."
    if what == "id":
        if d.get("same_content", True):
            return (f"The live {role} message {d['live']} is {d['history']} in history (same run, same place, same content): "
                    "a refresh replaces it with a copy under another id.")
        return (f"The live {role} message {d['live']} is {d['history']} in history (same run, same place), "
                "with another id and other content.")
    if what == "parts":
        return f"Message {msg} has other parts in history: live {', '.join(d['live']) or 'none'}; history {', '.join(d['history']) or 'none'}."
    if what == "content":
        fields = ", ".join(d.get("fields", []))
        live, hist = _sides(d)
        where = ""
        lt, ht = live.get("text"), hist.get("text")
        if len(live) == 1 and len(hist) == 1 and isinstance(lt, str) and isinstance(ht, str):
            a, b, at = _around(lt, ht, limit)
            shown_live, shown_hist = f"“{a}”", f"“{b}”"
            if at is not None:
                where = f" (they first differ at character {at + 1} of {len(lt)} live, {len(ht)} in history)"
        else:
            shown_live, shown_hist = _value(live, limit), _value(hist, limit)
        return (f"Message {msg}, part {d.get('part')}: {fields} differ{'s' if len(d.get('fields', [])) == 1 else ''}"
                f"{where}: live {shown_live}, history {shown_hist}: a refresh changes what the UI shows.")
    if what == "stop notice":
        return (f"History holds the backend's notice about the stop in message {msg}, part {d.get('part')}{said}, "
                "which no live event carried: a refresh shows it.")
    if what == "role":
        return f"Message {msg} is {_a(d['live'])} {d['live']} message live and {_a(d['history'])} {d['history']} message in history."
    return clip(json.dumps(dict(d), ensure_ascii=False, default=str), limit)


def difference_detail(d: Mapping[str, Any], limit: int = 120) -> dict[str, Any]:
    """A difference for a finding's detail: long text clipped (word boundary, ellipsis)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, str) and k in ("text",):
            out[k] = clip(v, limit)
        elif isinstance(v, dict):
            out[k] = {kk: clip(vv, limit) if isinstance(vv, str) else vv for kk, vv in v.items()}
        else:
            out[k] = v
    out["sentence"] = describe(d, limit)
    return out


HOW = {
    "fact": "settled live",
    "history": "settled by an earlier history read",
    "status": "settled by a status read",
    "read": "settled by this read",
    None: "not settled",
}


@dataclass
class Comparison:
    """One run the live stream carried against one later history read that covers it."""

    session_id: str
    run_id: str | None
    history: HistoryRecord
    #: What the read covers: session, run or page.
    scope: str
    #: How the run stood: ``fact`` (settled live before the read), ``history``
    #: / ``status`` (settled earlier by another read), ``read`` (settled by
    #: this read), None (not settled).
    settled: str | None
    #: Where the live baseline was taken: the run's last live frame before the read.
    live_at: tuple[int, int | None] | None
    live: list[RuntimeMessage]
    seen: list[RuntimeMessage]
    pairs: list[Pair]
    diffs: list[dict[str, Any]] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    #: Differences an earlier rejection in the same run explains, each with its ``cause``.
    explained: list[dict[str, Any]] = field(default_factory=list)
    #: Differences a limit of the protocol explains (a field the live stream
    #: cannot carry that history has: CK306, CK307), each with its ``limit``.
    limited: list[dict[str, Any]] = field(default_factory=list)
    #: What the run's live frames could not carry (``event_limits``: ``tool-args``, ``tool-result``).
    live_limits: frozenset[str] = frozenset()
    #: Tool calls the live stream left running that the read shows settled
    #: (``message/part``): history completing the run (R8.2), no difference.
    settled_parts: list[str] = field(default_factory=list)
    #: Kept for callers of the old shape.
    candidates: list[RuntimeMessage] = field(default_factory=list)
    #: Why the comparison is not judged (None: judged): the run was still
    #: moving at the read and the UI kept its live copy (:func:`open_comparisons`).
    moving: str | None = None

    def diff(self) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        return self.diffs, self.renamed

    @property
    def read(self) -> int:
        return self.history.exchange_index

    @property
    def how(self) -> str:
        return HOW.get(self.settled, "not settled")

    @property
    def baseline(self) -> str:
        """Which live snapshot the comparison used, in words."""
        at = frame_ref(*self.live_at) if self.live_at else "?"
        return f"live just before read {self.read}, as of {'frame' if self.live_at and self.live_at[1] is not None else 'request'} {at} (run {self.how})"

    @property
    def title(self) -> str:
        return f"history read {self.read} ({self.scope} scope)"

    @property
    def ids_limited(self) -> bool:
        """The read's history cannot carry the live ids (``history-ids``, CK207)."""
        return HISTORY_IDS in getattr(self.history, "limits", ())

    def head_differs(self, pair: Pair) -> bool:
        """Whether a pair's message line differs (``diff``, the viewer, the
        report mark it): missing on a side, another role, or another id where
        history can carry the live ids."""
        if pair.live is None or pair.history is None or pair.live.role != pair.history.role:
            return True
        return pair.live.id != pair.history.id and not self.ids_limited

    def part_differs(self, live: Any, history: Any) -> bool:
        """Whether a part differs in a way the comparison counts: another id,
        type or visible content, less the fields the live stream could not
        carry (CK306, CK307)."""
        if live is None or history is None or live.id != history.id or live.type != history.type:
            return True
        lv, hv = visible(live), visible(history)
        keys = {k for k in set(lv) | set(hv) if _field_differs(k, lv, hv) and not _settled_field(k, live, history)}
        return bool({k for k in keys if not _limited_field(k, lv, self.live_limits)})

    @property
    def verdict(self) -> str:
        """The comparison in a few words (``diff``, the viewer)."""
        if self.moving is not None:
            said = f"{len(self.diffs)} difference(s)" if self.diffs else "same content"
            return f"not judged: {said}; {self.moving}"
        if self.diffs:
            return f"{len(self.diffs)} difference(s)"
        if self.explained:
            return f"{len(self.explained)} difference(s), explained by an earlier finding"
        how = "same types and content (history cannot carry the live ids: CK207)" if self.ids_limited else "same ids, types and content"
        if self.limited:
            how += "; history adds what the protocol could not carry live"
        if self.settled_parts:
            how += f"; history settles {len(self.settled_parts)} tool call(s) the live stream left running"
        return f"isomorphic: {how}"


def cause_sentence(cause: Mapping[str, Any]) -> str:
    """Where an explained difference is reported, in a sentence."""
    what = cause.get("what") or f"the {cause.get('reason')} rejection"
    return f"Caused by {what} at frame {cause.get('frame')} ({cause.get('code')}), reported there."


def limit_sentence(d: Mapping[str, Any]) -> str:
    """A difference a protocol limit explains, in a sentence."""
    codes = ", ".join(sorted({x["code"] for x in d.get("limit", [])}))
    fields = " and ".join(d.get("fields", []))
    return (f"Message {d.get('message')}, part {d.get('part')}: history has the {fields} the live stream could not carry "
            f"(a limit of the protocol, {codes}): a refresh fills {'them' if len(d.get('fields', [])) > 1 else 'it'} in.")


def _order(s: Any, h: Any) -> list[str]:
    """The runs the live traffic carried before read ``h``, oldest first,
    less those a regenerate/edit replaced before it (R10.2)."""
    runs = [rid for rid in s.runs if rid in h.baselines]
    views = {r.id: r for r in h.before.runs}
    replaced: set[str] = set()
    for k, rid in enumerate(runs):
        v = views.get(rid)
        if v is None or v.via not in ("regenerate", "edit"):
            continue
        target = v.target_run_id or (runs[k - 1] if k else None)
        if target in runs[:k]:
            replaced.update(runs[runs.index(target) : k])
    return [r for r in runs if r not in replaced]


def _covered(s: Any, h: Any, hist: list[RuntimeMessage]) -> list[str]:
    runs = _order(s, h)
    if h.scope == "run":
        if h.run_id:
            task = _sequence_runs(h.run_id)
            return [r for r in runs if r == h.run_id or _sequence_runs(r) == task]
        named = {m.run_id for m in hist if m.run_id}
        return [r for r in runs if r in named]
    if h.scope == "page":
        ids = {m.id for m in hist}
        named = {m.run_id for m in hist if m.run_id}
        return [r for r in runs if r in named or any(m.id in ids for m in _live_of(h, r))]
    return runs


def _live_of(h: Any, run_id: str) -> list[RuntimeMessage]:
    b = h.baselines.get(run_id)
    return [m for m in b.snapshot.messages if m.run_id == run_id] if b is not None else []


def _read_comparisons(
    s: Any,
    h: Any,
    exchanges: Mapping[int, Any] | None = None,
    limits: Mapping[tuple[Any, Any], set[str]] | None = None,
    *,
    moving: bool = False,
) -> list[Comparison]:
    """The runs one read covers, each against the read.  ``limits``: what
    each (session, run)'s live frames could not carry.  A run still moving at
    the read (named its active run, its stream still open, a stop waiting for
    its confirmation, R8.3, R9.1), which the UI keeps as it was, is skipped,
    or with ``moving`` compared all the same and marked
    (:attr:`Comparison.moving`: ``diff`` shows it, CK118 asks what history
    holds of it)."""
    # long-function: one history read compared step by step (pair, diff, explain) over shared state
    hist = list(h.result.messages)
    covered = _covered(s, h, hist)
    if not covered:
        return []
    lives = {r: _live_of(h, r) for r in covered}
    home_of_live = {m.id: r for r, msgs in lives.items() for m in msgs}
    known = set(h.baselines)  # runs the live traffic carried before the read
    # 1. by id, across the read (a backend may file a follow-up turn under the first run's id)
    by_id: dict[str, RuntimeMessage] = {}
    for m in hist:
        if m.id in home_of_live and m.id not in by_id:
            by_id[m.id] = m
    # 2. every other history message goes to its run: its own, a run the live
    # traffic knows under another id (paired by position), or its neighbour's.
    home: list[str | None] = []
    outside = object()
    for m in hist:
        if m.id in by_id:
            home.append(home_of_live[m.id])
        elif m.run_id in lives:
            home.append(m.run_id)
        elif m.run_id is not None and m.run_id in known:
            home.append(outside)  # type: ignore[arg-type]  # another run's message: outside this comparison
        else:
            home.append(None if m.run_id is None else "?" + m.run_id)
    homed = {x for x in home if isinstance(x, str) and not x.startswith("?")}
    free = [r for r in covered if r not in homed]
    strangers: dict[str, str | None] = {}
    for x in home:
        if isinstance(x, str) and x.startswith("?") and x not in strangers:
            strangers[x] = free.pop(0) if free else None
    home = [strangers.get(x, x) if isinstance(x, str) and x.startswith("?") else x for x in home]
    if h.scope != "run":
        _home_turns(hist, home, free, lives, outside)
        # messages without a run id follow their neighbour (before, else after)
        last: str | None = None
        for k, x in enumerate(home):
            if x is None and hist[k].run_id is None:
                home[k] = last
            elif isinstance(x, str):
                last = x
        nxt: str | None = None
        for k in range(len(home) - 1, -1, -1):
            x = home[k]
            if x is None and hist[k].run_id is None:
                home[k] = nxt if nxt is not None else (covered[-1] if len(covered) == 1 else None)
            elif isinstance(x, str):
                nxt = x
    else:
        home = [covered[0] if x is None and hist[k].run_id is None else x for k, x in enumerate(home)]
    out: list[Comparison] = []
    after = h.after
    active = getattr(h.result.active_run, "run_id", None)
    for r in covered:
        why: str | None = None
        view = after.run(r)
        open_after = h.baselines[r].settled_by is None and not (view is not None and view.terminal)
        if h.baselines[r].settled_by is None and active is not None and (active == r or _sequence_runs(r) == active):
            # the read says the run is still going: a snapshot of a moving run (R8.3), the UI keeps its live copy
            why = f"read {h.exchange_index} names the run as its active run: the UI keeps its live copy (R8.3)"
        elif open_after and _streaming_at(s.runs[r], exchanges, h.at):
            # read while the run's stream was still open and the read did not
            # settle it: a snapshot of a moving run; the Core keeps its live messages (R8.3)
            why = f"the run's stream was still open at read {h.exchange_index}: the UI keeps its live copy (R8.3)"
        elif open_after and view is not None and view.abort is not None:
            # a stop waits for its confirmation (R9.1) and the read did not settle it
            why = (f"the run's stop was never confirmed and read {h.exchange_index} does not settle it: the UI keeps "
                   "its live copy while it waits (R9.1)")
        if why is not None and not moving:
            continue
        seen = [m for m, x in zip(hist, home, strict=False) if x == r]
        live = lives[r]
        if not live and not seen:
            continue
        pairs = pair_run(live, seen, by_id)
        apart, explained, limited = _set_apart(pairs, h, (limits or {}).get((s.session_id, r), set()))
        diffs, renamed = diff_pairs(apart, complete=h.scope != "page", ids=HISTORY_IDS not in getattr(h, "limits", ()))
        if open_after:
            for d in diffs:
                d["run_open"] = True  # the UI keeps the run's live messages while it stays open
        b = h.baselines[r]
        settled = b.settled_by
        if settled is None:
            view = after.run(r)
            settled = "read" if view is not None and view.terminal else None
        c = Comparison(s.session_id, r, h, h.scope, settled, b.at_frame, live, seen, pairs, diffs, renamed,
                       explained=explained, limited=limited, moving=why)
        c.settled_parts = [f"{p.live.id}/{lp.id}" for p in apart if p.live is not None and p.history is not None
                           for lp, hp in zip(p.live.parts, p.history.parts, strict=False) if lp.id == hp.id and settles(lp, hp)]
        out.append(c)
    return out


def _set_apart(pairs: list[Pair], h: Any, limits: set[str]) -> tuple[list[Pair], list[dict[str, Any]], list[dict[str, Any]]]:
    """Pairs to diff, less the history parts that are no difference the
    backend controls: its notice about a stop, which no live event carried
    (``STOP_NOTICE``, CK117), and reasoning the live stream had no event for
    (``REASONING``, CK308).  Returns (the pairs, explained, limited)."""
    out: list[Pair] = []
    explained: list[dict[str, Any]] = []
    limited: list[dict[str, Any]] = []
    for p in pairs:
        hm = p.history
        if hm is None:
            out.append(p)
            continue
        notices = set(notes_of(hm).get(STOP_NOTICE) or ())
        reasoning = REASONING in limits and not (p.live is not None and any(isinstance(q, ReasoningPart) for q in p.live.parts))
        drop = [q for q in hm.parts if q.id in notices or (reasoning and isinstance(q, ReasoningPart))]
        if not drop:
            out.append(p)
            continue
        for q in drop:
            text = q.text if isinstance(q, (TextPart, ReasoningPart)) else None
            if q.id in notices:
                explained.append({"message": hm.id, "part": q.id, "what": "stop notice", "role": hm.role, "text": text,
                                  "cause": {"code": "CK117", "reason": "stop notice", "frame": frame_ref(h.exchange_index, h.frame_index),
                                            "what": "the backend's notice about the stop, which no live event carried", "at": h.at}})
            else:
                limited.append({"message": hm.id, "part": q.id, "what": "content", "fields": ["reasoning"],
                                "live": {}, "history": {"reasoning": text}, "limit": [{"limit": REASONING, "code": "CK308"}]})
        rest = tuple(q for q in hm.parts if q not in drop)
        if rest or p.live is not None:
            out.append(Pair(p.live, hm.with_parts(rest), p.how))
    return out, explained, limited


def _home_turns(hist: list[RuntimeMessage], home: list[Any], free: list[str], lives: Mapping[str, list[RuntimeMessage]], outside: object) -> None:
    """History messages that name no run and no live id (Hermes rows: integer
    ids, no run) go to runs turn by turn: a user message opens a turn, and
    the turns are aligned in order with the covered runs no other message
    went to, by the user's text where it is equal, else by position (the
    latest turns with the latest runs before the first equal one, in order
    after it).  Turns before the first aligned one are the session's earlier
    history, outside this comparison; other unaligned ones follow their
    neighbour (extra in history)."""
    import difflib

    turns: list[list[int]] = []
    current: list[int] | None = None
    for k, m in enumerate(hist):
        if home[k] is not None or m.run_id is not None:
            current = None  # a message with a home ends the turn
            continue
        if m.role == "user" or current is None:
            current = []
            turns.append(current)
        current.append(k)
    if not turns or not free:
        return

    def user_text(msgs: Sequence[RuntimeMessage]) -> object:
        for m in msgs:
            if m.role == "user":
                return m.text
        return object()  # no user message: equal to nothing

    a = [user_text(lives.get(r, [])) for r in free]
    b = [user_text([hist[k] for k in t]) for t in turns]
    pairs: list[tuple[int, int]] = []
    i = j = 0
    for n, blk in enumerate(difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()):
        ga, gb = list(range(i, blk.a)), list(range(j, blk.b))
        if n == 0:  # before the first equal turn: align the latest with the latest
            size = min(len(ga), len(gb))
            pairs.extend(zip(ga[len(ga) - size :], gb[len(gb) - size :], strict=False))
        else:
            pairs.extend(zip(ga, gb, strict=False))
        pairs.extend((blk.a + x, blk.b + x) for x in range(blk.size))
        i, j = blk.a + blk.size, blk.b + blk.size
    if not pairs:
        return
    first = min(t for _, t in pairs)
    for r, t in pairs:
        for k in turns[t]:
            home[k] = free[r]
    for t in range(first):
        for k in turns[t]:
            home[k] = outside


def _streaming_at(run: Any, exchanges: Mapping[int, Any] | None, at: float) -> bool:
    """Whether one of the run's streams was still open at ``at``."""
    for i in run.exchanges:
        e = exchanges.get(i) if exchanges is not None else None
        if e is None or e.capability not in ("run", "resume", "regenerate", "edit", "subscribe"):
            continue
        end = e.ended_at if e.ended_at is not None else max((f.at for f in e.frames), default=e.started_at)
        if e.started_at <= at < end:
            return True
    return False


def comparisons(ctx: Context) -> list[Comparison]:
    # long-function: one pass over the runs and their later history reads, with the per-read cache
    """Every run the live traffic carried against the first later history
    read that covers it (its scope: the session, the run or task, a page)
    after its last live frame, however the run was settled; differences an
    earlier rejection in the same run explains are set apart
    (:attr:`Comparison.explained`)."""
    cached = ctx.cache.get("comparisons")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    from .resume import skip_causes
    out: list[Comparison] = []
    causes = _causes(ctx)
    skips = skip_causes(ctx)
    passive: dict[Any, dict[str, Any]] = passive_input_runs(ctx)  # looked up with (session, run id or None)
    run_limits: dict[tuple[str | None, str | None], set[str]] = {}
    for fr in ctx.frames():
        if fr.limits:
            run_limits.setdefault((fr.session_id, fr.run_id), set()).update(fr.limits)
    for s in ctx.replay.sessions.values():
        # (run, where its live baseline ends) -> compared already: a later read
        # finds the UI showing the earlier read's copy, not the live one
        compared: set[tuple[str | None, tuple[int, int | None] | None]] = set()
        for h in s.history:
            if h.result is None:
                continue
            for c in _read_comparisons(s, h, ctx.exchanges, run_limits):
                if (c.run_id, c.live_at) in compared:
                    continue
                if c.scope != "page":
                    compared.add((c.run_id, c.live_at))
                keep = []
                skipped = skips.get((c.session_id, c.run_id))
                limit = passive.get((c.session_id, c.run_id))
                limits = run_limits.get((c.session_id, c.run_id), set())
                c.live_limits = frozenset(limits)
                for diff in c.diffs:
                    d, lim = _split_limited(diff, limits)
                    if lim is not None:
                        c.limited.append(lim)
                    if d is None:
                        continue
                    cause = causes.get((c.session_id, c.run_id, d.get("message")))
                    if cause is not None and cause["at"] <= h.at and d["what"] in ("extra in history", "content", "parts", "missing in history"):
                        c.explained.append({**d, "cause": cause})
                    elif skipped is not None and skipped["at"] <= h.at and _explained_by_skip(d):
                        c.explained.append({**d, "cause": skipped})
                    elif limit is not None and d["what"] == "extra in history" and d.get("role") == "user":
                        c.explained.append({**d, "cause": limit})
                    else:
                        keep.append(d)
                c.diffs = keep
                if keep and c.settled != "fact":
                    broke = _broken_stream(ctx, c.session_id, c.run_id, h.at)
                    if broke is not None:
                        c.diffs = []
                        for d in keep:
                            if _explained_by_break(d):
                                c.explained.append({**d, "cause": broke})
                            else:
                                c.diffs.append(d)
                out.append(c)
    ctx.cache["comparisons"] = out
    return out


#: Live fields a protocol limit leaves empty -> (limit, the code that reports it).
_LIMITED_FIELDS = {"result": (TOOL_RESULT, "CK306"), "args": (TOOL_ARGS, "CK307")}


def _limited_field(key: str, live: Mapping[str, Any], limits: Any) -> bool:
    """A field the live stream had no way to carry (empty live) on this run."""
    return key in _LIMITED_FIELDS and _LIMITED_FIELDS[key][0] in limits and live.get(key) is None


def _split_limited(d: dict[str, Any], limits: set[str]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Split a content difference into what the backend controls and what a
    limit of the protocol explains: a tool call's result (CK306) or
    arguments (CK307) the live stream had no field for, which history has.
    Returns (the difference left, or None; the limited part, or None)."""
    if d.get("what") != "content" or not limits:
        return d, None
    live = d.get("live", {})
    limited = [k for k in d.get("fields", []) if _limited_field(k, live, limits)]
    if not limited:
        return d, None
    rest = [k for k in d.get("fields", []) if k not in limited]

    def part(keys: list[str]) -> dict[str, Any]:
        return {**d, "fields": keys, "live": {k: live.get(k) for k in keys}, "history": {k: d.get("history", {}).get(k) for k in keys}}

    lim = part(limited)
    lim["limit"] = [{"limit": _LIMITED_FIELDS[k][0], "code": _LIMITED_FIELDS[k][1]} for k in limited]
    return (part(rest) if rest else None), lim


def _broken_stream(ctx: Context, session_id: str, run_id: str | None, before: float) -> dict[str, Any] | None:
    """The run's stream that broke mid-run (reset, timeout, client gone) before ``before``: CK103."""
    for end in end_states(ctx):
        e = end.exchange
        if end.session_id != session_id or end.run_id != run_id or e.end not in ("reset", "timeout", "client-gone", "error"):
            continue
        if not end.subscription and end.rec.stopped_by_close:
            continue  # the UI's stop, not a break
        if end.subscription and ctx.settled_later(session_id, run_id) == "fact":
            continue  # a later subscription carried the run's end (no CK103)
        if (e.ended_at or e.started_at) > before:
            continue
        return {"code": "CK103", "reason": f"connection broke ({e.end})", "what": f"the connection that broke ({e.end})",
                "frame": end.last, "at": e.ended_at or e.started_at}
    return None


def _explained_by_skip(d: Mapping[str, Any]) -> bool:
    """What events a resume skipped explain (CK404): history holding output the
    live stream never showed (another text, other parts, a whole message of
    the answer), never other ids or a missing user message."""
    what = d.get("what")
    if what == "extra in history":
        return d.get("role") != "user"
    return what in ("content", "parts")


def _explained_by_break(d: Mapping[str, Any]) -> bool:
    """What a stream cut mid-run explains: history holding more or less of the
    run's output (the rest the stream never delivered, or a partial answer the
    backend did not keep), never other ids or other content."""
    what = d.get("what")
    if what == "extra in history":
        return True
    if what == "missing in history":
        return d.get("role") != "user"
    if what == "parts":
        a, b = list(d.get("live", [])), list(d.get("history", []))
        return a[: len(b)] == b or b[: len(a)] == a
    if what == "content" and d.get("fields") == ["text"]:
        x, y = str(d["live"].get("text") or ""), str(d["history"].get("text") or "")
        return x.startswith(y) or y.startswith(x)
    return False


def _comparisons(ctx: Context) -> list[Comparison]:
    return comparisons(ctx)


def open_comparisons(ctx: Context) -> list[Comparison]:
    """For each run no read was judged against (:func:`comparisons`), the
    latest read that covers it though the run was still moving at it (its
    stream open, named active, a stop never confirmed), compared all the
    same and marked :attr:`Comparison.moving`: ``diff`` shows it, no finding
    is made of it (the UI kept its live copy).  A later read that covers a
    run is never "no read" (issue 33)."""
    judged = {(c.session_id, c.run_id) for c in comparisons(ctx)}
    latest: dict[tuple[str, str | None], Comparison] = {}
    for s in ctx.replay.sessions.values():
        for h in s.history:
            if h.result is None:
                continue
            for c in _read_comparisons(s, h, ctx.exchanges, moving=True):
                if c.moving is not None and (c.session_id, c.run_id) not in judged:
                    latest[(c.session_id, c.run_id)] = c
    return list(latest.values())


#: Rejections whose message a later history read may hold (the UI dropped it).
CAUSE_REASONS = {"output-sealed": "CK107", "terminal-sealed": "CK101", "invalid-message": "CK301"}


def _message_id(fact: Any) -> str | None:
    msg = getattr(fact, "message", None)
    if msg is not None and getattr(msg, "id", None):
        return msg.id  # type: ignore[no-any-return]
    mid = getattr(fact, "message_id", None)
    return mid if isinstance(mid, str) else None


def _causes(ctx: Context) -> dict[tuple[str, str | None, str | None], dict[str, Any]]:
    """(session, run, message id) -> the rejection that dropped it live."""
    cached = ctx.cache.get("causes")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    notices = stop_notices(ctx)
    out: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}

    def at(ex: int | None, fr: int | None) -> float:
        rec = ctx.replay.frame(ex, fr) if ex is not None and fr is not None else None
        if rec is not None:
            return rec.at
        e = ctx.exchanges.get(ex) if ex is not None else None
        return e.started_at if e is not None else 0.0

    for rec in ctx.facts():
        reason = rec.result.reason.value if rec.result.reason is not None else None
        msg = getattr(rec.fact, "message", None) if reason is None and rec.fact.kind == "message" else None
        if msg is not None and REPORTED_FAILURE in notes_of(msg):
            # a failure the backend reported as the turn's answer (CK120): history keeps no answer
            out.setdefault((rec.fact.session_id, rec.fact.run_id, msg.id), {
                "code": "CK120", "reason": "failure reported as an answer", "frame": frame_ref(rec.exchange_index, rec.frame_index),
                "what": "the failure the backend reported as the turn's answer", "at": at(rec.exchange_index, rec.frame_index)})
            continue
        if reason not in CAUSE_REASONS:
            continue
        mid = _message_id(rec.fact)
        if mid is None:
            continue
        code = "CK117" if rec.seq in notices else CAUSE_REASONS[reason]
        key = (rec.fact.session_id, rec.fact.run_id, mid)
        out.setdefault(key, {"code": code, "reason": reason, "frame": frame_ref(rec.exchange_index, rec.frame_index),
                             "at": at(rec.exchange_index, rec.frame_index)})
    for ex in ctx.exchange_records():
        if ex.reader_stop is None or ex.reader_stop[0] != ReaderStop.TERMINAL:
            continue
        for fr in ex.frames:
            if fr.state != FrameState.AFTER_TERMINAL:
                continue
            for fact in fr.shadow:
                mid = _message_id(fact)
                if mid is None or fact.kind not in ("message", "delta", "part"):
                    continue
                out.setdefault((fact.session_id, fact.run_id, mid), {
                    "code": "CK101", "reason": "after-terminal", "frame": frame_ref(fr.exchange_index, fr.frame_index), "at": fr.at})
    ctx.cache["causes"] = out
    return out


def consequences(ctx: Context, session_id: str | None, run_id: str | None, code: str) -> list[dict[str, Any]]:
    """What later history reads show of the messages a ``code`` rejection
    dropped in this run: ``[{read, message, what}]``."""
    out = []
    for c in comparisons(ctx):
        if c.session_id != session_id or c.run_id != run_id:
            continue
        for d in c.explained:
            if d["cause"]["code"] == code:
                out.append({"read": c.read, "message": d.get("message"), "what": d.get("what")})
    return out


def consequence_sentence(found: list[dict[str, Any]]) -> str:
    if not found:
        return ""
    reads = sorted({f["read"] for f in found})
    msgs = sorted({str(f["message"]) for f in found})
    return (f" History read{'s' if len(reads) > 1 else ''} {', '.join(map(str, reads))} "
            f"hold{'' if len(reads) > 1 else 's'} what the UI dropped ({', '.join(msgs[:3])}{'…' if len(msgs) > 3 else ''}): "
            "the next refresh will show it.")




def _answer_text(msgs: Sequence[RuntimeMessage]) -> str:
    """The visible text of a run's answers, whitespace runs made one space."""
    return " ".join(
        " ".join(p.text.split()) for m in msgs if m.role != "user" for p in m.parts if isinstance(p, TextPart) and isinstance(p.text, str)
    ).strip()


def _largest_delta(ctx: Context, exchange_index: int) -> int:
    return max((len(getattr(r.fact, "delta", "") or "") for fr in ctx.replay.exchanges[exchange_index].frames
                for r in fr.facts if r.fact.kind == "delta" and r.result.accepted), default=0)


def ignored_stops(ctx: Context) -> dict[tuple[str, str], dict[str, Any]]:
    """Runs the client stopped by closing their stream (``stop = "close"``)
    whose answer a later history read holds more of than the UI showed at
    the stop, by more than two of the stream's largest chunks (one in flight
    when the stream closed is no sign): the backend ignored the stop and
    kept generating (CK118; decisions.md 254).  (session, run) -> what shows it."""
    cached = ctx.cache.get("ignored_stops")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    out: dict[tuple[str, str], dict[str, Any]] = {}
    by_read: dict[tuple[int, int | None], list[Comparison]] = {}  # a read's comparisons, moving runs included, made once
    for ex in ctx.exchange_records():
        if not ex.stopped_by_close or ex.session_id is None or ex.run_id is None or (ex.session_id, ex.run_id) in out:
            continue
        s = ctx.replay.sessions.get(ex.session_id)
        e = ex.exchange
        closed = e.ended_at if e.ended_at is not None else max((f.at for f in e.frames), default=e.started_at)
        for h in s.history if s is not None else ():
            if h.result is None or h.at < closed:
                continue
            read = (h.exchange_index, h.frame_index)
            if read not in by_read:
                by_read[read] = _read_comparisons(s, h, ctx.exchanges, moving=True)
            c = next((c for c in by_read[read] if c.run_id == ex.run_id), None)
            if c is None:
                continue
            live, hist = _answer_text(c.live), _answer_text(c.seen)
            if hist.startswith(live) and len(hist) - len(live) > 2 * _largest_delta(ctx, e.index):
                stop = frame_ref(e.index, e.frames[-1].index) if e.frames else frame_ref(e.index, None)
                out[(ex.session_id, ex.run_id)] = {
                    "stop": stop, "exchange": e.index, "read": h.exchange_index, "shown": len(live), "held": len(hist),
                    "live_text": live, "history_text": hist,
                }
                break
    ctx.cache["ignored_stops"] = out
    return out
