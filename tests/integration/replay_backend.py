"""A real HTTP server on 127.0.0.1 that answers with recorded bytes, step by step.

The live-vs-import test (test_live_import.py) sends each :class:`Step`'s
request through ``mitmdump`` with an ``X-Step`` header; the server answers
with that step's status, headers and body chunks, exactly as given: a JSON
body whole, an event stream chunked (one write per chunk), a cut stream
aborted after its chunks (no terminating chunk: an RST mid-body), a
WebSocket replaying its server messages between the client's and closing
with its code (0: the TCP connection dropped without a close frame).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from .backend import ServerThread

#: Response headers the server sets itself (length, framing, date).
_OWN = frozenset({"content-length", "transfer-encoding", "date", "server", "connection", "keep-alive"})


@dataclass
class Step:
    """One recorded exchange: the request to send and the answer to replay."""

    method: str
    path: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | None = None
    status: int = 200
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    #: the upstream drops the connection after the chunks (a cut stream)
    cut: bool = False
    #: a WebSocket: ("in" | "out", text) messages in order; None for HTTP
    ws: list[tuple[str, str]] | None = None
    #: the WebSocket's close code from the server (0: drop TCP, no close frame)
    close: int = 1000
    #: the client leaves after the first chunk (the server holds the stream open)
    leave: bool = False

    @property
    def streamed(self) -> bool:
        ctype = next((v for k, v in self.response_headers if k.lower() == "content-type"), "")
        return "event-stream" in ctype or "ndjson" in ctype or "jsonl" in ctype or self.cut or self.leave


class ReplayServer(ServerThread):
    name = "replay-backend"

    def __init__(self, steps: list[Step]) -> None:
        super().__init__()
        self.steps = steps

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/{tail:.*}", self.answer)

    async def answer(self, request: web.Request) -> web.StreamResponse:
        step = self.steps[int(request.headers["X-Step"])]
        await request.read()
        if step.ws is not None:
            return await self._socket(request, step)
        if step.status == 0:  # the upstream drops the connection before any response
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        headers = [(k, v) for k, v in step.response_headers if k.lower() not in _OWN]
        if not step.streamed:
            return web.Response(status=step.status, headers=headers, body=b"".join(step.chunks))
        resp = web.StreamResponse(status=step.status, headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for chunk in step.chunks:
            await resp.write(chunk)
            await asyncio.sleep(0.002)  # one chunk, one read on the other side
        if step.leave:
            await asyncio.sleep(2)  # the client leaves meanwhile
            return resp  # no end written: the connection is gone
        if step.cut:
            await asyncio.sleep(0.05)
            assert request.transport is not None
            request.transport.abort()
            return resp
        await resp.write_eof()
        return resp

    async def _socket(self, request: web.Request, step: Step) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        for direction, text in step.ws or ():
            if direction == "in":
                await ws.send_str(text)
            else:
                msg = await ws.receive()
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    break
        if step.close == 0:
            await asyncio.sleep(0.05)
            assert request.transport is not None
            request.transport.abort()
        else:
            await ws.close(code=step.close)
        return ws


async def drive(base: str, steps: list[Step]) -> None:
    """Send every step's request in order (each after the previous one ended)."""
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for i, step in enumerate(steps):
            headers = [(k, v) for k, v in step.headers if k.lower() not in ("host", "content-length")]
            headers.append(("X-Step", str(i)))
            url = base + step.path
            if step.ws is not None:
                await _socket(s, url.replace("http://", "ws://", 1), headers, step)
                continue
            try:
                async with s.request(step.method, url, data=step.body, headers=headers) as r:
                    if step.leave:
                        await r.content.readany()
                        r.close()  # the client leaves mid-stream
                        await asyncio.sleep(0.2)
                        continue
                    await r.read()
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                pass  # a cut stream: the client saw the break


async def _socket(s: aiohttp.ClientSession, url: str, headers: list[tuple[str, str]], step: Step) -> None:
    async with s.ws_connect(url, headers=dict(headers)) as ws:
        for direction, text in step.ws or ():
            if direction == "out":
                await ws.send_str(text)
            else:
                msg = await ws.receive()
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    return
        while True:  # until the server's close (or the dropped connection)
            msg = await ws.receive(timeout=10)
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                return
