"""One reading of a derived trace for the outside world.

:func:`collect` drives the derive engine (:class:`chatkit_trace.derive.Deriver`,
what ``check`` runs: the same findings) over a stored trace, one session at a
time, and hands what it makes to *sinks* (:class:`Sink`): rows of the
exchanges, frames and facts as each session is done (the Parquet dataset),
then the runs, sessions and findings once the trace's findings are merged
(the Parquet dataset, the OTLP spans).  :func:`session_export` makes the runs
and the session of one derived session: the recorder's live OTLP option calls
it on a session the deriver just derived.

Identity (decision 291): a trace's ``uid`` is made from what never changes
in it (meta ``created_at``, set once when the file is created; a file with
none, an imported HAR or flow file: its first exchange), so exporting the
same trace twice yields the same uid, the same OTel trace and span ids and
the same Parquet file names.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec

from ..analyze import Finding
from ..derive import Deriver, RunSummary, SessionDerivation, fact_summary, run_summaries
from ..pipeline import DEFAULT_SESSION, STREAMING, FrameRecord, FrameState
from ..trace import Exchange
from .genai import GenAI, GenAIReader, operation_of

__all__ = [
    "ExportOptions",
    "FindingOut",
    "FrameEvent",
    "RunOut",
    "SessionOut",
    "Sink",
    "TraceExport",
    "TraceInfo",
    "collect",
    "date_of",
    "session_export",
    "trace_uid",
]


@dataclass
class ExportOptions:
    """What an export carries beyond the default (runs, sessions, findings)."""

    #: frames as span events, at most this many per run (0: none; sampled evenly beyond it)
    frames_per_run: int = 0
    #: message text (the GenAI conventions' opt-in content; frame text in Parquet)
    content: bool = False
    #: name every exchange's backend so (default: the URL's host:port)
    backend: str | None = None
    #: extra names to redact in exported content (``--redact``)
    redact: Sequence[str] = ()


@dataclass
class TraceInfo:
    uid: str
    name: str
    kind: str
    protocol: str | None
    profile: str | None
    created_at: float | None
    redaction: str | None
    exported_at: float = field(default_factory=time.time)


@dataclass
class FrameEvent:
    id: str
    at: float
    direction: str
    state: str
    event: str | None
    event_id: str | None
    event_type: str | None
    size: int
    text: str | None = None


@dataclass
class RunOut:
    session_id: str
    run_id: str
    status: str
    origin: str | None
    phase: str | None
    connection: str | None
    settled_by: str | None
    error_code: str | None
    interrupt_reason: str | None
    created_at: float | None
    started_at: float
    ended_at: float
    first_at: float | None
    last_at: float | None
    settled_at: float | None
    exchanges: list[int]
    route: str | None
    route_name: str | None
    capability: str | None
    backend: str
    frames: int
    facts: int
    rejected: int
    ttfe: float | None
    gaps: tuple[float | None, float | None, float | None]
    genai: GenAI
    operation: str
    provider: str
    events: list[FrameEvent] = field(default_factory=list)
    input_messages: list[dict[str, Any]] | None = None
    output_messages: list[dict[str, Any]] | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def date(self) -> str:
        return date_of(self.started_at)


@dataclass
class SessionOut:
    session_id: str
    status: str | None
    runs: int
    messages: int
    started_at: float
    ended_at: float
    backend: str
    exchanges: int
    findings: list[Finding] = field(default_factory=list)


@dataclass
class FindingOut:
    finding: Finding
    at: float
    backend: str
    route: str | None

    @property
    def date(self) -> str:
        return date_of(self.at)


@dataclass
class TraceExport:
    info: TraceInfo
    sessions: list[SessionOut]
    runs: list[RunOut]
    findings: list[FindingOut]
    #: trace-level findings (no session): the recording's span
    trace_findings: list[Finding]
    counts: dict[str, int]
    started_at: float
    ended_at: float
    backend: str


class Sink(Protocol):
    #: whether the sink takes the exchanges', frames' and facts' rows
    wants_rows: bool

    def begin(self, info: TraceInfo) -> None: ...

    def rows(self, table: str, rows: list[dict[str, Any]]) -> None: ...

    def finish(self, export: TraceExport) -> None: ...

    def abort(self) -> None: ...


def date_of(t: float) -> str:
    """The UTC date of a time (the dataset's ``date`` partition)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, separators=(",", ":"), default=str).encode()).hexdigest()


def trace_uid(meta: dict[str, Any], first: Exchange | None, kind: str = "db") -> str:
    """A trace's stable id (32 hex digits; see the module docstring)."""
    created = meta.get("created_at")
    if kind == "db" and isinstance(created, int | float):
        return _hash("chatkit-trace/trace", repr(float(created)))[:32]
    key = (first.started_at, first.method, first.url, first.flow_id) if first is not None else None
    return _hash("chatkit-trace/trace", key)[:32]


# ---------------------------------------------------------------------------- one trace


class _Places:
    """Where an exchange belongs: its backend, route and the run's TTFE."""

    def __init__(self, meta: dict[str, Any], backend: str | None) -> None:
        self.backend_override = backend
        spec = meta.get("profile_spec")
        routes = spec.get("routes") if isinstance(spec, dict) else None
        self.routes = [r for r in routes if isinstance(r, dict)] if isinstance(routes, list) else []

    def backend(self, ex: Exchange) -> str:
        if self.backend_override:
            return self.backend_override
        return urlsplit(ex.url).netloc or "unknown"

    def route(self, ex: Exchange) -> tuple[str | None, str | None]:
        """(``METHOD path-template``, route name) of the profile route that matched."""
        if ex.capability is None:
            return None, None
        ident = (ex.notes or {}).get("identity") or {}
        i = ident.get("route")
        name = ident.get("route_name")
        if isinstance(i, int) and 0 <= i < len(self.routes):
            r = self.routes[i]
            return f"{r.get('method') or '*'} {r.get('path')}", name or r.get("name")
        return f"{ex.method} {ex.path}", name


def ttfe(ex: Exchange) -> float | None:
    """Time to first event of a streamed run exchange: its first incoming
    frame's arrival after the request started (CK601's measure)."""
    if ex.capability not in STREAMING:
        return None
    for f in ex.frames:
        if f.direction == "in" and f.text is not None:
            return max(0.0, f.at - ex.started_at)
    return None


def seconds(value: Any) -> float | None:
    """A time in seconds since the epoch: the Core's run times are
    milliseconds (``Date.now()`` in chatkit), a fact's or an exchange's
    seconds; the derived ``settled_at`` may be either (decision 293)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return value / 1000.0 if value > 1e11 else float(value)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def sample(total: int, limit: int) -> list[int]:
    """Which of ``total`` frames become events: all up to ``limit``, else
    ``limit`` evenly spaced ones, the first and the last included."""
    if limit <= 0 or total <= 0:
        return []
    if total <= limit:
        return list(range(total))
    if limit == 1:
        return [0]
    return sorted({round(i * (total - 1) / (limit - 1)) for i in range(limit)})


_PART_TYPES = {"text": "text", "reasoning": "reasoning"}


def _gen_ai_part(part: dict[str, Any], scrub: Callable[[str], str]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in _PART_TYPES:
        return {"type": _PART_TYPES[kind], "content": scrub(str(part.get("text", "")))}
    if kind == "tool-call":
        out: dict[str, Any] = {"type": "tool_call", "id": part.get("toolCallId"), "name": part.get("toolName")}
        if "args" in part:
            out["arguments"] = json.loads(scrub(json.dumps(part["args"], default=str)))
        if "result" in part:
            return {**out, "type": "tool_call_response", "response": json.loads(scrub(json.dumps(part["result"], default=str)))}
        return out
    return {"type": str(kind or "unknown")}


def messages_of(snapshot: Any, run_id: str, scrub: Callable[[str], str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's input (user) and output (assistant, tool) messages in the
    GenAI conventions' JSON shape, from a Core snapshot; text masked."""
    data = snapshot.to_json()
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for m in data.get("messages", []):
        if m.get("runId") != run_id:
            continue
        msg = {"role": m.get("role"), "parts": [_gen_ai_part(p, scrub) for p in m.get("parts", []) if isinstance(p, dict)]}
        (inputs if m.get("role") == "user" else outputs).append(msg)
    return inputs, outputs


@dataclass
class _SessionContext:
    protocol: str | None
    places: _Places
    options: ExportOptions
    scrub: Callable[[str], str]


def _run_out(ctx: _SessionContext, d: SessionDerivation, run: RunSummary, frames: list[FrameRecord]) -> RunOut:
    # long-function: one run's every exported field, in the order RunOut lists them
    by_index = {ex.index: ex for ex in d.exchanges}
    exs = sorted((by_index[i] for i in run.exchanges if i in by_index), key=lambda e: (e.started_at, e.index))
    view, rec = run.view, run.record
    first_ex = exs[0] if exs else None
    reader = GenAIReader(ctx.protocol)
    for ex in exs:
        if ex.capability in STREAMING:
            reader.request(ex.request_body)
    raw = {(ex.index, f.index): f for ex in exs for f in ex.frames}
    incoming = [fr for fr in frames if fr.state != FrameState.OUTGOING]
    for fr in incoming:
        f = raw.get((fr.exchange_index, fr.frame_index))
        if f is not None:
            reader.frame(f.text)
    times = sorted(fr.at for fr in incoming)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    ttfes = [t for t in (ttfe(ex) for ex in exs) if t is not None]
    starts = [ex.started_at for ex in exs] or times[:1] or [seconds(view.created_at) or 0.0]
    ends = [e for ex in exs for e in (ex.ended_at, ex.started_at) if e is not None] + times
    route, route_name = ctx.places.route(first_ex) if first_ex is not None else (None, None)
    operation, provider = operation_of(ctx.protocol)
    out = RunOut(
        session_id=run.session_id,
        run_id=view.id,
        status=view.status,
        origin=view.origin,
        phase=view.phase,
        connection=view.connection,
        settled_by=rec.settled_by if rec else None,
        error_code=getattr(view.error, "code", None) if view.error else None,
        interrupt_reason=view.interrupt_reason,
        created_at=seconds(view.created_at),
        started_at=min(starts),
        ended_at=max(ends) if ends else min(starts),
        first_at=times[0] if times else None,
        last_at=times[-1] if times else None,
        settled_at=seconds(rec.settled_at) if rec else None,
        exchanges=[ex.index for ex in exs],
        route=route,
        route_name=route_name,
        capability=first_ex.capability if first_ex else None,
        backend=ctx.places.backend(first_ex) if first_ex is not None else (ctx.places.backend_override or "unknown"),
        frames=len(incoming),
        facts=run.facts,
        rejected=run.violations,
        ttfe=ttfes[0] if ttfes else None,
        gaps=(_quantile(gaps, 0.5), _quantile(gaps, 0.95), max(gaps) if gaps else None),
        genai=reader.result(),
        operation=operation,
        provider=provider,
    )
    if ctx.options.frames_per_run:
        out.events = [_event(frames[i], raw, ctx) for i in sample(len(frames), ctx.options.frames_per_run)]
    if ctx.options.content:
        snap = rec.settled if rec is not None and rec.settled is not None else d.replay.sessions[run.session_id].core.snapshot
        out.input_messages, out.output_messages = messages_of(snap, view.id, ctx.scrub)
    return out


def _event(fr: FrameRecord, raw: dict[tuple[int, int], Any], ctx: _SessionContext) -> FrameEvent:
    f = raw.get((fr.exchange_index, fr.frame_index))
    text = f.text if f is not None else None
    return FrameEvent(
        id=f"{fr.exchange_index}:{fr.frame_index}",
        at=fr.at,
        direction=f.direction if f is not None else "in",
        state=fr.state,
        event=f.event if f is not None else None,
        event_id=f.event_id if f is not None else None,
        event_type=fr.event_type,
        size=len(text) if text else (len(f.raw) if f is not None and f.raw else 0),
        text=ctx.scrub(text) if ctx.options.content and text else None,
    )


def session_export(d: SessionDerivation, ctx: _SessionContext) -> tuple[SessionOut | None, list[RunOut]]:
    """The session and runs of one derived session (findings not attached)."""
    per_run: dict[tuple[str | None, str | None], list[FrameRecord]] = {}
    for fr in d.replay.frames:
        per_run.setdefault((fr.session_id, fr.run_id), []).append(fr)
    runs = [_run_out(ctx, d, r, per_run.get((r.session_id, r.run_id), [])) for r in run_summaries(d.replay)]
    if not d.exchanges:
        return None, runs
    sid = d.session_id if d.session_id is not None else DEFAULT_SESSION
    rep = d.replay.sessions.get(sid)
    snap = rep.core.snapshot if rep is not None else None
    first = min(d.exchanges, key=lambda e: (e.started_at, e.index))
    ends = [e for ex in d.exchanges for e in (ex.ended_at, ex.started_at) if e is not None]
    session = SessionOut(
        session_id=sid,
        status=snap.session_status if snap is not None else None,
        runs=len(snap.runs) if snap is not None else 0,
        messages=len(snap.messages) if snap is not None else 0,
        started_at=first.started_at,
        ended_at=max(ends),
        backend=ctx.places.backend(first),
        exchanges=len(d.exchanges),
    )
    return session, runs


def make_context(meta: dict[str, Any], protocol: str | None, options: ExportOptions) -> _SessionContext:
    """What exporting a session needs of its trace (the live option makes one per recording)."""
    scrub = _scrubber(meta, options) if options.content else (lambda s: s)
    return _SessionContext(protocol, _Places(meta, options.backend), options, scrub)


def _scrubber(meta: dict[str, Any], options: ExportOptions) -> Callable[[str], str]:
    """Exported text is masked as the trace is: the profile's redaction (and
    ``--redact``) by value and every well-known token shape."""
    from ..route import ProfileError, Redactor, load_profile

    config = None
    name = meta.get("profile")
    if isinstance(name, str):
        try:
            config = load_profile(name).redact
        except (ProfileError, OSError, ValueError):
            config = None
    redactor = Redactor.from_config(config, list(options.redact) or None)
    return redactor.scrub_text


# ---------------------------------------------------------------------------- rows


def _exchange_row(ex: Exchange, places: _Places, frames: int, first_in: float | None) -> dict[str, Any]:
    route, route_name = places.route(ex)
    backend = places.backend(ex)
    notes = ex.notes or {}
    return {
        "exchange_id": ex.index,
        "flow_id": ex.flow_id,
        "started_at": ex.started_at,
        "ended_at": ex.ended_at,
        "method": ex.method,
        "host": urlsplit(ex.url).netloc,
        "path": ex.path,
        "route": route,
        "route_name": route_name,
        "capability": ex.capability,
        "session_id": ex.session_id,
        "run_id": ex.run_id,
        "run_id_source": ex.run_id_source,
        "status": ex.status,
        "transport": ex.transport,
        "end": ex.end,
        "error": ex.error,
        "frames": frames,
        "bytes": notes.get("bytes") if isinstance(notes.get("bytes"), int) else None,
        "ttfe_s": max(0.0, first_in - ex.started_at) if first_in is not None and ex.capability in STREAMING else None,
        "duration_s": (ex.ended_at - ex.started_at) if ex.ended_at is not None else None,
        "date": date_of(ex.started_at),
        "backend": backend,
    }


def _frame_rows(d: SessionDerivation, places: _Places, content: bool, scrub: Callable[[str], str]) -> list[dict[str, Any]]:
    raw = {(ex.index, f.index): f for ex in d.exchanges for f in ex.frames}
    exs = {ex.index: ex for ex in d.exchanges}
    where = {i: (date_of(ex.started_at), places.backend(ex), ex.started_at) for i, ex in exs.items()}
    rows = []
    for fr in d.replay.frames:
        f = raw.get((fr.exchange_index, fr.frame_index))
        date, backend, start = where.get(fr.exchange_index, (date_of(fr.at), "unknown", fr.at))
        text = f.text if f is not None else None
        error = fr.error
        rows.append({
            "exchange_id": fr.exchange_index,
            "idx": fr.frame_index,
            "arrived_at": fr.at,
            "offset_s": fr.at - start,
            "direction": f.direction if f is not None else None,
            "transport": f.transport if f is not None else None,
            "event": f.event if f is not None else None,
            "event_id": f.event_id if f is not None else None,
            "size": len(text) if text is not None else (len(f.raw) if f is not None and f.raw else 0),
            "state": fr.state,
            "session_id": fr.session_id,
            "run_id": fr.run_id,
            "event_type": fr.event_type,
            "end_marker": bool(fr.end_marker),
            "unknown": bool(fr.unknown),
            "error": None if error is None else (json.dumps(error.to_json()) if hasattr(error, "to_json") else str(error)),
            "text": scrub(text) if content and text else None,
            "date": date,
            "backend": backend,
        })
    return rows


def _fact_rows(d: SessionDerivation, places: _Places) -> list[dict[str, Any]]:
    where = {ex.index: (date_of(ex.started_at), places.backend(ex)) for ex in d.exchanges}
    nowhere = (date_of(min((ex.started_at for ex in d.exchanges), default=0.0)), places.backend_override or "unknown")
    encode = msgspec.json.Encoder(enc_hook=str).encode
    rows = []
    for f in d.replay.facts:
        date, backend = where.get(f.exchange_index, nowhere) if f.exchange_index is not None else nowhere
        rows.append({
            "seq": f.seq,
            "exchange_id": f.exchange_index,
            "frame_idx": f.frame_index,
            "session_id": f.fact.session_id,
            "run_id": f.fact.run_id,
            "kind": f.fact.kind,
            "event_id": f.fact.event_id,
            "accepted": bool(f.result.accepted),
            "reason": None if f.result.reason is None else f.result.reason.value,
            "detail": f.result.detail,
            "snapshot_version": f.snapshot_version,
            "fact": encode(fact_summary(f.fact)).decode(),
            "date": date,
            "backend": backend,
        })
    return rows


# ---------------------------------------------------------------------------- the whole trace


@dataclass
class _Acc:
    """What the sessions leave for the end of the trace."""

    sessions: list[SessionOut] = field(default_factory=list)
    runs: list[RunOut] = field(default_factory=list)
    frames: dict[int, int] = field(default_factory=dict)
    first_in: dict[int, float] = field(default_factory=dict)


def collect(
    store: Any,
    adapter: Any,
    *,
    capabilities: Any = None,
    name: str,
    kind: str = "db",
    options: ExportOptions | None = None,
    sinks: Iterable[Sink] = (),
    analyse_options: Any = None,
) -> TraceExport:
    """Derive ``store`` (as ``check`` does) and hand it to ``sinks`` (module
    docstring).  A trace the adapter understood nothing of (``counts
    ["understood"]`` 0: what ``check`` refuses) finishes no sink: each is
    aborted, nothing is written or sent."""
    options = options or ExportOptions()
    sink_list = list(sinks)
    meta = store.meta()
    exchanges = list(store.exchanges(with_frames=False))
    first = min(exchanges, key=lambda e: (e.started_at, e.index)) if exchanges else None
    protocol = getattr(adapter, "name", None) or meta.get("protocol")
    info = TraceInfo(trace_uid(meta, first, kind), name, kind, meta.get("protocol") or protocol, meta.get("profile"),
                     meta.get("created_at"), meta.get("redaction"))
    ctx = make_context(meta, meta.get("protocol") or protocol, options)
    rows = any(s.wants_rows for s in sink_list)
    acc = _Acc()
    for s in sink_list:
        s.begin(info)

    def on_session(d: SessionDerivation) -> None:
        _on_session(d, ctx, acc, sink_list if rows else [])

    try:
        result = Deriver(store, adapter, capabilities=capabilities, options=analyse_options).run(on_session=on_session)
        if not result.counts.get("understood"):
            for s in sink_list:
                s.abort()
            sink_list = []
        export = _finish(store, info, exchanges, ctx, acc, result, rows and bool(sink_list), sink_list)
    except BaseException:
        for s in sink_list:
            s.abort()
        raise
    return export


def _on_session(d: SessionDerivation, ctx: _SessionContext, acc: _Acc, sinks: list[Sink]) -> None:
    session, runs = session_export(d, ctx)
    if session is not None:
        acc.sessions.append(session)
    acc.runs.extend(runs)
    for ex in d.exchanges:
        acc.frames[ex.index] = acc.frames.get(ex.index, 0) + len(ex.frames)
        for f in ex.frames:
            if f.direction == "in" and f.text is not None:
                if ex.index not in acc.first_in or f.at < acc.first_in[ex.index]:
                    acc.first_in[ex.index] = f.at
                break
    if sinks:
        frames = _frame_rows(d, ctx.places, ctx.options.content, ctx.scrub)
        facts = _fact_rows(d, ctx.places)
        for s in sinks:
            if s.wants_rows:
                s.rows("frames", frames)
                s.rows("facts", facts)


def _finish(store: Any, info: TraceInfo, exchanges: list[Exchange], ctx: _SessionContext, acc: _Acc,
            result: Any, rows: bool, sinks: list[Sink]) -> TraceExport:
    by_index = {ex.index: ex for ex in exchanges}
    if rows:
        ex_rows = []
        for ex in exchanges:
            n = acc.frames.get(ex.index)
            if n is None:  # not in any session (no route matched): its frames as recorded
                n = len(store.frames(ex.index))
            ex_rows.append(_exchange_row(ex, ctx.places, n, acc.first_in.get(ex.index)))
        for s in sinks:
            if s.wants_rows:
                s.rows("exchanges", ex_rows)
    runs = {(r.session_id, r.run_id): r for r in acc.runs}
    sessions = {s.session_id: s for s in acc.sessions}
    starts = [ex.started_at for ex in exchanges] or [info.exported_at]
    ends = [e for ex in exchanges for e in (ex.ended_at, ex.started_at) if e is not None] or starts
    first = min(exchanges, key=lambda e: (e.started_at, e.index)) if exchanges else None
    trace_backend = ctx.places.backend(first) if first is not None else (ctx.places.backend_override or "unknown")
    found, trace_level = [], []
    for f in result.findings:
        out = _finding_out(store, f, by_index, runs, ctx.places, min(starts), trace_backend)
        found.append(out)
        run = runs.get((f.session_id, f.run_id)) if f.run_id is not None else None
        if run is not None:
            run.findings.append(f)
        elif f.session_id is not None and f.session_id in sessions:
            sessions[f.session_id].findings.append(f)
        else:
            trace_level.append(f)
    counts = {**result.counts, "exchanges": len(exchanges)}
    export = TraceExport(info, acc.sessions, acc.runs, found, trace_level, counts, min(starts), max(ends), trace_backend)
    for s in sinks:
        s.finish(export)
    return export


def _finding_out(store: Any, f: Finding, by_index: dict[int, Exchange], runs: dict[tuple[str, str], RunOut],
                 places: _Places, start: float, backend: str) -> FindingOut:
    """A finding placed at its decisive frame (time, backend, route)."""
    ref = f.frames[0] if f.frames else None
    if ref is not None:
        ex_s, _, idx = ref.partition(":")
        ex = by_index.get(int(ex_s)) if ex_s.isdigit() else None
        if ex is not None:
            at = ex.started_at
            if idx.isdigit():
                got = store.frames(ex.index, start=int(idx), limit=1)
                if got:
                    at = got[0].at
            return FindingOut(f, at, places.backend(ex), places.route(ex)[0])
    run = runs.get((f.session_id, f.run_id)) if f.session_id and f.run_id else None
    if run is not None:
        return FindingOut(f, run.started_at, run.backend, run.route)
    return FindingOut(f, start, backend, None)
