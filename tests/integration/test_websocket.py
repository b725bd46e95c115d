"""WebSocket messages are recorded in both directions, in order."""

from __future__ import annotations

import json

import aiohttp
import pytest

from .conftest import stopped_store

pytestmark = pytest.mark.mitmdump


async def test_websocket_messages_both_directions(server, proxy, tmp_path):
    p = proxy()
    url = f"ws://127.0.0.1:{p.port}/ws"
    async with aiohttp.ClientSession() as s, s.ws_connect(url) as ws:
        assert json.loads((await ws.receive()).data) == {"type": "hello"}
        await ws.send_str("one")
        assert json.loads((await ws.receive()).data) == {"type": "echo", "data": "one"}
        assert (await ws.receive()).data == b"\x00\x01bin:one"
        await ws.send_bytes(b"\x01\x02\x03")
        assert (await ws.receive()).data == b"\x03\x02\x01"
        await ws.send_str(json.dumps({"type": "auth", "token": "WSSECRET1"}))
        await ws.receive()
        await ws.receive()
        await ws.send_str("close")
        msg = await ws.receive()
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert server.ws_received[-2] == json.dumps({"type": "auth", "token": "WSSECRET1"})  # the upstream got it
    store = stopped_store(p, tmp_path / "trace.db")
    [ex] = [e for e in store.exchanges() if e.path == "/ws"]
    assert (ex.status, ex.transport, ex.end) == (101, "ws", "complete")
    assert ex.notes["close_code"] == 1000
    frames = store.frames(ex.index)
    got = [(f.direction, f.text if f.raw is None else f.raw) for f in frames]
    assert got[:6] == [
        ("in", '{"type": "hello"}'),
        ("out", "one"),
        ("in", '{"type": "echo", "data": "one"}'),
        ("in", b"\x00\x01bin:one"),
        ("out", b"\x01\x02\x03"),
        ("in", b"\x03\x02\x01"),
    ]
    # the client's auth message is stored as sent, its secret masked in place (length kept: decision 234)
    assert got[6][1] == json.dumps({"type": "auth", "token": "*" * len("WSSECRET1")})
    assert got[-1] == ("out", "close")
    for f in sorted(tmp_path.glob("trace.db*")):
        assert b"WSSECRET1" not in f.read_bytes()
