"""A run's timeline: its rows in replay order, compressed into segments.

A row is an exchange's request (``START``), one of its frames, or the end of
its response stream (``END``).  The rows of a run are merged across its
exchanges in the pipeline's order ``(t, exchange, kind, frame)`` and kept as
segments ``(exchange, first frame, count)`` of consecutive frames of one
exchange: random access is a bisect and memory is O(segments), not O(frames)
(a run of 100k frames in one stream is three segments).

The timeline is built from any :class:`~.source.ViewSource`: SQLite for the
viewer, one session's replay for the report.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from chatkit_trace.core import TERMINAL_STATUSES
from chatkit_trace.pipeline import STREAMING

from .model import END, START, ExchangeInfo, Key, RunInfo, Timeline, parse_ref
from .source import ViewSource

__all__ = ["Timeline", "build_timeline"]


def build_timeline(data: ViewSource, run: RunInfo, extra_refs: Iterable[str] = ()) -> Timeline:
    # long-function: a run's exchanges merged in the pipeline's order, with the segment compression
    """The rows of ``run``: its exchanges' requests, frames and stream ends,
    the stop, history and status requests of its session while it was
    current (until the session's next run started), and any row its findings
    point at (``extra_refs``), in replay order."""
    sid, rid = run.session_id, run.run_id
    session = data.session_exchanges(run.session_for_replay)
    by_id = {ex.index: ex for ex in session}
    own = [i for i in run.exchanges if i in by_id] or [
        ex.index for ex in session if ex.run_id == rid
    ]
    own_set = set(own)
    first = min((by_id[i].started_at for i in own), default=0.0)
    later = sorted(
        ex.started_at
        for ex in session
        if ex.capability in ("run", "regenerate", "edit")
        and ex.started_at > first
        and ex.index not in own_set
        and ex.run_id != rid
    )
    horizon = later[0] if later else float("inf")
    chosen: dict[int, str] = {
        i: "own" for i in own
    }  # exchange -> own | point (its request only) | extra
    for ex in session:
        if ex.index in chosen:
            continue
        names_run = ex.capability in ("abort", "status") and ex.run_id == rid
        while_current = (
            ex.capability in ("history", "status", "abort")
            and first <= ex.started_at < horizon
            and ex.run_id in (None, rid)
        )
        if names_run or while_current:
            chosen[ex.index] = "point"
    extra_frames: dict[int, set[int]] = {}
    for ref in extra_refs:
        try:
            e, i = parse_ref(ref)
        except ValueError:
            continue
        if chosen.get(e) == "own":
            if i != START:
                extra_frames.setdefault(e, set()).add(i)  # a subscription frame routed elsewhere
            continue
        found = by_id.get(e) or data.exchange(e)
        if found is None:
            continue
        by_id[e] = found
        if i == START:
            chosen.setdefault(e, "point")
        else:
            chosen[e] = "extra"
            extra_frames.setdefault(e, set()).add(i)
    subscriptions = [
        i for i, how in chosen.items() if how == "own" and by_id[i].capability == "subscribe"
    ]
    routed = data.routed_frames(sid, rid, subscriptions)
    streams: list[Iterator[tuple[Key, int]]] = []
    sub_ends: list[ExchangeInfo] = []
    last_routed = float("-inf")
    for e, how in chosen.items():
        ex = by_id[e]
        streams.append(iter([((ex.started_at, e, 0, START), START)]))
        if how == "own" and ex.capability == "subscribe":
            sub_keys = list(data.frame_keys(ex, only=routed.get(e, set()) | extra_frames.get(e, set())))
            streams.append(iter(sub_keys))
            if sub_keys:
                last_routed = max(last_routed, sub_keys[-1][0][0])
            if ex.transport is not None:
                sub_ends.append(ex)
        elif how == "own":
            streams.append(data.frame_keys(ex))
            if ex.transport is not None and ex.capability in STREAMING:
                streams.append(iter([(data.end_key(ex), END)]))
        elif how == "extra":
            streams.append(data.frame_keys(ex, only=extra_frames[e]))
    # A subscription that ended while the run went on (a reconnect follows,
    # or nothing does) shows its end; one that outlived a finished run does not.
    unfinished = run.status not in TERMINAL_STATUSES  # the status a person reads: recording incomplete is unfinished
    for ex in sub_ends:
        end = data.end_key(ex)
        if end[0] < last_routed or unfinished:
            streams.append(iter([(end, END)]))
    segments: list[tuple[int, int, int]] = []
    keys: list[Key] = []
    for key, idx in heapq.merge(*streams, key=lambda kv: kv[0]):
        ex_index = key[1]
        if segments and idx not in (START, END):
            pex, pfirst, pcount = segments[-1]
            if pex == ex_index and pfirst not in (START, END) and pfirst + pcount == idx:
                segments[-1] = (pex, pfirst, pcount + 1)
                continue
        segments.append((ex_index, idx, 1))
        keys.append(key)
    return Timeline(sid, rid, segments, keys, by_id)
