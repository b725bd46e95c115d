"""A real aiohttp chat backend on 127.0.0.1 for the recorder's integration tests.

It speaks chatkit's example protocol (``myproto``: ``POST
/sessions/{sid}/runs`` streams ``id:`` + ``data:`` events, ``GET
/sessions/{sid}/runs`` is the history, ``POST …/stop``, ``GET
…/events?after=``), plus a WebSocket, NDJSON and chunked text endpoints and
an echo.  It runs on its own event loop in a thread, and keeps the exact
bytes it wrote for every response (``sent[key]``, the key being the
request's ``X-Test-Key`` header or its run id), so a test can compare them
with what the client received through the proxy.

Query parameters of a run: ``n`` events (default 5), ``delay`` seconds
between writes, ``enc`` (``gzip``, ``br``, ``zstd``, ``deflate``), ``split``
(``event``: one write per event, ``tiny``: 7-byte writes, ``bulk``: one
write), ``reset_after`` (abort the connection after that many events),
``hold`` (wait for ``POST /release/{key}`` after the first event), ``late``
(one more text event after ``done``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import WSMsgType, web


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_events(run_id: str, n: int, *, pad: int = 0) -> list[dict[str, Any]]:
    """The myproto events of one run: started, text…, done."""
    events: list[dict[str, Any]] = [{"type": "started", "run": run_id}]
    for i in range(1, max(n, 2) - 1):
        events.append({"type": "text", "text": f"{run_id}:{i} " + "x" * pad})
    events.append({"type": "done"})
    return events


def sse(i: int, event: dict[str, Any]) -> bytes:
    return f"id: e{i}\ndata: {json.dumps(event)}\n\n".encode()


class _Encoder:
    def __init__(self, enc: str | None) -> None:
        self.enc = enc
        if enc == "gzip":
            self._z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.compressobj()
        elif enc == "br":
            import brotli

            self._b = brotli.Compressor()
        elif enc == "zstd":
            import zstandard

            self._zc = zstandard.ZstdCompressor().compressobj()

    def step(self, data: bytes) -> bytes:
        if self.enc in ("gzip", "deflate"):
            return self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        if self.enc == "br":
            return self._b.process(data) + self._b.flush()
        if self.enc == "zstd":
            import zstandard

            return self._zc.compress(data) + self._zc.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        return data

    def end(self) -> bytes:
        if self.enc in ("gzip", "deflate"):
            return self._z.flush()
        if self.enc == "br":
            return self._b.finish()
        if self.enc == "zstd":
            return self._zc.flush()
        return b""


class ServerThread:
    """An aiohttp application on its own event loop in a thread, listening on
    127.0.0.1 (``url``, ``start()``, ``stop()``); a subclass adds its
    ``routes`` and may cancel its long-lived handlers in ``closing``."""

    name = "backend"

    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name=self.name, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, router: web.UrlDispatcher) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _start(self) -> None:
        app = web.Application()
        self.routes(app.router)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def closing(self) -> None:
        """Before the server closes: its long-lived handlers end."""
        for t in list(self._tasks):
            t.cancel()

    def stop(self) -> None:
        async def _stop() -> None:
            await self.closing()
            if self._runner is not None:
                await self._runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


class Backend(ServerThread):
    """The server (see the module docstring); use :func:`backend`."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, bytearray] = {}
        self.seen: list[dict[str, Any]] = []  # requests as the backend saw them
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.ws_received: list[Any] = []
        self.release: dict[str, asyncio.Event] = {}

    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_post("/sessions/{sid}/runs", self.run)
        r.add_get("/sessions/{sid}/runs", self.get_history)
        r.add_post("/sessions/{sid}/runs/{rid}/stop", self.stop_run)
        r.add_get("/sessions/{sid}/runs/{rid}/events", self.resume)
        r.add_post("/release/{key}", self.do_release)
        r.add_get("/ws", self.ws)
        r.add_post("/ndjson", self.ndjson)
        r.add_get("/plain", self.plain)
        r.add_route("*", "/echo", self.echo)

    # -- helpers -----------------------------------------------------------------------

    def _note(self, request: web.Request, body: bytes) -> None:
        self.seen.append(
            {
                "method": request.method,
                "path": request.path_qs,
                "headers": list(request.headers.items()),
                "body": body,
            }
        )

    async def _write(self, resp: web.StreamResponse, key: str, data: bytes, split: str) -> None:
        if not data:
            return
        self.sent.setdefault(key, bytearray()).extend(data)
        if split == "tiny":
            for i in range(0, len(data), 7):
                await resp.write(data[i : i + 7])
        else:
            await resp.write(data)

    # -- handlers ----------------------------------------------------------------------

    async def run(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self._note(request, raw)
        body = json.loads(raw) if raw else {}
        sid = request.match_info["sid"]
        run_id = body.get("runId") or f"srv{len(self.seen)}"
        key = request.headers.get("X-Test-Key", run_id)
        q = request.query
        events = run_events(run_id, int(q.get("n", 5)), pad=int(q.get("pad", 0)))
        if q.get("late"):  # a chunk after the terminal (CK101)
            events.append({"type": "text", "text": "late"})
        self.history.setdefault(sid, []).append(
            {"id": run_id, "status": "completed", "input": body.get("text", ""), "created_at": int(time.time() * 1000),
             "frames": [{"id": f"e{i}", "event": ev} for i, ev in enumerate(events)]}
        )
        return await self._stream(request, key, events, 0)

    async def resume(self, request: web.Request) -> web.StreamResponse:
        self._note(request, b"")
        rid = request.match_info["rid"]
        after = request.query.get("after") or request.headers.get("Last-Event-ID") or "e-1"
        start = int(after[1:]) + 1
        events = run_events(rid, int(request.query.get("n", 5)))
        key = request.headers.get("X-Test-Key", f"resume:{rid}")
        return await self._stream(request, key, events[start:], start)

    async def _stream(self, request: web.Request, key: str, events: list[dict[str, Any]], first: int) -> web.StreamResponse:
        q = request.query
        enc = q.get("enc") or None
        split = q.get("split", "event")
        delay = float(q.get("delay", 0))
        reset_after = int(q["reset_after"]) if "reset_after" in q else None
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if enc:
            headers["Content-Encoding"] = enc
        if "cookie" in q:
            headers["Set-Cookie"] = f"session={q['cookie']}; HttpOnly"
        resp = web.StreamResponse(headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        coder = _Encoder(enc)
        self.sent[key] = bytearray()
        bulk = bytearray()
        for i, ev in enumerate(events):
            if reset_after is not None and i == reset_after:
                await asyncio.sleep(0.05)
                assert request.transport is not None
                request.transport.abort()  # RST mid-body: no terminating chunk
                return resp
            data = coder.step(sse(first + i, ev))
            if split == "bulk":
                bulk += data
            else:
                await self._write(resp, key, data, split)
            if i == 0 and "hold" in q:
                ev_ = self.release.setdefault(key, asyncio.Event())
                await asyncio.wait_for(ev_.wait(), 10)
            if delay:
                await asyncio.sleep(delay)
        await self._write(resp, key, bytes(bulk) + coder.end(), split)
        await resp.write_eof()
        return resp

    async def do_release(self, request: web.Request) -> web.Response:
        self.release.setdefault(request.match_info["key"], asyncio.Event()).set()
        return web.json_response({"released": True})

    async def get_history(self, request: web.Request) -> web.Response:
        self._note(request, b"")
        return web.json_response({"runs": self.history.get(request.match_info["sid"], [])})

    async def stop_run(self, request: web.Request) -> web.Response:
        self._note(request, await request.read())
        return web.json_response({"ok": True}, status=202)

    async def echo(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self._note(request, raw)
        headers = {"Set-Cookie": "sid=SETCOOKIESECRET; Path=/"}
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        return web.json_response({"headers": dict(request.headers), "query": dict(request.query), "json": doc}, headers=headers)

    async def ndjson(self, request: web.Request) -> web.StreamResponse:
        self._note(request, await request.read())
        key = request.headers.get("X-Test-Key", "ndjson")
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        self.sent[key] = bytearray()
        for i in range(int(request.query.get("n", 5))):
            await self._write(resp, key, (json.dumps({"i": i, "text": f"line {i}"}) + "\n").encode(), "event")
            await asyncio.sleep(0.002)
        await resp.write_eof()
        return resp

    async def plain(self, request: web.Request) -> web.StreamResponse:
        self._note(request, b"")
        key = request.headers.get("X-Test-Key", "plain")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        self.sent[key] = bytearray()
        for i in range(int(request.query.get("n", 5))):
            await self._write(resp, key, f'0:"part {i}"\n'.encode(), "event")
            if "hold" in request.query and i == 0:
                ev_ = self.release.setdefault(key, asyncio.Event())
                await asyncio.wait_for(ev_.wait(), 10)
        await resp.write_eof()
        return resp

    async def ws(self, request: web.Request) -> web.WebSocketResponse:
        self._note(request, b"")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "hello"}))
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                self.ws_received.append(msg.data)
                if msg.data == "close":
                    await ws.close()
                    break
                if msg.data.startswith('{"type": "auth"'):
                    await ws.send_str(json.dumps({"type": "authed"}))
                    await ws.send_bytes(b"ok")
                    continue
                await ws.send_str(json.dumps({"type": "echo", "data": msg.data}))
                await ws.send_bytes(b"\x00\x01bin:" + msg.data.encode())
            elif msg.type == WSMsgType.BINARY:
                self.ws_received.append(msg.data)
                await ws.send_bytes(msg.data[::-1])
        return ws


@contextmanager
def backend() -> Iterator[Backend]:
    b = Backend()
    b.start()
    try:
        yield b
    finally:
        b.stop()
