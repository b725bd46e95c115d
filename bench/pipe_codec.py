"""What the recorder's pipe costs per message: typed messages (msgspec, MessagePack)
against the string-tagged tuples it carried before issue 35 (pickle).

    python bench/pipe_codec.py [--streams 200] [--chunks 100] [--reps 15]

The workload is the recorder's own mix: per stream a request, its body, a
response head, ``--chunks`` SSE chunks of ~200 bytes, an end; the batches are
cut where the proxy cuts them (every 4,096 messages at most).  Two sides are
timed, interleaved rep by rep, best of ``--reps``:

* proxy: building each message on the loop and encoding the batches (what
  the proxy's interpreter pays, the hot path: one message per chunk);
* writer: decoding the batches into messages (the writer process).

Prints ns per message for each and the ratio typed/tuples (below 1: the
typed pipe is cheaper).
"""

from __future__ import annotations

import argparse
import pickle
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatkit_trace.capture._messages import Chunk, End, Request, RequestBody, ResponseHead  # noqa: E402
from chatkit_trace.capture._pipe import pack, writer_unpacker  # noqa: E402

HEADER = struct.Struct("<Q")
FIELDS = ((b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"), (b"authorization", b"Bearer x" * 4))
RESPONSE_FIELDS = ((b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"))
BATCH = 4096


def _workload(streams: int, chunks: int) -> list[tuple[str, str, list[bytes]]]:
    return [(f"{i:08x}-flow-id-of-mitmproxy-0000", f"http://127.0.0.1:8000/runs/{i}", [
        b"data: " + (b'{"type":"delta","text":"%06d"}' % (i * chunks + j)).ljust(200, b" ") + b"\n\n" for j in range(chunks)
    ]) for i in range(streams)]


def _tuples(work: list[tuple[str, str, list[bytes]]], t: float) -> list[bytes]:
    out, buf = [], []
    for fid, url, chunks in work:
        buf.append(("req", fid, t, "POST", url, FIELDS))
        buf.append(("body", fid, b'{"input":"hi"}', None, False))
        buf.append(("head", fid, t, 200, RESPONSE_FIELDS, "sse"))
        for c in chunks:
            buf.append(("c", fid, t, c))
            if len(buf) >= BATCH:
                data = pickle.dumps(buf, protocol=pickle.HIGHEST_PROTOCOL)
                out.append(HEADER.pack(len(data)) + data)
                buf = []
        buf.append(("end", fid, t, "complete", None, None, None, None))
    data = pickle.dumps(buf, protocol=pickle.HIGHEST_PROTOCOL)
    out.append(HEADER.pack(len(data)) + data)
    return out


def _typed(work: list[tuple[str, str, list[bytes]]], t: float) -> list[bytes]:
    out, buf = [], []
    for fid, url, chunks in work:
        buf.append(Request(fid, t, "POST", url, FIELDS))
        buf.append(RequestBody(fid, b'{"input":"hi"}', None, False))
        buf.append(ResponseHead(fid, t, 200, RESPONSE_FIELDS, "sse"))
        for c in chunks:
            buf.append(Chunk(fid, t, c))
            if len(buf) >= BATCH:
                out.append(pack(buf))
                buf = []
        buf.append(End(fid, t, "complete", None, None, None, None))
    out.append(pack(buf))
    return out


def _untuple(frames: list[bytes]) -> int:
    n = 0
    for f in frames:
        n += len(pickle.loads(memoryview(f)[HEADER.size :]))
    return n


def _untyped(frames: list[bytes]) -> int:
    u = writer_unpacker()
    return sum(len(u.feed(f)) for f in frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    work = _workload(args.streams, args.chunks)
    n = args.streams * (args.chunks + 4)
    best = {k: float("inf") for k in ("proxy tuples", "proxy typed", "writer tuples", "writer typed")}
    for _ in range(args.reps):
        t = time.time()
        a = time.perf_counter()
        old = _tuples(work, t)
        b = time.perf_counter()
        new = _typed(work, t)
        c = time.perf_counter()
        assert _untuple(old) == n
        d = time.perf_counter()
        assert _untyped(new) == n
        e = time.perf_counter()
        for key, secs in (("proxy tuples", b - a), ("proxy typed", c - b), ("writer tuples", d - c), ("writer typed", e - d)):
            best[key] = min(best[key], secs)
    print(f"{n:,} messages ({args.streams} streams x {args.chunks} chunks), best of {args.reps}; ns per message")
    for side in ("proxy", "writer"):
        old, new = best[f"{side} tuples"] / n * 1e9, best[f"{side} typed"] / n * 1e9
        print(f"{side:<7} tuples+pickle {old:7.1f}   typed+msgpack {new:7.1f}   ratio {new / old:.2f}")
    print(f"bytes   tuples+pickle {sum(map(len, old_frames := _tuples(work, 0.0))):,}   "
          f"typed+msgpack {sum(map(len, _typed(work, 0.0))):,}   ({len(old_frames)} batches)")


if __name__ == "__main__":
    main()
