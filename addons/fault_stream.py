"""The response stream at event granularity, and the faults that act on it.

The relay (:mod:`chatkit_trace.addons.fault_relay`) reads the backend's
response, cuts it into :class:`Piece` values and hands them to a
:class:`Pump`, which forwards them to a :class:`Sink` (the client side of
the relay, i.e. mitmproxy) with the rules of one exchange applied:

* SSE: the decoded body is cut into blocks at blank lines
  (:class:`BlockSplitter`, CR / LF / CRLF, split anywhere); a block with a
  ``data`` line is an *event* (the project's :class:`~chatkit_trace.wire.SSEParser`
  reads its ``id``), comment-only blocks (keepalives) pass along and are
  not counted;
* NDJSON: one line is one event;
* WebSocket: one server message is one event (client messages are not
  touched);
* anything else is forwarded chunk by chunk: only time rules (delay, stall,
  a cut after a duration) act on it.

Content-encoded event streams are decoded here and re-encoded with the same
coding, flushed after every piece (:class:`Encoder`), so each event stays a
separate, immediately decodable write; an encoding that cannot be undone
(an unknown coding, a chain) is forwarded as raw chunks, and the trace
says so.

Timing never blocks: a reader task fills a queue as the backend writes, and
the pump sleeps with ``asyncio`` until each piece's release time
(``arrival + delay``, never before the previous piece, never during a
stall); everything runs on mitmproxy's event loop between awaits.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from chatkit_trace.wire import SSEParser

from .fault_rules import Rule

__all__ = [
    "END",
    "RESET",
    "BlockSplitter",
    "Encoder",
    "LineSplitter",
    "Piece",
    "Pump",
    "Sink",
    "can_reencode",
    "corrupt",
    "sse_event_id",
]

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Piece:
    """One unit the relay forwards: an event, or bytes between events."""

    data: bytes
    #: counts as an event (dispatched SSE event, NDJSON line, WebSocket message)
    event: bool
    #: loop time it arrived from the backend
    t: float
    #: the SSE ``id`` of the event, if any
    eid: str | None = None
    #: ``sse``, ``ndjson``, ``ws`` or ``raw``
    kind: str = "sse"
    #: WebSocket: a text message (data is its UTF-8 bytes)
    text: bool = False


#: Queue markers: the backend ended cleanly / the backend's connection broke.
END = "end"
RESET = "reset"


class BlockSplitter:
    """Decoded SSE bytes -> blocks, each with its terminating blank line."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.scan = 0  # where the next unchecked line starts
        self.line_start = 0

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out: list[bytes] = []
        pos = self.scan
        while True:
            m = _LINE_END.search(self.buf, pos)
            if m is None:
                break
            if m.group() == b"\r" and m.end() == len(self.buf):
                break  # may be the first half of a CRLF: wait for the next byte
            if m.start() == pos:  # an empty line: the block ends here
                out.append(bytes(self.buf[: m.end()]))
                del self.buf[: m.end()]
                pos = 0
                continue
            pos = m.end()
        self.scan = pos
        return out

    def flush(self) -> bytes:
        """What is left at the end: an incomplete block (never an event)."""
        rest = bytes(self.buf)
        self.buf.clear()
        self.scan = 0
        return rest


class LineSplitter:
    """Decoded NDJSON bytes -> lines (with their line end)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                break
            out.append(bytes(self.buf[: i + 1]))
            del self.buf[: i + 1]
        return out

    def flush(self) -> bytes:
        rest = bytes(self.buf)
        self.buf.clear()
        return rest


def sse_event_id(block: bytes) -> tuple[bool, str | None]:
    """``(is an event, its id)`` for one SSE block, as the project's parser reads it."""
    parser = SSEParser()
    events = parser.feed(block) + parser.flush()
    if not events or not events[0].dispatched:
        return False, None
    return True, events[0].id


# ---------------------------------------------------------------------- encoding

_CODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd")


def can_reencode(content_encoding: str | None) -> bool:
    """Whether a body in this Content-Encoding can be decoded and re-encoded piece by piece."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    return len(codings) <= 1 and all(c in _CODINGS for c in codings)


class Encoder:
    """Re-encodes pieces in one Content-Encoding, flushed after each piece."""

    def __init__(self, content_encoding: str | None) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        self.coding = codings[0] if codings else "identity"
        self._z: Any = None
        if self.coding in ("gzip", "x-gzip"):
            self._z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        elif self.coding == "deflate":
            self._z = zlib.compressobj()
        elif self.coding == "br":
            import brotli

            self._z = brotli.Compressor()
        elif self.coding == "zstd":
            import zstandard

            self._z = zstandard.ZstdCompressor().compressobj()

    def encode(self, data: bytes) -> bytes:
        c = self.coding
        out: bytes = data
        if c in ("gzip", "x-gzip", "deflate"):
            out = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        elif c == "br":
            out = self._z.process(data) + self._z.flush()
        elif c == "zstd":
            import zstandard

            out = self._z.compress(data) + self._z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        return out

    def finish(self) -> bytes:
        c = self.coding
        out: bytes = b""
        if c in ("gzip", "x-gzip", "deflate"):
            out = self._z.flush()
        elif c == "br":
            out = self._z.finish()
        elif c == "zstd":
            out = self._z.flush()
        return out


# ---------------------------------------------------------------------- corruption

_DATA_LINE = re.compile(rb"^data:[ ]?(.*?)(\r\n|\r|\n)", re.MULTILINE)


def corrupt(piece: Piece, how: str) -> Piece:
    """The piece with its payload damaged: JSON cut in half (``json``) or
    bytes that are not UTF-8 (``utf8``).  SSE framing (``id:``, the blank
    line) stays intact, so the damage is in the event, not in the stream."""
    data = piece.data
    if piece.kind == "sse":
        found = list(_DATA_LINE.finditer(data))
        if not found:
            return piece
        m = found[-1]
        value = m.group(1)
        new = _damage(value, how)
        data = data[: m.start(1)] + new + data[m.end(1) :]
    elif piece.kind == "ndjson":
        body = data.rstrip(b"\r\n")
        data = _damage(body, how) + data[len(body) :]
    else:  # ws, raw
        data = _damage(data, how)
    return replace(piece, data=data)


def _damage(value: bytes, how: str) -> bytes:
    if how == "utf8":
        mid = max(1, len(value) // 2)
        return value[:mid] + b"\xff\xfe" + value[mid:]
    if len(value) <= 1:
        return b"{"
    return value[: len(value) // 2]


# ---------------------------------------------------------------------- the pump


class Sink(Protocol):
    """The client side of one relayed exchange."""

    async def send(self, piece: Piece) -> None: ...

    async def end(self) -> None:
        """The backend ended cleanly: end the response the same way."""

    async def reset(self) -> None:
        """Drop the connection (no clean end)."""

    async def close(self) -> None:
        """End the response cleanly now (a cut with mode=close)."""


@dataclass
class Applied:
    """What one exchange's faults did; ``notes`` is the trace's ``notes.fault``."""

    notes: dict[str, Any]
    started: float
    on_applied: Callable[[dict[str, Any]], None] | None = None
    delayed: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, rule: Rule, **what: Any) -> None:
        entry = {
            "rule": rule.text,
            "kind": rule.kind,
            **what,
            "at_s": round(time.monotonic() - self.started, 4),
        }
        self.notes.setdefault("applied", []).append(entry)
        if self.on_applied is not None:
            self.on_applied(entry)


class _CutNow(Exception):
    def __init__(self, rule: Rule, why: dict[str, Any]) -> None:
        super().__init__(rule.text)
        self.rule = rule
        self.why = why


class Pump:
    """Forwards one exchange's pieces to a sink with its stream rules applied.

    ``rules`` are ``(rule, rng)`` pairs: the rng is the rule's own, seeded
    per (seed, rule, exchange), so a seeded scenario replays identically.
    Event numbers count the backend's events from 1; ``frame`` in the
    notes is the index of the client-visible event the fault shows at.
    """

    def __init__(
        self, rules: list[tuple[Rule, random.Random]], applied: Applied, sink: Sink
    ) -> None:
        self.rules = [(r, g) for r, g in rules if r.acts_on_stream]
        self.applied = applied
        self.sink = sink
        self.n = 0  # backend events seen
        self.frames = 0  # events the client got
        self.not_before = 0.0
        self.last_release = 0.0
        self.held: tuple[Rule, list[Piece], int] | None = None  # swap: (rule, pieces, event number)
        self.deadline: tuple[float, Rule] | None = None
        self.ended = "open"

    def _of(self, kind: str) -> list[tuple[Rule, random.Random]]:
        return [(r, g) for r, g in self.rules if r.kind == kind]

    async def run(self, queue: asyncio.Queue[Any]) -> str:
        """Until the stream ends; returns ``complete``, ``reset`` (mirrored from
        the backend) or ``cut-reset`` / ``cut-close``."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for rule, _ in self._of("cut"):
            timed = rule.after_events is None
            if timed and (self.deadline is None or start + rule.seconds < self.deadline[0]):
                self.deadline = (start + rule.seconds, rule)
        for rule, _ in self._of("stall"):
            if rule.start == 0:
                self.not_before = max(self.not_before, start + rule.seconds)
                self.applied.add(rule, event=0, frame=0, seconds=rule.seconds)
        try:
            for rule, _ in self._of("cut"):
                if rule.after_events == 0:
                    raise _CutNow(rule, {"event": 0, "frame": 0})
            while True:
                item = await self._get(queue)
                if item is END or item is RESET:
                    await self._release_held()
                    # a stall holds the end too
                    await self._wait(max(self.last_release, self.not_before))
                    if item is END:
                        self._finish("complete")
                        await self.sink.end()
                    else:
                        self._finish("reset")
                        await self.sink.reset()
                    return self.ended
                await self._piece(item)
        except _CutNow as cut:
            self.applied.add(cut.rule, mode=cut.rule.mode, **cut.why)
            if cut.rule.mode == "close":
                self._finish("cut-close")
                await self.sink.close()
            else:
                self._finish("cut-reset")
                await self.sink.reset()
            return self.ended
        finally:
            self._summarise_delays()

    def _finish(self, ended: str) -> None:
        """Complete the notes *before* the last write: the moment the client side
        sees the end, mitmproxy's hooks (and the recorder) may read them."""
        self.ended = ended
        self._not_applied()
        self._summarise_delays()
        self.applied.notes["end"] = ended
        self.applied.notes["events"] = {"backend": self.n, "client": self.frames}

    async def _get(self, queue: asyncio.Queue[Any]) -> Any:
        if self.deadline is None:
            return await queue.get()
        loop = asyncio.get_running_loop()
        left = self.deadline[0] - loop.time()
        if left <= 0:
            self._time_cut()
        try:
            return await asyncio.wait_for(queue.get(), left)
        except TimeoutError:
            self._time_cut()

    def _time_cut(self) -> None:
        assert self.deadline is not None
        rule = self.deadline[1]
        raise _CutNow(rule, {"after_s": rule.seconds, "event": self.n, "frame": self.frames})

    async def _wait(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self.deadline is not None and self.deadline[0] <= until and self.deadline[0] <= now:
                self._time_cut()
            target = until if self.deadline is None else min(until, self.deadline[0])
            if target <= now:
                return
            await asyncio.sleep(target - now)

    async def _emit(self, pieces: list[Piece], release: float) -> None:
        release = max(release, self.last_release, self.not_before)
        await self._wait(release)
        self.last_release = max(release, self.last_release)
        for p in pieces:
            await self.sink.send(p)
            if p.event:
                self.frames += 1

    async def _piece(self, piece: Piece) -> None:
        # long-function: one stream piece per fault kind
        if not piece.event:
            await self._emit([piece], piece.t)
            return
        self.n += 1
        n = self.n
        out = [piece]
        what: dict[str, Any] = {"event": n}
        if piece.eid is not None:
            what["event_id"] = piece.eid
        for rule, _ in self._of("drop"):
            if rule.at == n:
                out = []
                self.applied.add(rule, frame=self.frames, **what)
        if out:
            for rule, _ in self._of("corrupt"):
                if rule.at == n:
                    out = [corrupt(p, rule.how) for p in out]
                    self.applied.add(rule, frame=self.frames, how=rule.how, **what)
            for rule, _ in self._of("dup"):
                if rule.at == n:
                    out = out + [out[-1]]
                    self.applied.add(rule, frame=self.frames + len(out) - 1, **what)
        delay = 0.0
        for rule, rng in self._of("delay"):
            if n >= rule.start:
                d = rule.seconds + (rng.uniform(0.0, rule.jitter) if rule.jitter else 0.0)
                delay += d
                s = self.applied.delayed.setdefault(
                    rule.text, {"rule": rule, "events": 0, "total": 0.0, "max": 0.0, "first": n}
                )
                s["events"] += 1
                s["total"] += d
                s["max"] = max(s["max"], d)
        swapped = False
        for rule, _ in self._of("swap"):
            if rule.at == n and self.held is None:
                self.held = (rule, out, n)
                swapped = True
        if swapped:
            self._after(n, piece.eid)
            return
        if self.held is not None and self.held[2] == n - 1:
            rule, pieces, m = self.held
            self.held = None
            info: dict[str, Any] = {"event": m, "swapped_with": n}
            held_id = next((p.eid for p in pieces if p.eid is not None), None)
            if held_id is not None:
                info["event_id"] = held_id
            if piece.eid is not None:
                info["swapped_with_id"] = piece.eid
            # the client sees event n at this frame, then event m
            self.applied.add(rule, frame=self.frames, **info)
            out = out + pieces
        await self._emit(out, piece.t + delay)
        for rule, _ in self._of("stall"):
            if rule.start == n:
                loop = asyncio.get_running_loop()
                self.not_before = max(self.not_before, loop.time() + rule.seconds)
                self.applied.add(rule, frame=self.frames, seconds=rule.seconds, **what)
        self._after(n, piece.eid)

    def _after(self, n: int, eid: str | None) -> None:
        for rule, _ in self._of("cut"):
            if rule.after_events == n:
                info: dict[str, Any] = {"event": n, "frame": self.frames - 1}
                if eid is not None:
                    info["event_id"] = eid
                raise _CutNow(rule, info)

    async def _release_held(self) -> None:
        if self.held is None:
            return
        rule, pieces, m = self.held
        self.held = None
        self.applied.notes.setdefault("not_applied", []).append(
            {"rule": rule.text, "why": f"event {m} was the last one: nothing to swap it with"}
        )
        await self._emit(pieces, self.last_release)

    def _not_applied(self) -> None:
        """Rules that never fired on this exchange (the stream was shorter), said once."""
        fired = {a["rule"] for a in self.applied.notes.get("applied", ())} | set(
            self.applied.delayed
        )
        listed = {a["rule"] for a in self.applied.notes.get("not_applied", ())}
        for rule, _ in self.rules:
            if rule.text in fired or rule.text in listed:
                continue
            if rule.kind == "cut" and rule.after_events is None:
                why = f"the stream ended before {rule.seconds:g}s"
            else:
                why = f"the stream ended after {self.n} event(s)"
            self.applied.notes.setdefault("not_applied", []).append({"rule": rule.text, "why": why})

    def _summarise_delays(self) -> None:
        for text, s in self.applied.delayed.items():
            rule: Rule = s["rule"]
            entry = {
                "rule": text,
                "kind": rule.kind,
                "event": s["first"],
                "events": s["events"],
                "total_ms": round(s["total"] * 1000, 1),
                "max_ms": round(s["max"] * 1000, 1),
            }
            self.applied.notes.setdefault("applied", []).append(entry)
            if self.applied.on_applied is not None:
                self.applied.on_applied(entry)
        self.applied.delayed.clear()
