"""A real aiohttp backend on 127.0.0.1 that echoes what it was sent: the
debug endpoint, the error handler that dumps the request, the SSE frame
that repeats the headers (issue 16).

It speaks ``myproto`` so the recorder matches its runs:

* ``POST /sessions/{sid}/runs`` streams SSE (``?enc=`` identity, gzip, br,
  zstd): started, a text event quoting the Authorization and the cookie, a
  ``debug`` event with the headers, cookie, query and body secrets as
  fields, a text event with tokens the server made itself (a JWT, a GitHub
  token: shapes nobody sent), done.  ``?fail=401`` answers with a JSON
  error body instead ("Incorrect API key provided: …"), content-encoded.
* ``GET /echo`` answers one non-streamed JSON body echoing headers, cookies
  and query, content-encoded.
* ``GET /ws`` greets with the upgrade request's headers and echoes every
  message.

``sent[key]`` keeps the exact bytes of every response body it wrote (the
key is ``X-Test-Key``), so a test can compare with what the client got.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import WSMsgType, web

from .backend import ServerThread, _Encoder, sse

#: Tokens the server makes up itself (not learned from any request): only their shape gives them away.
SERVER_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwiaWF0IjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLWJ5dGVzLTEyMzQ"
SERVER_GITHUB = "ghp_" + "Zr4Qm8Lx2Vb7Nc1Tw9Ys3Pk6Hd0Fg5Ja8Ee2"


def _echo(request: web.Request, body: Any) -> dict[str, Any]:
    return {
        "authorization": request.headers.get("Authorization"),
        "cookie": request.headers.get("Cookie"),
        "x_api_key": request.headers.get("X-Api-Key"),
        "query": dict(request.query),
        "body": body,
    }


def _encoded(payload: bytes, enc: str | None) -> bytes:
    coder = _Encoder(enc or None)
    return coder.step(payload) + coder.end()


class EchoBackend(ServerThread):
    name = "echo-backend"

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, bytes] = {}

    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_post("/sessions/{sid}/runs", self.run)
        r.add_get("/echo", self.echo)
        r.add_get("/ws", self.ws)

    async def run(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        key = request.headers.get("X-Test-Key", "run")
        enc = request.query.get("enc") or None
        auth = request.headers.get("Authorization", "")
        if request.query.get("fail") == "401":
            token = auth.partition(" ")[2]
            doc = {
                "error": {
                    "message": f"Incorrect API key provided: {token}. You can find your API key at https://example.test/keys.",
                    "type": "invalid_request_error",
                    "request": _echo(request, body),
                }
            }
            data = _encoded(json.dumps(doc).encode(), enc)
            self.sent[key] = data
            headers = {"Content-Type": "application/json"}
            if enc:
                headers["Content-Encoding"] = enc
            return web.Response(status=401, body=data, headers=headers)
        run_id = body.get("runId", "r1")
        events = [
            {"type": "started", "run": run_id},
            {"type": "text", "text": f"You sent {auth} and the cookie {request.headers.get('Cookie', '')}."},
            {"type": "debug", **_echo(request, body)},
            {"type": "text", "text": f" The server also made {SERVER_JWT} and {SERVER_GITHUB}."},
            {"type": "done"},
        ]
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if enc:
            headers["Content-Encoding"] = enc
        resp = web.StreamResponse(headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        coder = _Encoder(enc)
        out = bytearray()
        for i, ev in enumerate(events):
            data = coder.step(sse(i, ev))
            out += data
            await resp.write(data)
        tail = coder.end()
        out += tail
        if tail:
            await resp.write(tail)
        self.sent[key] = bytes(out)
        await resp.write_eof()
        return resp

    async def echo(self, request: web.Request) -> web.Response:
        key = request.headers.get("X-Test-Key", "echo")
        enc = request.query.get("enc") or None
        data = _encoded(json.dumps({"echo": _echo(request, None)}).encode(), enc)
        self.sent[key] = data
        headers = {"Content-Type": "application/json", "Set-Cookie": "refresh=SETCOOKIEVALUE-77a1b2c3; HttpOnly"}
        if enc:
            headers["Content-Encoding"] = enc
        return web.Response(body=data, headers=headers)

    async def ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "hello", **_echo(request, None)}))
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                if msg.data == "close":
                    await ws.close()
                    break
                await ws.send_str(json.dumps({"type": "echo", "data": msg.data}))
                await ws.send_bytes(b"bin:" + msg.data.encode())
        return ws


@contextmanager
def echo_backend() -> Iterator[EchoBackend]:
    b = EchoBackend()
    b.start()
    try:
        yield b
    finally:
        b.stop()
