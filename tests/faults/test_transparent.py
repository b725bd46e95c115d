"""Byte-for-byte transparency (the recorder's own test, with the faults addon
loaded), encoded streams (decoded to find events, re-encoded per event) and
WebSocket messages as events; against the recorder's integration backend,
which keeps the exact bytes it wrote."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from chatkit_trace.wire import make_decoder
from tests.integration.backend import backend as integration_backend
from tests.integration.backend import run_events
from tests.integration.client import fetch

from .conftest import settled_copy, start_proxy
from .helpers import request

ENCODINGS = ["", "gzip", "br", "zstd", "deflate"]
RULES = [
    "drop:at=2,session=enc-*",
    "drop:at=2,path=/ws,nth=1",
    "dup:at=1,path=/ws,nth=1",
    "cut:after=1,mode=reset,path=/ws,nth=2",
    "cut:after=1,mode=close,path=/ws,nth=3",
    "dup:at=1,path=/echo",
]


@pytest.fixture(scope="module")
def server():
    with integration_backend() as b:
        yield b


@pytest.fixture(scope="module")
def quiet(server, module_procs, tmp_path_factory):
    """Both addons, no rule (the faults addon loaded first)."""
    db = tmp_path_factory.mktemp("quiet") / "trace.db"
    p = start_proxy(server.url, db, [], seed=None, faults_first=True)
    module_procs.append(p)
    return f"http://127.0.0.1:{p.port}", db, p


@pytest.fixture(scope="module")
def ruled(server, module_procs, tmp_path_factory):
    db = tmp_path_factory.mktemp("ruled") / "trace.db"
    p = start_proxy(server.url, db, RULES)
    module_procs.append(p)
    return f"http://127.0.0.1:{p.port}", db, p


async def test_with_no_rule_the_addon_is_byte_for_byte_transparent(server, quiet, tmp_path):
    base, db, p = quiet
    for split in ("event", "tiny", "bulk"):
        for enc in ENCODINGS:
            rid = f"q-{split}-{enc or 'identity'}"
            got = await fetch(
                "POST",
                f"{base}/sessions/quiet/runs?n=12&enc={enc}&split={split}",
                json={"runId": rid, "text": "hi"},
            )
            assert got.status == 200 and got.error is None
            assert got.raw == bytes(server.sent[rid])  # byte for byte, still encoded
            assert "X-Chatkit-Fault" not in got.headers
    store = settled_copy(db, tmp_path / "copy.db", "quiet", 15)
    for ex in store.exchanges(session="quiet"):
        assert "fault" not in ex.notes and ex.end == "complete"
        assert [json.loads(f.text) for f in store.frames(ex.index)] == run_events(ex.run_id, 12)
    assert "chatkit-trace fault" not in p.output  # nothing configured, nothing done, nothing said


async def test_rules_that_match_nothing_leave_the_traffic_alone(server, ruled):
    base, _, _ = ruled
    for enc in ENCODINGS:
        rid = f"plain-{enc or 'identity'}"
        got = await fetch(
            "POST", f"{base}/sessions/plain/runs?n=8&enc={enc}&split=tiny", json={"runId": rid}
        )
        assert got.raw == bytes(server.sent[rid]) and "X-Chatkit-Fault" not in got.headers


@pytest.mark.parametrize("enc", ["gzip", "br", "zstd", "deflate", ""])
async def test_an_encoded_stream_is_decoded_to_find_events_and_reencoded(
    server, ruled, tmp_path, enc
):
    base, db, _ = ruled
    sid = f"enc-{enc or 'identity'}"
    rid = f"r-{sid}"
    got = await request(
        "POST",
        f"{base}/sessions/{sid}/runs?n=6&enc={enc}&split=tiny",
        json_body={"runId": rid, "text": "hi"},
    )
    assert got.status == 200 and got.error is None and not got.decode_errors
    assert got.headers.get("Content-Encoding") == (enc or None)
    assert got.ids == ["e0", "e2", "e3", "e4", "e5"]
    expect = run_events(rid, 6)
    assert got.json() == [expect[0], *expect[2:]]
    store = settled_copy(db, tmp_path / "copy.db", sid, 1)
    [ex] = list(store.exchanges(session=sid))
    assert [f.event_id for f in store.frames(ex.index)] == got.ids
    notes = ex.notes["fault"]
    assert notes["applied"][0]["event_id"] == "e1"
    if enc:
        assert notes["encoding"] == f"{enc}: decoded to find events, re-encoded per event"
        d = make_decoder(enc)
        assert (
            d.decode(got.raw) + d.flush() and d.error is None
        )  # one valid stream in that encoding


async def _ws_session(url: str, send: list[str], want: int) -> tuple[list, int | None]:
    got: list = []
    async with aiohttp.ClientSession() as s, s.ws_connect(url) as ws:
        for text in send:
            await ws.send_str(text)
        try:
            async with asyncio.timeout(3):
                while len(got) < want:
                    msg = await ws.receive()
                    if msg.type in (
                        aiohttp.WSMsgType.CLOSE,
                        aiohttp.WSMsgType.CLOSED,
                        aiohttp.WSMsgType.ERROR,
                    ):
                        break
                    got.append(msg.data)
        except TimeoutError:
            pass
        await ws.close()
        return got, ws.close_code


async def test_websocket_messages_are_events(server, ruled, tmp_path):
    base, db, _ = ruled
    url = base.replace("http://", "ws://") + "/ws"
    # 1st connection: the hello is sent twice, the echo of "one" is dropped
    got, _ = await _ws_session(url, ["one"], 3)
    assert got == ['{"type": "hello"}', '{"type": "hello"}', b"\x00\x01bin:one"]
    assert server.ws_received[-1] == "one"  # client messages go to the backend untouched
    # 2nd: reset after the hello; 3rd: a clean close after it
    got2, _ = await _ws_session(url, ["two"], 3)
    got3, code3 = await _ws_session(url, ["three"], 3)
    assert got2 == ['{"type": "hello"}'] and got3 == ['{"type": "hello"}'] and code3 == 1000
    first, second, third = _by_path(db, tmp_path, "/ws", 3)
    frames = [(f.direction, f.text if f.raw is None else f.raw) for f in first[1]]
    assert [x for x in frames if x[0] == "in"] == [
        ("in", '{"type": "hello"}'),
        ("in", '{"type": "hello"}'),
        ("in", b"\x00\x01bin:one"),
    ]
    kinds = sorted(a["kind"] for a in first[0].notes["fault"]["applied"])
    assert kinds == ["drop", "dup"] and first[0].notes["fault"]["stream"] == "ws"
    assert second[0].end == "reset" and second[0].notes["fault"]["end"] == "cut-reset"
    assert third[0].notes["fault"]["end"] == "cut-close" and third[0].notes["close_code"] == 1000


async def test_a_response_that_is_not_an_event_stream_passes_the_relay_whole(
    server, ruled, tmp_path
):
    base, db, _ = ruled
    body = {"text": "hi", "runId": "echo-1"}
    got = await fetch(
        "POST", f"{base}/echo?q=1", json=body, headers={"X-Test": "yes", "Cookie": "a=1"}
    )
    assert got.status == 200 and got.headers["X-Chatkit-Fault"] == "dup:at=1,path=/echo"
    echoed = json.loads(got.raw)
    assert echoed["json"] == body and echoed["query"] == {"q": "1"}
    assert echoed["headers"]["X-Test"] == "yes" and echoed["headers"]["Cookie"] == "a=1"
    assert "X-Chatkit-Fault-Flow" not in echoed["headers"]  # the relay's own header stays inside
    assert got.headers["Set-Cookie"].startswith("sid=SETCOOKIESECRET")
    seen = server.seen[-1]
    assert (seen["method"], seen["path"], json.loads(seen["body"])) == ("POST", "/echo?q=1", body)
    [(ex, _)] = _by_path(db, tmp_path, "/echo", 1)
    assert json.loads(ex.response_body)["json"] == body and ex.url.endswith("/echo?q=1")
    notes = ex.notes["fault"]
    assert notes["stream"] == "raw"
    assert notes["not_applied"] == [
        {"rule": "dup:at=1,path=/echo", "why": "the stream ended after 0 event(s)"}
    ]


def _by_path(db, tmp_path, path: str, n: int):
    """The exchanges on ``path`` once ``n`` of them have ended, with their frames."""
    import time

    from chatkit_trace.store import TraceStore

    from .conftest import snapshot

    deadline = time.monotonic() + 10
    while True:
        store = TraceStore(snapshot(db, tmp_path / "by-path.db"), readonly=True)
        exs = [e for e in store.exchanges() if e.path == path]
        done = len(exs) >= n and all(e.ended_at is not None for e in exs)
        if done or time.monotonic() > deadline:
            return [(e, store.frames(e.index)) for e in exs]
        store.close()
        time.sleep(0.1)
