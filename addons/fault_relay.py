"""The fault relay: an aiohttp server on mitmproxy's own event loop.

Why a relay: mitmproxy 11's stream callable is synchronous and can only
return what it is given *now* (mitmproxy.md section 1; ``proxy/layers/http``
``state_stream_response_body``): it cannot send a held event later, end a
response early or drop the connection, and an addon cannot inject HTTP
response data (``inject.*`` commands exist for WebSocket, TCP and UDP
only).  So an exchange a stream rule targets is redirected, in the
``request`` hook, to this relay on 127.0.0.1 (the way mitmproxy's own
"redirect requests" example does it).  The relay calls the real backend
with aiohttp and writes the response back with asyncio timing: held events
are released by ``await asyncio.sleep``, a cut is ``transport.abort()``
(with ``SO_LINGER 0``: a reset) or a clean end of the body.  mitmproxy,
and the recording addon next to it, see the relay's response exactly as
the client gets it, so the trace holds the effect, and ``notes.fault``
the cause.

Exchanges no rule targets never come here: with no rule the addon does
nothing at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web
from yarl import URL

from chatkit_trace.capture._lines import install
from chatkit_trace.wire import NDJSON_CONTENT_TYPES

from .fault_rules import Rule
from .fault_stream import (
    END,
    RESET,
    Applied,
    BlockSplitter,
    Encoder,
    LineSplitter,
    Piece,
    Pump,
    can_reencode,
    sse_event_id,
)

try:  # Linux/BSD: how much the kernel still has to send
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]

__all__ = ["FLOW_HEADER", "MARK_HEADER", "Plan", "Relay"]

logger = install(logging.getLogger("chatkit_trace.faults"))  # lines masked, control characters shown

#: The request header that names the plan of a redirected exchange (removed by the relay).
FLOW_HEADER = "X-Chatkit-Fault-Flow"
#: The response header the relay adds: the rules acting on this exchange.
MARK_HEADER = "X-Chatkit-Fault"

_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authenticate",
    }
)
_WS_REQUEST_SKIP = _HOP | {
    "host",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "content-length",
}
_NDJSON = NDJSON_CONTENT_TYPES  # json-seq included (it was missing here)


@dataclass
class Plan:
    """One redirected exchange: where it really goes and what to do to it."""

    token: str
    scheme: str
    host: str
    port: int
    rules: list[tuple[Rule, Any]]
    notes: dict[str, Any]
    describe: str = ""
    on_applied: Callable[[dict[str, Any]], None] | None = None

    def url(self, raw_path: str, *, ws: bool = False) -> URL:
        scheme = self.scheme
        if ws:
            scheme = "wss" if scheme == "https" else "ws"
        default = 443 if self.scheme == "https" else 80
        hostport = self.host if self.port == default else f"{self.host}:{self.port}"
        if ":" in self.host and not self.host.startswith("["):
            hostport = f"[{self.host}]" if self.port == default else f"[{self.host}]:{self.port}"
        return URL(f"{scheme}://{hostport}{raw_path}", encoded=True)


class Relay:
    """The relay server (see the module docstring); ``await start()`` once, ``plans`` by token."""

    def __init__(self, *, ssl_insecure: bool = False) -> None:
        self.plans: dict[str, Plan] = {}
        self.port = 0
        self.ssl_insecure = ssl_insecure
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._starting: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> bool:
        return self._runner is not None and self.port != 0

    async def start(self) -> None:
        if self.running:
            return
        if self._starting is not None:
            await asyncio.shield(self._starting)
            return
        self._starting = asyncio.get_running_loop().create_future()
        try:
            app = web.Application(client_max_size=1024**3)
            app.router.add_route("*", "/{tail:.*}", self._handle)
            runner = web.AppRunner(
                app,
                access_log=None,
                handle_signals=False,
                auto_decompress=False,
                shutdown_timeout=0.5,
            )
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])
            self._runner = runner
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
            connector = aiohttp.TCPConnector(ssl=not self.ssl_insecure, limit=0)
            self._session = aiohttp.ClientSession(
                timeout=timeout,
                auto_decompress=False,
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            self._starting.set_result(None)
        except BaseException as err:
            self._starting.set_exception(err)
            self._starting = None
            raise

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        session, self._session = self._session, None
        runner, self._runner = self._runner, None
        self.port = 0
        self._starting = None
        if session is not None:
            await session.close()
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------ requests

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        plan = self.plans.get(request.headers.get(FLOW_HEADER, ""))
        if plan is None or self._session is None:
            return web.json_response(
                {
                    "error": "chatkit-trace fault relay: this request has no fault plan (was the proxy restarted?)"
                },
                status=502,
            )
        try:
            if request.headers.get("upgrade", "").lower() == "websocket":
                return await self._websocket(request, plan)
            return await self._http(request, plan)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - a bug here must not look like the backend's fault
            plan.notes["relay_error"] = f"{type(err).__name__}: {err}"
            logger.warning(
                f"chatkit-trace faults: relay error (the exchange is dropped): {type(err).__name__}: {err}"
            )
            _rst(request.transport)
            raise web.HTTPInternalServerError() from None

    def _forward_headers(self, request: web.Request, skip: frozenset[str]) -> list[tuple[str, str]]:
        out = []
        for k, v in request.raw_headers:
            name = k.decode("latin-1")
            low = name.lower()
            if low in skip or low == FLOW_HEADER.lower() or low == "content-length":
                continue
            out.append((name, v.decode("latin-1")))
        return out

    async def _http(self, request: web.Request, plan: Plan) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = self._forward_headers(request, _HOP)
        try:
            up = await self._session.request(
                request.method,
                plan.url(request.raw_path),
                headers=headers,
                data=body if body else None,
                allow_redirects=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            )
        except Exception as err:  # noqa: BLE001 - a dead backend: say so, as mitmproxy would (502)
            plan.notes["relay_error"] = f"{type(err).__name__}: {err}"
            return web.json_response(
                {"error": f"chatkit-trace fault relay: the backend is unreachable: {err}"},
                status=502,
            )
        try:
            return await self._stream_back(request, plan, up)
        finally:
            up.close()

    async def _stream_back(
        self, request: web.Request, plan: Plan, up: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        ctype = up.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        encoding = up.headers.get("content-encoding")
        kind = "sse" if ctype == "text/event-stream" else "ndjson" if ctype in _NDJSON else "raw"
        if kind != "raw" and not can_reencode(encoding):
            plan.notes["stream"] = "raw"
            plan.notes["encoding"] = (
                f"{encoding}: not separable into events here; only delay, stall and timed cuts act"
            )
            kind = "raw"
        else:
            plan.notes["stream"] = kind
            if encoding and kind != "raw":
                plan.notes["encoding"] = (
                    f"{encoding.strip()}: decoded to find events, re-encoded per event"
                )
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        for k, v in up.raw_headers:
            name = k.decode("latin-1")
            low = name.lower()
            if low in _HOP or (low == "content-length" and kind != "raw"):
                continue
            resp.headers.add(name, v.decode("latin-1"))
        resp.headers[MARK_HEADER] = plan.describe
        await resp.prepare(request)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        reader = asyncio.ensure_future(_read_http(up, kind, encoding, queue))
        self._tasks.add(reader)
        reader.add_done_callback(self._tasks.discard)
        sink = _HttpSink(request, resp, Encoder(encoding) if kind != "raw" else None)
        applied = Applied(plan.notes, time.monotonic(), plan.on_applied)
        pump = Pump(plan.rules, applied, sink)
        try:
            await pump.run(queue)  # completes plan.notes before its last write
        except ConnectionError:
            plan.notes["end"] = "client-gone"
            plan.notes["events"] = {"backend": pump.n, "client": pump.frames}
        finally:
            reader.cancel()
        return resp

    # ------------------------------------------------------------------ WebSocket

    async def _websocket(self, request: web.Request, plan: Plan) -> web.StreamResponse:
        assert self._session is not None
        protocols = [
            p.strip()
            for p in request.headers.get("sec-websocket-protocol", "").split(",")
            if p.strip()
        ]
        headers = self._forward_headers(request, _WS_REQUEST_SKIP)
        try:
            up = await self._session.ws_connect(
                plan.url(request.raw_path, ws=True),
                headers=headers,
                protocols=protocols,
                max_msg_size=0,
                autoping=True,
            )
        except aiohttp.WSServerHandshakeError as err:
            plan.notes["relay_error"] = f"WebSocket handshake refused: {err.status} {err.message}"
            return web.json_response(
                {"error": f"the backend refused the WebSocket: {err.message}"},
                status=err.status or 502,
            )
        except Exception as err:  # noqa: BLE001 - any upstream failure is the relay's 502, noted on the plan
            plan.notes["relay_error"] = f"{type(err).__name__}: {err}"
            return web.json_response(
                {"error": f"chatkit-trace fault relay: the backend is unreachable: {err}"},
                status=502,
            )
        ws = web.WebSocketResponse(
            protocols=[up.protocol] if up.protocol else (), max_msg_size=0, autoping=True
        )
        ws.headers[MARK_HEADER] = plan.describe
        await ws.prepare(request)
        plan.notes["stream"] = "ws"
        queue: asyncio.Queue[Any] = asyncio.Queue()
        reader = asyncio.ensure_future(_read_ws(up, queue))
        upward = asyncio.ensure_future(_client_to_backend(ws, up))
        for t in (reader, upward):
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)
        sink = _WsSink(request, ws, up)
        pump = Pump(plan.rules, Applied(plan.notes, time.monotonic(), plan.on_applied), sink)
        try:
            await pump.run(queue)  # completes plan.notes before its last write
        except ConnectionError:
            plan.notes["end"] = "client-gone"
            plan.notes["events"] = {"backend": pump.n, "client": pump.frames}
        finally:
            reader.cancel()
            upward.cancel()
            if not up.closed:
                with contextlib.suppress(Exception):
                    await up.close()
        return ws


# ---------------------------------------------------------------------- readers


async def _read_http(
    up: aiohttp.ClientResponse, kind: str, encoding: str | None, queue: asyncio.Queue[Any]
) -> None:
    """The backend's body -> pieces on ``queue``, then END (clean) or RESET (broken)."""
    from chatkit_trace.wire import make_decoder

    loop = asyncio.get_running_loop()
    decoder = make_decoder(encoding) if kind != "raw" else None
    splitter: BlockSplitter | LineSplitter | None = (
        BlockSplitter() if kind == "sse" else LineSplitter() if kind == "ndjson" else None
    )

    def put_blocks(blocks: list[bytes], t: float) -> None:
        for block in blocks:
            if kind == "sse":
                event, eid = sse_event_id(block)
            else:
                event, eid = bool(block.strip()), None
            queue.put_nowait(Piece(block, event, t, eid, kind))

    try:
        async for chunk in up.content.iter_any():
            t = loop.time()
            if splitter is None or decoder is None:
                queue.put_nowait(Piece(chunk, False, t, None, "raw"))
                continue
            put_blocks(splitter.feed(decoder.decode(chunk)), t)
        if splitter is not None and decoder is not None:
            t = loop.time()
            put_blocks(splitter.feed(decoder.flush()), t)
            rest = splitter.flush()
            if rest:
                queue.put_nowait(Piece(rest, False, t, None, kind))
        queue.put_nowait(END)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - the backend's connection broke: mirror it
        if splitter is not None:
            rest = splitter.flush()
            if rest:
                queue.put_nowait(Piece(rest, False, loop.time(), None, kind))
        queue.put_nowait(RESET)


async def _read_ws(up: aiohttp.ClientWebSocketResponse, queue: asyncio.Queue[Any]) -> None:
    loop = asyncio.get_running_loop()
    try:
        async for msg in up:
            if msg.type == WSMsgType.TEXT:
                queue.put_nowait(
                    Piece(msg.data.encode("utf-8"), True, loop.time(), None, "ws", text=True)
                )
            elif msg.type == WSMsgType.BINARY:
                queue.put_nowait(Piece(bytes(msg.data), True, loop.time(), None, "ws"))
            elif msg.type == WSMsgType.ERROR:
                queue.put_nowait(RESET)
                return
        queue.put_nowait(END if up.close_code in (None, 1000, 1001) else RESET)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - any upstream failure resets the client's socket, as a real proxy would
        queue.put_nowait(RESET)


async def _client_to_backend(
    ws: web.WebSocketResponse, up: aiohttp.ClientWebSocketResponse
) -> None:
    """Client messages go to the backend untouched; the client's close closes the backend side."""
    with contextlib.suppress(Exception):
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await up.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await up.send_bytes(msg.data)
        await up.close(code=ws.close_code or 1000)


# ---------------------------------------------------------------------- sinks


async def _flushed(transport: asyncio.BaseTransport | None, limit: float = 1.0) -> None:
    """Wait (at most ``limit``) until what was written reached the peer, so a
    reset comes after the last event and never takes it with it: the asyncio
    buffer is empty and, where the OS says (Linux ``TIOCOUTQ``), the kernel
    has no unacknowledged bytes left (``SO_LINGER 0`` discards those)."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    end = time.monotonic() + limit
    while time.monotonic() < end:
        size = getattr(transport, "get_write_buffer_size", lambda: 0)()
        if not size and not _unsent(sock):
            return
        await asyncio.sleep(0.002)


def _unsent(sock: Any) -> int:
    """Bytes the kernel has not delivered yet (0 where it cannot tell)."""
    if sock is None or not hasattr(termios, "TIOCOUTQ"):
        return 0
    try:
        buf = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
        return int(struct.unpack("i", buf)[0])
    except (OSError, ValueError):
        return 0


def _rst(transport: asyncio.BaseTransport | None) -> None:
    """Drop the connection with a TCP reset (SO_LINGER 0), not a clean FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()  # type: ignore[attr-defined]


class _HttpSink:
    def __init__(
        self, request: web.Request, resp: web.StreamResponse, encoder: Encoder | None
    ) -> None:
        self.request = request
        self.resp = resp
        self.encoder = encoder

    async def send(self, piece: Piece) -> None:
        data = piece.data if self.encoder is None else self.encoder.encode(piece.data)
        if data:
            await self.resp.write(data)

    async def end(self) -> None:
        if self.encoder is not None:
            tail = self.encoder.finish()
            if tail:
                await self.resp.write(tail)
        await self.resp.write_eof()

    async def close(self) -> None:
        await self.end()

    async def reset(self) -> None:
        transport = self.request.transport
        await _flushed(transport)
        _rst(transport)


class _WsSink:
    def __init__(
        self, request: web.Request, ws: web.WebSocketResponse, up: aiohttp.ClientWebSocketResponse
    ) -> None:
        self.request = request
        self.ws = ws
        self.up = up

    async def send(self, piece: Piece) -> None:
        if piece.text:
            try:
                text = piece.data.decode("utf-8")
            except UnicodeDecodeError:  # corrupt:how=utf8 — a text frame that is not UTF-8
                await self.ws.send_frame(piece.data, WSMsgType.TEXT)
                return
            await self.ws.send_str(text)
        else:
            await self.ws.send_bytes(piece.data)

    async def end(self) -> None:
        code = self.up.close_code or 1000
        await self.ws.close(code=code)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.up.close()
        await self.ws.close(code=1000, message=b"chatkit-trace fault: cut")

    async def reset(self) -> None:
        with contextlib.suppress(Exception):
            await self.up.close()
        transport = self.request.transport
        await _flushed(transport)
        _rst(transport)
