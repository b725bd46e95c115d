"""What following secret values costs the writer thread, per frame (issue 16).

    python bench/redaction_cost.py [--events 20000] [--repeat 5] [--learned 10]

The stream is a real capture stretched as in ``decode_throughput.py``
(its streaming text event repeated ``--events`` times).  Timed, per
protocol, interleaved, medians of ``--repeat`` runs:

* ``parse``: the baseline, measured in the same run: SSE parsing of the
  stream into frames (``frames_from_body``), what the writer does anyway;
* ``scrub``: :meth:`Redactor.scrub_frame` on every frame, with ``--learned``
  values remembered and the shape table on: the usual case, nothing found;
* ``echo``: the same on a stream whose every text event echoes a learned
  value and a JWT (the worst case: every frame masked, spans noted);
* ``stream``: ``scrub`` plus what the writer does since issue 32: each frame
  also through :class:`~chatkit_trace.route.redact.StreamMasks` (JSON strings
  decoded, each field's text joined across frames), nothing found.

Only ratios are meaningful (scrub/parse, echo/parse).  Masking runs on the
writer thread, never on the proxy's loop, so it adds no latency to the
user's stream; ``bench/proxy_overhead.py`` measures that end to end.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode_throughput import SOURCES, stretched  # noqa: E402

from chatkit_trace.route import Redactor  # noqa: E402
from chatkit_trace.route.redact import StreamMasks  # noqa: E402
from chatkit_trace.trace import frames_from_body  # noqa: E402

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJlLWJ5dGVz"


def redactor(learned: int) -> tuple[Redactor, str]:
    red = Redactor()
    for i in range(learned):
        red.secrets.learn(f"learned-secret-{i:04d}-Zq8xLm2Vb7")
    token = "sk-proj-Zq8xLm2Vb7Nc4Rt6Yw1Pk9Hs3Df5Gj0Au"
    red.redact_headers([("Authorization", f"Bearer {token}")])
    return red, token


def echoing(body: bytes, token: str) -> bytes:
    """The stream with a learned token and a JWT inside every event's data."""
    out = []
    for block in body.split(b"\n\n"):
        if b"data: {" in block:
            block = block.replace(b"data: {", f'data: {{"echo": "Bearer {token} {JWT}", '.encode(), 1)
        out.append(block)
    return b"\n\n".join(out)


def stream(red: Redactor, frames: list) -> None:  # type: ignore[type-arg]
    """The writer's per-frame masking since issue 32: the frame's own scrub, then the stream's."""
    masks = StreamMasks(red)
    for f in frames:
        masks.add(f, red.scrub_frame(f)[0])


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--learned", type=int, default=10)
    ap.add_argument("--protocols", default=",".join(SOURCES))
    args = ap.parse_args()
    red, token = redactor(args.learned)
    rows = []
    for p in args.protocols.split(","):
        body, _ = stretched(p, args.events)
        frames = frames_from_body(body, 0)
        echo_frames = frames_from_body(echoing(body, token), 0)
        masked = [red.scrub_frame(f)[0] for f in echo_frames]
        assert all(token not in (f.text or "") and JWT not in (f.text or "") for f in masked)
        assert all(red.scrub_frame(f)[0] is f for f in frames[:1000])  # nothing to mask: the same frame
        samples = []
        for _ in range(args.repeat):
            t_parse = timed(lambda: frames_from_body(body, 0))  # noqa: B023
            t_scrub = timed(lambda: [red.scrub_frame(f) for f in frames])  # noqa: B023
            t_echo = timed(lambda: [red.scrub_frame(f) for f in echo_frames])  # noqa: B023
            t_stream = timed(lambda: stream(red, frames))  # noqa: B023
            samples.append((t_parse, t_scrub, t_echo, t_stream))
        med = [statistics.median(s[i] for s in samples) for i in range(4)]
        rows.append((p, len(frames), med))
    print(f"{'adapter':<8} {'frames':>7} {'us/frame parse':>15} {'us/frame scrub':>15} {'scrub/parse':>12} {'echo/parse':>11}"
          f" {'us/frame stream':>16} {'stream/parse':>13}")
    for p, n, (t_parse, t_scrub, t_echo, t_stream) in rows:
        print(f"{p:<8} {n:>7} {t_parse / n * 1e6:>15.2f} {t_scrub / n * 1e6:>15.2f} {t_scrub / t_parse:>12.2f} "
              f"{t_echo / t_parse:>11.2f} {t_stream / n * 1e6:>16.2f} {t_stream / t_parse:>13.2f}")
    print(json.dumps({"learned": len(red.secrets), "events": args.events}))


if __name__ == "__main__":
    main()
