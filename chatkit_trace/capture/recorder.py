"""The mitmproxy addon that records chat traffic: ``Recorder``.

Loaded by ``chatkit_trace/addon.py`` (``mitmdump -s …``, ``mitmweb -s …``,
``chatkit-trace record``).  Everything here runs on mitmproxy's one event
loop, so it does as little as it can: it copies references to what it sees
(request line, headers, bodies, response chunks, WebSocket messages) with a
timestamp into the hand-off to the writer process
(:mod:`chatkit_trace.capture.link`), and returns.  Decoding, parsing,
matching routes, redaction and SQLite happen in the writer process
(:mod:`chatkit_trace.capture.writer`); deriving facts in the deriver
process (:mod:`chatkit_trace.capture.deriver`): neither shares the proxy's
interpreter.

Rules (docs/recording.md; mitmproxy.md "Pitfalls"):

* The user's bytes are never touched.  Streaming is switched on in
  ``responseheaders`` for every response that may stream (SSE, NDJSON, a
  body without length and without a JSON type); the stream callable
  (:class:`_Tap`) returns the very chunk it was given, whatever happens in
  it.  Ordinary JSON responses stay unstreamed, so mitmweb still shows them.
* Nothing raises into mitmproxy: every hook body is wrapped; a failure is
  stored as a capture error (once per kind and flow) and logged once.
* The hand-off is bounded by a count (``chatkit_queue``): when the writer
  process does not take what is handed to it, the *copy* of a chunk is
  dropped, never the chunk, and the exchange records how many chunks and
  bytes it lost.
* Options carry the ``chatkit_`` prefix and are checked in ``configure``,
  which raises ``OptionsError`` (mitmproxy prints it and refuses to start).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from mitmproxy import ctx, exceptions, hooks, http

from ..route import classify_end, make_redactor, proxy_answered, websocket_close_notes
from ..wire import NDJSON_CONTENT_TYPES, content_transport
from ._lines import install
from ._messages import Chunk, End, Gap, Request, RequestBody, ResponseHead, SocketMessage, TrapError
from .link import Link, LinkError, current_tuning
from .writer import WriterConfig

__all__ = ["OPTIONS", "Recorder", "parse_duration", "stream_transport"]

logger = install(logging.getLogger("chatkit_trace.capture"))  # lines masked, control characters shown

DERIVE_MODES = ("live", "end", "off")
TEST_RAISE = ("tap", "hooks", "writer")
NDJSON_TYPES = NDJSON_CONTENT_TYPES

#: name -> (type, default, help): the options ``load`` declares.
OPTIONS: dict[str, tuple[type, Any, str]] = {
    "chatkit_profile": (
        str,
        "",
        (
            "chatkit-trace route profile: a preset name (openai, adk, a2a, hermes, agui, myproto …), a TOML/JSON "
            "profile file, or an adapter (an installed adapter's name or module:Class, importable by this Python). "
            "Empty: record every exchange without identity (no facts)."
        ),
    ),
    "chatkit_db": (str, "chatkit-trace.db", "chatkit-trace: the SQLite trace file to record into (created, or appended to)."),
    "chatkit_redact": (
        str,
        "",
        (
            "chatkit-trace: extra header, query parameter or JSON field names to redact before storing, comma-separated "
            "(added to the defaults: Authorization, Cookie, Set-Cookie, X-Api-Key, api_key, token, password, secret …)."
        ),
    ),
    "chatkit_keep_secrets": (
        bool,
        False,
        "chatkit-trace: store credentials as they are (no redaction at all). Only for traces that never leave your machine.",
    ),
    "chatkit_max_db_mb": (
        int,
        0,
        "chatkit-trace: cap the trace at this many MB by dropping the oldest finished exchanges (recorded in meta 'dropped'). 0: no cap.",
    ),
    "chatkit_max_age": (
        str,
        "",
        (
            "chatkit-trace: keep only exchanges younger than this (e.g. 90s, 30m, 2h, 1d; dropped ones are counted "
            "in meta 'dropped'). Empty: no cap."
        ),
    ),
    "chatkit_max_event_mb": (
        int,
        64,
        (
            "chatkit-trace: the longest SSE event line or NDJSON line stored whole, in MiB; a longer one is stored as "
            "its first bytes, its length and its SHA-256, not decoded (CK703; the client gets it all)."
        ),
    ),
    "chatkit_queue": (
        int,
        20000,
        (
            "chatkit-trace: most chunks/messages waiting to be handed to the writer process; beyond it the recorder "
            "drops its copy (never the traffic) and the trace says how much."
        ),
    ),
    "chatkit_derive": (
        str,
        "live",
        (
            "chatkit-trace: derive facts while recording (live: in a process of its own, one log line per finished "
            "run), only at shutdown (end), or never (off; run `chatkit-trace redecode` later)."
        ),
    ),
    "chatkit_derive_wait": (
        int,
        30,
        (
            "chatkit-trace: seconds a clean stop waits for the facts still to derive; what is left is derived by the "
            "next recording into the same file (or `chatkit-trace redecode`)."
        ),
    ),
    "chatkit_otlp": (
        str,
        "",
        (
            "chatkit-trace: send each run as an OpenTelemetry span (GenAI conventions) to this OTLP endpoint as it "
            "settles (http://host:4318, or host:4317 with chatkit_otlp_protocol=grpc; env: the OTEL_EXPORTER_OTLP_* "
            "variables decide), from the deriver process. Empty: off. Needs chatkit-trace[otel]."
        ),
    ),
    "chatkit_otlp_protocol": (str, "", "chatkit-trace: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)."),
    "chatkit_otlp_frames": (int, 0, "chatkit-trace: frames as span events, at most this many per run (sampled beyond); 0: none."),
    "chatkit_otlp_content": (bool, False, "chatkit-trace: include message text in the spans (masked as the trace is)."),
    "chatkit_otlp_queue": (
        int,
        4096,
        "chatkit-trace: most spans waiting to be sent; beyond it a span is dropped, counted and said (the trace keeps every run).",
    ),
    "chatkit_ws_abnormal_close": (
        bool,
        True,
        (
            "chatkit-trace: a WebSocket one side drops without a close frame is dropped on the other side too "
            "(the client sees 1006, as without the proxy); false: mitmproxy's own behaviour, a 1000 close frame."
        ),
    ),
    "chatkit_test_raise": (
        str,
        "",
        (
            "chatkit-trace, for tests only: make the recorder fail on purpose in 'tap', 'hooks' and/or 'writer' "
            "(comma-separated) to prove the traffic is unaffected."
        ),
    ),
}


def _otlp_settings(opts: Any) -> tuple[Any, list[str]]:
    """The live spans' settings (``chatkit_otlp*``), or the errors."""
    if not opts.chatkit_otlp.strip():
        return None, []
    from ..export.settings import settings_from_options

    return settings_from_options(opts.chatkit_otlp, opts.chatkit_otlp_protocol, opts.chatkit_otlp_frames,
                                 bool(opts.chatkit_otlp_content), opts.chatkit_otlp_queue)


def parse_duration(text: str) -> float:
    """``"90"``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1d"`` -> seconds; ``""`` -> 0."""
    text = text.strip().lower()
    if not text:
        return 0.0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?", text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 1d)")
    value = float(m.group(1))
    unit = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}[m.group(2) or "s"]
    return value * unit


def stream_transport(response: http.Response, method: str = "GET") -> str | None:
    """How a response is recorded: ``sse``, ``ndjson``, ``body`` (stream it) or ``None``.

    ``None`` means "leave it unstreamed" (mitmproxy buffers it, mitmweb shows
    it, the ``response`` hook gets the whole body): responses without a body,
    JSON bodies, and bodies with a ``Content-Length`` that are not event
    streams.  Everything else may be a stream (chunked or close-delimited
    ``text/plain``, an AI-SDK data stream, an unknown type) and is streamed.
    """
    status = response.status_code
    if method == "HEAD" or status < 200 or status in (204, 304):
        return None
    ctype = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    streamed = content_transport(ctype)
    if streamed is not None:
        return streamed
    if ctype == "application/json" or ctype.endswith("+json") or ctype == "text/json":
        return None
    if "content-length" in response.headers:
        return None
    return "body"


class _Tap:
    """The stream callable of one response: timestamp, hand off, return the chunk.

    It must never lose or change a chunk (mitmproxy.md: a raising callable
    silently loses that chunk for the user), so everything it does is inside
    ``try`` and the chunk it returns is the object it was given.  When the
    hand-off's backlog is at its limit the copy is dropped and counted.  The
    one exception: once mitmproxy is exiting and the recording has stopped
    (:meth:`Recorder.done`), a chunk could no longer be recorded, and the
    client does not get it either.
    """

    __slots__ = ("dropped", "dropped_bytes", "fail", "fid", "gap", "inner", "rec", "writer")

    def __init__(self, fid: str, writer: Link, rec: Recorder, inner: Callable[[bytes], Any] | None) -> None:
        self.fid = fid
        self.writer = writer
        self.rec = rec
        self.inner = inner
        self.dropped = 0
        self.dropped_bytes = 0
        self.gap = False
        self.fail = "tap" in rec.test_raise

    def __call__(self, chunk: bytes) -> Any:
        if self.inner is not None:
            # Another addon's callable (or ours chained twice): it decides the
            # bytes; we record what the client gets.  Its exceptions are its own.
            chunk = self.inner(chunk)
            if not isinstance(chunk, (bytes, bytearray, memoryview)):
                chunk = b"".join(chunk)
        if self.rec.closed:
            return b""  # mitmproxy is exiting and the recording stopped: the client gets only what was recorded
        if chunk:
            try:
                if self.fail:
                    raise RuntimeError("chatkit_test_raise=tap: injected failure in the stream callable")
                w = self.writer
                if w.produced - w.consumed < w.limit:
                    if self.gap:
                        self.gap = False
                        w.put(Gap(self.fid, self.dropped, self.dropped_bytes))
                    w.put(Chunk(self.fid, time.time(), chunk))
                else:
                    self.dropped += 1
                    self.dropped_bytes += len(chunk)
                    self.gap = True
            except Exception as err:  # noqa: BLE001 - never lose the user's chunk
                self.rec._failed("tap", err, self.fid)
        return chunk


class Recorder:
    """Records chat traffic into a chatkit-trace SQLite file (module docstring)."""

    def __init__(self) -> None:
        self.writer: Link | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.test_raise: frozenset[str] = frozenset()
        self._config: WriterConfig | None = None
        self._redactor: Any = None  # masks this side's own log lines when the writer is gone
        self._started: set[str] = set()  # flows whose request was queued
        self._headed: set[str] = set()  # flows whose response head was queued
        self._streamed: dict[str, _Tap] = {}
        self._logged: set[str] = set()
        self._error_keys: set[tuple[str, str, str | None]] = set()
        #: mitmproxy is exiting and the recording has stopped: nothing more
        #: passes that could not be recorded (:meth:`done`)
        self.closed = False

    # ------------------------------------------------------------------ options

    def load(self, loader: Any) -> None:
        for name, (typ, default, help_) in OPTIONS.items():
            loader.add_option(name, typ, default, help_)

    def configure(self, updated: set[str]) -> None:
        if not any(name in updated for name in OPTIONS):
            return
        try:
            self._configure(updated)
        except exceptions.OptionsError as err:
            if not _proxy_running():
                _refuse(str(err))  # a bad start: one line, exit 2, nothing created
            raise  # mitmweb's options editor: mitmproxy shows it, the recording goes on

    def _configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "chatkit_ws_abnormal_close" in updated:
            from .wsclose import pass_abnormal_closes

            pass_abnormal_closes(bool(opts.chatkit_ws_abnormal_close))
        config = self._build_config(opts)  # raises OptionsError
        old = self._config
        self._config = config
        self.test_raise = config.test_raise
        if self.writer is not None and old is not None and old.db == config.db and self.writer.is_alive():
            self.writer.reconfigure(config)
            return
        from .target import RecordTargetError, check_target

        try:
            check_target(config.db)
        except RecordTargetError as err:
            self._config = old
            raise exceptions.OptionsError(f"chatkit_db: {err}") from None
        self._start_writer(config)

    def _build_config(self, opts: Any) -> WriterConfig:
        # long-function: one mitmproxy option after another into the writer's settings, each with its one-line error
        errors: list[str] = []
        if opts.chatkit_queue < 1:
            errors.append(f"chatkit_queue must be at least 1, not {opts.chatkit_queue}")
        if opts.chatkit_max_event_mb < 1:
            errors.append(f"chatkit_max_event_mb must be at least 1 (MiB), not {opts.chatkit_max_event_mb}")
        if opts.chatkit_max_db_mb < 0:
            errors.append(f"chatkit_max_db_mb must be 0 (no cap) or more, not {opts.chatkit_max_db_mb}")
        try:
            max_age = parse_duration(opts.chatkit_max_age)
        except ValueError as err:
            errors.append(f"chatkit_max_age: {err}")
            max_age = 0.0
        if opts.chatkit_derive not in DERIVE_MODES:
            errors.append(f"chatkit_derive must be one of {', '.join(DERIVE_MODES)}, not {opts.chatkit_derive!r}")
        if opts.chatkit_derive_wait < 0:
            errors.append(f"chatkit_derive_wait must be 0 or more seconds, not {opts.chatkit_derive_wait}")
        raises = frozenset(x.strip() for x in opts.chatkit_test_raise.split(",") if x.strip())
        if raises - set(TEST_RAISE):
            errors.append(f"chatkit_test_raise: unknown {', '.join(sorted(raises - set(TEST_RAISE)))} (use {', '.join(TEST_RAISE)})")
        db = opts.chatkit_db.strip()
        if not db:
            errors.append("chatkit_db: give the trace file to record into")
        elif os.path.isdir(db):
            errors.append(f"chatkit_db: {db} is a directory, not a trace file")
        extra = [x.strip() for x in opts.chatkit_redact.split(",") if x.strip()]
        if extra and opts.chatkit_keep_secrets:
            errors.append("chatkit_redact and chatkit_keep_secrets contradict each other: choose one")
        profile = None
        if opts.chatkit_profile.strip():
            try:
                from ..route.profiles import load_profile

                profile = load_profile(opts.chatkit_profile.strip())
            except Exception as err:  # noqa: BLE001 - ProfileError, a missing file, a bad preset name
                errors.append(f"chatkit_profile: {err}")
        redactor = None
        if not opts.chatkit_keep_secrets and not errors:
            try:
                redactor = make_redactor(profile, opts.chatkit_redact)
            except Exception as err:  # noqa: BLE001 - e.g. a bad name list
                errors.append(f"chatkit_redact: {err}")
        otlp, otlp_errors = _otlp_settings(opts)
        errors += otlp_errors
        if errors:
            raise exceptions.OptionsError("; ".join(errors))
        self._redactor = redactor
        meta = {
            "profile": profile.name if profile is not None else None,
            "protocol": profile.protocol if profile is not None else None,
            "redaction": "off" if redactor is None else ("on" + (f" + {', '.join(extra)}" if extra else "")),
            "mitmproxy": _mitmproxy_version(),
            "pid": os.getpid(),
        }
        return WriterConfig(
            db=os.path.abspath(db),
            profile=profile,
            redact=opts.chatkit_redact,
            keep_secrets=bool(opts.chatkit_keep_secrets or redactor is None),
            queue_limit=opts.chatkit_queue,
            max_db_bytes=opts.chatkit_max_db_mb * 1024 * 1024,
            max_age=max_age,
            max_event_bytes=max(1, opts.chatkit_max_event_mb) * 1024 * 1024,
            derive=opts.chatkit_derive,
            derive_wait=float(opts.chatkit_derive_wait),
            test_raise=raises,
            otlp=otlp,
            recorder_meta=meta,
            tuning=current_tuning(),
        )

    def _start_writer(self, config: WriterConfig) -> None:
        if self.writer is not None:
            old, self.writer = self.writer, None
            old.stop()
        link = Link(config, on_mark=self._mark_flows)
        try:
            link.start()
        except LinkError as err:
            said = str(err) if config.db in str(err) else f"cannot record into {config.db}: {err}"
            raise exceptions.OptionsError(f"chatkit_db: {said}") from None
        link.attach(self.loop)
        self.writer = link
        self._started.clear()
        self._headed.clear()
        self._streamed.clear()
        if config.profile is None:
            logger.info(f"chatkit-trace: recording into {config.db} without a profile: exchanges only, no facts "
                        "(set chatkit_profile)")
        else:
            logger.info(f"chatkit-trace: recording into {config.db} with profile {config.profile.name}")
            if config.profile.records_every_stream:
                logger.info("chatkit-trace: the adapter has no routes: every streamed response is recorded as a run "
                            "(narrow it with a profile file, docs/profiles.md)")

    def running(self) -> None:
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        if self.writer is not None:
            self.writer.attach(self.loop)
        _announce()

    def done(self) -> None:
        """Stop: the writer stores what it received, the deriver derives what
        is queued, each within its bound (:meth:`Link.stop`).

        When mitmproxy is exiting (not a script reload, which calls ``done``
        too), connections still open may go on for a moment after this; what
        they would carry could no longer be recorded, so it is withheld from
        the client (:meth:`_withheld`, the taps): the client never gets
        anything the trace lacks."""
        self.closed = self.writer is not None and _exiting()
        writer, self.writer = self.writer, None
        if self.closed:
            _quiet_cancelled_tasks()
            open_flows = len(self._started)
            if open_flows:
                logger.warning(f"chatkit-trace: stopping with {open_flows} exchange(s) still open: recorded as they are "
                               "(end 'open'); their clients are cut off")
        if writer is not None:
            try:
                writer.stop()
            except Exception as err:  # noqa: BLE001 - the proxy's stop: a failed flush is said in one line, mitmproxy stops anyway
                logger.warning(f"chatkit-trace: error while flushing the recording: {err}")

    # ------------------------------------------------------------------ errors

    def _failed(self, where: str, err: BaseException, fid: str | None) -> None:
        """A failure inside the addon: store it (once per kind and flow), log it once."""
        try:
            message = f"{type(err).__name__}: {err}"
            key = (where, type(err).__name__, fid)
            text = None
            if where not in self._logged:
                self._logged.add(where)
                tb = "".join(traceback.format_exception(err)).rstrip()
                text = (f"chatkit-trace: capture error in {where} (stored in the trace, logged once; the traffic is not "
                        f"affected): {message}\n{tb}")
            w = self.writer
            if w is not None and w.is_alive() and (key not in self._error_keys or text is not None):
                # The writer stores and logs it after everything queued before: by
                # then it has learned this flow's secrets and masks them (issue 16).
                w.put(TrapError(fid, where, message if key not in self._error_keys else None, text))
            elif text is not None:
                red = self._redactor
                logger.warning(red.scrub_text(text) if red is not None else text)
            self._error_keys.add(key)
        except Exception:  # noqa: BLE001, S110 - the last line of defence
            pass

    def _withheld(self, flow: http.HTTPFlow) -> bool:
        """After the recording stopped for mitmproxy's exit: kill a flow that
        would otherwise pass unrecorded (True)."""
        if not self.closed:
            return False
        try:
            if flow.killable:
                flow.kill()
        except Exception:  # noqa: BLE001, S110 - exiting anyway
            pass
        return True

    def _hook_check(self) -> None:
        if "hooks" in self.test_raise:
            raise RuntimeError("chatkit_test_raise=hooks: injected failure in a hook")

    # ------------------------------------------------------------------ HTTP

    def _queue_request(self, w: Link, flow: http.HTTPFlow) -> None:
        if flow.id in self._started:
            return
        self._started.add(flow.id)
        req = flow.request
        w.put_request(Request(flow.id, req.timestamp_start or time.time(), req.method, req.url, req.headers.fields))

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """The exchange exists from its first byte (even if its body never arrives)."""
        w = self.writer
        if w is None:
            self._withheld(flow)
            return
        try:
            self._hook_check()
            self._queue_request(w, flow)
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("requestheaders", err, flow.id)

    def request(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None:
            self._withheld(flow)
            return
        try:
            self._hook_check()
            self._queue_request(w, flow)
            req = flow.request
            w.put(RequestBody(flow.id, req.raw_content, req.headers.get("content-encoding"), bool(req.stream)))
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("request", err, flow.id)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        resp = flow.response
        if w is None or resp is None:
            if w is None:
                self._withheld(flow)
            return
        try:
            self._hook_check()
            self._queue_request(w, flow)
            transport = stream_transport(resp, flow.request.method)
            existing = resp.stream
            if existing and transport is None and resp.status_code != 101:
                transport = "body"  # someone else streams it (stream_large_bodies …): record the copy
            if transport is not None:
                tap = _Tap(flow.id, w, self, existing if callable(existing) else None)
                resp.stream = tap
                self._streamed[flow.id] = tap
            self._headed.add(flow.id)
            w.put(ResponseHead(flow.id, resp.timestamp_start or time.time(), resp.status_code, resp.headers.fields, transport))
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("responseheaders", err, flow.id)

    def _queue_head(self, w: Link, flow: http.HTTPFlow) -> None:
        """A response that skipped ``responseheaders`` (made by another addon, e.g. map_local)."""
        resp = flow.response
        if resp is not None and flow.id not in self._headed:
            self._headed.add(flow.id)
            w.put(ResponseHead(flow.id, resp.timestamp_start or time.time(), resp.status_code, resp.headers.fields, None))

    def response(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None:
            self._withheld(flow)
            return
        try:
            self._hook_check()
            if flow.websocket is not None:
                return  # the 101; the exchange ends in websocket_end
            self._queue_request(w, flow)
            self._queue_head(w, flow)
            tap = self._streamed.pop(flow.id, None)
            resp = flow.response
            body = None if tap is not None or resp is None else resp.raw_content
            t = (resp.timestamp_end if resp is not None else None) or time.time()
            w.put(End(flow.id, t, "complete", None, body, _addon_notes(flow), _dropped(tap)))
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("response", err, flow.id)
        finally:
            self._started.discard(flow.id)
            self._headed.discard(flow.id)

    def error(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None:
            return
        try:
            self._hook_check()
            self._queue_request(w, flow)
            tap = self._streamed.pop(flow.id, None)
            message = flow.error.msg if flow.error is not None else "unknown error"
            resp = flow.response
            kind = str(classify_end(message, had_response=resp is not None))
            if proxy_answered(kind, had_response=resp is not None):
                kind = "proxy-error"  # the proxy answered the client (502) itself
            body = None
            if resp is not None and tap is None and resp.raw_content:
                body = resp.raw_content
            w.put(End(flow.id, time.time(), kind, message, body, _addon_notes(flow), _dropped(tap)))
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("error", err, flow.id)
        finally:
            self._started.discard(flow.id)
            self._headed.discard(flow.id)

    # ------------------------------------------------------------------ WebSocket

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None:
            return
        try:
            self._hook_check()
            self._queue_request(w, flow)
            self._started.add(flow.id)
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("websocket_start", err, flow.id)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None or flow.websocket is None:
            if self.closed and flow.websocket is not None and flow.websocket.messages:
                flow.websocket.messages[-1].drop()  # exiting: not recorded, so not sent on
            return
        try:
            self._hook_check()
            msg = flow.websocket.messages[-1]
            if w.produced - w.consumed < w.limit:
                w.put(SocketMessage(flow.id, msg.timestamp, msg.content, msg.is_text, msg.from_client))
            else:
                tap = self._streamed.get(flow.id)
                if tap is None:
                    tap = self._streamed[flow.id] = _Tap(flow.id, w, self, None)
                tap.dropped += 1
                tap.dropped_bytes += len(msg.content)
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("websocket_message", err, flow.id)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        w = self.writer
        if w is None:
            return
        try:
            self._hook_check()
            ws = flow.websocket
            notes: dict[str, Any] = {}
            error = flow.error.msg if flow.error is not None else None
            if ws is not None:
                notes = websocket_close_notes(ws.close_code, ws.closed_by_client, ws.close_reason)
            end = str(classify_end(error, had_response=True, websocket=True, close_code=getattr(ws, "close_code", None),
                                   closed_by_client=getattr(ws, "closed_by_client", None)))
            t = (ws.timestamp_end if ws is not None else None) or time.time()
            notes.update(_addon_notes(flow) or {})
            w.put(End(flow.id, t, end, error, None, notes, _dropped(self._streamed.pop(flow.id, None))))
        except Exception as err:  # noqa: BLE001 - a recorder never fails a flow: the error is recorded (CK702), the traffic goes on
            self._failed("websocket_end", err, flow.id)
        finally:
            self._started.discard(flow.id)
            self._headed.discard(flow.id)

    # ------------------------------------------------------------------ deriver -> loop

    def _mark_flows(self, fids: Sequence[str], marker: str, comment: str) -> None:
        """On the loop: mark a finished run's flows and comment them (mitmweb's view)."""
        view = ctx.master.addons.get("view") if ctx.master is not None else None
        if view is None:
            return
        flows = []
        for fid in fids:
            f = view.get_by_id(fid)
            if f is None:
                continue
            f.marked = marker
            if not f.comment or f.comment.startswith("session "):
                f.comment = comment
            flows.append(f)
        if flows:
            ctx.master.addons.trigger(hooks.UpdateHook(flows))


#: ``chatkit-trace record``'s banner, printed once the proxy listens (``running``).
_ANNOUNCE: list[Callable[[], None] | None] = [None]
_LISTENED: list[bool] = [False]


def announce_when_listening(say: Callable[[], None] | None) -> None:
    """Have ``say()`` called once mitmproxy's proxy server listens (the next
    ``running`` hook of this process; :func:`listened` turns true then);
    ``None`` forgets it."""
    _ANNOUNCE[0] = say
    if say is not None:
        _LISTENED[0] = False


def listened() -> bool:
    """Whether a recorder of this process reached ``running`` (the proxy listened)."""
    return _LISTENED[0]


def _announce() -> None:
    _LISTENED[0] = True
    say, _ANNOUNCE[0] = _ANNOUNCE[0], None
    if say is not None:
        try:
            say()
        except Exception:  # noqa: BLE001, S110 - a closed stderr: nothing to announce to
            pass


class _CancelledAtExit(logging.Filter):
    """Drops asyncio's "Exception in callback …" report of a connection task
    that mitmproxy's exit cancelled (its own, ~17 lines of ``CancelledError``
    traceback after Ctrl-C with a stream open); every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


def _quiet_cancelled_tasks() -> None:
    log = logging.getLogger("asyncio")
    if not any(isinstance(f, _CancelledAtExit) for f in log.filters):
        log.addFilter(_CancelledAtExit())


def _proxy_running() -> bool:
    """Whether mitmproxy is up (its proxy server started): an option rejected
    before that is a bad start, after it a change in mitmweb's options editor."""
    try:
        server = ctx.master.addons.get("proxyserver")
    except Exception:  # noqa: BLE001 - no master (tests, an unloaded addon)
        return True
    return server is None or bool(getattr(server, "is_running", True))


def _refuse(message: str) -> None:
    """A recorder that cannot start: one line on stderr and exit code 2, as every
    chatkit-trace command says a user mistake (not mitmproxy's traceback and
    "Error logged during startup", exit 1).  ``SystemExit`` passes through
    mitmproxy's script loader, which catches ``Exception`` only."""
    import sys

    print(f"chatkit-trace: cannot start recording: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _exiting() -> bool:
    """Whether mitmproxy is shutting down (its ``should_exit`` is set before
    the ``done`` hooks run; a script reload calls ``done`` without it)."""
    try:
        master = ctx.master
        return master is not None and master.should_exit.is_set()
    except Exception:  # noqa: BLE001 - no master (tests, an unloaded addon)
        return False


def _addon_notes(flow: http.HTTPFlow) -> dict[str, Any] | None:
    """What other addons left for the trace in ``flow.metadata``: the fault
    injection addon's ``chatkit_fault`` (which fault it applied where,
    docs/faults.md) becomes the exchange's ``notes.fault``.  A JSON copy,
    taken on the loop, since the writer thread stores it later."""
    fault = flow.metadata.get("chatkit_fault")
    if not fault:
        return None
    return {"fault": json.loads(json.dumps(fault, default=str))}


def _dropped(tap: _Tap | None) -> tuple[int, int] | None:
    if tap is None or not tap.dropped:
        return None
    return (tap.dropped, tap.dropped_bytes)


def _mitmproxy_version() -> str:
    try:
        from mitmproxy.version import VERSION

        return VERSION
    except Exception:  # noqa: BLE001 - a version string for the meta: never a reason not to record
        return "unknown"

