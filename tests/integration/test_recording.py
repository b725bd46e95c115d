"""A real mitmdump with the addon in front of a real aiohttp backend, and a real client.

The client keeps the raw bytes (still content-encoded) it received; the
backend keeps the bytes it wrote: they must be identical.  The trace must
hold every event, with the right session and run, and nothing secret.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chatkit_trace.wire import make_decoder

from .backend import run_events, sse
from .client import fetch
from .conftest import stopped_store

pytestmark = pytest.mark.mitmdump


def _events(store, run_id):
    [ex] = [e for e in store.exchanges() if e.run_id == run_id and e.capability == "run"]
    frames = store.frames(ex.index)
    return ex, frames


@pytest.mark.parametrize("split", ["event", "tiny", "bulk"])
async def test_sse_streams_are_byte_identical_and_every_event_is_recorded(server, proxy, tmp_path, split):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    encodings = ["", "gzip", "br", "zstd", "deflate"]
    for enc in encodings:
        rid = f"r-{enc or 'identity'}"
        got = await fetch("POST", f"{base}/sessions/s1/runs?n=12&enc={enc}&split={split}", json={"runId": rid, "text": "hi"})
        assert got.status == 200 and got.error is None
        assert got.raw == bytes(server.sent[rid])  # byte for byte, still encoded
        if enc:
            assert got.headers["Content-Encoding"] == enc
    store = stopped_store(p, tmp_path / "trace.db")
    assert store.capture_errors() == []
    for enc in encodings:
        rid = f"r-{enc or 'identity'}"
        ex, frames = _events(store, rid)
        assert (ex.session_id, ex.run_id, ex.run_id_source) == ("s1", rid, "body")
        assert (ex.status, ex.transport, ex.end) == (200, "sse", "complete")
        assert [json.loads(f.text) for f in frames] == run_events(rid, 12)
        assert [f.event_id for f in frames] == [f"e{i}" for i in range(12)]
        # offsets point into the decoded body
        d = make_decoder(enc or None)
        body = d.decode(bytes(server.sent[rid])) + d.flush()
        for i, f in enumerate(frames):
            assert body[f.start : f.end] + b"\n" == sse(i, run_events(rid, 12)[i])
        assert all(f.at >= ex.started_at for f in frames)
    runs = {r["run_id"]: r for r in store.rows("runs")}
    assert {runs[f"r-{e or 'identity'}"]["status"] for e in encodings} == {"completed"}
    assert store.rows("facts") is not None and any(True for _ in store.rows("facts"))


async def test_the_stream_is_not_buffered(server, proxy, tmp_path):
    """The backend waits after its first event until the client has received it."""
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"

    async def release_sse() -> None:
        await fetch("POST", f"{server.url}/release/held")

    got = await fetch("POST", f"{base}/sessions/s1/runs?n=5&hold=1&enc=gzip", json={"runId": "held"}, on_first=release_sse, timeout=20)
    assert got.error is None and got.raw == bytes(server.sent["held"])

    async def release_plain() -> None:
        await fetch("POST", f"{server.url}/release/plain1")

    got = await fetch("GET", f"{base}/plain?n=4&hold=1", headers={"X-Test-Key": "plain1"}, on_first=release_plain, timeout=20)
    assert got.raw == bytes(server.sent["plain1"])
    store = stopped_store(p, tmp_path / "trace.db")
    ex, frames = _events(store, "held")
    assert len(frames) == 5 and ex.end == "complete"
    [plain] = [e for e in store.exchanges() if e.path == "/plain"]
    assert plain.response_body == bytes(server.sent["plain1"]) and plain.notes["chunks"] >= 2


async def test_json_history_and_accepted_responses_are_recorded_whole(server, proxy, tmp_path):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    await fetch("POST", f"{base}/sessions/s9/runs?n=4", json={"runId": "h1", "text": "hi"})
    hist = await fetch("GET", f"{base}/sessions/s9/runs")
    stop = await fetch("POST", f"{base}/sessions/s9/runs/h1/stop")
    assert stop.status == 202
    nd = await fetch("POST", f"{base}/ndjson?n=6", headers={"X-Test-Key": "nd"})
    assert nd.raw == bytes(server.sent["nd"])
    store = stopped_store(p, tmp_path / "trace.db")
    exs = {e.path: e for e in store.exchanges()}
    h = exs["/sessions/s9/runs"] if exs["/sessions/s9/runs"].method == "GET" else None
    [h] = [e for e in store.exchanges() if e.method == "GET" and e.path == "/sessions/s9/runs"]
    assert (h.capability, h.session_id, h.status, h.transport) == ("history", "s9", 200, None)
    assert h.response_body == hist.raw and json.loads(h.response_body)["runs"][0]["id"] == "h1"
    s = exs["/sessions/s9/runs/h1/stop"]
    assert (s.capability, s.run_id, s.status) == ("abort", "h1", 202)
    n = exs["/ndjson"]
    assert n.transport == "ndjson" and [json.loads(f.text)["i"] for f in store.frames(n.index)] == list(range(6))
    reads = list(store.rows("history_reads"))
    assert len(reads) == 1 and reads[0]["ok"] == 1


async def test_secrets_are_redacted_in_the_file_but_reach_the_upstream(server, proxy, tmp_path):
    p = proxy(options={"chatkit_redact": "x-team-secret"})
    base = f"http://127.0.0.1:{p.port}"
    headers = {
        "Authorization": "Bearer AUTHSECRET1",
        "Cookie": "sid=COOKIESECRET2; theme=dark",
        "X-Api-Key": "APIKEYSECRET3",
        "X-Team-Secret": "TEAMSECRET4",
    }
    body = {"text": "hi", "api_key": "BODYSECRET5", "nested": {"password": "BODYSECRET6"}, "runId": "sec1"}
    got = await fetch("POST", f"{base}/echo?api_key=QUERYSECRET7&q=1", json=body, headers=headers)
    assert "SETCOOKIESECRET" in got.headers["Set-Cookie"]  # the client got it
    echoed = json.loads(got.raw)  # the upstream got them (and the client got the echo unchanged)
    assert echoed["headers"]["Authorization"] == "Bearer AUTHSECRET1"
    assert echoed["query"]["api_key"] == "QUERYSECRET7" and echoed["json"]["api_key"] == "BODYSECRET5"
    seen = server.seen[-1]
    assert ("X-Team-Secret", "TEAMSECRET4") in seen["headers"] and b"BODYSECRET6" in seen["body"]
    run = await fetch("POST", f"{base}/sessions/s1/runs?n=3&token=QUERYSECRET8", json=body, headers=headers)
    assert run.raw == bytes(server.sent["sec1"])
    db = tmp_path / "trace.db"
    store = stopped_store(p, db)
    secrets = [b"AUTHSECRET1", b"COOKIESECRET2", b"APIKEYSECRET3", b"TEAMSECRET4", b"BODYSECRET5", b"BODYSECRET6",
               b"QUERYSECRET7", b"QUERYSECRET8", b"SETCOOKIESECRET"]
    files = sorted(tmp_path.glob("trace.db*"))
    assert files
    for f in files:
        data = f.read_bytes()
        for s in secrets:
            assert s not in data, f"{s!r} found in {f.name}"
    [ex] = [e for e in store.exchanges() if e.path == "/echo"]
    assert ex.header("Authorization") == "Bearer [REDACTED]"
    assert ex.header("Set-Cookie", response=True).startswith("sid=[REDACTED]")
    assert "theme=[REDACTED]" in ex.header("Cookie")
    assert "api_key=" in ex.url and "REDACTED" in ex.url and "q=1" in ex.url
    assert json.loads(ex.request_body)["nested"]["password"] == "[REDACTED]"
    assert json.loads(ex.response_body)["headers"]["Authorization"] == "[REDACTED]"
    assert "request.header:authorization" in ex.notes["redacted"]
    [run_ex] = [e for e in store.exchanges() if e.run_id == "sec1"]
    assert run_ex.session_id == "s1"  # identity still read from the real request


async def test_a_midstream_reset_is_a_connection_observation_not_a_failure(server, proxy, tmp_path):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    got = await fetch("POST", f"{base}/sessions/s1/runs?n=10&reset_after=4", json={"runId": "cut"})
    assert got.error is not None  # the client saw the cut
    assert got.raw == bytes(server.sent["cut"])  # … after every byte the backend sent
    store = stopped_store(p, tmp_path / "trace.db")
    ex, frames = _events(store, "cut")
    assert (ex.status, ex.end) == (200, "reset")
    assert ex.error and "peer closed" in ex.error
    assert [json.loads(f.text) for f in frames] == run_events("cut", 10)[:4]
    assert store.capture_errors() == []
    [run] = [r for r in store.rows("runs") if r["run_id"] == "cut"]
    assert (run["status"], run["connection"]) == ("running", "disconnected")  # R3.4: outcome unknown


async def test_a_client_that_leaves_is_recorded_as_client_gone(server, proxy, tmp_path):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    got = await fetch("POST", f"{base}/sessions/s1/runs?n=200&delay=0.01", json={"runId": "gone"}, stop_after=200)
    assert len(got.raw) >= 200
    await asyncio.sleep(0.5)
    store = stopped_store(p, tmp_path / "trace.db")
    ex, frames = _events(store, "gone")
    assert ex.end == "client-gone" and 0 < len(frames) < 200
    assert store.capture_errors() == []


async def test_fifty_concurrent_streams_are_recorded_without_mixing_frames(server, proxy, tmp_path):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    n = 30

    async def one(i: int) -> None:
        rid = f"c{i:02d}"
        enc = "gzip" if i % 3 == 0 else ""
        got = await fetch("POST", f"{base}/sessions/s{i % 7}/runs?n={n}&delay=0.002&enc={enc}&split={'tiny' if i % 5 == 0 else 'event'}",
                          json={"runId": rid, "text": str(i)})
        assert got.raw == bytes(server.sent[rid])

    await asyncio.gather(*(one(i) for i in range(50)))
    store = stopped_store(p, tmp_path / "trace.db")
    assert store.capture_errors() == []
    for i in range(50):
        rid = f"c{i:02d}"
        ex, frames = _events(store, rid)
        assert ex.session_id == f"s{i % 7}"
        assert [json.loads(f.text) for f in frames] == run_events(rid, n)
        assert [f.index for f in frames] == list(range(n))
    runs = list(store.rows("runs"))
    assert len(runs) == 50 and {r["status"] for r in runs} == {"completed"}
    assert sum(r["rejected"] for r in runs) == 0


async def test_each_finished_run_logs_one_line(server, proxy, tmp_path):
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    await fetch("POST", f"{base}/sessions/s1/runs?n=4", json={"runId": "log1"})
    await fetch("POST", f"{base}/sessions/s1/runs?n=6&reset_after=2", json={"runId": "log2"})
    assert p.wait_for("chatkit-trace: session s1 run log1: completed, ", timeout=15), p.output
    assert p.wait_for("chatkit-trace: session s1 run log2: no conclusion (connection reset)", timeout=15), p.output
    p.stop()
    assert p.output.count("run log1:") == 1
    assert Path(tmp_path / "trace.db").exists()
