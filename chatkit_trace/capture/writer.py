"""The recorder's writer thread: everything slow happens here, off the proxy's loop.

Theory of operation
-------------------
mitmproxy runs every hook and every stream callable on one asyncio event
loop (docs: mitmproxy.md section 7), so anything that blocks there delays
every connection.  The loop side (:mod:`chatkit_trace.capture.recorder`)
therefore only timestamps what it sees and puts it on a queue; this thread
owns the SQLite connection and does the rest::

    loop:   hook / stream callable --put--> SimpleQueue (bounded by a count)
    writer: get, drain what is waiting --> one transaction per batch (WAL)
              per flow: Content-Encoding decoder -> SSE parser / NDJSON
              splitter -> frames; requests matched against the route profile
              and redacted; exchanges finalised when their flow ends
            when idle: re-derive the sessions whose flows changed (the
              derive engine, :class:`chatkit_trace.derive.Deriver`: the
              adapter and the Core), write the derived tables, log one line
              per finished run and ask the loop to mark that run's flows in
              mitmweb

Queue messages are tuples, first item the kind (the loop side builds them,
see ``Recorder``): ``req`` (request line and headers), ``body`` (the request
body), ``head`` (response status and headers, and how it is recorded),
``c`` (a response chunk, still content-encoded), ``gap`` (the loop dropped
chunks of this flow because the queue was full), ``ws`` (a WebSocket
message), ``end`` (the flow ended: complete, reset, client-gone, timeout,
error), ``err`` (a capture error caught on the loop), ``cfg`` (new options),
``sync`` (commit and signal an event: tests, ``done``) and ``None`` (stop).

The bound: ``produced`` is only written by the loop and ``consumed`` only by
this thread, so ``produced - consumed`` is the backlog without a lock.  Data
messages (chunks, WebSocket messages) are dropped on the loop when the
backlog reaches the limit; control messages never are (they are few and
small), so every exchange is finalised and says how much of it was lost.

Nothing here may raise out of :meth:`Writer.run`: a failure while handling
one message becomes a stored capture error (and one log line per kind), and
the thread carries on with the next message.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import sys
import threading
import time
import traceback
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..trace import Exchange
from ..wire import (
    Frame,
    NDJSONSplitter,
    SSEParser,
    error_frame,
    event_json,
    frame_from_sse,
    make_decoder,
    ws_frame,
)
from .identity import (
    IdentityTracker,
    apply_match,
    output_frames,
    resolve_from_event,
    resolve_from_response,
)
from .messages import CaptureErrorMessage, Chunk, Configure, End, Gap, Message, Request, RequestBody, ResponseHead, Sync, WsMessage

__all__ = ["MAX_BODY_BYTES", "Writer", "WriterConfig", "end_kind"]

logger = logging.getLogger("chatkit_trace.capture")

#: Request bodies and whole response bodies are stored up to this size.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Items handled per transaction at most (keeps a commit's latency bounded).
BATCH_ITEMS = 4096
#: While traffic flows the writer wakes this often and takes what is queued
#: (instead of waking for every chunk, which costs the loop GIL hand-offs).
BATCH_WAIT = 0.02
#: Chunks are parsed when the writer is quiet, when their flow ends, or at
#: the latest when the oldest unparsed chunk of a flow is this old or its
#: unparsed bytes reach PARSE_BYTES.  Every event still gets the arrival
#: time of the chunk that completed it.
PARSE_LAG = 0.5
PARSE_BYTES = 4 * 1024 * 1024
#: Derive facts after this much idle time (at least the last derivation's
#: duration), or at the latest after MAX_LAG.
IDLE_DERIVE = 0.3
MAX_LAG = 30.0
#: How often the caps (size, age) are checked.
CAP_INTERVAL = 2.0
#: Frames of one exchange tried for ids its route takes from the events.
EVENT_ID_TRIES = 64


@dataclass(frozen=True)
class WriterConfig:
    """What the writer needs from the options (``Recorder.configure`` builds it)."""

    db: str
    profile: Any = None  # a capture.profiles.Profile, or None: record without identity
    redactor: Any = None  # a capture.redact.Redactor, or None: keep secrets
    queue_limit: int = 20000
    max_db_bytes: int = 0  # 0: no cap
    max_age: float = 0.0  # seconds, 0: no cap
    derive: str = "live"  # live | end | off
    test_raise: frozenset[str] = frozenset()
    #: what to store in the meta table about this recording
    recorder_meta: dict[str, Any] = field(default_factory=dict)


def end_kind(message: str, *, had_response: bool) -> str:
    """How a flow's error becomes an exchange ``end`` (a connection observation).

    ``client-gone`` when the client left, ``timeout`` for timeouts, ``reset``
    when the upstream dropped the connection after the response started,
    ``error`` for anything else (a refused connection, a killed flow …).
    """
    m = message.lower()
    if "client disconnected" in m or "client closed" in m:
        return "client-gone"
    if "timeout" in m or "timed out" in m:
        return "timeout"
    if had_response and any(
        s in m for s in ("peer closed", "server disconnected", "connection reset", "incomplete", "connection closed", "eof")
    ):
        return "reset"
    return "error"


def _text(value: bytes | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _pairs(fields: Iterable[tuple[Any, Any]]) -> list[tuple[str, str]]:
    return [(_text(k), _text(v)) for k, v in fields]


def _header(pairs: Sequence[tuple[str, str]], name: str) -> str | None:
    for k, v in pairs:
        if k.lower() == name:
            return v
    return None


def _shift(frame: Frame, base: int) -> Frame:
    """A frame from a parser restarted after a gap, moved to stream offsets."""
    if not base:
        return frame
    return replace(
        frame,
        start=None if frame.start is None else frame.start + base,
        end=None if frame.end is None else frame.end + base,
        data_offsets=None if frame.data_offsets is None else tuple(o + base for o in frame.data_offsets),
    )


def _redacted(ex: Exchange, where: str) -> None:
    """Note what was redacted (names only, as ``Redactor.redact_exchange`` does)."""
    done = ex.notes.setdefault("redacted", [])
    if where not in done:
        done.append(where)


def _redacted_headers(ex: Exchange, side: str, before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]) -> None:
    for (k, v), (_, v2) in zip(before, after, strict=False):
        if v != v2:
            _redacted(ex, f"{side}.header:{k.lower()}")


_FRAME_ROW = 64  # bytes counted per frame row besides its text and raw bytes
_EXCHANGE_ROW = 256  # per exchange row besides its bodies, headers and URL


def _exchange_size(ex: Exchange) -> int:
    headers = sum(len(k) + len(v) + 6 for k, v in (*ex.request_headers, *ex.response_headers))
    return _EXCHANGE_ROW + len(ex.request_body or b"") + len(ex.response_body or b"") + headers + len(ex.url)


class _InjectedFault(RuntimeError):
    """Raised on purpose when ``chatkit_test_raise`` asks for it."""


@dataclass(eq=False)
class _Flow:
    """The writer's state of one flow (one exchange)."""

    fid: str
    ex: Exchange
    raw_url: str = ""  # unredacted, for the profile
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted, for the profile
    request_body: bytes | None = None  # unredacted, for the profile
    match: Any = None  # identity.Match, provisional until assigned
    matched: bool = False
    resolved: bool = False  # ids from the response looked up
    assigned: bool = False  # final ids written (IdentityTracker, request order)
    event_tries: int = 0
    response_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted
    decoder: Any = None
    parser: Any = None  # SSEParser | NDJSONSplitter | None
    base: int = 0  # stream offset where the current parser started (after a gap)
    copy: bytearray | None = None  # decoded copy of a 'body' stream (capped)
    copy_lost: int = 0
    next_frame: int = 0
    pending: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time, chunk) not parsed yet
    pending_since: float = 0.0
    pending_bytes: int = 0
    chunks: int = 0
    encoded: int = 0
    decoded: int = 0
    decoder_error_stored: bool = False
    lost: bool = False  # the decoder cannot go on after a gap (compressed body)
    ended: bool = False
    dirty: bool = True
    frame_count: int = 0


class Writer(threading.Thread):
    """The single writer of one recording (see the module docstring).

    Args:
        config: options, see :class:`WriterConfig`.
        notify: called from this thread with a zero-argument function to run
            on the proxy's event loop (log lines, marks); ``None`` runs them
            here.
        mark: ``mark(flow_ids, marker, comment)``, run through ``notify`` on
            the loop, marks a finished run's flows (mitmweb).
    """

    def __init__(
        self,
        config: WriterConfig,
        notify: Callable[[Callable[[], None]], None] | None = None,
        mark: Callable[[list[str], str, str], None] | None = None,
    ) -> None:
        super().__init__(name="chatkit-trace-writer", daemon=True)
        self.config = config
        self.notify = notify
        self.mark_flows = mark
        self.q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.limit = max(1, config.queue_limit)
        self.produced = 0  # written by the loop only
        self.consumed = 0  # written by this thread only
        self.ready = threading.Event()
        self.open_error: str | None = None
        self.store: Any = None
        self.next_index = 0
        self.flows: dict[str, _Flow] = {}
        self.tracker = IdentityTracker()
        self.ident_queue: deque[_Flow] = deque()  # flows in request order, until assigned
        self.flow_of: dict[int, str] = {}  # exchange index -> flow id (for marks)
        self.open_indexes: set[int] = set()
        self.frames: list[Frame] = []
        self.dirty_sessions: set[str | None] = set()
        self.dirty_since: float | None = None
        self.logged_runs: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.adapter: Any = None
        self.orphans = 0
        self.errors_seen: Counter[str] = Counter()
        self.stored_errors: set[tuple[str, str | None]] = set()
        self.drops = {"chunks": 0, "bytes": 0, "flows": 0}
        self.capped = {"exchanges": 0, "frames": 0, "by_age": 0, "by_size": 0, "frames_over_cap": 0}
        self.over_cap = False
        self.last_cap_check = 0.0
        self.unparsed: set[_Flow] = set()
        self.recorded_bytes = 0  # the recorded data's size (chatkit_max_db_mb), kept up to date
        self.derive_cost = 0.0  # seconds the last derivation took
        self.stopped = threading.Event()
        self.scrub_memo: weakref.WeakKeyDictionary[_Flow, dict[str, Any]] = weakref.WeakKeyDictionary()
        #: the unmatched-stream hint was logged (once per recording)
        self.hinted = False

    # ------------------------------------------------------------------ loop side API

    def put(self, item: Message | None) -> None:
        """Queue a control message (never dropped).  Called on the loop."""
        self.produced += 1
        self.q.put(item)

    def sync(self, timeout: float = 10.0) -> bool:
        """Commit everything queued so far; ``False`` on timeout.  Blocks the caller."""
        if not self.is_alive():
            return False
        done = threading.Event()
        self.put(Sync("sync", done))
        return done.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Flush everything received, finalise open flows as ``open``, close."""
        if self.is_alive():
            self.put(None)
            self.join(timeout)

    # ------------------------------------------------------------------ thread

    def run(self) -> None:
        try:
            self._open()
        except Exception as err:  # noqa: BLE001 - reported to configure() as an OptionsError
            self.open_error = str(err) or type(err).__name__
            self.ready.set()
            self.stopped.set()
            return
        self.ready.set()
        try:
            self._loop()
        finally:
            try:
                self._shutdown()
            except Exception:
                logger.exception("chatkit-trace: error while closing the recording")
            self.stopped.set()

    def _open(self) -> None:
        from ..store import TraceStore

        path = self.config.db
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self.store = TraceStore(path, create=True)
        self.next_index = self.store.next_exchange_index()
        self.recorded_bytes = self._recorded_bytes()
        meta = dict(self.config.recorder_meta)
        meta["started_at"] = time.time()
        recordings = self.store.get_meta("recordings", []) or []
        recordings.append(meta)
        self.store.set_meta("recordings", recordings)
        self.store.commit()
        self._configure(self.config)

    def _configure(self, config: WriterConfig) -> None:
        old = self.config.redactor
        if config.redactor is not None and old is not None:
            config.redactor.adopt(old)  # one recording: what was learned stays learned
        self.config = config
        self.limit = max(1, config.queue_limit)
        self.adapter = None
        profile = config.profile
        self._write_meta(config)
        if profile is not None and config.derive != "off":
            try:
                self.adapter = profile.create_adapter()
            except Exception as err:  # noqa: BLE001
                self._capture_error("derive", f"cannot build the adapter for profile {profile.name!r}: {err}")
                # Loud, once: every later command needs the adapter too (docs/recording.md).
                # (A warning: mitmdump exits on an error logged during its startup.)
                self._log(logging.WARNING, f"chatkit-trace: ERROR: cannot import the adapter {profile.protocol!r} of "
                          f"profile {profile.name!r} ({type(err).__name__}: {err}). Every exchange is still recorded, "
                          "but no run is decoded or judged: install the adapter into this Python "
                          f"({sys.executable}), e.g. `pip install -e ./my_adapter`, then "
                          f"`chatkit-trace redecode {config.db}`; runs, check, view and the fixtures' pytest need it too")

    def _write_meta(self, config: WriterConfig) -> None:
        """The meta keys readers use (docs/trace-format.md): which profile, protocol and
        capabilities decode this trace, whether it is redacted, where it came from."""
        store = self.store
        profile = config.profile
        if profile is not None:
            store.set_meta("profile", profile.name)
            store.set_meta("protocol", profile.protocol)
            store.set_meta("capabilities", list(profile.capabilities))
            try:
                store.set_meta("profile_spec", profile.model_dump(mode="json", by_alias=True))
            except Exception:  # noqa: BLE001, S110 - a profile object without pydantic: the name suffices
                pass
        store.set_meta("redaction", "off" if config.redactor is None else "on")
        store.set_meta("source", {"kind": "record", **config.recorder_meta})
        store.commit()

    def _loop(self) -> None:
        q = self.q
        while True:
            timeout = self._idle_timeout()
            try:
                item = q.get(timeout=timeout) if timeout is not None else q.get()
            except queue.Empty:
                self._idle()
                continue
            items = [item]
            # Traffic starts: let the loop serve the new flow's first round trip
            # (TTFE) before taking the GIL; then take what is queued every BATCH_WAIT.
            time.sleep(BATCH_WAIT)
            while True:
                try:
                    while len(items) < BATCH_ITEMS:
                        items.append(q.get_nowait())
                except queue.Empty:
                    pass
                if not items:  # quiet: parse everything pending, then block again
                    self._parse_pending(force=True)
                    self._commit()
                    break
                if self._batch(items):
                    return
                items = []
                time.sleep(BATCH_WAIT)

    def _idle_timeout(self) -> float | None:
        if self.dirty_sessions and self.config.derive == "live":
            return max(IDLE_DERIVE, min(self.derive_cost, 10.0))
        if self.config.max_age or self.config.max_db_bytes:
            return CAP_INTERVAL
        return None

    def _idle(self) -> None:
        try:
            self._check_caps()
            if self.config.derive == "live":
                self._derive()
        except Exception as err:  # noqa: BLE001
            self._internal_error("derive", err)

    def _batch(self, items: list[Any]) -> bool:
        """Handle ``items`` in one transaction; ``True`` when told to stop."""
        store = self.store
        stop = False
        syncs: list[threading.Event] = []
        try:
            store.begin()
        except sqlite3.Error as err:
            self._internal_error("store", err)
        for item in items:
            if item is None:
                stop = True
                continue
            kind = item[0]
            if kind == "sync":
                syncs.append(item[1])
                continue
            try:
                self._handle(kind, item)
            except Exception as err:  # noqa: BLE001 - one bad message never stops the recording
                self._internal_error(kind, err, fid=item[1] if len(item) > 1 and isinstance(item[1], str) else None)
        self.consumed += len(items)
        self._parse_pending(force=stop or bool(syncs))
        self._commit()
        if self.config.derive == "live" and self.dirty_since is not None and time.time() - self.dirty_since > MAX_LAG:
            self._idle()
        elif (self.config.max_age or self.config.max_db_bytes) and time.time() - self.last_cap_check > CAP_INTERVAL:
            self._idle_caps()
        for ev in syncs:
            ev.set()
        return stop

    def _idle_caps(self) -> None:
        try:
            self._check_caps()
        except Exception as err:  # noqa: BLE001
            self._internal_error("caps", err)

    def _commit(self) -> None:
        store = self.store
        try:
            self._assign_ready()
            self._scrub()
            if self.frames:
                if self.over_cap:
                    self.capped["frames_over_cap"] += len(self.frames)
                else:
                    store.add_frames(self.frames)
                    self.recorded_bytes += sum(_FRAME_ROW + len(f.text or "") + len(f.raw or b"") for f in self.frames)
                self.frames = []
            for st in self.flows.values():
                if st.dirty:
                    st.dirty = False
                    store.add_exchange(st.ex, with_frames=False)
            done = [fid for fid, st in self.flows.items() if st.ended and st.assigned]
            for fid in done:
                del self.flows[fid]
            store.commit()
        except Exception as err:  # noqa: BLE001 - e.g. disk full: log, drop this batch, go on
            self.frames = []
            try:
                store.rollback()
            except Exception:  # noqa: BLE001, S110 - the batch is lost either way
                pass
            self._internal_error("store", err)

    def _scrub(self) -> None:
        """Mask learned secrets and token shapes in every frame and exchange row
        about to be written (capture/secrets.py): nothing unmasked reaches the
        file, its WAL or free pages.  Lengths are kept; the exchange notes where."""
        red = self.config.redactor
        if red is None:
            return
        from .redact import note_scrubbed

        frames = self.frames
        for i, f in enumerate(frames):
            new, spans = red.scrub_frame(f)
            if new is f:
                continue
            frames[i] = new
            st = self.flows.get(self.flow_of.get(f.exchange_index, ""))
            if st is not None:
                note_scrubbed(st.ex.notes, f"frame:{f.index}", spans)
                st.dirty = True
        for st in self.flows.values():
            if st.dirty:
                memo = self.scrub_memo.setdefault(st, {})
                for where, spans in red.scrub_fields(st.ex, memo):
                    note_scrubbed(st.ex.notes, where, spans)

    # ------------------------------------------------------------------ messages

    def _handle(self, kind: str, item: Message) -> None:
        match item:
            case Chunk():
                self._chunk(item)
            case Request():
                self._request(item)
            case RequestBody():
                self._request_body(item)
            case ResponseHead():
                self._response_head(item)
            case WsMessage():
                self._ws(item)
            case End():
                self._end(item)
            case Gap():
                self._gap(item)
            case CaptureErrorMessage():
                st = self.flows.get(item.flow_id) if item.flow_id else None
                if item.message is not None:
                    self._capture_error(item.where, item.message, fid=item.flow_id, exchange_id=st.ex.index if st else None)
                if item.log:
                    self._log(logging.WARNING, item.log)  # the loop's error, masked here (in queue order)
            case Configure():
                self._configure(item.config)
            case _:
                raise ValueError(f"unknown queue message {kind!r}")

    def _maybe_raise(self) -> None:
        if "writer" in self.config.test_raise:
            raise _InjectedFault("chatkit_test_raise=writer: injected writer failure")

    def _request(self, item: Request) -> None:
        _, fid, t, method, url, fields = item
        if fid in self.flows:
            return
        index = self.next_index
        self.next_index += 1
        headers = _pairs(fields)
        ex = Exchange(index, method=method, url=url, started_at=t, flow_id=fid)
        st = _Flow(fid, ex, raw_url=url, raw_headers=headers)
        red = self.config.redactor
        if red is not None:
            ex.url = red.redact_url(url)
            if ex.url != url:
                _redacted(ex, "url")
            ex.request_headers = red.redact_headers(headers)
            _redacted_headers(ex, "request", headers, ex.request_headers)
        else:
            ex.request_headers = headers
        self.flows[fid] = st
        self.flow_of[index] = fid
        self.open_indexes.add(index)
        self.ident_queue.append(st)

    def _request_body(self, item: RequestBody) -> None:
        _, fid, raw, encoding, streamed = item
        st = self.flows.get(fid)
        if st is None:
            self.orphans += 1
            return
        body = None
        if raw:
            body, problem = self._decode_whole(raw, encoding)
            if problem:
                st.ex.notes["request_body_encoding"] = problem
        elif streamed:
            st.ex.notes["request_body"] = "streamed by another addon: not recorded"
        st.request_body = body
        self._match(st)
        if body is not None:
            stored = body
            if len(stored) > MAX_BODY_BYTES:
                st.ex.notes["request_body_truncated"] = len(stored)
                stored = stored[:MAX_BODY_BYTES]
            red = self.config.redactor
            if red is not None:
                before = stored
                stored = red.redact_body(stored, _header(st.raw_headers, "content-type"))
                if stored is not before and stored != before:
                    _redacted(st.ex, "request.body")
            st.ex.request_body = stored
        st.dirty = True

    def _match(self, st: _Flow) -> None:
        st.matched = True
        profile = self.config.profile
        if profile is None:
            return
        ex = st.ex
        st.match = profile.match(ex.method, st.raw_url, st.raw_headers, st.request_body)
        if st.match is not None:
            ex.notes["identity"] = "pending"

    def _assign_ready(self, *, force: bool = False) -> None:
        """Final ids, in request order, for the flows whose ids are all known.

        :class:`IdentityTracker` must see exchanges in request order, each
        once, with the ids from the response and the events already filled
        in; a flow still waiting for those holds back the flows after it
        (their rows say ``notes.identity = "pending"`` meanwhile).  ``force``
        (shutdown) assigns everything with what is known.
        """
        q = self.ident_queue
        while q:
            st = q[0]
            m = st.match
            if not force and not st.ended:
                if not st.matched:
                    return
                if m is not None and not st.resolved:
                    return
                if m is not None and m.pending_events and st.event_tries < EVENT_ID_TRIES:
                    return
            q.popleft()
            st.assigned = True
            if m is None:
                continue
            if not st.resolved:
                st.match = m = resolve_from_response(m, st.ex.status, st.response_headers, None)
            st.match = m = self.tracker.assign(m, st.ex.index)
            ex = st.ex
            ex.notes.pop("identity", None)
            apply_match(ex, m)
            st.dirty = True
            if ex.capability is not None:
                self._touch(ex.session_id)

    def _response_head(self, item: ResponseHead) -> None:
        _, fid, t, status, fields, transport = item
        st = self.flows.get(fid)
        if st is None:
            self.orphans += 1
            return
        if not st.matched:
            self._match(st)
        headers = _pairs(fields)
        st.response_headers = headers
        red = self.config.redactor
        ex = st.ex
        ex.status = status
        if red is not None:
            ex.response_headers = red.redact_headers(headers)
            _redacted_headers(ex, "response", headers, ex.response_headers)
        else:
            ex.response_headers = headers
        ex.transport = transport
        ex.notes["response_at"] = t
        if st.match is not None and st.match.streams_only and transport not in ("sse", "ndjson") and status != 101:
            _drop_match(st)  # a route for event streams only (Route.streams_only)
        if transport in ("sse", "ndjson", "body"):
            st.decoder = make_decoder(_header(headers, "content-encoding"))
            if st.decoder.unsupported_error is not None:
                self._add_frame(st, error_frame(st.decoder.unsupported_error, ex.index, st.next_frame, t, transport=transport))
            if transport == "sse":
                st.parser = SSEParser()
            elif transport == "ndjson":
                st.parser = NDJSONSplitter(ex.index)
            else:
                st.copy = bytearray()
        if st.match is None and transport in ("sse", "ndjson"):
            self._hint_unmatched(st)
        if st.match is not None and transport is not None and not st.resolved:
            # A streamed body is not JSON: only response headers can name ids.
            st.match = resolve_from_response(st.match, status, headers, None)
            st.resolved = True
        st.dirty = True

    def _hint_unmatched(self, st: _Flow) -> None:
        """The first streamed response that matches no route: say so, and what it
        looks like (the sentence ``check`` says about such a trace).  The
        exchange is kept whatever the profile says; ``check --profile``
        decodes it later."""
        if self.hinted:
            return
        self.hinted = True
        from types import SimpleNamespace

        from .detect import describe_routes, guess_profile, unmatched_hint

        ex = st.ex
        raw = SimpleNamespace(method=ex.method, url=st.raw_url, request_headers=st.raw_headers,
                              request_body=st.request_body, frames=(), transport=ex.transport)
        profile = getattr(self.config.profile, "name", None)
        guess = guess_profile([raw], exclude=profile)
        hint = unmatched_hint(profile, describe_routes([raw], counts=False), guess)
        later = f" --profile {guess.profiles[0]}" if len(guess.profiles) == 1 else " --profile …"
        self._log(logging.WARNING, f"chatkit-trace: {hint} (the exchange is kept, undecoded: "
                  f"`chatkit-trace check {self.config.db}{later}` decodes it later)")

    def _add_frame(self, st: _Flow, frame: Frame) -> None:
        self.frames.append(frame)
        st.next_frame = frame.index + 1
        st.frame_count += 1
        if st.assigned:
            if st.ex.capability is not None:
                self._touch(st.ex.session_id)
        elif st.match is not None and st.match.pending_events and st.event_tries < EVENT_ID_TRIES:
            st.event_tries += 1
            value, err = event_json(frame)
            if err is None:
                st.match = resolve_from_event(st.match, value)

    def _touch(self, session_id: str | None) -> None:
        self.dirty_sessions.add(session_id)
        if self.dirty_since is None:
            self.dirty_since = time.time()

    def _chunk(self, item: Chunk) -> None:
        _, fid, t, chunk = item
        st = self.flows.get(fid)
        if st is None or st.ended:
            self.orphans += 1
            return
        self._maybe_raise()
        st.chunks += 1
        st.encoded += len(chunk)
        if st.lost or st.decoder is None:
            return
        if not st.pending:
            st.pending_since = t
            self.unparsed.add(st)
        st.pending.append((t, chunk))
        st.pending_bytes += len(chunk)

    def _parse_pending(self, *, force: bool = False) -> None:
        """Decode and parse the chunks waiting (see PARSE_LAG)."""
        if not self.unparsed:
            return
        now = time.time()
        for st in list(self.unparsed):
            if force or now - st.pending_since >= PARSE_LAG or st.pending_bytes >= PARSE_BYTES:
                try:
                    self._parse(st)
                except Exception as err:  # noqa: BLE001
                    st.pending = []
                    self.unparsed.discard(st)
                    self._internal_error("parse", err, fid=st.fid)

    def _parse(self, st: _Flow) -> None:
        pending, st.pending, st.pending_bytes = st.pending, [], 0
        self.unparsed.discard(st)
        if st.lost or st.decoder is None:
            return
        decoder = st.decoder
        for t, chunk in pending:
            data = decoder.decode(chunk)
            self._feed(st, data, t)
            if decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self._add_frame(st, error_frame(decoder.error, st.ex.index, st.next_frame, t, transport=st.ex.transport or "sse"))

    def _feed(self, st: _Flow, data: bytes, t: float, *, final: bool = False) -> None:
        if data:
            st.decoded += len(data)
        parser = st.parser
        ex = st.ex
        if isinstance(parser, SSEParser):
            events = parser.feed(data) if data else []
            if final:
                events += parser.flush()
            for ev in events:
                self._add_frame(st, _shift(frame_from_sse(ev, ex.index, st.next_frame, t), st.base))
        elif isinstance(parser, NDJSONSplitter):
            frames = parser.feed(data, t) if data else []
            if final:
                frames += parser.flush(t)
            for fr in frames:
                self._add_frame(st, _shift(fr, st.base))
        elif st.copy is not None and data:
            room = MAX_BODY_BYTES - len(st.copy)
            if room > 0:
                st.copy += data[:room]
            st.copy_lost += max(0, len(data) - max(room, 0))

    def _gap(self, item: Gap) -> None:
        """The loop dropped chunks of this flow: what follows is not contiguous."""
        _, fid, _chunks, nbytes = item
        st = self.flows.get(fid)
        if st is None:
            return
        self._parse(st)
        ex = st.ex
        ex.notes["incomplete"] = True
        st.dirty = True
        if st.decoder is None or st.lost:
            return
        if st.decoder.coding != "identity":
            # A compressed stream cannot be decoded past a hole.
            self._feed(st, b"", time.time(), final=True)
            st.lost = True
            ex.notes["lost_after_gap"] = "content-encoded stream: nothing after the first dropped chunk was decoded"
            return
        # Identity: end the current parser (its partial event is truncated) and
        # restart after the hole, keeping offsets in stream coordinates.
        t = time.time()
        self._feed(st, b"", t, final=True)
        st.base = st.decoded + nbytes
        st.decoded = st.base
        if isinstance(st.parser, SSEParser):
            st.parser = SSEParser()
        elif isinstance(st.parser, NDJSONSplitter):
            st.parser = NDJSONSplitter(ex.index, first_index=st.next_frame)

    def _ws(self, item: WsMessage) -> None:
        _, fid, t, content, is_text, from_client = item
        st = self.flows.get(fid)
        if st is None or st.ended:
            self.orphans += 1
            return
        self._maybe_raise()
        if st.ex.transport != "ws":
            st.ex.transport = "ws"
            st.dirty = True
            if st.match is None:
                self._hint_unmatched(st)
        frame = ws_frame(content, is_text, from_client, t, st.ex.index, st.next_frame)
        if self.config.redactor is not None and from_client and frame.text:
            # Client messages may authenticate (a first "auth" frame); server
            # events are the recording's source of truth and stay as they are.
            [frame] = self._redact_frames(st.ex, [frame], None)
        self._add_frame(st, frame)

    def _end(self, item: End) -> None:
        _, fid, t, end, error, body, notes, dropped = item
        st = self.flows.get(fid)
        if st is None or st.ended:
            return
        ex = st.ex
        if not st.matched:
            self._match(st)
        ex.ended_at = t
        if notes:
            ex.notes.update(notes)
        if error:
            ex.error = error
        if end == "proxy-error" and ex.status is None:
            # The proxy answered the client itself (e.g. 502 for a dead upstream).
            ex.status = 502
            ex.notes["status_from"] = "proxy"
            end = "error"
        if dropped and dropped[0]:
            ex.notes.update(dropped_chunks=dropped[0], dropped_bytes=dropped[1], incomplete=True)
            self.drops["chunks"] += dropped[0]
            self.drops["bytes"] += dropped[1]
            self.drops["flows"] += 1
        # Finish the stream copy.
        self._parse(st)
        if st.decoder is not None and not st.lost:
            rest = st.decoder.flush()
            self._feed(st, rest, t, final=True)
            if st.decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self._add_frame(st, error_frame(st.decoder.error, ex.index, st.next_frame, t, transport=ex.transport or "sse"))
        decoded = None
        if st.copy is not None:
            decoded = bytes(st.copy)
        elif body:
            decoded, problem = self._decode_whole(body, _header(st.response_headers, "content-encoding"))
            if problem:
                ex.notes["response_body_encoding"] = problem
        if st.match is not None and st.match.streams_only and ex.transport not in ("sse", "ndjson", "ws"):
            _drop_match(st)
        if st.match is not None and not st.resolved:
            st.match = resolve_from_response(st.match, ex.status, st.response_headers, decoded)
            st.resolved = True
        if decoded is not None:
            self._store_body(st, decoded, t, lost=st.copy_lost)
        if ex.transport is not None or end != "complete":
            ex.end = end
        if st.chunks:
            ex.notes["chunks"] = st.chunks
            ex.notes["bytes"] = st.encoded
        st.ended = True
        st.dirty = True
        self.open_indexes.discard(ex.index)
        self.recorded_bytes += _exchange_size(ex)
        if ex.capability is not None:
            self._touch(ex.session_id)

    def _store_body(self, st: _Flow, data: bytes, t: float, *, lost: int = 0) -> None:
        """A whole (decoded) response body: stored redacted; the run's output
        becomes ``body`` frames by the rule ``import`` uses (``output_frames``)."""
        ex = st.ex
        if lost or len(data) > MAX_BODY_BYTES:
            ex.notes["response_body_truncated"] = len(data) + lost
            data = data[:MAX_BODY_BYTES]
        frames = []
        if ex.transport in (None, "body") and st.frame_count == 0:
            frames = output_frames(st.match, ex.status, data, ex.index, t, first_index=st.next_frame)
        red = self.config.redactor
        ctype = _header(st.response_headers, "content-type")
        if red is not None:
            before = data
            data = red.redact_body(data, ctype)
            if data is not before and data != before:
                _redacted(ex, "response.body")
            if frames:
                frames = self._redact_frames(ex, frames, ctype)
        ex.response_body = data
        if frames:
            ex.transport = "body"
            for frame in frames:
                self._add_frame(st, frame)
        elif ex.transport == "body":
            ex.transport = None  # a streamed body that is not the run's output: stored whole, as import does

    def _redact_frames(self, ex: Exchange, frames: list[Frame], ctype: str | None) -> list[Frame]:
        """Body frames and client messages, redacted exactly as ``Redactor.redact_exchange`` does on import."""
        red = self.config.redactor
        probe = Exchange(ex.index, response_headers=[("content-type", ctype)] if ctype else [], frames=frames)
        done = red.redact_exchange(probe)
        for where in done.notes.get("redacted", ()):
            _redacted(ex, where)
        if "scrubbed" in done.notes:
            from .redact import note_scrubbed

            for span in done.notes["scrubbed"]:
                where = span.get("where", "")
                note_scrubbed(ex.notes, where, [{k: v for k, v in span.items() if k != "where"}])
        return list(done.frames)

    @staticmethod
    def _decode_whole(raw: bytes, encoding: str | None) -> tuple[bytes, str | None]:
        if not encoding:
            return raw, None
        d = make_decoder(encoding)
        data = d.decode(raw) + d.flush()
        err = d.error or d.unsupported_error
        if err is not None:
            return (raw if not data else data), err.message
        return data, None

    # ------------------------------------------------------------------ errors

    def _capture_error(self, where: str, message: str, *, fid: str | None = None, exchange_id: int | None = None) -> None:
        key = (f"{where}:{message[:200]}", fid)
        if key in self.stored_errors:
            return
        self.stored_errors.add(key)
        if self.config.redactor is not None:
            message = self.config.redactor.scrub_text(message)
        try:
            self.store.add_capture_error(where, message, flow_id=fid, exchange_id=exchange_id)
        except Exception:  # noqa: BLE001, S110 - nowhere left to store it
            pass

    def _internal_error(self, where: str, err: BaseException, *, fid: str | None = None) -> None:
        message = f"{type(err).__name__}: {err}"
        st = self.flows.get(fid) if fid else None
        self._capture_error(f"writer:{where}", message, fid=fid, exchange_id=st.ex.index if st else None)
        key = f"{where}:{type(err).__name__}"
        self.errors_seen[key] += 1
        if self.errors_seen[key] == 1:
            tb = "".join(traceback.format_exception(err)).rstrip()
            self._log(logging.WARNING, f"chatkit-trace: capture error in the writer ({where}), stored in the trace; "
                      f"the traffic is not affected: {message}\n{tb}")

    def _log(self, level: int, message: str) -> None:
        if self.config.redactor is not None:
            message = self.config.redactor.scrub_text(message)
        if self.notify is not None:
            try:
                self.notify(lambda: logger.log(level, message))
                return
            except Exception:  # noqa: BLE001, S110 - the loop is gone: log from here
                pass
        logger.log(level, message)

    # ------------------------------------------------------------------ caps

    def _check_caps(self, *, force: bool = False) -> None:
        cfg = self.config
        if not (cfg.max_age or cfg.max_db_bytes):
            return
        if not force and time.time() - self.last_cap_check < CAP_INTERVAL:
            return
        self.last_cap_check = time.time()
        store = self.store
        dropped_before = self.capped["exchanges"]
        if cfg.max_age:
            rows = [r for r in store.exchange_ages(ended_before=time.time() - cfg.max_age) if r[0] not in self.open_indexes]
            if rows:
                self._prune(rows, "by_age")
        if cfg.max_db_bytes:
            self.over_cap = False
            for _ in range(50):
                if self.recorded_bytes <= cfg.max_db_bytes:
                    break
                rows = [r for r in store.exchange_ages() if r[0] not in self.open_indexes]
                if not rows:
                    self.over_cap = True
                    break
                self._prune(rows[: max(1, len(rows) // 10)], "by_size")
        if self.capped["exchanges"] != dropped_before:
            store.set_meta("dropped", dict(self.capped, queue=self.drops))
            store.commit()
            n = self.capped["exchanges"] - dropped_before
            self._log(logging.INFO, f"chatkit-trace: recording cap reached: dropped the {n} oldest exchange(s) "
                      f"({self.capped['exchanges']} so far, {self.capped['frames']} frames); see meta 'dropped'")

    def _recorded_bytes(self, ids: list[int] | None = None) -> int:
        """The size of recorded exchanges and frames (all, or of exchanges ``ids``), as counted for the cap."""
        frames, frame_bytes, exchanges, exchange_bytes = self.store.recorded_sizes(ids)
        return frames * _FRAME_ROW + frame_bytes + exchanges * _EXCHANGE_ROW + exchange_bytes

    def _prune(self, rows: list[tuple[int, str | None]], why: str) -> None:
        ids = [r[0] for r in rows]
        for i in range(0, len(ids), 500):
            self.recorded_bytes -= self._recorded_bytes(ids[i : i + 500])
        frames = self.store.delete_exchanges(ids)
        self.capped["exchanges"] += len(ids)
        self.capped["frames"] += frames
        self.capped[why] += len(ids)
        for i in ids:
            self.flow_of.pop(i, None)
        for _, sid in rows:
            self._touch(sid)
        if self.config.derive == "off":
            self.dirty_sessions.clear()
            self.dirty_since = None

    # ------------------------------------------------------------------ derivation

    def _derive(self, *, final: bool = False) -> None:
        """Re-derive the sessions that changed and replace their derived rows.

        Only those sessions are replayed and rewritten (sessions are
        independent Cores), so a long recording costs what its busiest
        session costs, not the whole file.  The derive engine is the one
        ``check`` runs (:class:`chatkit_trace.derive.Deriver`).
        """
        if not self.dirty_sessions or self.adapter is None:
            self.dirty_sessions.clear()
            self.dirty_since = None
            return
        from ..derive import Deriver

        started = time.monotonic()
        dirty = self.dirty_sessions
        self.dirty_sessions = set()
        self.dirty_since = None
        deriver = Deriver(self.store, self.adapter, capabilities=getattr(self.config.profile, "capabilities", None))
        # a socket several sessions share is re-derived for all of them at once
        dirty = deriver.together(dirty)
        shared = deriver.shared_sockets()
        for sid in sorted(dirty, key=lambda s: (s is None, s or "")):
            d = deriver.session(sid, analyse=False)
            # a shared socket's rows are its sessions' own (replaced by session, not by exchange)
            ids = [ex.index for ex in d.exchanges if ex.index not in shared]
            self.store.write_derived(d.rows() if d.exchanges else {}, sessions=d.names, exchanges=ids)
            if d.exchanges:
                self._report_runs(d, self._findings(deriver, d), final=final)
        self.derive_cost = time.monotonic() - started

    def _findings(self, deriver: Any, derived: Any) -> list[Any]:
        """The session's findings, by the analysis ``check`` runs (so the
        per-run log line and ``check`` say the same thing)."""
        try:
            return deriver.analyse(derived)  # type: ignore[no-any-return]
        except Exception as err:  # noqa: BLE001 - the log line then says so
            self._internal_error("analyze", err)
            return []

    def _report_runs(self, derived: Any, findings: list[Any] | None = None, *, final: bool) -> None:
        """One log line per finished run, with its findings as ``check`` reports
        them (and a mitmweb mark on its flows); logged again when they change."""
        per_finding: dict[tuple[Any, Any], list[Any]] = {}
        for f in findings or ():
            per_finding.setdefault((f.session_id, f.run_id), []).append(f)
        for run in derived.runs():
            view, exchanges = run.view, run.exchanges
            still_open = any(i in self.open_indexes for i in exchanges)
            if not view.terminal and still_open and not final:
                continue
            rejected = run.rejections
            outcome = self._outcome(view, derived.replay, exchanges)
            mine = sorted(per_finding.get((run.session_id, view.id), []), key=lambda f: (f.severity != "error", f.severity, f.code))
            codes = tuple(dict.fromkeys(f"{f.code} {f.severity}" for f in mine))
            signature = (outcome, run.facts, tuple(sorted(rejected.items())), codes)
            key = (run.session_id, view.id)
            if self.logged_runs.get(key) == signature:
                continue
            self.logged_runs[key] = signature
            if rejected:
                rej = ", ".join(f"{reason} {n}" for reason, n in sorted(rejected.items()))
                rej_text = f"{sum(rejected.values())} rejected ({rej})"
            else:
                rej_text = "no rejections"
            found = f"findings: {', '.join(codes)}" if codes else "no findings"
            summary = f"session {run.session_id} run {view.id}: {outcome}, {run.facts} facts, {rej_text}; {found}"
            self._log(logging.INFO, f"chatkit-trace: {summary}")
            marker = self._marker(view, rejected, mine)
            fids = [self.flow_of[i] for i in exchanges if i in self.flow_of]
            self._mark(fids, marker, summary)

    @staticmethod
    def _outcome(view: Any, r: Any, exchanges: list[int]) -> str:
        if view.status == "failed" and view.error is not None:
            code = getattr(view.error, "code", None)
            return f"failed ({code})" if code else "failed"
        if view.status == "interrupted" and view.interrupt_reason:
            return f"interrupted ({view.interrupt_reason})"
        if view.terminal:
            return str(view.status)
        ends = [r.exchanges[i].exchange.end for i in exchanges if i in r.exchanges]
        cut = [e for e in ends if e and e != "complete"]
        if cut:
            return f"no conclusion (connection {cut[-1]})"
        if view.connection == "disconnected":
            return "no conclusion (stream ended)"
        return str(view.status)

    @staticmethod
    def _marker(view: Any, rejected: Counter[str], findings: Sequence[Any] = ()) -> str:
        if view.status == "failed":
            return ":x:"
        if rejected or any(f.severity == "error" for f in findings):
            return ":warning:"
        if view.terminal:
            return ":white_check_mark:"
        return ":hourglass:"

    def _mark(self, fids: list[str], marker: str, comment: str) -> None:
        mark = self.mark_flows
        if mark is None or not fids or self.notify is None:
            return
        try:
            self.notify(lambda: mark(fids, marker, comment))
        except Exception:  # noqa: BLE001, S110 - the loop is gone
            pass

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        """Flows still open become ``end='open'``; derive once more; close."""
        store = self.store
        if store is None:
            return
        try:
            store.begin()
            for st in list(self.flows.values()):
                if st.ended:
                    continue
                if not st.matched:
                    self._match(st)
                ex = st.ex
                self._parse(st)
                if st.decoder is not None and not st.lost:
                    self._feed(st, st.decoder.flush(), time.time(), final=True)
                if st.copy is not None:
                    self._store_body(st, bytes(st.copy), time.time(), lost=st.copy_lost)
                ex.end = "open"
                st.ended = True
                st.dirty = True
            self._assign_ready(force=True)
            self._commit()
        except Exception as err:  # noqa: BLE001
            self._internal_error("shutdown", err)
        try:
            stats = {"queue_dropped": self.drops, "orphan_messages": self.orphans, "capped": self.capped}
            store.set_meta("capture_stats", stats)
            if self.drops["chunks"] or self.capped["exchanges"] or self.capped["frames_over_cap"]:
                store.set_meta("dropped", dict(self.capped, queue=self.drops))
            store.commit()
        except Exception as err:  # noqa: BLE001
            self._internal_error("shutdown", err)
        if self.config.derive != "off":
            try:
                self.open_indexes.clear()
                self._derive(final=True)
                # Flows finalised at shutdown count towards the caps too: check once more.
                self._check_caps(force=True)
                if self.dirty_sessions:
                    self._derive(final=True)
            except Exception as err:  # noqa: BLE001
                self._internal_error("derive", err)
        if self.drops["chunks"]:
            self._log(logging.WARNING, f"chatkit-trace: the writer fell behind: {self.drops['chunks']} chunk(s), "
                      f"{self.drops['bytes']} bytes of {self.drops['flows']} flow(s) were not recorded "
                      "(the traffic itself was not affected); raise chatkit_queue to keep more")
        store.settle()  # one file after a clean stop: no -wal/-shm next to the trace
        store.close()


def _drop_match(st: _Flow) -> None:
    """The response is not an event stream and the route takes only those:
    the exchange stays a plain one (stored, not a run)."""
    st.match = None
    if st.ex.notes.get("identity") == "pending":
        del st.ex.notes["identity"]
