"""``chatkit-trace import``: HAR files and mitmproxy flow files -> a trace.

Reads what users already have, producing the trace a live recording of the
same traffic would have produced: one exchange per HTTP request (or
WebSocket connection) in request order, frames from its stream, identity
from the route profile, redaction on by default, then facts and results by
replaying through the profile's adapter and the Core, a session at a time
(the derive engine, :class:`chatkit_trace.derive.Deriver`).

Inputs
------
* **HAR 1.2** as Chrome / Firefox DevTools and mitmproxy (``--set
  hardump=FILE``) export it: ``log.entries`` (sorted here by
  ``startedDateTime``: mitmproxy writes entries as flows *end*),
  request/response headers (HTTP/2 pseudo-headers dropped),
  ``postData.text``, ``response.content.text`` (base64 when ``encoding`` is
  ``base64``; always *decoded* text, so ``Content-Encoding`` is not applied
  again), ``text/event-stream`` and NDJSON bodies, Chrome's
  ``_webSocketMessages``, ``timings`` and ``time``.
* **mitmproxy flow files** (``mitmdump -w FILE``), read with
  ``mitmproxy.io.FlowReader``: HTTP flows and WebSocket flows with their
  messages.  A response that was *streamed* through mitmproxy has no body in
  a flow file; the exchange says so in ``notes["body"]``.

Times: a HAR or flow file has no per-event arrival times for HTTP bodies,
so a body's frames are spread evenly from the first response byte to the
end of the exchange (one frame: at the first byte).  WebSocket messages keep
their own times.  Analysis that depends on exact inter-frame timing (CK6xx)
is therefore approximate for imports; ordering relative to other exchanges
(a stop request in the middle of a stream) is kept.

Nothing half-written: the CLI writes to a temporary file next to the output
and renames it at the end; an existing output is refused without
``--force``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core import ChatkitTraceError
from ..errors import TraceImportError, UsageError
from ..masking import keep_derived_secrets
from ..route import (
    Profile,
    ProfileError,
    Redactor,
    Router,
    classify_end,
    load_profile,
    proxy_answered,
    websocket_close_notes,
)
from ..trace import Exchange, frames_from_body
from ..wire import Frame, content_transport, frames_from_har, replace_frame, ws_frame

#: the name this error had before ``chatkit_trace.errors`` (kept for old imports)
ImportError_ = TraceImportError

__all__ = ["ImportError_", "ImportResult", "import_file", "read_exchanges", "read_har", "read_flows", "add_parser", "run"]

Progress = Callable[[int, int], None]


@dataclass
class ImportResult:
    """What one import did."""

    source: str
    format: str  # "har" | "flows"
    profile: str
    exchanges: int = 0
    matched: int = 0
    frames: int = 0
    facts: int = 0
    rejected: int = 0
    sessions: int = 0
    runs: int = 0
    redacted: int = 0
    notes: list[str] = field(default_factory=list)
    #: what streamed traffic the profile did not match looks like (capture.detect)
    unmatched: str | None = None

    def summary(self) -> str:
        return (
            f"imported {self.exchanges} exchanges ({self.matched} matched by profile {self.profile!r}) "
            f"from {self.source} ({self.format}): {self.frames} frames, {self.sessions} sessions, "
            f"{self.runs} runs, {self.facts} facts, {self.rejected} rejected"
            + (f"; redacted {self.redacted} exchanges" if self.redacted else "")
        )


# -- transports ------------------------------------------------------------------------------



def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    lname = name.lower()
    for k, v in headers:
        if k.lower() == lname:
            return v
    return None


def _spread(frames: list[Frame], first: float, last: float) -> list[Frame]:
    if len(frames) <= 1:
        return [replace_frame(f, at=first) for f in frames]
    step = max(last - first, 0.0) / (len(frames) - 1)
    return [replace_frame(f, at=first + i * step) for i, f in enumerate(frames)]


def _body_frames(ex: Exchange, body: bytes | None, first: float, last: float) -> None:
    """Frames of a recorded HTTP body (decoded bytes), as the recorder makes them."""
    ctype = ex.header("content-type", response=True)
    transport = content_transport(ctype)
    if transport is None:
        ex.response_body = body
        return
    ex.transport = transport
    ex.end = ex.end or "complete"
    if body is None:
        return
    frames = frames_from_body(body, ex.index, transport=transport, at=first)
    ex.frames = _spread(frames, first, last)


def _ended(ex: Exchange, error: str, *, had_response: bool) -> None:
    """A transport error ended the exchange: its end kind as the live recorder
    says it (:func:`~chatkit_trace.route.classify_end`); before any response
    the proxy answered the client itself (502), as a live recording stores it."""
    ex.error = error
    ex.end = classify_end(error, had_response=had_response)
    if proxy_answered(ex.end, had_response=had_response) and ex.status is None:
        ex.status = 502
        ex.notes["status_from"] = "proxy"


# -- HAR -------------------------------------------------------------------------------------


def _har_time(value: Any) -> float:
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _ms(value: Any) -> float:
    return float(value) / 1000.0 if isinstance(value, int | float) and value > 0 else 0.0


def _har_headers(items: Any) -> list[tuple[str, str]]:
    out = []
    for h in items if isinstance(items, list) else ():
        if isinstance(h, Mapping) and isinstance(h.get("name"), str):
            name = h["name"]
            if name.startswith(":"):
                continue  # HTTP/2 pseudo-headers: not headers a proxy sees as such
            out.append((name, str(h.get("value", ""))))
    return out


def _har_text(content: Any) -> bytes | None:
    if not isinstance(content, Mapping) or "text" not in content:
        return None
    text = content.get("text")
    if not isinstance(text, str):
        return None
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=False)
        except (binascii.Error, ValueError):
            return text.encode("utf-8", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")


def _har_post(request: Mapping[str, Any]) -> bytes | None:
    post = request.get("postData")
    if not isinstance(post, Mapping):
        return None
    text = post.get("text")
    if isinstance(text, str):
        if post.get("encoding") == "base64":  # not HAR 1.2, but some tools write it
            try:
                return base64.b64decode(text)
            except (binascii.Error, ValueError):
                pass
        return text.encode("utf-8", "surrogatepass")
    params = post.get("params")
    if isinstance(params, list) and params:
        from urllib.parse import urlencode

        return urlencode([(p.get("name", ""), p.get("value", "")) for p in params if isinstance(p, Mapping)]).encode()
    return None


def read_har(path: str | Path, data: bytes | None = None) -> list[Exchange]:
    """The exchanges of a HAR file (raw: not matched, not redacted), in request order."""
    path = Path(path)
    raw = data if data is not None else path.read_bytes()
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ImportError_(f"{path}: not JSON ({err})") from None
    log = doc.get("log") if isinstance(doc, Mapping) else None
    entries = log.get("entries") if isinstance(log, Mapping) else None
    if not isinstance(entries, list):
        raise ImportError_(f"{path}: not a HAR file (no log.entries list)")
    rows: list[tuple[float, int, Mapping[str, Any]]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("request"), Mapping):
            raise ImportError_(f"{path}: log.entries[{i}] is not a HAR entry (no request)")
        rows.append((_har_time(entry.get("startedDateTime")), i, entry))
    rows.sort(key=lambda r: (r[0], r[1]))
    out: list[Exchange] = []
    for index, (start, i, entry) in enumerate(rows):
        try:
            out.append(_har_exchange(index, start, i, entry))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ImportError_(f"{path}: log.entries[{i}] cannot be read ({type(err).__name__}: {err})") from None
    return out


def _har_exchange(index: int, start: float, i: int, entry: Mapping[str, Any]) -> Exchange:
    req = entry["request"]
    got, tim = entry.get("response"), entry.get("timings")
    resp: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    timings: Mapping[str, Any] = tim if isinstance(tim, Mapping) else {}
    ttfb = sum(_ms(timings.get(k)) for k in ("blocked", "dns", "connect", "send", "wait"))
    total = _ms(entry.get("time"))
    first = start + ttfb
    end = start + max(total, ttfb)
    status = resp.get("status") if isinstance(resp.get("status"), int) else None
    ex = Exchange(
        index,
        method=str(req.get("method") or "GET").upper(),
        url=str(req.get("url") or ""),
        started_at=start,
        ended_at=end,
        request_headers=_har_headers(req.get("headers")),
        request_body=_har_post(req) or None,
        status=status if status else None,
        response_headers=_har_headers(resp.get("headers")),
        flow_id=str(entry.get("_requestId") or entry.get("_id") or f"har:{i}"),
    )
    error = resp.get("_error") or entry.get("_error")
    if isinstance(error, str) and error:
        _ended(ex, error, had_response=bool(status))  # HAR: status 0 is no response
    messages = entry.get("_webSocketMessages")
    if isinstance(messages, list) or status == 101:
        ex.transport = "ws"
        ex.frames = frames_from_har(messages if isinstance(messages, list) else [], index)
        if ex.frames:
            ex.ended_at = max(end, max(f.at for f in ex.frames))
        ex.end = ex.end or "complete"
        return ex
    body = _har_text(resp.get("content"))
    if body is None and status and content_transport(ex.header("content-type", response=True)):
        ex.notes["body"] = "not in the HAR file (the browser did not keep the streamed body)"
    _body_frames(ex, body, first, end)
    return ex


# -- mitmproxy flow files ---------------------------------------------------------------------


def read_flows(path: str | Path) -> list[Exchange]:
    """The exchanges of a mitmproxy flow file (``mitmdump -w``), in request order."""
    path = Path(path)
    try:
        from mitmproxy import exceptions, http, io
    except ImportError as err:  # pragma: no cover - mitmproxy is a dependency
        raise ImportError_(f"{path}: reading flow files needs mitmproxy ({err})") from None
    flows = []
    try:
        with path.open("rb") as fo:
            for f in io.FlowReader(fo).stream():
                flows.append(f)
    except exceptions.FlowReadException as err:
        raise ImportError_(
            f"{path}: not a complete mitmproxy flow file ({err}; read {len(flows)} flows before the problem)"
        ) from None
    except (ValueError, TypeError, KeyError, IndexError, EOFError) as err:
        raise ImportError_(f"{path}: not a complete mitmproxy flow file ({type(err).__name__}: {err})") from None
    https = [f for f in flows if isinstance(f, http.HTTPFlow)]
    https.sort(key=lambda f: (f.request.timestamp_start or 0.0))
    return [_flow_exchange(i, f) for i, f in enumerate(https)]


def _decoded(message: Any) -> tuple[bytes | None, str | None]:
    """(decoded body, note) of a mitmproxy request/response."""
    if message.raw_content is None:
        return None, "not in the flow file (the body was streamed through mitmproxy, and flow files keep no streamed bodies)"
    try:
        return message.get_content(strict=True), None
    except ValueError:
        return message.raw_content, "Content-Encoding could not be decoded: stored as received"


def _flow_exchange(index: int, f: Any) -> Exchange:
    req = f.request
    resp = f.response
    start = req.timestamp_start or 0.0
    body, note = _decoded(req)
    ex = Exchange(
        index,
        method=req.method.upper(),
        url=req.pretty_url,
        started_at=start,
        ended_at=None,
        request_headers=list(req.headers.items(multi=True)),
        request_body=body or None,
        status=resp.status_code if resp is not None else None,
        response_headers=list(resp.headers.items(multi=True)) if resp is not None else [],
        flow_id=f.id,
    )
    if note and body is None and req.method.upper() in ("POST", "PUT", "PATCH"):
        ex.notes["request_body"] = note
    if f.error is not None:
        _ended(ex, f.error.msg, had_response=resp is not None)
    if f.websocket is not None:
        ws = f.websocket
        ex.transport = "ws"
        ex.frames = [
            ws_frame(m.content, m.is_text, m.from_client, m.timestamp, index, i) for i, m in enumerate(ws.messages)
        ]
        ex.ended_at = ws.timestamp_end or (ex.frames[-1].at if ex.frames else None)
        if ex.end is None:
            ex.end = classify_end(None, had_response=True, websocket=True, close_code=ws.close_code,
                                  closed_by_client=ws.closed_by_client)
        ex.notes.update(websocket_close_notes(ws.close_code, ws.closed_by_client, ws.close_reason))
        return ex
    if resp is None:
        ex.ended_at = f.error.timestamp if f.error is not None else None
        return ex
    first = resp.timestamp_start or start
    last = resp.timestamp_end or (f.error.timestamp if f.error is not None else first)
    ex.ended_at = last
    rbody, rnote = _decoded(resp)
    if rnote:
        ex.notes["body"] = rnote
    _body_frames(ex, rbody, first, last)
    return ex


# -- reading either --------------------------------------------------------------------------


def sniff_format(path: str | Path) -> str:
    """``har`` or ``flows`` from the file's first bytes; :class:`ImportError_` otherwise."""
    path = Path(path)
    with path.open("rb") as fo:
        head = fo.read(64)
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not stripped:
        raise ImportError_(f"{path}: empty file: neither a HAR file nor a mitmproxy flow file")
    if stripped[:1] == b"{":
        return "har"
    if stripped[:1].isdigit() and b":" in stripped[:12]:
        return "flows"
    if stripped[:1] == b"[":
        raise ImportError_(f"{path}: JSON, but not a HAR file (a HAR file is an object with log.entries)")
    if head.startswith(b"SQLite format 3\x00"):
        raise ImportError_(f"{path}: a SQLite database, not a HAR or flow file (a trace is read by check/view as it is)")
    raise ImportError_(f"{path}: not a HAR or flow file (neither HAR JSON nor a mitmproxy flow file from mitmdump -w)")


def read_exchanges(path: str | Path, fmt: str = "auto") -> tuple[str, list[Exchange]]:
    """``(format, exchanges)`` of a HAR or flow file (raw: not matched, not redacted)."""
    path = Path(path)
    if not path.exists():
        raise ImportError_(f"{path}: no such file")
    if path.is_dir():
        raise ImportError_(f"{path}: is a directory, not a HAR or flow file")
    if fmt == "auto":
        fmt = sniff_format(path)
    if fmt == "har":
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        return fmt, read_har(path, data)
    if fmt == "flows":
        return fmt, read_flows(path)
    raise ImportError_(f"unknown input format {fmt!r} (har, flows or auto)")


# -- routing, redaction, store ------------------------------------------------------------------


def import_file(
    path: str | Path,
    profile: Profile | str,
    store: Any,
    *,
    redact: bool = True,
    extra_redact: str | list[str] | None = None,
    fmt: str = "auto",
    progress: Progress | None = None,
) -> ImportResult:
    # long-function: one import (read, classify, store, derive) in the order its progress reports
    """Import a HAR or flow file into ``store`` (a :class:`~chatkit_trace.store.TraceStore`).

    ``profile`` is a :class:`Profile` or a name/path for :func:`load_profile`.
    Redaction follows the profile's ``redact`` config (plus
    ``extra_redact`` names); ``redact=False`` keeps secrets.  ``progress``
    is called with (done, total) as exchanges are stored.  The store is
    committed; its derived tables hold the replay's facts and results.
    """
    from ..derive import Deriver

    if isinstance(profile, str):
        profile = load_profile(profile)
    path = Path(path)
    fmt, exchanges = read_exchanges(path, fmt)
    try:
        adapter = profile.create_adapter()
    except (TypeError, ChatkitTraceError) as err:
        raise ImportError_(f"profile {profile.name!r}: its adapter {profile.protocol!r} cannot be used ({err})") from None
    result = ImportResult(str(path), fmt, profile.name)
    config = profile.redact
    if not redact:
        config = config.model_copy(update={"keep_secrets": True})
    redactor = Redactor.from_config(config, extra_redact)
    keep_derived_secrets(redactor.keep_secrets and not extra_redact)  # derived rows as the frames: masked unless kept
    Router(profile).route_all(exchanges)  # identity from the raw traffic, in request order; stored redacted below
    total = len(exchanges)
    start_index = store.next_exchange_index()
    if start_index:
        raise ImportError_(f"{store.path}: already holds a recording; import into a new file")
    for ex in exchanges:  # first learn every secret, so a value is masked even before the request that sent it
        redactor.learn_exchange(ex)
    for n, ex in enumerate(exchanges, 1):
        stored = redactor.redact_exchange(ex)
        if "redacted" in stored.notes:
            result.redacted += 1
        store.add_exchange(stored)
        result.exchanges += 1
        result.matched += ex.capability is not None
        result.frames += len(ex.frames)
        if progress is not None:
            progress(n, total)
        for key in ("body", "request_body"):
            if key in ex.notes:
                result.notes.append(f"exchange {ex.index} ({ex.method} {ex.path}): {key.replace('_', ' ')} {ex.notes[key]}")
    store.set_meta("source", {"kind": "import", "file": str(path), "format": fmt})
    store.set_meta("profile", profile.name)
    store.set_meta("protocol", profile.protocol)
    store.set_meta("capabilities", list(profile.capabilities))
    store.set_meta("profile_spec", profile.model_dump(mode="json", by_alias=True))
    store.set_meta("redaction", "off" if redactor.keep_secrets and not extra_redact else "on")
    store.commit()
    streamed = [e for e in exchanges if e.capability is None and (e.frames or e.transport in ("sse", "ndjson", "ws"))]
    if streamed:
        from .detect import describe_routes, guess_profile, unmatched_hint

        guess = guess_profile(streamed, exclude=profile.name)
        result.unmatched = unmatched_hint(profile.name, describe_routes(streamed), guess) + " (kept, not decoded)"
    # The derived tables as the recorder writes them (no findings: ``check`` says those).
    sessions: set[str] = set()

    def count(derived: Any) -> None:
        sessions.update(derived.replay.sessions)
        result.runs += sum(len(s.run_views()) for s in derived.replay.sessions.values())

    derived = Deriver(store, adapter, capabilities=profile.capabilities).run(write_to=store, analyse=False, on_session=count)
    store.commit()
    result.facts = derived.counts["facts"]
    result.rejected = derived.counts["violations"]
    result.sessions = len(sessions)
    return result


# -- the command ------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="import a HAR file or a mitmproxy flow file into a trace",
        description=(
            "Import a HAR 1.2 file (Chrome/Firefox DevTools, mitmproxy --set hardump=FILE) or a "
            "mitmproxy flow file (mitmdump -w FILE) into a trace database, as a live recording of "
            "that traffic would be: matched by the route profile, redacted by default, decoded and "
            "admitted through the profile's adapter and the Core."
        ),
    )
    p.add_argument("file", metavar="FILE", help="a .har file or a mitmproxy flow file")
    p.add_argument("--profile", "-p", required=True, metavar="P",
                   help="a preset (openai, adk, a2a, hermes, myproto) or a profile file (.toml/.json)")
    p.add_argument("--profile-overrides", metavar="FILE_OR_TOML", default=None,
                   help="overrides applied on top of the profile (a file, or inline TOML/JSON)")
    p.add_argument("-o", "--output", metavar="TRACE.db", default=None,
                   help="the trace database to write (default: FILE with the suffix .db)")
    p.add_argument("--force", action="store_true", help="replace the output if it exists")
    p.add_argument("--format", choices=("auto", "har", "flows"), default="auto", help="input format (default: sniffed)")
    p.add_argument("--redact", action="append", default=[], metavar="NAME",
                   help="also redact this header/parameter/field (header:X, query:X, field:X to be specific); repeatable")
    p.add_argument("--keep-secrets", action="store_true",
                   help="store Authorization, cookies, tokens … as they were (redaction is on by default)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    p.set_defaults(run=run)


def _usage(message: str) -> Exception:

    return UsageError(message)


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def run(args: argparse.Namespace) -> int:
    # long-function: the import command: each bad input's one-line error next to its check
    from ..store import TraceStore

    src = Path(args.file)
    if not src.exists():
        raise _usage(f"{src}: no such file")
    if src.is_dir():
        raise _usage(f"{src}: is a directory, not a HAR or flow file")
    if not src.is_file():
        raise _usage(f"{src}: is not a regular file (a FIFO, a device): give a HAR or flow file")
    if args.format == "auto":
        try:
            sniff_format(src)  # what the input is comes first: notsqlite.db is not a HAR or flow file
        except ImportError_ as err:
            raise _usage(str(err)) from None
    out = Path(args.output) if args.output else src.with_suffix(".db")
    if out.resolve() == src.resolve():
        raise _usage(f"{out}: the output would overwrite the input; choose another -o")
    if out.exists() and not args.force:
        raise _usage(f"{out} exists: use --force to replace it, or choose another -o")
    if out.is_dir():
        raise _usage(f"{out}: is a directory")
    try:
        profile = load_profile(args.profile, args.profile_overrides)
    except ProfileError as err:
        raise _usage(str(err)) from None
    if not out.parent.exists():
        raise _usage(f"{out.parent}: no such directory for the output")
    tmp = out.with_name(f".{out.name}.importing-{os.getpid()}")
    _remove(tmp)
    show = not args.quiet and sys.stderr.isatty()
    progress_ctx = None
    update: Progress | None = None
    if show:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress_ctx = Progress(TextColumn("importing {task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                console=Console(stderr=True), transient=True)
        task = progress_ctx.add_task(src.name, total=None)

        def update(done: int, total: int) -> None:
            progress_ctx.update(task, completed=done, total=total)

    store = None
    try:
        store = TraceStore(tmp, create=True)
        if progress_ctx is not None:
            progress_ctx.start()
        try:
            result = import_file(
                src, profile, store, redact=not args.keep_secrets, extra_redact=args.redact or None,
                fmt=args.format, progress=update,
            )
        finally:
            if progress_ctx is not None:
                progress_ctx.stop()
        store.set_meta("output", str(out))
        store.close()  # committed and settled: one file, no -wal/-shm to leave behind
        store = None
        if out.exists():
            _remove(out)
        os.replace(tmp, out)
    except ImportError_ as err:
        raise _usage(str(err)) from None
    finally:
        if store is not None:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - closing after a failure: the error that got here is the one to say
                pass
        _remove(tmp)
    if result.unmatched:
        # Kept, and decoded later with --profile: the sentence check would say.
        print(f"chatkit-trace import: note: {result.unmatched}", file=sys.stderr)
    if not args.quiet:
        print(result.summary() + f" -> {out}")
        for note in result.notes[:5]:
            print(f"note: {note}", file=sys.stderr)
        if len(result.notes) > 5:
            print(f"note: … and {len(result.notes) - 5} more exchanges without a stored body", file=sys.stderr)
    return 0
