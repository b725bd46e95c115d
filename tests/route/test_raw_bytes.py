"""Raw bytes are raw (issue 32): an SSE event that is not valid UTF-8 keeps
the bytes received (``raw``) beside its U+FFFD text, and a client WebSocket
JSON message is stored as it was sent with its secret fields masked in place
(same byte length), not re-serialised.  Secrets are masked in both, lengths
kept; the stored frame reads back the same, and a fixture serves the
original bytes again."""

from __future__ import annotations

import json

from chatkit_trace.fixtures.convert import frame_bytes
from chatkit_trace.masking import mask
from chatkit_trace.route import Redactor
from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange, frames_from_body
from chatkit_trace.wire import Frame

TOKEN = "sk-proj-" + "Zq8xLm2Vb7Nc4Rt6Yw1Pk9Hs3Df5Gj0Au"


def test_an_invalid_utf8_event_keeps_its_bytes_masked_and_stored(tmp_path):
    data = b'{"type": "text", "text": "caf\xe9 ' + TOKEN.encode() + b' \xff"}'
    body = b"data: " + data + b"\n\ndata: {\"type\": \"done\"}\n\n"
    frames = frames_from_body(body, 0)
    assert frames[0].raw == data and "\ufffd" in frames[0].text  # the bytes and what a browser decodes
    assert frames[1].raw is None  # valid events stay text only
    ex = Exchange(index=0, method="POST", url="http://b/sessions/s1/runs", status=200, transport="sse",
                  response_headers=[("content-type", "text/event-stream")], frames=frames)
    out = Redactor().redact_exchange(ex)
    raw = out.frames[0].raw
    assert raw is not None and len(raw) == len(data) and TOKEN.encode() not in raw
    assert raw == data.replace(TOKEN.encode(), mask(len(TOKEN)).encode())  # only the secret changed, in place
    assert TOKEN not in out.frames[0].text
    with TraceStore(tmp_path / "t.db", create=True) as store:
        store.add_exchange(out)
    with TraceStore(tmp_path / "t.db", readonly=True) as store:
        [stored] = store.frames(0)[:1]
    assert stored.raw == raw and stored.text == out.frames[0].text
    assert frame_bytes(stored) == b"data: " + raw + b"\n\n"  # a fixture serves the bytes received
    assert TOKEN.encode() not in (tmp_path / "t.db").read_bytes()


def test_a_client_websocket_message_is_stored_as_sent_with_its_secret_masked_in_place():
    sent = '{ "type" : "auth",\n  "token": "wstoken-0b1c2d3e4f5a", "nested": {"password": 12345678, "ok": true} }'
    ex = Exchange(index=0, method="GET", url="ws://b/ws", status=101, transport="ws",
                  frames=[Frame(0, 0, "ws", "out", sent), Frame(0, 1, "ws", "in", '{"echo": "wstoken-0b1c2d3e4f5a"}')])
    red = Redactor()
    out = red.redact_exchange(ex)
    got = out.frames[0].text
    assert len(got.encode()) == len(sent.encode())  # the mask keeps the length: offsets stay true
    assert got == sent.replace('"wstoken-0b1c2d3e4f5a"', f'"{mask(20)}"').replace("12345678", '"******"')
    assert json.loads(got)["type"] == "auth"  # still the same JSON document, the layout as sent
    assert "wstoken-0b1c2d3e4f5a" in set(red.secrets)  # learned: masked where it travels
    assert "wstoken-0b1c2d3e4f5a" not in out.frames[1].text
    assert "frame:0" in out.notes["redacted"]


def test_an_old_trace_without_raw_bytes_for_invalid_events_still_opens(tmp_path):
    """Nothing in the schema changed: a frame with text only (as older versions stored it) reads as before."""
    path = tmp_path / "old.db"
    with TraceStore(path, create=True) as store:
        store.add_exchange(Exchange(index=0, method="POST", url="http://b/x", status=200, transport="sse",
                                    frames=[Frame(0, 0, "sse", "in", "caf\ufffd", start=6, end=10)]))
    with TraceStore(path, readonly=True) as store:
        [f] = store.frames(0)
    assert f.raw is None and f.text == "caf\ufffd"
    assert frame_bytes(f) == "data: caf\ufffd\n\n".encode()
