"""Analyse a stored trace one session at a time (bounded memory).

Sessions never share Core state, so a trace is replayed and analysed
session by session: only one session's exchanges, frames and facts are in
memory at a time, and derived rows are written as each session finishes.
The few trace-level codes (CK203, CK306, CK401, CK406, CK505: "once per trace") are merged
across sessions at the end; CK203 learns up front, from one SQL query,
whether the trace holds any history read.  CK7xx come from the trace's
meta (``recording.trace_findings``), once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..adapters import Adapter
from ..pipeline import understood_exchanges
from ..store import TraceStore
from ..trace import Exchange
from ._context import Options
from ._finding import Finding

__all__ = ["analyze_store", "SessionHooks", "TRACE_LEVEL"]

TRACE_LEVEL = ("CK112", "CK115", "CK203", "CK207", "CK306", "CK307", "CK401", "CK406", "CK505")


def _sessions(store: TraceStore) -> list[str | None]:
    return store.session_ids()


def _merge(findings: list[Finding]) -> list[Finding]:
    by_fp: dict[str, Finding] = {}
    out: list[Finding] = []
    for f in findings:
        if f.code not in TRACE_LEVEL:
            out.append(f)
            continue
        first = by_fp.get(f.fingerprint)
        if first is None:
            by_fp[f.fingerprint] = f
            continue
        first.frames = (first.frames + [x for x in f.frames if x not in first.frames])[:20]
        if f.code == "CK406":
            types = dict(first.detail.get("types", {}))
            for t, n in f.detail.get("types", {}).items():
                types[t] = types.get(t, 0) + n
            first.detail["types"] = types
            total = sum(types.values())
            top = sorted(types.items(), key=lambda kv: -kv[1])[:5]
            first.message = (
                f"{total} frame(s) of {len(types)} event type(s) decoded to nothing and were ignored "
                f"({', '.join(f'{t} x{n}' for t, n in top)})."
            )
        elif f.code == "CK401":
            first.detail["exchanges"] = first.detail.get("exchanges", 0) + f.detail.get("exchanges", 0)
        elif f.code in ("CK306", "CK307"):
            first.detail["events"] = first.detail.get("events", 0) + f.detail.get("events", 0)
        elif f.code == "CK505":
            first.detail["count"] = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["runs"] = (first.detail.get("runs", []) + f.detail.get("runs", []))[:20]
            first.message = first.message.rsplit("; ", 1)[0] + f"; {first.detail['count']} such run(s))."
        elif f.code == "CK207":
            first.detail["reads"] = first.detail.get("reads", 0) + f.detail.get("reads", 0)
        elif f.code in ("CK112", "CK115"):
            count = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["count"] = count
            first.detail["runs"] = (first.detail.get("runs", []) + f.detail.get("runs", []))[:20]
            first.message = re.sub(r"^\d+ run\(s\)", f"{count} run(s)", first.message)
        elif f.code == "CK203":
            first.detail["count"] = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["examples"] = (first.detail.get("examples", []) + f.detail.get("examples", []))[:10]
    return out + list(by_fp.values())


@dataclass
class SessionHooks:
    """What a caller of :func:`analyze_store` may add to each session's pass
    (the HTML report reads snapshots and results from the same replay):

    * ``prepare(exchanges)``: the exchanges to replay instead (e.g. scrubbed);
    * ``observe(kind, exchange, frame, replayer)``: after every replay event
      (:func:`chatkit_trace.pipeline.replay`);
    * ``done(session_id, replay, exchanges, findings)``: after the session was
      analysed (its findings before the trace-level merge).
    """

    prepare: Callable[[list[Exchange]], list[Exchange]] | None = None
    observe: Callable[..., None] | None = None
    done: Callable[[str | None, Any, Sequence[Exchange], list[Finding]], None] | None = None


def analyze_store(
    store: TraceStore,
    adapter: Adapter,
    *,
    capabilities: Any = None,
    options: Options | None = None,
    write: bool = False,
    on_session: Callable[[str | None, int], None] | None = None,
    hooks: SessionHooks | None = None,
) -> tuple[list[Finding], dict[str, int]]:
    """Replay and analyse ``store`` session by session; optionally write the
    derived tables.  Returns the findings and counts (frames, facts,
    sessions, violations)."""
    from . import analyze_replay
    from ..store import write_replay

    has_history = store.db.execute("SELECT 1 FROM exchanges WHERE capability = 'history' LIMIT 1").fetchone() is not None
    opts = replace(options or Options(), trace_has_history=has_history)
    findings: list[Finding] = []
    counts = {"frames": 0, "facts": 0, "sessions": 0, "violations": 0, "matched": 0, "understood": 0}
    if write:
        store.clear_derived()
    from ..sessions import TraceSessions

    sessions = TraceSessions(store, adapter)
    for sid in sessions.sessions():
        exchanges = sessions.exchanges(sid)
        if hooks is not None and hooks.prepare is not None:
            exchanges = hooks.prepare(exchanges)
        rep = sessions.replay(sid, exchanges, capabilities=capabilities, observe=hooks.observe if hooks is not None else None)
        found = analyze_replay(rep, exchanges, adapter, opts)
        findings.extend(found)
        if hooks is not None and hooks.done is not None:
            hooks.done(sid, rep, exchanges, found)
        counts["frames"] += len(rep.frames)
        counts["facts"] += len(rep.facts)
        counts["violations"] += sum(1 for f in rep.facts if f.result.violation)
        counts["sessions"] += 1
        counts["matched"] += len(exchanges)
        counts["understood"] += len(understood_exchanges(rep))
        if write:
            write_replay(store, rep, append=True)
        if on_session is not None:
            on_session(sid, len(rep.frames))
        del rep, exchanges
    merged = _merge(findings)
    from .recording import trace_findings

    merged += trace_findings(store.meta())
    from ._finding import severity_rank

    merged.sort(key=lambda f: (f.session_id or "", f.run_id or "", severity_rank(f.severity), f.code, f.frames[:1]))
    return merged, counts


def iter_sessions(store: TraceStore) -> Iterator[str | None]:
    yield from _sessions(store)

