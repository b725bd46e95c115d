"""The writer's traffic step: the proxy's messages about a flow become its
exchange row and frames.

Per flow: the request (redacted), its body, the response head (the
Content-Encoding decoder and the SSE parser or NDJSON splitter it needs),
chunks (parsed when the writer is quiet, when the flow ends, or at the
latest after ``PARSE_LAG`` / ``PARSE_BYTES``; every event keeps the arrival
time of the chunk that completed it), gaps the proxy left, WebSocket
messages and the end (a whole body stored, the run's output made ``body``
frames by the rule ``import`` uses).  Ids are :class:`~._identity.Identity`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..trace import Exchange
from ..wire import Frame, NDJSONSplitter, SSEParser, error_frame, frame_from_sse, make_decoder, replace_frame, ws_frame
from ._caps import Caps, exchange_size
from ._identity import Identity
from ._losses import Losses
from ._messages import Chunk, End, Gap, Request, RequestBody, ResponseHead, SocketMessage
from ._recording import Flow, Recording

__all__ = ["Traffic"]


class _InjectedFault(RuntimeError):
    """Raised on purpose when ``chatkit_test_raise`` asks for it."""


class Traffic:
    """The recording's flows, from the proxy's messages to rows (module docstring)."""

    def __init__(self, rec: Recording, identity: Identity, losses: Losses, caps: Caps) -> None:
        self.rec = rec
        self.identity = identity
        self.losses = losses
        self.caps = caps
        self.orphans = 0  # messages about a flow the writer does not know (or that ended)
        self.unparsed: set[Flow] = set()

    def handlers(self) -> dict[type[Any], Any]:
        """This step's part of the writer's dispatch (message type -> handler)."""
        return {
            Chunk: self.chunk,
            Request: self.request,
            RequestBody: self.request_body,
            ResponseHead: self.response_head,
            SocketMessage: self.ws,
            End: self.end,
            Gap: self.gap,
        }

    def _maybe_raise(self) -> None:
        if "writer" in self.rec.config.test_raise:
            raise _InjectedFault("chatkit_test_raise=writer: injected writer failure")

    # ------------------------------------------------------------------ the request

    def request(self, item: Request) -> None:
        rec = self.rec
        fid, t, method, url = item.fid, item.t, item.method, item.url
        if fid in rec.flows:
            return
        index = rec.next_index
        rec.next_index += 1
        headers = _pairs(item.headers)
        ex = Exchange(index, method=method, url=url, started_at=t, flow_id=fid)
        st = Flow(fid, ex, raw_url=url, raw_headers=headers)
        red = rec.redactor
        if red is not None:
            ex.url = red.redact_url(url)
            if ex.url != url:
                _redacted(ex, "url")
            ex.request_headers = red.redact_headers(headers)
            _redacted_headers(ex, "request", headers, ex.request_headers)
        else:
            ex.request_headers = headers
        rec.flows[fid] = st
        rec.flow_of[index] = fid
        rec.open_indexes.add(index)
        self.identity.enqueue(st)

    def request_body(self, item: RequestBody) -> None:
        raw, encoding, streamed = item.raw, item.encoding, item.streamed
        st = self.rec.flows.get(item.fid)
        if st is None:
            self.orphans += 1
            return
        body = None
        if raw:
            body, problem = _decode_whole(raw, encoding)
            if problem:
                st.ex.notes["request_body_encoding"] = problem
        elif streamed:
            st.ex.notes["request_body"] = "streamed by another addon: not recorded"
        st.request_body = body
        self.identity.match(st)
        if body is not None:
            stored = body
            limit = self.rec.tuning.max_body_bytes
            if len(stored) > limit:
                st.ex.notes["request_body_truncated"] = len(stored)
                stored = stored[:limit]
            red = self.rec.redactor
            if red is not None:
                before = stored
                stored = red.redact_body(stored, _header(st.raw_headers, "content-type"))
                if stored is not before and stored != before:
                    _redacted(st.ex, "request.body")
            st.ex.request_body = stored
        st.dirty = True

    # ------------------------------------------------------------------ the response

    def response_head(self, item: ResponseHead) -> None:
        t, status, transport = item.t, item.status, item.transport
        rec = self.rec
        st = rec.flows.get(item.fid)
        if st is None:
            self.orphans += 1
            return
        identity = self.identity
        if not st.matched:
            identity.match(st)
        headers = _pairs(item.headers)
        st.response_headers = headers
        red = rec.redactor
        ex = st.ex
        ex.status = status
        if red is not None:
            ex.response_headers = red.redact_headers(headers)
            _redacted_headers(ex, "response", headers, ex.response_headers)
        else:
            ex.response_headers = headers
        ex.transport = transport
        ex.notes["response_at"] = t
        identity.keep(st, transport, status)  # a route for event streams only (Route.streams_only)
        if transport in ("sse", "ndjson", "body"):
            st.decoder = make_decoder(_header(headers, "content-encoding"))
            if st.decoder.unsupported_error is not None:
                self.add_frame(st, error_frame(st.decoder.unsupported_error, ex.index, st.next_frame, t, transport=transport))
            max_line = rec.config.max_event_bytes
            if transport == "sse":
                st.parser = SSEParser(max_line=max_line)
            elif transport == "ndjson":
                st.parser = NDJSONSplitter(ex.index, max_line=max_line)
            else:
                st.copy = bytearray()
        if st.match is None and transport in ("sse", "ndjson"):
            identity.hint_unmatched(st)
        if transport is not None:
            # A streamed body is not JSON: only response headers can name ids.
            identity.respond(st, status, headers, None)
        st.dirty = True

    def add_frame(self, st: Flow, frame: Frame) -> None:
        self.rec.frames.append(frame)
        st.next_frame = frame.index + 1
        st.frame_count += 1
        if st.assigned:
            if st.ex.capability is not None:
                self.rec.touch(st.ex.session_id, 1)
        else:
            self.identity.on_frame(st, frame)

    def chunk(self, item: Chunk) -> None:
        t, chunk = item.t, item.data
        st = self.rec.flows.get(item.fid)
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

    def parse_pending(self, *, force: bool = False) -> None:
        """Decode and parse the chunks waiting (see PARSE_LAG)."""
        if not self.unparsed:
            return
        now = time.time()
        lag, most = self.rec.tuning.parse_lag, self.rec.tuning.parse_bytes
        for st in list(self.unparsed):
            if force or now - st.pending_since >= lag or st.pending_bytes >= most:
                try:
                    self.parse(st)
                except Exception as err:  # noqa: BLE001 - one flow's stream never stops the recording: marked on it
                    st.pending = []
                    self.unparsed.discard(st)
                    self.losses.internal_error("parse", err, fid=st.fid)

    def parse(self, st: Flow) -> None:
        pending, st.pending, st.pending_bytes = st.pending, [], 0
        self.unparsed.discard(st)
        if st.lost or st.decoder is None:
            return
        decoder = st.decoder
        for t, chunk in pending:
            data = decoder.decode(chunk)
            self.feed(st, data, t)
            if decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self.add_frame(st, error_frame(decoder.error, st.ex.index, st.next_frame, t, transport=st.ex.transport or "sse"))

    def feed(self, st: Flow, data: bytes, t: float, *, final: bool = False) -> None:
        if data:
            st.decoded += len(data)
        parser = st.parser
        ex = st.ex
        if isinstance(parser, SSEParser):
            events = parser.feed(data) if data else []
            if final:
                events += parser.flush()
            for ev in events:
                self.add_frame(st, _shift(frame_from_sse(ev, ex.index, st.next_frame, t), st.base))
        elif isinstance(parser, NDJSONSplitter):
            frames = parser.feed(data, t) if data else []
            if final:
                frames += parser.flush(t)
            for fr in frames:
                self.add_frame(st, _shift(fr, st.base))
        elif st.copy is not None and data:
            room = self.rec.tuning.max_body_bytes - len(st.copy)
            if room > 0:
                st.copy += data[:room]
            st.copy_lost += max(0, len(data) - max(room, 0))

    def gap(self, item: Gap) -> None:
        """The loop dropped chunks of this flow: what follows is not contiguous."""
        nbytes = item.nbytes
        st = self.rec.flows.get(item.fid)
        if st is None:
            return
        self.parse(st)
        ex = st.ex
        ex.notes["incomplete"] = True
        st.dirty = True
        if st.decoder is None or st.lost:
            return
        if st.decoder.coding != "identity":
            # A compressed stream cannot be decoded past a hole.
            self.feed(st, b"", time.time(), final=True)
            st.lost = True
            ex.notes["lost_after_gap"] = "content-encoded stream: nothing after the first dropped chunk was decoded"
            return
        # Identity: end the current parser (its partial event is truncated) and
        # restart after the hole, keeping offsets in stream coordinates.
        t = time.time()
        self.feed(st, b"", t, final=True)
        st.base = st.decoded + nbytes
        st.decoded = st.base
        max_line = self.rec.config.max_event_bytes
        if isinstance(st.parser, SSEParser):
            st.parser = SSEParser(max_line=max_line)
        elif isinstance(st.parser, NDJSONSplitter):
            st.parser = NDJSONSplitter(ex.index, first_index=st.next_frame, max_line=max_line)

    def ws(self, item: SocketMessage) -> None:
        t, content, is_text, from_client = item.t, item.content, item.is_text, item.from_client
        st = self.rec.flows.get(item.fid)
        if st is None or st.ended:
            self.orphans += 1
            return
        self._maybe_raise()
        if st.ex.transport != "ws":
            st.ex.transport = "ws"
            st.dirty = True
            if st.match is None:
                self.identity.hint_unmatched(st)
        frame = ws_frame(content, is_text, from_client, t, st.ex.index, st.next_frame)
        if self.rec.redactor is not None and from_client and frame.text:
            # Client messages may authenticate (a first "auth" frame); server
            # events are the recording's source of truth and stay as they are.
            [frame] = self._redact_frames(st.ex, [frame], None)
        self.add_frame(st, frame)

    # ------------------------------------------------------------------ the end

    def end(self, item: End) -> None:
        t, end, error, body, notes, dropped = item.t, item.end, item.error, item.body, item.notes, item.dropped
        rec = self.rec
        st = rec.flows.get(item.fid)
        if st is None or st.ended:
            return
        ex = st.ex
        if not st.matched:
            self.identity.match(st)
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
            rec.drops["chunks"] += dropped[0]
            rec.drops["bytes"] += dropped[1]
            rec.drops["flows"] += 1
        # Finish the stream copy.
        self.parse(st)
        if st.decoder is not None and not st.lost:
            rest = st.decoder.flush()
            self.feed(st, rest, t, final=True)
            if st.decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self.add_frame(st, error_frame(st.decoder.error, ex.index, st.next_frame, t, transport=ex.transport or "sse"))
        decoded = None
        if st.copy is not None:
            decoded = bytes(st.copy)
        elif body:
            decoded, problem = _decode_whole(body, _header(st.response_headers, "content-encoding"))
            if problem:
                ex.notes["response_body_encoding"] = problem
        self.identity.keep(st, ex.transport)
        self.identity.respond(st, ex.status, st.response_headers, decoded)
        if decoded is not None:
            self.store_body(st, decoded, t, lost=st.copy_lost)
        if ex.transport is not None or end != "complete":
            ex.end = end
        if st.chunks:
            ex.notes["chunks"] = st.chunks
            ex.notes["bytes"] = st.encoded
        st.ended = True
        st.dirty = True
        rec.open_indexes.discard(ex.index)
        self.caps.recorded_bytes += exchange_size(ex)
        if ex.capability is not None:
            rec.touch(ex.session_id)

    def store_body(self, st: Flow, data: bytes, t: float, *, lost: int = 0) -> None:
        """A whole (decoded) response body: stored redacted; the run's output
        becomes ``body`` frames by the rule ``import`` uses (``output_frames``)."""
        ex = st.ex
        limit = self.rec.tuning.max_body_bytes
        if lost or len(data) > limit:
            ex.notes["response_body_truncated"] = len(data) + lost
            data = data[:limit]
        frames = []
        if ex.transport in (None, "body") and st.frame_count == 0:
            frames = self.rec.router.output(st.match, ex.status, data, ex.index, t, first_index=st.next_frame)
        red = self.rec.redactor
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
                self.add_frame(st, frame)
        elif ex.transport == "body":
            ex.transport = None  # a streamed body that is not the run's output: stored whole, as import does

    def finish_open(self) -> None:
        """At the stop: flows still open are stored as they are (``end='open'``)."""
        for st in list(self.rec.flows.values()):
            if st.ended:
                continue
            if not st.matched:
                self.identity.match(st)
            ex = st.ex
            self.parse(st)
            if st.decoder is not None and not st.lost:
                self.feed(st, st.decoder.flush(), time.time(), final=True)
            if st.copy is not None:
                self.store_body(st, bytes(st.copy), time.time(), lost=st.copy_lost)
            ex.end = "open"
            st.ended = True
            st.dirty = True
            if st.assigned and ex.capability is not None:
                self.rec.touch(ex.session_id)

    def _redact_frames(self, ex: Exchange, frames: list[Frame], ctype: str | None) -> list[Frame]:
        """Body frames and client messages, redacted exactly as ``Redactor.redact_exchange`` does on import."""
        red = self.rec.redactor
        probe = Exchange(ex.index, response_headers=[("content-type", ctype)] if ctype else [], frames=frames)
        done = red.redact_exchange(probe)
        for where in done.notes.get("redacted", ()):
            _redacted(ex, where)
        if "scrubbed" in done.notes:
            from ..route.redact import note_scrubbed

            for span in done.notes["scrubbed"]:
                where = span.get("where", "")
                note_scrubbed(ex.notes, where, [{k: v for k, v in span.items() if k != "where"}])
        return list(done.frames)


def _decode_whole(raw: bytes, encoding: str | None) -> tuple[bytes, str | None]:
    if not encoding:
        return raw, None
    d = make_decoder(encoding)
    data = d.decode(raw) + d.flush()
    err = d.error or d.unsupported_error
    if err is not None:
        return (raw if not data else data), err.message
    return data, None


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
    return replace_frame(
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
