"""Events, re-encoding and the pump, without a network (fast)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass

import pytest

from chatkit_trace.addons.fault_rules import parse_rule
from chatkit_trace.addons.fault_stream import (
    END,
    RESET,
    Applied,
    BlockSplitter,
    Encoder,
    LineSplitter,
    Piece,
    Pump,
    can_reencode,
    corrupt,
    sse_event_id,
)
from chatkit_trace.wire import SSEParser, make_decoder

STREAM = (
    b"\xef\xbb\xbf: hello\n\n"
    b'id: e0\ndata: {"n": 0}\n\n'
    b'id: e1\r\ndata: {"n": 1}\r\n\r\n'
    b'id: e2\rdata: {"n": 2}\r\r'
    b"event: x\ndata: a\ndata: b\n\n"
    b'id: e4\ndata: {"n"'
)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_blocks_are_cut_at_blank_lines_whatever_the_split(step):
    s = BlockSplitter()
    blocks = []
    for i in range(0, len(STREAM), step):
        blocks += s.feed(STREAM[i : i + step])
    rest = s.flush()
    assert b"".join(blocks) + rest == STREAM  # nothing lost, nothing added
    assert len(blocks) == 5 and rest == b'id: e4\ndata: {"n"'
    assert [sse_event_id(b) for b in blocks] == [
        (False, None),
        (True, "e0"),
        (True, "e1"),
        (True, "e2"),
        (True, None),
    ]


def test_a_cr_at_the_end_of_a_chunk_waits_for_its_lf():
    s = BlockSplitter()
    assert s.feed(b"data: 1\r\n\r") == []
    assert s.feed(b"\ndata: 2\n\n") == [b"data: 1\r\n\r\n", b"data: 2\n\n"]


def test_lines():
    s = LineSplitter()
    assert s.feed(b'{"a":1}\n{"b"') == [b'{"a":1}\n']
    assert s.feed(b":2}\n\n") == [b'{"b":2}\n', b"\n"]
    assert s.flush() == b""


@pytest.mark.parametrize("coding", [None, "gzip", "deflate", "br", "zstd"])
def test_reencoded_pieces_decode_one_by_one(coding):
    enc = Encoder(coding)
    dec = make_decoder(coding)
    pieces = [b"id: e0\ndata: 1\n\n", b"id: e1\ndata: 2\n\n", b"id: e2\ndata: 3\n\n"]
    out = b""
    for p in pieces:
        got = dec.decode(enc.encode(p))
        assert got == p  # each piece decodes as soon as it arrives: it stays a live stream
        out += got
    out += dec.decode(enc.finish()) + dec.flush()
    assert out == b"".join(pieces) and dec.error is None


def test_what_can_be_reencoded():
    assert (
        can_reencode(None)
        and can_reencode("gzip")
        and can_reencode("identity")
        and can_reencode(" BR ")
    )
    assert not can_reencode("gzip, br") and not can_reencode("compress")


def test_corruption_keeps_the_framing():
    p = Piece(b'id: e3\ndata: {"type":"text","text":"hello"}\n\n', True, 0.0, "e3")
    bad = corrupt(p, "json")
    assert bad.data == b'id: e3\ndata: {"type":"text",\n\n'
    [ev] = SSEParser().feed(bad.data)
    assert ev.id == "e3"
    with pytest.raises(ValueError):
        json.loads(ev.data)
    u = corrupt(p, "utf8")
    assert (
        b"\xff\xfe" in u.data
        and u.data.startswith(b"id: e3\ndata: {")
        and u.data.endswith(b"}\n\n")
    )
    [ev] = SSEParser().feed(u.data)
    assert ev.error is not None  # the project's parser reports the bytes
    line = corrupt(Piece(b'{"a": 1}\n', True, 0.0, kind="ndjson"), "json")
    assert line.data == b'{"a"\n'
    assert corrupt(Piece(b"x", True, 0.0, kind="ws"), "json").data == b"{"


class FakeSink:
    def __init__(self) -> None:
        self.sent: list[tuple[float, bytes]] = []
        self.how: str | None = None

    async def send(self, piece: Piece) -> None:
        self.sent.append((asyncio.get_running_loop().time(), piece.data))

    async def end(self) -> None:
        self.how = "end"
        self.end_at = asyncio.get_running_loop().time()

    async def close(self) -> None:
        self.how = "close"

    async def reset(self) -> None:
        self.how = "reset"


def _events(n: int, t: float) -> list[Piece]:
    return [Piece(f"id: e{i}\ndata: {i}\n\n".encode(), True, t, f"e{i}") for i in range(n)]


@dataclass
class Pumped:
    ended: str
    ids: list[str]
    notes: dict
    sink: FakeSink
    t0: float


async def _pump(rules: list[str], pieces: list[Piece | str], *, seed: int = 1, gap: float = 0.0):
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue()
    notes: dict = {}
    sink = FakeSink()
    parsed = [(parse_rule(r), random.Random(f"{seed}:{i}:1")) for i, r in enumerate(rules)]
    pump = Pump(parsed, Applied(notes, 0.0), sink)

    async def feed() -> None:
        for p in pieces:
            if isinstance(p, Piece):
                p = Piece(p.data, p.event, loop.time(), p.eid, p.kind)
            q.put_nowait(p)
            if gap:
                await asyncio.sleep(gap)

    t0 = loop.time()
    feeder = asyncio.ensure_future(feed())
    ended = await pump.run(q)
    feeder.cancel()
    ids = [
        d.split(b"\n")[0].decode()[4:] if d.startswith(b"id:") else d.decode() for _, d in sink.sent
    ]
    return Pumped(ended, ids, notes, sink, t0)


async def test_no_rule_forwards_everything_and_ends_the_same_way():
    r = await _pump([], [*_events(3, 0), END])
    assert (r.ended, r.ids, r.sink.how) == ("complete", ["e0", "e1", "e2"], "end")
    r = await _pump([], [*_events(2, 0), RESET])
    assert (r.ended, r.ids, r.sink.how) == (
        "reset",
        ["e0", "e1"],
        "reset",
    )  # a backend reset is mirrored


async def test_cut_after_n_events():
    r = await _pump(["cut:after=2"], [*_events(5, 0), END])
    assert (r.ended, r.ids, r.sink.how) == ("cut-reset", ["e0", "e1"], "reset")
    [a] = r.notes["applied"]
    assert (a["kind"], a["event"], a["event_id"], a["frame"], a["mode"]) == (
        "cut",
        2,
        "e1",
        1,
        "reset",
    )
    r = await _pump(["cut:after=0,mode=close"], [*_events(5, 0), END])
    assert (r.ended, r.ids, r.sink.how) == ("cut-close", [], "close")


async def test_comments_pass_and_do_not_count():
    keepalive = Piece(b": ping\n\n", False, 0.0)
    r = await _pump(["drop:at=2"], [keepalive, *_events(3, 0), keepalive, END])
    assert r.ids == [": ping\n\n", "e0", "e2", ": ping\n\n"]
    assert r.notes["applied"][0]["event_id"] == "e1"


async def test_dup_drop_swap_corrupt_compose():
    r = await _pump(["dup:at=1", "drop:at=3", "swap:at=4", "corrupt:at=6"], [*_events(7, 0), END])
    assert r.ids == ["e0", "e0", "e1", "e4", "e3", "e5", "e6"]
    assert r.sink.sent[5][1] == b"id: e5\ndata: {\n\n"  # "5" is too short to halve: "{"
    by_kind = {a["kind"]: a for a in r.notes["applied"]}
    assert by_kind["dup"]["frame"] == 1 and by_kind["drop"]["frame"] == 3
    assert by_kind["swap"] == {
        **by_kind["swap"],
        "event": 4,
        "event_id": "e3",
        "swapped_with": 5,
        "frame": 3,
    }
    assert by_kind["corrupt"]["frame"] == 5 and "not_applied" not in r.notes


async def test_rules_that_never_fire_say_why():
    r = await _pump(["cut:after=9", "swap:at=2"], [*_events(2, 0), END])
    assert r.ids == ["e0", "e1"]
    assert [n["why"] for n in r.notes["not_applied"]] == [
        "event 2 was the last one: nothing to swap it with",
        "the stream ended after 2 event(s)",
    ]


async def test_delay_shifts_every_event_and_the_end():
    r = await _pump(["delay:by=150ms"], [*_events(3, 0), END])
    assert r.ids == ["e0", "e1", "e2"] and r.ended == "complete"
    assert r.sink.sent[0][0] - r.t0 >= 0.14
    assert r.sink.sent[2][0] - r.sink.sent[0][0] < 0.1  # shifted, not spread: spacing kept
    [a] = r.notes["applied"]
    assert (a["kind"], a["events"], a["max_ms"]) == ("delay", 3, 150.0)


async def test_jitter_is_seeded():
    rule = "delay:by=0ms,jitter=40ms"
    draws = random.Random("5:0:1")
    expect = [draws.uniform(0.0, 0.04) for _ in range(4)]
    r = await _pump([rule], [*_events(4, 0), END], seed=5)
    [a] = r.notes["applied"]
    assert a["total_ms"] == round(sum(expect) * 1000, 1) and a["max_ms"] == round(
        max(expect) * 1000, 1
    )
    again = (await _pump([rule], [*_events(4, 0), END], seed=5)).notes
    assert again["applied"][0]["total_ms"] == a["total_ms"]


async def test_stall_holds_the_stream_once():
    r = await _pump(["stall:for=300ms,after=2"], [*_events(4, 0), END])
    times = [t for t, _ in r.sink.sent]
    assert times[2] - times[1] >= 0.29 and times[3] - times[2] < 0.2
    assert r.notes["applied"][0]["frame"] == 2


async def test_cut_after_a_duration_on_a_slow_stream():
    r = await _pump(["cut:after=250ms,mode=close"], [*_events(10, 0), END], gap=0.1)
    assert r.ended == "cut-close" and 2 <= len(r.ids) <= 4
    [a] = r.notes["applied"]
    assert a["after_s"] == 0.25 and a["frame"] == len(r.ids)


async def test_a_timed_cut_interrupts_a_delay():
    r = await _pump(["delay:by=1s", "cut:after=200ms"], [*_events(3, 0), END])
    assert r.ended == "cut-reset" and r.ids == []
    assert asyncio.get_running_loop().time() - r.t0 < 0.9


async def test_a_stall_after_the_last_event_holds_the_end():
    r = await _pump(["stall:for=300ms,after=2"], [*_events(2, 0), END])
    assert r.ended == "complete" and r.sink.end_at - r.sink.sent[-1][0] >= 0.29
