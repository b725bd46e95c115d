"""The Recorder addon through mitmproxy's test helpers (taddons, tflow).

Flows are driven hook by hook as mitmproxy would; the stream callable is
called with chunks directly.  The writer thread is real and writes a real
SQLite file; ``writer.sync()`` waits until everything queued is committed.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import logging
import time
from pathlib import Path

import pytest
from mitmproxy import exceptions, http
from mitmproxy.addons.view import View
from mitmproxy.test import taddons, tflow

from chatkit_trace.capture import recorder as recorder_mod
from chatkit_trace.capture import writer as writer_mod
from chatkit_trace.capture.recorder import OPTIONS, Recorder, parse_duration, stream_transport
from chatkit_trace.cli import record as recordcmd
from chatkit_trace.store import TraceStore

ADDON = Path(__file__).resolve().parents[2] / "chatkit_trace" / "addon.py"


def sse_event(i: int, ev: dict) -> bytes:
    return f"id: e{i}\ndata: {json.dumps(ev)}\n\n".encode()


RUN = [{"type": "started", "run": "r1"}, {"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}, {"type": "done"}]
CHUNKS = [sse_event(i, ev) for i, ev in enumerate(RUN)]


def make_flow(method: str = "POST", url: str = "http://backend/sessions/s1/runs", body: bytes = b'{"runId": "r1", "text": "hi"}',
              headers: dict[str, str] | None = None) -> http.HTTPFlow:
    f = tflow.tflow()
    f.request = http.Request.make(method, url, body, {"content-type": "application/json", **(headers or {})})
    f.request.timestamp_start = time.time()
    f.response = None
    return f


def make_response(status: int = 200, ctype: str | None = "text/event-stream", content: bytes = b"",
                  length: bool = False, headers: dict[str, str] | None = None) -> http.Response:
    h = {**({"content-type": ctype} if ctype else {}), **(headers or {})}
    r = http.Response.make(status, b"", h)
    if length:
        r.set_content(content)
    else:
        r.raw_content = content or None
        if "content-length" in r.headers:
            del r.headers["content-length"]
    r.timestamp_start = time.time()
    return r


class Harness:
    def __init__(self, rec: Recorder, tctx: taddons.context, db: Path) -> None:
        self.rec, self.tctx, self.db = rec, tctx, db

    def stream(self, f: http.HTTPFlow, chunks: list[bytes], *, response: http.Response | None = None, end: bool = True,
               end_at: float | None = None) -> None:
        r = self.rec
        r.requestheaders(f)
        r.request(f)
        f.response = response or make_response()
        r.responseheaders(f)
        tap = f.response.stream
        assert callable(tap)
        for c in chunks:
            assert tap(c) is c  # the very object, byte for byte
        if end:
            assert tap(b"") == b""
            f.response.timestamp_end = end_at or time.time()
            r.response(f)

    def whole(self, f: http.HTTPFlow, response: http.Response) -> None:
        r = self.rec
        r.requestheaders(f)
        r.request(f)
        f.response = response
        r.responseheaders(f)
        assert not f.response.stream
        r.response(f)

    def store(self, *, done: bool = False) -> TraceStore:
        if done:
            self.rec.done()
        else:
            assert self.rec.writer is not None and self.rec.writer.sync()
        return TraceStore(self.db, readonly=True)


@pytest.fixture
def harness(tmp_path, monkeypatch):
    made: list[Recorder] = []
    # loading the addon configures it with the defaults first (chatkit_db =
    # chatkit-trace.db in the working folder): that file lands in tmp_path
    monkeypatch.chdir(tmp_path)

    def make(**options) -> Harness:
        rec = Recorder()
        made.append(rec)
        tctx = taddons.context(rec)
        db = tmp_path / options.pop("db", "t.db")
        try:
            tctx.configure(rec, chatkit_db=str(db), **{"chatkit_profile": "myproto", **options})
        except Exception:
            # refused: the recorder keeps the trace it had (the defaults'), as in
            # mitmproxy; stop it, so the next one may record there (one recorder per file)
            made.remove(rec)
            rec.done()
            raise
        return Harness(rec, tctx, db)

    yield make
    for rec in made:
        rec.done()


# -- options ---------------------------------------------------------------------------------


def test_options_are_declared_with_the_chatkit_prefix():
    rec = Recorder()
    with taddons.context(rec) as tctx:
        for name, (_typ, default, help_) in OPTIONS.items():
            assert name.startswith("chatkit_") and help_
            assert getattr(tctx.options, name) == default
    assert set(OPTIONS) >= {"chatkit_profile", "chatkit_db", "chatkit_redact", "chatkit_keep_secrets",
                            "chatkit_max_db_mb", "chatkit_max_age", "chatkit_queue"}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"chatkit_queue": 0}, "chatkit_queue must be at least 1"),
        ({"chatkit_max_db_mb": -1}, "chatkit_max_db_mb must be 0"),
        ({"chatkit_max_age": "soon"}, "chatkit_max_age: not a duration"),
        ({"chatkit_derive": "sometimes"}, "chatkit_derive must be one of live, end, off"),
        ({"chatkit_test_raise": "everywhere"}, "chatkit_test_raise: unknown everywhere"),
        ({"chatkit_profile": "nosuchpreset"}, "chatkit_profile:"),
        ({"chatkit_redact": "x-foo", "chatkit_keep_secrets": True}, "contradict"),
        ({"chatkit_db": ""}, "chatkit_db: give the trace file"),
    ],
)
def test_configure_rejects_bad_options_with_one_clear_message(tmp_path, options, message):
    rec = Recorder()
    with taddons.context(rec) as tctx:
        options.setdefault("chatkit_db", str(tmp_path / "t.db"))
        with pytest.raises(exceptions.OptionsError, match=message):
            tctx.configure(rec, **options)
    rec.done()


def test_a_directory_or_a_foreign_file_is_not_a_trace(tmp_path):
    rec = Recorder()
    with taddons.context(rec) as tctx:
        with pytest.raises(exceptions.OptionsError, match="is a directory"):
            tctx.configure(rec, chatkit_db=str(tmp_path))
        bad = tmp_path / "notes.txt"
        bad.write_text("hello, not SQLite" * 100)
        with pytest.raises(exceptions.OptionsError, match="not a chatkit-trace trace"):
            tctx.configure(rec, chatkit_db=str(bad))
    rec.done()


@pytest.mark.parametrize(
    "text, seconds",
    [("", 0), ("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1.5h", 5400)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


# -- what streams --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, ctype, length, method, expected",
    [
        (200, "text/event-stream", False, "POST", "sse"),
        (200, "text/event-stream; charset=utf-8", True, "GET", "sse"),
        (200, "application/x-ndjson", False, "POST", "ndjson"),
        (200, "application/jsonl", False, "POST", "ndjson"),
        (200, "text/plain; charset=utf-8", False, "POST", "body"),  # AI-SDK data stream
        (200, None, False, "GET", "body"),
        (200, "application/octet-stream", False, "GET", "body"),
        (200, "application/json", False, "GET", None),  # chunked JSON is still ordinary JSON
        (200, "application/json", True, "GET", None),
        (200, "application/problem+json", False, "GET", None),
        (200, "text/html", True, "GET", None),
        (202, "application/json", True, "POST", None),
        (204, None, False, "POST", None),
        (304, None, False, "GET", None),
        (101, None, False, "GET", None),
        (200, "text/event-stream", False, "HEAD", None),
    ],
)
def test_which_responses_are_streamed(status, ctype, length, method, expected):
    resp = make_response(status, ctype, b"{}" if length else b"", length=length)
    assert stream_transport(resp, method) == expected




# -- recording -------------------------------------------------------------------------------


def test_an_sse_run_is_recorded_with_identity_redaction_and_arrival_times(harness):
    h = harness()
    f = make_flow(url="http://backend/sessions/s1/runs?api_key=QSECRET", headers={"authorization": "Bearer TSECRET"},
                  body=b'{"runId": "r1", "text": "hi", "password": "PSECRET"}')
    before = time.time()
    h.stream(f, CHUNKS[:2] + [CHUNKS[2][:5], CHUNKS[2][5:]] + CHUNKS[3:])
    assert f.request.headers["authorization"] == "Bearer TSECRET"  # the flow itself is untouched
    store = h.store()
    [ex] = list(store.exchanges())
    assert (ex.capability, ex.session_id, ex.run_id, ex.run_id_source) == ("run", "s1", "r1", "body")
    assert (ex.status, ex.transport, ex.end, ex.flow_id) == (200, "sse", "complete", f.id)
    assert ex.header("authorization") == "Bearer [REDACTED]" and "QSECRET" not in ex.url
    assert json.loads(ex.request_body)["password"] == "[REDACTED]"
    frames = store.frames(ex.index)
    assert [json.loads(fr.text) for fr in frames] == RUN
    assert [fr.event_id for fr in frames] == ["e0", "e1", "e2", "e3"]
    assert all(before <= fr.at <= time.time() for fr in frames)
    assert frames[1].at <= frames[2].at
    assert ex.notes["chunks"] == 5 and ex.notes["bytes"] == sum(map(len, CHUNKS))
    meta = store.meta()
    assert (meta["profile"], meta["protocol"], meta["redaction"]) == ("myproto", "myproto", "on")
    assert "run" in meta["capabilities"] and meta["source"]["kind"] == "record"
    for p in h.db.parent.glob("t.db*"):
        data = p.read_bytes()
        assert b"QSECRET" not in data and b"TSECRET" not in data and b"PSECRET" not in data


def test_a_gzip_stream_split_anywhere_is_decoded_for_the_copy_only(harness):
    h = harness()
    body = gzip.compress(b"".join(CHUNKS))
    pieces = [body[i : i + 3] for i in range(0, len(body), 3)]
    f = make_flow()
    h.stream(f, pieces, response=make_response(headers={"content-encoding": "gzip"}))
    store = h.store()
    [ex] = list(store.exchanges())
    assert [json.loads(fr.text) for fr in store.frames(ex.index)] == RUN
    assert ex.header("content-encoding", response=True) == "gzip"


def test_a_json_response_is_not_streamed_and_is_stored_whole(harness):
    h = harness()
    f = make_flow("GET", "http://backend/sessions/s1/runs", b"")
    body = json.dumps({"runs": []}).encode()
    h.whole(f, make_response(200, "application/json", body, length=True, headers={"set-cookie": "sid=CSECRET; Path=/"}))
    store = h.store()
    [ex] = list(store.exchanges())
    assert (ex.capability, ex.transport, ex.end, ex.response_body) == ("history", None, None, body)
    assert ex.header("set-cookie", response=True) == "sid=[REDACTED]; Path=/"


def test_an_ndjson_and_a_chunked_text_stream(harness):
    h = harness(chatkit_profile="")
    f = make_flow("POST", "http://backend/ndjson", b"")
    h.stream(f, [b'{"a": 1}\n{"a"', b': 2}\n', b'{"a": 3}'], response=make_response(ctype="application/x-ndjson"))
    g = make_flow("GET", "http://backend/plain", b"")
    h.stream(g, [b'0:"a"\n', b'0:"b"\n'], response=make_response(ctype="text/plain"))
    store = h.store()
    nd, plain = list(store.exchanges())
    assert nd.transport == "ndjson" and [json.loads(fr.text)["a"] for fr in store.frames(nd.index)] == [1, 2, 3]
    # a streamed body that is not the run's output is stored whole, as `import` stores it
    assert plain.transport is None and plain.response_body == b'0:"a"\n0:"b"\n' and plain.notes["chunks"] == 2
    assert nd.capability is None  # no profile: plain exchanges


def test_errors_become_connection_observations(harness):
    h = harness()
    cut = make_flow(body=b'{"runId": "cut"}')
    h.stream(cut, CHUNKS[:2] + [CHUNKS[2][:7]], end=False)
    cut.error = tflow.terr("HTTP/1 protocol error: peer closed connection without sending complete message body (incomplete chunked read)")
    h.rec.error(cut)
    gone = make_flow(body=b'{"runId": "gone"}')
    h.stream(gone, CHUNKS[:1], end=False)
    gone.error = tflow.terr("Client disconnected.")
    h.rec.error(gone)
    dead = make_flow(body=b'{"runId": "dead"}')
    h.rec.requestheaders(dead)
    h.rec.request(dead)
    dead.error = tflow.terr("[Errno 111] Connect call failed ('127.0.0.1', 9)")
    h.rec.error(dead)
    store = h.store(done=True)
    ex = {e.run_id: e for e in store.exchanges()}
    assert (ex["cut"].end, ex["cut"].status) == ("reset", 200)
    frames = store.frames(ex["cut"].index)
    assert [str(fr.error.kind) if fr.error else None for fr in frames] == [None, None, "truncated-event"]
    assert ex["gone"].end == "client-gone"
    assert (ex["dead"].status, ex["dead"].end, ex["dead"].notes["status_from"]) == (502, "error", "proxy")
    assert store.capture_errors() == []
    runs = {r["run_id"]: r for r in store.rows("runs")}
    assert (runs["cut"]["status"], runs["cut"]["connection"]) == ("running", "disconnected")


def test_websocket_messages_in_both_directions(harness):
    h = harness()
    f = tflow.twebsocketflow(messages=False)
    f.websocket.messages = []
    r = h.rec
    r.requestheaders(f)
    r.request(f)
    r.responseheaders(f)
    assert not f.response.stream
    r.response(f)
    r.websocket_start(f)
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    msgs = [(True, Opcode.TEXT, b'{"type": "auth", "token": "WSECRET"}'), (False, Opcode.TEXT, b'{"type": "hello"}'),
            (False, Opcode.BINARY, b"\x00\x01"), (True, Opcode.TEXT, b"bye")]
    for from_client, op, content in msgs:
        f.websocket.messages.append(WebSocketMessage(op, from_client, content, time.time()))
        r.websocket_message(f)
    f.websocket.close_code = 1000
    f.websocket.closed_by_client = True
    r.websocket_end(f)
    store = h.store()
    [ex] = list(store.exchanges())
    assert (ex.status, ex.transport, ex.end, ex.notes["close_code"]) == (101, "ws", "complete", 1000)
    frames = store.frames(ex.index)
    assert [fr.direction for fr in frames] == ["out", "in", "in", "out"]
    assert json.loads(frames[0].text)["token"].rstrip("*") in ("", "[REDACTED]")  # masked in place (issue 32)
    assert frames[1].text == '{"type": "hello"}' and frames[2].raw == b"\x00\x01" and frames[3].text == "bye"


def test_an_abnormal_websocket_close(harness):
    h = harness()
    f = tflow.twebsocketflow(messages=False)
    h.rec.requestheaders(f)
    h.rec.request(f)
    h.rec.response(f)
    f.websocket.close_code = 1006
    f.websocket.closed_by_client = True
    h.rec.websocket_end(f)
    [ex] = list(h.store().exchanges())
    assert ex.end == "client-gone"


# -- the queue bound and gaps ----------------------------------------------------------------


def test_a_full_queue_drops_the_copy_never_the_chunk_and_says_so(harness):
    h = harness()
    f = make_flow()
    r = h.rec
    r.requestheaders(f)
    r.request(f)
    f.response = make_response()
    r.responseheaders(f)
    tap = f.response.stream
    w = r.writer
    assert tap(CHUNKS[0]) is CHUNKS[0]
    w.produced += 10**9  # the writer looks hopelessly behind
    assert tap(CHUNKS[1]) is CHUNKS[1]  # dropped from the copy, not from the stream
    w.produced -= 10**9
    assert tap(CHUNKS[2]) is CHUNKS[2]
    assert tap(CHUNKS[3]) is CHUNKS[3]
    r.response(f)
    store = h.store(done=True)
    [ex] = list(store.exchanges())
    assert ex.notes["dropped_chunks"] == 1 and ex.notes["dropped_bytes"] == len(CHUNKS[1]) and ex.notes["incomplete"]
    frames = store.frames(ex.index)
    assert [fr.event_id for fr in frames] == ["e0", "e2", "e3"]
    assert frames[1].start == len(CHUNKS[0]) + len(CHUNKS[1])  # offsets still in stream coordinates
    assert store.get_meta("capture_stats")["queue_dropped"] == {"chunks": 1, "bytes": len(CHUNKS[1]), "flows": 1}


def test_a_gap_in_a_compressed_stream_stops_decoding_the_copy(harness):
    h = harness()
    body = gzip.compress(b"".join(CHUNKS * 20))
    pieces = [body[i : i + 40] for i in range(0, len(body), 40)]
    f = make_flow()
    r = h.rec
    r.requestheaders(f)
    r.request(f)
    f.response = make_response(headers={"content-encoding": "gzip"})
    r.responseheaders(f)
    tap = f.response.stream
    for i, p in enumerate(pieces):
        if i == 2:
            r.writer.produced += 10**9
        assert tap(p) is p
        if i == 2:
            r.writer.produced -= 10**9
    r.response(f)
    [ex] = list(h.store(done=True).exchanges())
    assert ex.notes["incomplete"] and "lost_after_gap" in ex.notes


# -- failures inside the addon ----------------------------------------------------------------


def test_a_failing_tap_still_returns_every_chunk_and_stores_one_error(harness, caplog):
    h = harness(chatkit_test_raise="tap")
    caplog.set_level(logging.WARNING, logger="chatkit_trace.capture")
    f = make_flow()
    h.stream(f, CHUNKS)
    g = make_flow(body=b'{"runId": "r2"}')
    h.stream(g, CHUNKS)
    store = h.store()
    errors = store.capture_errors()
    assert {e["where"] for e in errors} == {"tap"} and len(errors) == 2  # once per flow
    assert "injected" in errors[0]["message"]
    assert sum("capture error in tap" in r.getMessage() for r in caplog.records) == 1  # logged once


def test_failing_hooks_never_raise_into_mitmproxy(harness):
    h = harness(chatkit_test_raise="hooks")
    f = make_flow()
    r = h.rec
    r.requestheaders(f)
    r.request(f)
    f.response = make_response()
    r.responseheaders(f)
    assert not f.response.stream  # the hook failed before switching: mitmproxy's default applies
    r.response(f)
    f.error = tflow.terr("Client disconnected.")
    r.error(f)
    w = tflow.twebsocketflow()
    r.websocket_start(w)
    r.websocket_message(w)
    r.websocket_end(w)
    errors = h.store().capture_errors()
    assert {"requestheaders", "request", "responseheaders", "response", "error", "websocket_start",
            "websocket_message", "websocket_end"} <= {e["where"] for e in errors}


def test_a_failing_writer_goes_on_with_the_next_message(harness):
    h = harness(chatkit_test_raise="writer")
    f = make_flow()
    h.stream(f, CHUNKS)
    store = h.store()
    [ex] = list(store.exchanges())
    assert ex.end == "complete" and store.frames(ex.index) == []
    errors = store.capture_errors()
    assert errors and errors[0]["where"] == "writer:c" and errors[0]["exchange_id"] == ex.index


def test_the_recorder_does_nothing_without_a_writer():
    rec = Recorder()
    f = make_flow()
    rec.requestheaders(f)
    rec.request(f)
    f.response = make_response()
    rec.responseheaders(f)
    rec.response(f)
    assert not f.response.stream


# -- facts, log lines, marks ------------------------------------------------------------------


def test_each_finished_run_is_derived_and_logged_once(harness, caplog):
    h = harness()
    caplog.set_level(logging.INFO, logger="chatkit_trace.capture")
    h.stream(make_flow(), CHUNKS)
    bad = [sse_event(0, {"type": "started", "run": "r2"}), sse_event(1, {"type": "done"}), sse_event(2, {"type": "text", "text": "late"})]
    h.stream(make_flow(body=b'{"runId": "r2"}'), bad)
    store = h.store(done=True)
    runs = {r["run_id"]: r for r in store.rows("runs")}
    assert runs["r1"]["status"] == "completed" and runs["r1"]["facts"] > 0
    lines = [r.getMessage() for r in caplog.records if "run r1:" in r.getMessage() or "run r2:" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith("chatkit-trace: session s1 run r1: completed, ") and lines[0].endswith("no rejections; no findings")
    # the late chunk is lost output: no rejection, but check's CK101, and the line says so
    assert lines[1].endswith("no rejections; findings: CK101 error"), lines[1]
    facts = list(store.rows("facts"))
    assert facts and {f["session_id"] for f in facts} == {"s1"}


async def test_a_finished_runs_flows_are_marked_and_commented_on_the_loop(tmp_path):
    rec = Recorder()
    view = View()
    with taddons.context(rec, view) as tctx:
        tctx.configure(rec, chatkit_db=str(tmp_path / "t.db"), chatkit_profile="myproto")
        rec.running()
        threads: list[str] = []
        original = rec._mark_flows

        def spy(*args):
            import threading

            threads.append(threading.current_thread().name)
            original(*args)

        rec.writer.on_mark = spy
        f = make_flow()
        view.add([f])
        Harness(rec, tctx, tmp_path / "t.db").stream(f, CHUNKS)
        for _ in range(1500):  # the deriver process derives it and the loop marks it (bounded)
            if f.marked:
                break
            await asyncio.sleep(0.02)
        assert f.marked == ":white_check_mark:"
        assert f.comment.startswith("session s1 run r1: completed")
        assert threads == ["MainThread"]  # on the event loop, not a thread of ours
        rec.done()


# -- caps -------------------------------------------------------------------------------------


def test_max_age_drops_old_exchanges_and_says_what_it_dropped(harness, monkeypatch):
    monkeypatch.setattr(writer_mod, "CAP_INTERVAL", 0.05)
    h = harness(chatkit_max_age="1h")
    old = make_flow(body=b'{"runId": "old"}')
    old.request.timestamp_start = time.time() - 7200
    h.stream(old, CHUNKS, end_at=time.time() - 7100)
    h.stream(make_flow(body=b'{"runId": "new"}'), CHUNKS)
    store = h.store()
    for _ in range(100):
        if store.get_meta("dropped"):
            break
        time.sleep(0.05)
    dropped = store.get_meta("dropped")
    assert dropped["by_age"] == 1 and dropped["frames"] == 4
    assert [e.run_id for e in store.exchanges()] == ["new"]


def test_max_db_mb_keeps_the_file_bounded(harness, monkeypatch):
    monkeypatch.setattr(writer_mod, "CAP_INTERVAL", 0.01)
    h = harness(chatkit_max_db_mb=1)
    big = [sse_event(i, {"type": "text", "text": "x" * 20000}) for i in range(10)]
    for i in range(12):
        h.stream(make_flow(body=json.dumps({"runId": f"b{i}"}).encode()), big)
        h.rec.writer.sync()
        time.sleep(0.03)
    store = h.store(done=True)
    dropped = store.get_meta("dropped")
    assert dropped["by_size"] >= 1
    recorded = store.db.execute("SELECT SUM(LENGTH(text)) FROM frames").fetchone()[0]
    assert recorded <= 1024 * 1024  # the cap counts recorded data; derived tables come on top
    kept = [e.run_id for e in store.exchanges()]
    assert kept[-1] == "b11" and "b0" not in kept


# -- configuration changes, the entry script, the commands -------------------------------------


def test_changing_the_db_option_switches_files(harness, tmp_path):
    h = harness()
    h.stream(make_flow(), CHUNKS)
    h.tctx.configure(h.rec, chatkit_db=str(tmp_path / "second.db"))
    h.stream(make_flow(body=b'{"runId": "r2"}'), CHUNKS)
    h.rec.done()
    assert [e.run_id for e in TraceStore(h.db, readonly=True).exchanges()] == ["r1"]
    assert [e.run_id for e in TraceStore(tmp_path / "second.db", readonly=True).exchanges()] == ["r2"]


def test_the_entry_script_loads_under_mitmproxys_made_up_module_name(tmp_path):
    with taddons.context() as tctx:
        module = tctx.script(str(ADDON))
        assert module.__name__ == "__mitmproxy_script__.addon"  # not importable: absolute imports only
        [addon] = module.addons
        assert type(addon).__name__ == "Recorder" and type(addon).__module__ == "chatkit_trace.capture.recorder"


def test_record_builds_the_mitmdump_command_line(tmp_path):
    args = argparse.Namespace(profile="openai", upstream="http://127.0.0.1:8000", port=9000, host="127.0.0.1",
                              db=str(tmp_path / "t.db"), redact="x-org", keep_secrets=False, max_db_mb=50, max_age="2h",
                              web=False, fault=None, extra=["--", "-v"])
    argv = recordcmd.mitmdump_args(args)
    assert argv[:2] == ["-s", recordcmd.addon_path()] and Path(argv[1]).is_file()
    assert argv[2:] == [
        "--mode", "reverse:http://127.0.0.1:8000", "--listen-host", "127.0.0.1", "-p", "9000",
        "--set", "connection_strategy=lazy", "--set", "chatkit_profile=openai", "--set", f"chatkit_db={tmp_path / 't.db'}",
        "--set", "chatkit_redact=x-org", "--set", "chatkit_max_db_mb=50", "--set", "chatkit_max_age=2h", "-v",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["record", "--profile", "myproto", "--upstream", "ftp://x"], "--upstream must be an http"),
        (["record", "--profile", "myproto", "--upstream", "http://x", "--port", "0"], "--port must be"),
        (["record", "--profile", "nosuch", "--upstream", "http://x"], "--profile nosuch:"),
        (["record", "--profile", "myproto", "--upstream", "http://x", "--fault", "drop"], "--fault: fault rule 'drop'"),
    ],
)
def test_record_usage_errors_are_one_line(capsys, argv, message):
    from chatkit_trace.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_addon_path_command(capsys):
    from chatkit_trace.cli import main

    assert main(["addon-path"]) == 0
    assert capsys.readouterr().out.strip() == str(ADDON)


def test_the_recorder_module_needs_no_loop_for_its_options():
    assert recorder_mod.DERIVE_MODES == ("live", "end", "off")


def test_a_json_answer_that_is_the_runs_output_becomes_a_redacted_body_frame(tmp_path, harness):
    profile = tmp_path / "answers.toml"
    profile.write_text(
        'extends = "myproto"\nname = "answers"\n'
        '[[routes]]\ncapability = "run"\nmethod = "POST"\npath = "/answer"\nsession = "constant:s1"\nrun = "body:runId"\n'
        'output = "body"\n'
    )
    h = harness(chatkit_profile=str(profile))
    f = make_flow("POST", "http://backend/answer", b'{"runId": "a1"}')
    body = json.dumps({"type": "done", "text": "hi", "token": "BSECRET"}).encode()
    h.whole(f, make_response(200, "application/json", body, length=True))
    store = h.store()
    [ex] = list(store.exchanges())
    assert (ex.capability, ex.run_id, ex.transport, ex.end) == ("run", "a1", "body", "complete")
    [frame] = store.frames(ex.index)
    assert frame.transport == "body" and json.loads(frame.text)["token"] == "[REDACTED]"
    assert "frame:0" in ex.notes["redacted"] and "response.body" in ex.notes["redacted"]
    assert b"BSECRET" not in h.db.read_bytes()


def test_a_response_made_by_another_addon_is_recorded_too(harness):
    h = harness()
    f = make_flow("GET", "http://backend/sessions/s1/runs", b"")
    h.rec.requestheaders(f)
    h.rec.request(f)
    f.response = make_response(200, "application/json", b'{"runs": []}', length=True)  # e.g. map_local
    h.rec.response(f)
    [ex] = list(h.store().exchanges())
    assert (ex.status, ex.response_body, ex.header("content-type", response=True)) == (200, b'{"runs": []}', "application/json")


def test_once_mitmproxy_exits_nothing_reaches_the_client_unrecorded(harness):
    """mitmdump calls ``done`` when it exits while connections may still be
    open for a moment; what they would carry then could not be stored.  The
    recorder withholds it: a stream's later chunks are not sent on, a
    WebSocket message is dropped, a response or a new request is killed.
    So the client never has an event the trace lacks (the end-to-end test
    counts them).  A script reload, which calls ``done`` without exiting,
    withholds nothing."""
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    for exiting in (True, False):
        h = harness(db=f"exit-{exiting}.db")
        r = h.rec
        f = make_flow()
        r.requestheaders(f)
        r.request(f)
        f.response = make_response()
        r.responseheaders(f)
        tap = f.response.stream
        assert tap(CHUNKS[0]) is CHUNKS[0]
        g = tflow.twebsocketflow(messages=False)
        g.websocket.messages = []
        for hook in (r.requestheaders, r.request, r.responseheaders, r.response, r.websocket_start):
            hook(g)
        g.websocket.messages.append(WebSocketMessage(Opcode.TEXT, False, b'{"type": "hello"}', time.time()))
        r.websocket_message(g)
        if exiting:
            h.tctx.master.should_exit.set()
        r.done()
        late = tap(CHUNKS[1])
        g.websocket.messages.append(WebSocketMessage(Opcode.TEXT, False, b'{"type": "late"}', time.time()))
        r.websocket_message(g)
        whole, new = make_flow(), make_flow()
        whole.live = new.live = True
        whole.response = make_response(ctype="application/json", content=b"{}", length=True)
        r.response(whole)
        r.requestheaders(new)
        assert r.closed is exiting
        if exiting:
            assert late == b"" and g.websocket.messages[-1].dropped
            assert whole.error is not None and new.error is not None  # killed: never sent on
        else:
            assert late is CHUNKS[1] and not g.websocket.messages[-1].dropped
            assert whole.error is None and new.error is None
        store = TraceStore(h.db, readonly=True)
        frames = {ex.transport: [fr.text for fr in store.frames(ex.index)] for ex in store.exchanges()}
        assert frames["sse"] == [CHUNKS[0].decode().split("data: ")[1].split("\n")[0]]
        assert frames["ws"] == ['{"type": "hello"}']
        h.tctx.master.should_exit.clear()
