"""Make the import test files from real traffic (run it to regenerate them).

    .venv/bin/python tests/data/import/make_files.py [OUT_DIR]

Starts a small aiohttp server on 127.0.0.1 speaking chatkit's example
protocol (``myproto``: SSE runs with ``id:`` lines, history, resume, stop,
and a WebSocket subscription on ``…/events?sessionId=``), puts a real
``mitmdump`` in reverse mode in front of it, recording a flow file (``-w``)
and mitmproxy's own HAR export (``--set hardump=``) of the *same* traffic,
and drives a client through the proxy.  Requests carry secrets (an
Authorization header, an ``api_key`` query parameter, a ``password`` body
field, a WebSocket auth message) so the tests can check redaction.

Writes ``myproto.mitm`` and ``myproto.har``, and ``chrome-ws.har``: a
hand-checked Chrome DevTools-style HAR (``_webSocketMessages``, HTTP/2
pseudo-headers, ``timings`` with ``blocked``/``dns``/``ssl``, a base64 body)
written from the literal below, not from traffic.

Plain mitmdump buffers SSE responses (mitmproxy.md section 1), so the flow
file and the HAR keep the bodies; the importer spreads their frames over the
response's duration.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import WSMsgType, web

HERE = Path(__file__).resolve().parent
MITMDUMP = Path(sys.executable).with_name("mitmdump")
SECRET_BEARER = "sk-test-BEARER-0123456789"
SECRET_QUERY = "QUERY-SECRET-987"
SECRET_PASSWORD = "hunter2-PASSWORD"
SECRET_WS = "WS-TOKEN-555"

SCRIPTS = {
    "r1": [{"type": "text", "text": "This is "}, {"type": "text", "text": "the answer"}, {"type": "done"}],
    "r2": [
        {"type": "text", "text": "Let me look that up."},
        {"type": "tool", "id": "call-1", "name": "lookup", "args": {"q": "a"}},
        {"type": "tool_result", "id": "call-1", "result": {"hits": 1}},
        {"type": "text", "text": "Found 1 result."},
        {"type": "done"},
    ],
}
PASSIVE = [
    {"type": "started", "run": "p1"},
    {"type": "text", "text": "from another tab", "run": "p1"},
    {"type": "done", "run": "p1"},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sse(i: int, event: dict) -> bytes:
    return f"id: e{i}\ndata: {json.dumps(event)}\n\n".encode()


def make_app() -> web.Application:
    runs: dict[str, dict] = {}

    async def run(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        rid = body["runId"]
        events = [{"type": "started", "run": rid}, *SCRIPTS[rid]]
        runs[rid] = {"id": rid, "status": "completed", "input": body.get("text", ""), "created_at": 1,
                     "frames": [{"id": f"e{i}", "event": ev} for i, ev in enumerate(events)]}
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        for i, ev in enumerate(events):
            await resp.write(sse(i, ev))
            await asyncio.sleep(0.005)
        await resp.write_eof()
        return resp

    async def resume(request: web.Request) -> web.StreamResponse:
        rid = request.match_info["run"]
        after = request.query.get("after") or request.headers.get("Last-Event-ID")
        frames = runs[rid]["frames"]
        start = next((i + 1 for i, f in enumerate(frames) if f["id"] == after), 0)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for f in frames[start:]:
            await resp.write(sse(int(f["id"][1:]), f["event"]))
            await asyncio.sleep(0.005)
        await resp.write_eof()
        return resp

    async def history(request: web.Request) -> web.Response:
        return web.json_response({"runs": list(runs.values())})

    async def stop(request: web.Request) -> web.Response:
        return web.json_response({"ok": False, "reason": "already finished"}, status=409)

    async def events(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        msg = await ws.receive()
        assert msg.type == WSMsgType.TEXT and SECRET_WS in msg.data
        for ev in PASSIVE:
            await ws.send_str(json.dumps(ev))
            await asyncio.sleep(0.005)
        await ws.close()
        return ws

    async def login(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"ok": True}, headers={"Set-Cookie": "session=COOKIE-SECRET-42; Path=/; HttpOnly"})

    async def favicon(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no favicon")

    app = web.Application()
    app.router.add_post("/api/chat/sessions/{session}/runs", run)
    app.router.add_get("/api/chat/sessions/{session}/runs", history)
    app.router.add_get("/api/chat/sessions/{session}/runs/{run}/events", resume)
    app.router.add_post("/api/chat/sessions/{session}/runs/{run}/stop", stop)
    app.router.add_get("/api/chat/events", events)
    app.router.add_post("/api/login", login)
    app.router.add_get("/favicon.ico", favicon)
    return app


async def drive(proxy: str) -> None:
    auth = {"Authorization": f"Bearer {SECRET_BEARER}"}
    async with aiohttp.ClientSession(auto_decompress=True) as s:
        async with s.post(f"{proxy}/api/login", data={"user": "ann", "password": SECRET_PASSWORD}) as r:
            await r.read()
        async with s.get(f"{proxy}/favicon.ico") as r:
            await r.read()
        for rid, text in (("r1", "hello"), ("r2", "look it up")):
            async with s.post(f"{proxy}/api/chat/sessions/s1/runs?api_key={SECRET_QUERY}", json={"runId": rid, "text": text},
                              headers=auth) as r:
                await r.read()
        async with s.get(f"{proxy}/api/chat/sessions/s1/runs/r2/events?after=e2", headers=auth) as r:
            await r.read()
        async with s.post(f"{proxy}/api/chat/sessions/s1/runs/r2/stop", json={}, headers=auth) as r:
            await r.read()
        async with s.ws_connect(f"{proxy.replace('http', 'ws')}/api/chat/events?sessionId=s1", headers=auth) as ws:
            await ws.send_str(json.dumps({"type": "auth", "token": SECRET_WS}))
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    break
        async with s.get(f"{proxy}/api/chat/sessions/s1/runs", headers=auth) as r:
            await r.read()


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


async def record(out: Path) -> None:
    app = make_app()
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    pport = free_port()
    flows, har = out / "myproto.mitm", out / "myproto.har"
    for p in (flows, har):
        p.unlink(missing_ok=True)
    cmd = [str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "-p", str(pport),
           "--mode", f"reverse:http://127.0.0.1:{port}", "--set", "connection_strategy=lazy",
           "-w", str(flows), "--set", f"hardump={har}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "HOME": str(out / ".mitmhome")})
    try:
        await asyncio.get_running_loop().run_in_executor(None, wait_port, pport)
        await drive(f"http://127.0.0.1:{pport}")
        await asyncio.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = await asyncio.get_running_loop().run_in_executor(None, lambda: proc.communicate(timeout=30))
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        await runner.cleanup()
    if not flows.exists() or not har.exists():
        raise RuntimeError(f"mitmdump wrote no files (rc {proc.returncode}): {output.decode(errors='replace')}")
    home = out / ".mitmhome"
    if home.exists():
        import shutil

        shutil.rmtree(home)


#: A Chrome DevTools "Save all as HAR with content" export, trimmed by hand to
#: what Chrome writes for a fetch() SSE stream and a WebSocket (checked against
#: Chrome 126's exporter: HTTP/2 pseudo-headers, _resourceType,
#: _webSocketMessages with epoch-second times, opcode 1 text / 2 base64 binary,
#: timings with blocked/dns/ssl/connect/send/wait/receive, cookies arrays).
CHROME_WS_HAR = {
    "log": {
        "version": "1.2",
        "creator": {"name": "WebInspector", "version": "537.36"},
        "pages": [{"startedDateTime": "2026-11-30T07:00:00.000Z", "id": "page_1", "title": "http://localhost:5173/",
                   "pageTimings": {"onContentLoad": 120.5, "onLoad": 180.2}}],
        "entries": [
            {
                "_initiator": {"type": "script"},
                "_priority": "High",
                "_resourceType": "fetch",
                "cache": {},
                "connection": "443",
                "pageref": "page_1",
                "request": {
                    "method": "POST",
                    "url": "https://chat.example.test/api/chat/sessions/s9/runs",
                    "httpVersion": "http/2.0",
                    "headers": [
                        {"name": ":authority", "value": "chat.example.test"},
                        {"name": ":method", "value": "POST"},
                        {"name": ":path", "value": "/api/chat/sessions/s9/runs"},
                        {"name": ":scheme", "value": "https"},
                        {"name": "accept", "value": "text/event-stream"},
                        {"name": "authorization", "value": "Bearer sk-chrome-SECRET-1"},
                        {"name": "content-type", "value": "application/json"},
                        {"name": "cookie", "value": "sid=CHROME-COOKIE-SECRET"},
                    ],
                    "queryString": [],
                    "cookies": [{"name": "sid", "value": "CHROME-COOKIE-SECRET", "path": "/", "domain": "chat.example.test",
                                 "expires": "1969-12-31T23:59:59.000Z", "httpOnly": True, "secure": True}],
                    "headersSize": -1,
                    "bodySize": 33,
                    "postData": {"mimeType": "application/json", "text": "{\"runId\":\"c1\",\"text\":\"hi there\"}"},
                },
                "response": {
                    "status": 200,
                    "statusText": "",
                    "httpVersion": "http/2.0",
                    "headers": [
                        {"name": "content-type", "value": "text/event-stream; charset=utf-8"},
                        {"name": "content-encoding", "value": "gzip"},
                        {"name": "date", "value": "Mon, 30 Nov 2026 07:00:01 GMT"},
                    ],
                    "cookies": [],
                    "content": {
                        "size": 175,
                        "mimeType": "text/event-stream",
                        "compression": 40,
                        "text": "aWQ6IGUwCmRhdGE6IHsidHlwZSI6ICJzdGFydGVkIiwgInJ1biI6ICJjMSJ9CgppZDogZTEKZGF0YTogeyJ0eXBlIjogInRleHQiLCAidGV4dCI6ICJIZWxsbyJ9CgppZDogZTIKZGF0YTogeyJ0eXBlIjogInRleHQiLCAidGV4dCI6ICIgd29ybGQifQoKaWQ6IGUzCmRhdGE6IHsidHlwZSI6ICJkb25lIn0KCg==",  # noqa: E501 - a recorded body, base64
                        "encoding": "base64",
                    },
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": -1,
                    "_transferSize": 260,
                    "_error": None,
                },
                "serverIPAddress": "127.0.0.1",
                "startedDateTime": "2026-11-30T07:00:01.000Z",
                "time": 412.3,
                "timings": {"blocked": 1.2, "dns": -1, "ssl": -1, "connect": -1, "send": 0.3, "wait": 10.5,
                            "receive": 400.3, "_blocked_queueing": 0.8},
            },
            {
                "_initiator": {"type": "script"},
                "_resourceType": "websocket",
                "_webSocketMessages": [
                    {"type": "send", "time": 1796022002.1, "opcode": 1, "data": "{\"type\":\"auth\",\"token\":\"WS-CHROME-SECRET\"}"},
                    {"type": "receive", "time": 1796022002.2, "opcode": 1, "data": "{\"type\": \"started\", \"run\": \"p9\"}"},
                    {"type": "receive", "time": 1796022002.3, "opcode": 1, "data": "{\"type\": \"text\", \"text\": \"remote\", \"run\": \"p9\"}"},
                    {"type": "receive", "time": 1796022002.35, "opcode": 9, "data": ""},
                    {"type": "receive", "time": 1796022002.4, "opcode": 2, "data": "eyJ0eXBlIjogImRvbmUiLCAicnVuIjogInA5In0="},
                ],
                "cache": {},
                "connection": "443",
                "pageref": "page_1",
                "request": {
                    "method": "GET",
                    "url": "wss://chat.example.test/api/chat/events?sessionId=s9",
                    "httpVersion": "HTTP/1.1",
                    "headers": [
                        {"name": "Host", "value": "chat.example.test"},
                        {"name": "Connection", "value": "Upgrade"},
                        {"name": "Upgrade", "value": "websocket"},
                        {"name": "Sec-WebSocket-Version", "value": "13"},
                        {"name": "Sec-WebSocket-Key", "value": "dGhlIHNhbXBsZSBub25jZQ=="},
                    ],
                    "queryString": [{"name": "sessionId", "value": "s9"}],
                    "cookies": [],
                    "headersSize": 420,
                    "bodySize": 0,
                },
                "response": {
                    "status": 101,
                    "statusText": "Switching Protocols",
                    "httpVersion": "HTTP/1.1",
                    "headers": [
                        {"name": "Upgrade", "value": "websocket"},
                        {"name": "Connection", "value": "Upgrade"},
                        {"name": "Sec-WebSocket-Accept", "value": "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
                    ],
                    "cookies": [],
                    "content": {"size": 0, "mimeType": "x-unknown"},
                    "redirectURL": "",
                    "headersSize": 129,
                    "bodySize": 0,
                    "_transferSize": 129,
                    "_error": None,
                },
                "serverIPAddress": "127.0.0.1",
                "startedDateTime": "2026-11-30T07:00:02.000Z",
                "time": 3.1,
                "timings": {"blocked": 0.9, "dns": -1, "ssl": -1, "connect": -1, "send": 0, "wait": 2.2, "receive": 0},
            },
        ],
    }
}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(record(out))
    (out / "chrome-ws.har").write_text(json.dumps(CHROME_WS_HAR, indent=1) + "\n")
    print(f"wrote {out / 'myproto.mitm'}, {out / 'myproto.har'}, {out / 'chrome-ws.har'}")


if __name__ == "__main__":
    main()
