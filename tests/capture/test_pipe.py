"""The recorder's pipes (``capture/_pipe.py``, ``capture/_messages.py``): every
message crosses as it was sent, batches survive any cut of the byte stream,
and a message its receiver cannot decode stands alone."""

from __future__ import annotations

import logging
import os

import msgspec
import pytest

from chatkit_trace.capture import _messages as m
from chatkit_trace.capture._pipe import HEADER, Unpacker, deriver_unpacker, pack, proxy_unpacker, read_some, writer_unpacker
from chatkit_trace.capture.writer import WriterConfig

HEADERS = ((b"content-type", b"text/event-stream"), (b"x-\xff", b"\x00\xfe"))

TO_WRITER = [
    m.Hello(["/a", "/b"]),
    m.Configure.of(WriterConfig(db="/tmp/x.db", redact="x-tenant", test_raise=frozenset({"tap"}))),
    m.Request("f1", 1.5, "POST", "http://h/runs?k=v", HEADERS),
    m.RequestBody("f1", b"\x1f\x8b raw", "gzip", False),
    m.RequestBody("f1", None, None, True),
    m.ResponseHead("f1", 2.25, 200, HEADERS, "sse"),
    m.ResponseHead("f1", 2.25, 502, (), None),
    m.Chunk("f1", 3.125, b"data: {}\n\n"),
    m.Gap("f1", 3, 120),
    m.SocketMessage("f2", 4.0, b"\x00\x01", False, True),
    m.End("f1", 5.0, "complete", None, None, {"fault": {"kind": "cut", "at": [1, 2]}}, (2, 64)),
    m.End("f2", 5.5, "proxy-error", "connect failed", b"body", None, None),
    m.TrapError("f1", "tap", "RuntimeError: x", "chatkit-trace: capture error"),
    m.TrapError(None, "hooks", None, None),
    m.DeriverStopped({"mode": "live", "state": "stopped", "at": 1.0}, "the deriver process exited"),
    m.Sync(7),
    m.Stop(),
]
TO_PROXY = [
    m.Log(logging.WARNING, "chatkit-trace: a line"),
    m.Mark(["f1", "f2"], ":red_circle:", "session s run r: failed"),
    m.Synced(7),
    m.Ready(123, 42, (1, 30)),
    m.OpenError("cannot open x.db"),
    m.Stopped({"queue_dropped": {"chunks": 0, "bytes": 0, "flows": 0}, "orphans": 0, "errors": 0}),
    m.Done({"state": "complete", "frames": 0}),
    m.Learned(["s3cret-value"]),
]
TO_DERIVER = [m.Hello(["/a"]), m.Learn(["s3cret-value"]), m.Final()]


@pytest.mark.parametrize(
    ("unpacker", "messages"),
    [(writer_unpacker, TO_WRITER), (proxy_unpacker, TO_PROXY), (deriver_unpacker, TO_DERIVER)],
)
def test_every_message_arrives_as_sent_whatever_the_cuts(unpacker, messages):
    data = pack(messages[:3]) + pack(messages[3:]) + pack([messages[0]])
    whole = unpacker().feed(data)
    assert whole == [*messages, messages[0]]
    assert [type(x) for x in whole] == [*map(type, messages), type(messages[0])]
    for cut in (1, HEADER.size - 1, HEADER.size, HEADER.size + 1, len(data) // 2, len(data) - 1):
        u = unpacker()
        got = u.feed(data[:cut]) + u.feed(data[cut:])
        assert got == whole, cut
    one_by_one = unpacker()
    assert [x for i in range(len(data)) for x in one_by_one.feed(data[i : i + 1])] == whole


def test_the_options_cross_whole():
    config = TO_WRITER[1].config
    [got] = writer_unpacker().feed(pack([TO_WRITER[1]]))
    assert isinstance(got, m.Configure) and got.config == config
    assert got.config.test_raise == frozenset({"tap"})


def test_the_kinds_on_the_wire_are_the_pipes_old_tags():
    """The tag of each message is the kind its tuple started with (capture
    errors name it: ``writer:c``)."""
    kinds = {m.kind_of(x) for x in TO_WRITER}
    assert kinds == {"hello", "cfg", "req", "body", "head", "c", "gap", "ws", "end", "err", "derivation", "sync", "stop"}
    assert msgspec.msgpack.decode(pack([m.Chunk("f", 1.0, b"x")])[HEADER.size :]) == [["c", "f", 1.0, b"x"]]


def test_a_message_the_union_does_not_allow_stands_alone():
    data = msgspec.msgpack.encode([m.Chunk("f", 1.0, b"a"), ["c", "f", "not a time", b"b"], ["nope", 1], m.Gap("f", 1, 2)])
    got = writer_unpacker().feed(HEADER.pack(len(data)) + data)
    assert got[0] == m.Chunk("f", 1.0, b"a") and got[3] == m.Gap("f", 1, 2)
    assert isinstance(got[1], m.Undecodable) and got[1].error.startswith("'c'")
    assert isinstance(got[2], m.Undecodable) and got[2].error.startswith("'nope'")
    # a message of another pipe is not the writer's either
    assert isinstance(writer_unpacker().feed(pack([m.Log(20, "x")]))[0], m.Undecodable)


def test_read_some_says_when_the_pipe_ended():
    r, w = os.pipe()
    try:
        os.write(w, pack(TO_PROXY[:2]))
        u: Unpacker[m.ToProxy] = proxy_unpacker()
        assert read_some(r, u, 5.0) == (TO_PROXY[:2], False)
        assert read_some(r, u, 0.0) == ([], False)
        os.close(w)
        w = -1
        assert read_some(r, u, 5.0) == ([], True)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
