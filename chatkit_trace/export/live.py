"""The recorder's live spans: runs sent as OpenTelemetry spans as they settle.

The recorder's deriver process (:mod:`chatkit_trace.capture.deriver`, off
mitmproxy's interpreter) calls :meth:`LiveSpans.session` after each session
it derived and :meth:`LiveSpans.finish` when the recording stops.  Spans are
the very spans ``export --otlp`` makes of the same trace (the same mapping,
the same ids: docs/export.md), with these differences, all because a span
cannot be changed once sent (decision 303):

* a run's span leaves once, when the run settled (a terminal event, or its
  streams all ended; at the stop, every run), with the findings it had then;
* a finding that appears later for a run already sent (a history read that
  disagrees with it) leaves as a ``chatkit.finding`` span of its own, a child
  of the run's span, carrying the finding event (and the ERROR status of an
  error finding);
* the session spans and the recording's span (with the trace-level
  findings) leave at the stop.

A bounded queue sits between the deriver and a sender thread, which batches
spans to the official OTLP exporter: the deriver never waits for the
network.  A span the full queue cannot take is dropped and counted; a batch
the receiver refuses is counted with the reason; both are said in the
recorder's log (the first at once, then at most every ``REPORT_EVERY``
seconds) and in the trace's meta (``otlp``), never lost silently (decision
304).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..analyze import Finding
from ..pipeline import DEFAULT_SESSION
from ._collect import ExportOptions, RunOut, SessionOut, TraceExport, TraceInfo, make_context, session_export, trace_uid
from .settings import OTLPSettings

__all__ = ["LiveSpans"]

#: spans per export request, and the longest a span waits for a batch to fill
BATCH = 256
BATCH_WAIT = 0.5
#: a run in one of these states has settled (the Core's terminal states)
TERMINAL = ("completed", "failed", "interrupted")
#: a drop or a failure is logged at once, then at most this often (seconds)
REPORT_EVERY = 30.0


@dataclass
class _Stats:
    sent: int = 0
    dropped: int = 0
    failed: int = 0
    last_error: str | None = None
    reported: float = 0.0
    said: tuple[int, int] = (0, 0)

    def as_meta(self, endpoint: str) -> dict[str, Any]:
        return {"endpoint": endpoint, "sent": self.sent, "dropped": self.dropped, "failed": self.failed,
                "last_error": self.last_error, "at": time.time()}


@dataclass
class _SessionState:
    out: SessionOut | None = None
    findings: list[Finding] = field(default_factory=list)


class LiveSpans:
    """Spans of one recording (see the module docstring).

    :param settings: the options.
    :param meta: the trace's meta (its uid; the profile's redaction for text).
    :param log: ``log(level, text)``: the recorder's log.
    :param exporter: the span exporter (default: the official OTLP one of ``settings``).
    """

    def __init__(self, settings: OTLPSettings, meta: dict[str, Any], name: str, log: Callable[[int, str], None],
                 exporter: Any = None) -> None:
        from .otlp import SpanFactory, make_exporter

        self.settings = settings
        self.meta = meta
        self.log = log
        self.exporter = exporter or make_exporter(None if settings.endpoint == "env" else settings.endpoint, settings.protocol)
        self.info = TraceInfo(trace_uid(meta, None, "db"), name, "db", meta.get("protocol"), meta.get("profile"),
                              meta.get("created_at"), meta.get("redaction"))
        self.factory = SpanFactory(self.info)
        self.ctx = make_context(meta, meta.get("protocol"), ExportOptions(frames_per_run=settings.frames, content=settings.content))
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=settings.queue)
        self.stats = _Stats()
        self.sent_runs: dict[tuple[str, str], set[str]] = {}
        self.sessions: dict[str, _SessionState] = {}
        self.runs = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send_loop, name="chatkit-otlp", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ from the deriver

    def session(self, derived: Any, findings: list[Finding], *, final: bool = False) -> int:
        """A session the deriver just derived: the runs that settled leave
        (once), with their findings; later findings of runs already sent
        leave as finding spans.  Returns how many spans were queued."""
        session, runs = session_export(derived, self.ctx)
        open_ex = {ex.index for ex in derived.exchanges if ex.ended_at is None and ex.end is None}
        times = _frame_times(derived, findings)
        if session is not None:
            self.sessions.setdefault(session.session_id, _SessionState()).out = session
            self._seen(session.started_at, session.ended_at)
        per_run: dict[tuple[Any, Any], list[Finding]] = {}
        for f in findings:
            per_run.setdefault((f.session_id, f.run_id), []).append(f)
        # the session's findings as last derived (its own, and the trace-level
        # codes it found: merged across sessions at the stop)
        key = session.session_id if session is not None else (derived.session_id or DEFAULT_SESSION)
        self.sessions.setdefault(key, _SessionState()).findings = list(findings)
        queued = 0
        for run in runs:
            key = (run.session_id, run.run_id)
            mine = per_run.get(key, [])
            sent = self.sent_runs.get(key)
            if sent is None:
                settled = run.status in TERMINAL or not any(i in open_ex for i in run.exchanges)
                if not (settled or final):
                    continue
                run.findings = mine
                queued += self._put(self.factory.run_span(run, times))
                self.sent_runs[key] = {f.fingerprint for f in mine}
                self.runs += 1
                continue
            for f in mine:
                if f.fingerprint not in sent:
                    sent.add(f.fingerprint)
                    queued += self._put(self._finding_span(run, f, times.get(id(f), run.ended_at)))
        return queued

    def finish(self) -> dict[str, Any]:
        """The recording stopped: the sessions' and the recording's spans,
        then drain the queue (at most ``settings.wait`` seconds).  Returns the
        counts (also the trace's meta ``otlp``)."""
        from ..derive import merge_findings

        for state in self.sessions.values():
            if state.out is not None:
                state.out.findings = [f for f in state.findings if f.run_id is None and f.session_id is not None]
                self._put(self.factory.session_span(state.out))
        everything = [f for s in self.sessions.values() for f in s.findings]
        trace_level = [f for f in merge_findings(everything, self.meta) if f.session_id is None]
        first = self.first_at if self.first_at is not None else time.time()
        export = TraceExport(self.info, [s.out for s in self.sessions.values() if s.out], [], [], trace_level,
                             {"runs": self.runs}, first, self.last_at or first, "unknown")
        self._put(self.factory.recording_span(export))
        self.close()
        return self.stats.as_meta(self.settings.endpoint)

    def close(self) -> None:
        """Drain the queue (bounded by ``settings.wait``), stop the sender."""
        deadline = time.monotonic() + self.settings.wait
        while not self.queue.empty() and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(timeout=max(0.1, deadline - time.monotonic()) + 1.0)
        left = self.queue.qsize()
        if left:
            self.stats.dropped += left
            self.stats.last_error = self.stats.last_error or f"{left} span(s) still queued when the recording stopped"
        try:
            self.exporter.shutdown()
        except Exception:  # noqa: BLE001, S110 - the receiver is gone: nothing more to say than the counts
            pass
        self._report(force=True)

    # ------------------------------------------------------------------ internals

    def _seen(self, start: float, end: float) -> None:
        self.first_at = start if self.first_at is None else min(self.first_at, start)
        self.last_at = end if self.last_at is None else max(self.last_at, end)

    def _finding_span(self, run: RunOut, f: Finding, at: float) -> Any:
        from opentelemetry.trace import SpanKind

        from .otlp import _id, run_span_id, session_trace_id

        uid = self.info.uid
        f_ctx = self.factory._context(session_trace_id(uid, run.session_id), _id(64, uid, "finding", run.session_id, run.run_id, f.fingerprint))
        parent = self.factory._context(session_trace_id(uid, run.session_id), run_span_id(uid, run.session_id, run.run_id))
        attrs = {"gen_ai.conversation.id": run.session_id, "chatkit.trace.uid": uid, "chatkit.session.id": run.session_id,
                 "chatkit.run.id": run.run_id, "chatkit.findings": [f.code]}
        return self.factory._span("chatkit.finding", f_ctx, parent, SpanKind.INTERNAL, attrs, [self.factory.finding_event(f, at)],
                                  at, at, self.factory._status([f]))

    def _put(self, span: Any) -> int:
        try:
            self.queue.put_nowait(span)
            return 1
        except queue.Full:
            self.stats.dropped += 1
            self._report()
            return 0

    def _send_loop(self) -> None:
        from .otlp import send

        while not (self._stop.is_set() and self.queue.empty()):
            batch = []
            try:
                batch.append(self.queue.get(timeout=BATCH_WAIT))
            except queue.Empty:
                continue
            deadline = time.monotonic() + BATCH_WAIT
            while len(batch) < BATCH:
                try:
                    batch.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            try:
                sent, error = send(self.exporter, batch, batch=BATCH)
            except Exception as err:  # noqa: BLE001 - the thread never dies of a receiver
                sent, error = 0, f"{type(err).__name__}: {err}"
            self.stats.sent += sent
            if error is not None:
                self.stats.failed += len(batch) - sent
                self.stats.last_error = error
                self._report()

    def _report(self, *, force: bool = False) -> None:
        s = self.stats
        now = time.monotonic()
        if (s.dropped, s.failed) == s.said or (not force and now - s.reported < REPORT_EVERY and s.said != (0, 0)):
            return
        s.reported, s.said = now, (s.dropped, s.failed)
        reason = f" (last: {s.last_error})" if s.last_error else ""
        self.log(logging.WARNING, f"chatkit-trace: OpenTelemetry spans to {self.settings.endpoint}: {s.sent} sent, "
                 f"{s.dropped} dropped (queue full, chatkit_otlp_queue={self.settings.queue}), {s.failed} refused{reason}; "
                 "every run is in the trace: `chatkit-trace export TRACE --otlp` sends them again")


def _frame_times(derived: Any, findings: list[Finding]) -> dict[int, float]:
    """Each finding's decisive frame time (by ``id``), from the session's frames in memory."""
    by_ex = {ex.index: ex for ex in derived.exchanges}
    out: dict[int, float] = {}
    for f in findings:
        if not f.frames:
            continue
        ex_s, _, idx = f.frames[0].partition(":")
        ex = by_ex.get(int(ex_s)) if ex_s.isdigit() else None
        if ex is None:
            continue
        at = ex.started_at
        if idx.isdigit():
            at = next((fr.at for fr in ex.frames if fr.index == int(idx)), at)
        out[id(f)] = at
    return out
