"""The recorder follows secret values (issue 16): what a request's headers,
query and body carry is masked in the response's frames, bodies, errors,
capture errors and log lines before the first write; the flow keeps every
byte; options changed mid-recording keep what was learned; keep_secrets
turns it all off.  Hook by hook through mitmproxy's test helpers, with the
real writer thread and a real SQLite file."""

from __future__ import annotations

import json
import logging

from mitmproxy.test import tflow

from chatkit_trace.masking import mask

from .test_recorder import harness, make_flow, make_response, sse_event  # noqa: F401 - the fixture

TOKEN = "tok-" + "Wq4Er5Ty6Ui7Op8"
COOKIE = "sess-" + "As1Df2Gh3Jk4"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhYmMxMjMifQ.c2lnLXZhbHVlLTEyMzQ1"
HEADERS = {"authorization": f"Bearer {TOKEN}", "cookie": f"session={COOKIE}; theme=dark"}


def echo_chunks(run_id: str = "r1") -> list[bytes]:
    return [
        sse_event(0, {"type": "started", "run": run_id}),
        sse_event(1, {"type": "text", "text": f"you sent {TOKEN}"}),
        sse_event(2, {"type": "debug", "cookie": f"session={COOKIE}", "jwt": JWT}),
        sse_event(3, {"type": "done"}),
    ]


def files_hold(h, *secrets: str) -> list[str]:
    found = []
    for p in h.db.parent.glob("t.db*"):
        data = p.read_bytes()
        found += [f"{s} in {p.name}" for s in secrets if s.encode() in data]
    return found


def test_echoed_values_are_masked_in_frames_before_the_first_write(harness):
    h = harness()
    f = make_flow(headers=HEADERS)
    chunks = echo_chunks()
    h.stream(f, chunks[:2] + [chunks[2][:17], chunks[2][17:]] + chunks[3:])  # a secret split across chunks
    assert f.request.headers["authorization"] == f"Bearer {TOKEN}"  # the flow is untouched
    store = h.store()
    [ex] = list(store.exchanges())
    frames = store.frames(ex.index)
    assert json.loads(frames[1].text)["text"] == f"you sent {mask(len(TOKEN))}"
    debug = json.loads(frames[2].text)
    assert debug == {"type": "debug", "cookie": f"session={mask(len(COOKIE))}", "jwt": mask(len(JWT))}
    offsets = 0
    for chunk, fr in zip(chunks, frames, strict=True):
        assert (fr.start, fr.end) == (offsets, offsets + len(chunk) - 1)  # offsets of the bytes sent
        offsets += len(chunk)
    assert {"frame:1", "frame:2"} <= set(ex.notes["redacted"])
    kinds = {(s["where"], s["kind"]) for s in ex.notes["scrubbed"]}
    assert kinds == {("frame:1", "learned"), ("frame:2", "learned"), ("frame:2", "jwt")}
    assert files_hold(h, TOKEN, COOKIE, JWT) == []
    store.close()
    runs = {r["run_id"]: r for r in h.store(done=True).rows("runs")}
    assert runs["r1"]["status"] == "completed"  # masks keep the JSON valid: it decodes as before


def test_errors_capture_errors_and_log_lines_are_masked(harness, caplog):
    caplog.set_level(logging.INFO, logger="chatkit_trace.capture")
    h = harness()
    # The run id is the secret itself: the log line about it, the row and the facts all mask it.
    f = make_flow(headers={"authorization": f"Bearer {TOKEN}"}, body=json.dumps({"runId": TOKEN}).encode())
    h.stream(f, echo_chunks(TOKEN)[:2], end=False)
    f.error = tflow.terr(f"upstream refused key {TOKEN}")
    h.rec.error(f)
    # Failures on the loop: stored and logged by the writer after the flow's headers taught it the token.
    h.rec._failed("tap", RuntimeError(f"boom near {TOKEN}"), f.id)
    h.rec._failed("response", ValueError(f"a message quoting {TOKEN}"), f.id)
    h.rec._failed("response", ValueError(f"a message quoting {TOKEN}"), f.id)  # once per kind and flow
    store = h.store(done=True)
    [ex] = list(store.exchanges())
    assert ex.error == f"upstream refused key {mask(len(TOKEN))}" and ex.run_id == mask(len(TOKEN))
    messages = sorted(e["message"] for e in store.capture_errors())
    assert messages == [f"RuntimeError: boom near {mask(len(TOKEN))}", f"ValueError: a message quoting {mask(len(TOKEN))}"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"run {mask(len(TOKEN))}:" in logged and "boom near [REDACTED]" in logged
    assert logged.count("capture error in response") == 1
    assert TOKEN not in logged
    assert files_hold(h, TOKEN) == []


def test_non_streamed_bodies_and_client_messages_follow_the_learned_values(harness):
    h = harness()
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {TOKEN}", "cookie": COOKIE}}).encode()
    f = make_flow(headers=HEADERS)
    h.whole(f, make_response(401, "application/json", body, length=True))
    assert f.response.content == body
    w = tflow.twebsocketflow()
    w.request.headers["authorization"] = f"Bearer {TOKEN}"
    r = h.rec
    r.websocket_start(w)
    from mitmproxy import websocket

    for content, from_client in ((f'{{"echo": "{TOKEN}"}}'.encode(), False), (f"auth {COOKIE}".encode(), True)):
        w.websocket.messages.append(websocket.WebSocketMessage(1, from_client, content))
        r.websocket_message(w)
    r.websocket_end(w)
    store = h.store()
    exs = list(store.exchanges(with_frames=True))
    err = next(e for e in exs if e.status == 401)
    assert json.loads(err.response_body)["error"]["message"] == f"Incorrect API key provided: {mask(len(TOKEN))}"
    ws = next(e for e in exs if e.transport == "ws")
    assert [fr.text for fr in ws.frames][-2:] == [f'{{"echo": "{mask(len(TOKEN))}"}}', f"auth {mask(len(COOKIE))}"]
    assert files_hold(h, TOKEN, COOKIE) == []


def test_new_options_mid_recording_keep_what_was_learned(harness):
    h = harness()
    h.stream(make_flow(headers=HEADERS), echo_chunks()[:1])
    assert h.rec.writer.config.redact == ""
    h.tctx.configure(h.rec, chatkit_redact="x-tenant")  # a new redactor (in the writer process), the same recording
    assert h.rec.writer.sync()
    assert h.rec.writer.config.redact == "x-tenant"
    h.stream(make_flow(body=b'{"runId": "r2"}'), echo_chunks("r2"))  # no headers this time: only memory knows
    store = h.store()
    [ex] = [e for e in store.exchanges() if e.run_id == "r2"]
    assert json.loads(store.frames(ex.index)[1].text)["text"] == f"you sent {mask(len(TOKEN))}"


def test_keep_secrets_stores_everything_as_it_was(harness):
    h = harness(chatkit_keep_secrets=True)
    h.stream(make_flow(headers=HEADERS), echo_chunks())
    store = h.store()
    [ex] = list(store.exchanges())
    assert TOKEN in store.frames(ex.index)[1].text and "scrubbed" not in ex.notes
    assert store.get_meta("redaction") == "off"
    assert files_hold(h, TOKEN, JWT)
