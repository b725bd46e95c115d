"""``export --otlp``: a trace's sessions, runs and findings as OpenTelemetry spans.

The mapping (docs/export.md "OpenTelemetry", decisions 290-293):

* a chatkit **session** is an OTel trace: a ``chatkit.session`` span (INTERNAL)
  whose trace id is derived from the trace's uid and the session id;
* a **run** is a span in it (CLIENT, child of the session span), named and
  attributed after the GenAI semantic conventions: ``gen_ai.operation.name``,
  ``gen_ai.provider.name`` (and the older ``gen_ai.system``),
  ``gen_ai.conversation.id`` (the session), the model, response id, finish
  reasons and token usage where the protocol carries them,
  ``gen_ai.response.time_to_first_chunk`` (CK601's measure), ``error.type`` for a
  failed run, and chatkit's own (``chatkit.*``: status, route, backend, frame
  and fact counts, chunk gaps);
* **findings** are ``chatkit.finding`` span events (code, severity, rule,
  decisive frame, frames, fingerprint, message) at their decisive frame's
  time; an error finding sets the span status to ERROR;
* **frames** are ``chatkit.frame`` events, only when asked
  (``--frames N``: at most N per run, evenly sampled beyond);
* message **text** only when asked (``--content``): ``gen_ai.input.messages``
  and ``gen_ai.output.messages`` (the conventions' opt-in content), frame text,
  masked as the trace is;
* the **recording** itself is one ``chatkit.recording`` span in its own trace,
  carrying the trace-level findings (route infos, CK7xx); every session span
  links to it.

Every id is derived from the trace's uid (sha256), so exporting a trace again
sends the very same trace and span ids (decision 291).  The spans are
:class:`opentelemetry.sdk.trace.ReadableSpan` objects with the recorded times,
sent by the official OTLP exporters (HTTP/protobuf or gRPC), which read the
standard ``OTEL_EXPORTER_OTLP_*`` variables.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ..analyze import Finding
from ..masking import mask_derived_value
from ._collect import FrameEvent, RunOut, SessionOut, TraceExport, TraceInfo
from .settings import PROTOCOLS, endpoint_url, require_otel, resolve_protocol

__all__ = [
    "PROTOCOLS",
    "OTLPSink",
    "SpanFactory",
    "make_exporter",
    "require_otel",
    "resolve_protocol",
    "send",
    "spans_of",
]

#: spans per export request
BATCH = 512
#: a span status description is cut at this many characters
STATUS_CHARS = 240


def make_exporter(endpoint: str | None, protocol: str | None = None, *, timeout: float | None = None) -> Any:
    """The official OTLP span exporter for ``protocol`` (variables honoured)."""
    proto = resolve_protocol(protocol)
    require_otel(proto)
    url = endpoint_url(endpoint, proto)
    kwargs: dict[str, Any] = {}
    if url is not None:
        kwargs["endpoint"] = url
    if timeout is not None:
        kwargs["timeout"] = timeout
    if proto == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        if url is not None:
            kwargs["insecure"] = urlsplit(url).scheme == "http"
        return GrpcExporter(**kwargs)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(**kwargs)


def describe(exporter: Any) -> str:
    """Where an exporter sends (for the summary line)."""
    for attr in ("_endpoint", "_target"):
        value = getattr(exporter, attr, None)
        if isinstance(value, str):
            return value
    return "the OTLP endpoint"


# ---------------------------------------------------------------------------- ids


def _id(bits: int, *parts: Any) -> int:
    digest = hashlib.sha256(json.dumps(["chatkit-trace/otel", *parts], default=str).encode()).digest()
    value = int.from_bytes(digest[: bits // 8], "big")
    return value or 1  # an all-zero id is invalid


def session_trace_id(uid: str, session: str) -> int:
    return _id(128, uid, "session", session)


def session_span_id(uid: str, session: str) -> int:
    return _id(64, uid, "session-span", session)


def run_span_id(uid: str, session: str, run: str) -> int:
    return _id(64, uid, "run", session, run)


def recording_ids(uid: str) -> tuple[int, int]:
    return _id(128, uid, "recording"), _id(64, uid, "recording-span")


def _ns(t: float | None) -> int:
    return int(round((t or 0.0) * 1_000_000_000))


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes worth sending, every text masked as derived text is
    (decision 231: a finding's message or a run's text can hold a secret no
    single frame held whole); every span and event attribute passes here."""
    return {k: mask_derived_value(v) for k, v in attrs.items() if v is not None and v != [] and v != ""}


# ---------------------------------------------------------------------------- spans


class SpanFactory:
    """Makes the spans of one trace (``uid``) with one resource and scope."""

    def __init__(self, info: TraceInfo, resource_attributes: dict[str, Any] | None = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from .. import __version__

        self.info = info
        attrs: dict[str, Any] = {"chatkit.trace.uid": info.uid, "chatkit.trace.name": info.name}
        if info.protocol:
            attrs["chatkit.protocol"] = info.protocol
        if info.profile:
            attrs["chatkit.profile"] = info.profile
        env = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in env:
            attrs["service.name"] = "chatkit-trace"
        attrs.update(resource_attributes or {})
        self.resource = Resource.create(attrs)
        self.scope = InstrumentationScope("chatkit_trace", __version__, "https://opentelemetry.io/schemas/1.37.0")

    def _context(self, trace_id: int, span_id: int) -> Any:
        from opentelemetry.trace import SpanContext, TraceFlags

        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def _span(self, name: str, ctx: Any, parent: Any, kind: Any, attrs: dict[str, Any], events: list[Any],
              start: float, end: float, status: Any, links: Sequence[Any] = ()) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan

        events.sort(key=lambda e: e.timestamp)
        return ReadableSpan(
            name, context=ctx, parent=parent, resource=self.resource, attributes=_clean(attrs), events=events,
            links=list(links), kind=kind, status=status, start_time=_ns(start), end_time=_ns(max(end, start)),
            instrumentation_scope=self.scope,
        )

    def finding_event(self, f: Finding, at: float) -> Any:
        from opentelemetry.sdk.trace import Event

        return Event("chatkit.finding", _clean({
            "chatkit.finding.code": f.code,
            "chatkit.finding.severity": f.severity,
            "chatkit.finding.rule": f.rule,
            "chatkit.finding.frame": f.frames[0] if f.frames else None,
            "chatkit.finding.frames": list(f.frames),
            "chatkit.finding.fingerprint": f.fingerprint,
            "chatkit.finding.message": f.message,
            "chatkit.session.id": f.session_id,
            "chatkit.run.id": f.run_id,
        }), timestamp=_ns(at))

    def frame_event(self, e: FrameEvent) -> Any:
        from opentelemetry.sdk.trace import Event

        return Event("chatkit.frame", _clean({
            "chatkit.frame.id": e.id,
            "chatkit.frame.direction": e.direction,
            "chatkit.frame.state": e.state,
            "chatkit.frame.event": e.event,
            "chatkit.frame.event_id": e.event_id,
            "chatkit.frame.event_type": e.event_type,
            "chatkit.frame.size": e.size,
            "chatkit.frame.text": e.text,
        }), timestamp=_ns(e.at))

    def _status(self, findings: Iterable[Finding], failed: str | None = None) -> Any:
        from opentelemetry.trace import Status, StatusCode

        errors = [f for f in findings if f.severity == "error"]
        if errors:
            codes = ", ".join(dict.fromkeys(f.code for f in errors))
            return Status(StatusCode.ERROR, f"{codes}: {errors[0].message}"[:STATUS_CHARS])
        if failed is not None:
            return Status(StatusCode.ERROR, failed[:STATUS_CHARS])
        return Status(StatusCode.UNSET)

    def run_span(self, r: RunOut, at: dict[int, float] | None = None) -> Any:
        """The run's span; ``at``: each finding's time (by ``id``), else the run's start."""
        from opentelemetry.trace import SpanKind

        uid = self.info.uid
        ctx = self._context(session_trace_id(uid, r.session_id), run_span_id(uid, r.session_id, r.run_id))
        parent = self._context(session_trace_id(uid, r.session_id), session_span_id(uid, r.session_id))
        g = r.genai
        # the conventions' span names: "chat {model}", "invoke_agent {agent}"
        model = g.agent_name if r.operation == "invoke_agent" else (g.request_model or g.response_model)
        events = [self.frame_event(e) for e in r.events]
        events += [self.finding_event(f, (at or {}).get(id(f), r.started_at)) for f in r.findings]
        failed = f"the run failed ({r.error_code})" if r.status == "failed" else None
        return self._span(f"{r.operation} {model}" if model else r.operation, ctx, parent, SpanKind.CLIENT,
                          self.run_attributes(r), events, r.started_at, r.ended_at, self._status(r.findings, failed))

    def run_attributes(self, r: RunOut) -> dict[str, Any]:
        host, _, port = r.backend.rpartition(":")
        p50, p95, mx = r.gaps
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": r.operation,
            "gen_ai.provider.name": r.provider,
            "gen_ai.system": r.provider,
            "gen_ai.conversation.id": r.session_id,
            **r.genai.attributes(),
            "gen_ai.response.time_to_first_chunk": r.ttfe,
            "error.type": (r.error_code or "run_failed") if r.status == "failed" else None,
            "server.address": host if port.isdigit() else r.backend,
            "server.port": int(port) if port.isdigit() else None,
            "chatkit.trace.uid": self.info.uid,
            "chatkit.session.id": r.session_id,
            "chatkit.run.id": r.run_id,
            "chatkit.run.status": r.status,
            "chatkit.run.origin": r.origin,
            "chatkit.run.phase": r.phase,
            "chatkit.run.connection": r.connection,
            "chatkit.run.settled_by": r.settled_by,
            "chatkit.run.interrupt_reason": r.interrupt_reason,
            "chatkit.run.exchanges": list(r.exchanges),
            "chatkit.run.frames": r.frames,
            "chatkit.run.facts": r.facts,
            "chatkit.run.rejected": r.rejected,
            "chatkit.route": r.route,
            "chatkit.route.name": r.route_name,
            "chatkit.capability": r.capability,
            "chatkit.backend": r.backend,
            "chatkit.chunk.gap_p50_s": p50,
            "chatkit.chunk.gap_p95_s": p95,
            "chatkit.chunk.gap_max_s": mx,
            "chatkit.findings": list(dict.fromkeys(f.code for f in r.findings)),
        }
        if r.events:
            attrs["chatkit.frames.exported"] = len(r.events)
            attrs["chatkit.frames.sampled"] = len(r.events) < r.frames
        if r.input_messages is not None:
            attrs["gen_ai.input.messages"] = json.dumps(r.input_messages, ensure_ascii=False)
        if r.output_messages is not None:
            attrs["gen_ai.output.messages"] = json.dumps(r.output_messages, ensure_ascii=False)
        return attrs

    def session_span(self, s: SessionOut, at: dict[int, float] | None = None) -> Any:
        from opentelemetry.trace import Link, SpanKind

        uid = self.info.uid
        ctx = self._context(session_trace_id(uid, s.session_id), session_span_id(uid, s.session_id))
        rec_trace, rec_span = recording_ids(uid)
        attrs = {
            "gen_ai.conversation.id": s.session_id,
            "chatkit.trace.uid": uid,
            "chatkit.session.id": s.session_id,
            "chatkit.session.status": s.status,
            "chatkit.session.runs": s.runs,
            "chatkit.session.messages": s.messages,
            "chatkit.session.exchanges": s.exchanges,
            "chatkit.backend": s.backend,
            "chatkit.findings": list(dict.fromkeys(f.code for f in s.findings)),
        }
        events = [self.finding_event(f, (at or {}).get(id(f), s.started_at)) for f in s.findings]
        return self._span("chatkit.session", ctx, None, SpanKind.INTERNAL, attrs, events, s.started_at, s.ended_at,
                          self._status(s.findings), links=[Link(self._context(rec_trace, rec_span))])

    def recording_span(self, e: TraceExport, at: dict[int, float] | None = None) -> Any:
        from opentelemetry.trace import SpanKind

        trace_id, span_id = recording_ids(self.info.uid)
        attrs = {
            "chatkit.trace.uid": self.info.uid,
            "chatkit.trace.name": self.info.name,
            "chatkit.trace.kind": self.info.kind,
            "chatkit.protocol": self.info.protocol,
            "chatkit.profile": self.info.profile,
            "chatkit.backend": e.backend,
            "chatkit.trace.exchanges": e.counts.get("exchanges"),
            "chatkit.trace.frames": e.counts.get("frames"),
            "chatkit.trace.sessions": len(e.sessions),
            "chatkit.trace.runs": len(e.runs),
            "chatkit.findings": list(dict.fromkeys(f.finding.code for f in e.findings)),
        }
        events = [self.finding_event(f, (at or {}).get(id(f), e.started_at)) for f in e.trace_findings]
        return self._span("chatkit.recording", self._context(trace_id, span_id), None, SpanKind.INTERNAL, attrs, events,
                          e.started_at, e.ended_at, self._status(e.trace_findings))


def spans_of(export: TraceExport, factory: SpanFactory | None = None) -> list[Any]:
    """Every span of a trace: the recording, then each session and its runs."""
    factory = factory or SpanFactory(export.info)
    at = {id(fo.finding): fo.at for fo in export.findings}
    sessions = {s.session_id: s for s in export.sessions}
    for r in export.runs:  # a session only an event named: a span from its runs
        if r.session_id not in sessions:
            sessions[r.session_id] = SessionOut(r.session_id, None, 0, 0, r.started_at, r.ended_at, r.backend, 0)
        s = sessions[r.session_id]
        s.started_at, s.ended_at = min(s.started_at, r.started_at), max(s.ended_at, r.ended_at)
    spans = [factory.recording_span(export, at)]
    for s in sessions.values():
        spans.append(factory.session_span(s, at))
    spans += [factory.run_span(r, at) for r in export.runs]
    return spans


# ---------------------------------------------------------------------------- sending


class _Failures(logging.Handler):
    """The exporters say why a batch failed only in their log: keep the last words."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage().splitlines()[0][:300]


@contextmanager
def _quiet_exporter() -> Iterator[_Failures]:
    """The exporter's log lines are taken (for the one-line error), not printed."""
    handler = _Failures()
    log = logging.getLogger("opentelemetry")
    old = (log.level, log.propagate)
    log.addHandler(handler)
    log.propagate = False
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.level, log.propagate = old


def send(exporter: Any, spans: Sequence[Any], batch: int = BATCH) -> tuple[int, str | None]:
    """Export ``spans`` in batches: (spans the receiver took, why the first refused batch failed)."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    sent = 0
    with _quiet_exporter() as failures:
        for i in range(0, len(spans), batch):
            chunk = spans[i : i + batch]
            try:
                result = exporter.export(chunk)
            except Exception as err:  # noqa: BLE001 - a receiver's failure is reported, never a traceback
                return sent, f"{type(err).__name__}: {err}"
            if result is not SpanExportResult.SUCCESS:
                return sent, failures.last or "the receiver did not accept the spans"
            sent += len(chunk)
    return sent, None


class OTLPSink:
    """A :class:`~chatkit_trace.export._collect.Sink` sending a trace's spans."""

    wants_rows = False

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.sent = 0
        self.spans = 0
        self.error: str | None = None

    def begin(self, info: TraceInfo) -> None:
        pass

    def rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        pass

    def finish(self, export: TraceExport) -> None:
        spans = spans_of(export)
        self.spans = len(spans)
        self.sent, self.error = send(self.exporter, spans)

    def abort(self) -> None:
        pass
