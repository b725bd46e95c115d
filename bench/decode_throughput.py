"""Frames per second through wire + adapter + Core, per built-in adapter.

    python bench/decode_throughput.py [--events 20000] [--repeat 5]
    python bench/decode_throughput.py --python /tmp/base18/.venv/bin/python   # before/after


For each protocol a real capture (recordings/captures/) is stretched into a
long stream of the same shape: its head (start events), its first streaming
text event repeated N times, its tail (the terminal).  The timed path is what
the recorder and ``check`` do with a body: SSE parsing (wire), ``event_json``,
the adapter's ``decode_event`` through the factory, and admission into the
Core (``chatkit_trace.pipeline.replay``).  The baseline, measured in the same
run, is plain ``json.loads`` of the same events' data.  Only ratios are
meaningful (machines are noisy); medians of ``--repeat`` interleaved runs.

AG-UI has no capture from a real server in recordings/captures/: its stream
is the scripted backend's ``tool`` scenario, encoded by the real
``ag-ui-protocol`` library's ``EventEncoder`` (the package in the test extra).

``--python OTHER`` measures another interpreter (e.g. the environment of a
baseline worktree: ``git worktree add /tmp/base18 bench-base-18``) in the
same run: each repeat runs this script once per interpreter, alternating, in
child processes, and the tables come out side by side.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from chatkit_trace.adapters import DeltaUpdate, create_adapter, load_protocol
from chatkit_trace.pipeline import replay
from chatkit_trace.trace import Exchange, frames_from_body
from chatkit_trace.wire import event_json, parse_sse, frame_from_sse

ROOT = Path(__file__).resolve().parents[1] / "recordings" / "captures"

SOURCES = {
    "openai": "openai/text.stream.sse",
    "adk": "adk/text_tool.stream.sse",
    "a2a": "a2a/v10-text.stream.sse",
    "hermes": "hermes/runs_text.events.sse",
    "agui": None,  # the scripted AG-UI backend through the real library's encoder
}


def source(protocol: str) -> bytes:
    if SOURCES[protocol] is not None:
        return (ROOT / SOURCES[protocol]).read_bytes()
    from ag_ui.encoder import EventEncoder

    from chatkit_trace.examples.agui_backend import script

    encoder = EventEncoder()
    return "".join(encoder.encode(e) for e in script("tool", "t1", "r1")).encode()


def block(ev) -> bytes:
    out = ""
    if ev.event:
        out += f"event: {ev.event}\n"
    if ev.id is not None:
        out += f"id: {ev.id}\n"
    out += "".join(f"data: {line}\n" for line in ev.data.split("\n"))
    return (out + "\n").encode()


def stretched(protocol: str, n: int) -> tuple[bytes, list[str]]:
    """A long stream of the capture's shape and the data strings it carries."""
    body = source(protocol)
    events = [e for e in parse_sse(body) if e.dispatched]
    adapter = create_adapter(load_protocol(protocol))
    dec = adapter.decoder("s")
    template = None
    for i, ev in enumerate(events):
        value, err = event_json(frame_from_sse(ev, 0, i, 0.0))
        if err is not None:
            continue
        out = dec.decode(value, run_id="r", fallback_id=f"0:{i}")
        if out.updates and all(isinstance(u, DeltaUpdate) for u in out.updates):
            template = i
            break
    if template is None:
        raise SystemExit(f"{protocol}: no streaming text event in {SOURCES[protocol] or 'its stream'}")
    head, tail = events[: template + 1], events[template + 1 :]
    blocks = [block(e) for e in head]
    rep = block(events[template])
    if events[template].id is not None:  # keep outer ids unique, as a real stream has
        rep_blocks = [rep.replace(f"id: {events[template].id}\n".encode(), f"id: {events[template].id}-{k}\n".encode()) for k in range(n)]
    else:
        rep_blocks = [rep] * n
    all_blocks = blocks + rep_blocks + [block(e) for e in tail]
    data = [e.data for e in head] + [events[template].data] * n + [e.data for e in tail]
    return b"".join(all_blocks), data


def run_pipeline(protocol: str, body: bytes) -> tuple[float, int]:
    adapter = create_adapter(load_protocol(protocol))
    session = "s"
    for ev in parse_sse(body[:20000]):
        value, err = event_json(frame_from_sse(ev, 0, 0, 0.0))
        ident = adapter.protocol.identify_event(value) if err is None else None
        if ident is not None and ident.session_id:  # e.g. A2A's contextId is the session
            session = ident.session_id
            break
    t0 = time.perf_counter()
    frames = frames_from_body(body, 0, at=1.0)
    ex = Exchange(0, "POST", "http://x/", started_at=1.0, ended_at=2.0, status=200, transport="sse", frames=frames,
                  end="complete", capability="run", session_id=session, run_id="r")
    rep = replay([ex], adapter)
    elapsed = time.perf_counter() - t0
    bad = [f for f in rep.facts if f.result.violation]
    assert not bad, (protocol, bad[:3])
    return elapsed, len(frames)


def run_json(data: list[str]) -> float:
    t0 = time.perf_counter()
    for d in data:
        if d != "[DONE]":
            json.loads(d)
    return time.perf_counter() - t0


def measure(protos: list[str], events: int, repeat: int) -> dict[str, list[tuple[float, float, int]]]:
    streams = {p: stretched(p, events) for p in protos}
    samples: dict[str, list[tuple[float, float, int]]] = {p: [] for p in protos}
    for _ in range(repeat):
        for p in protos:
            body, data = streams[p]
            gc.collect()
            t_json = run_json(data)
            gc.collect()
            t_pipe, frames = run_pipeline(p, body)
            samples[p].append((t_pipe, t_json, frames))
    return samples


def table(title: str, protos: list[str], samples: dict[str, list[tuple[float, float, int]]]) -> None:
    if title:
        print(title)
    print(f"{'adapter':<8} {'frames':>8} {'frames/s':>10} {'us/frame':>9} {'us/json':>8} {'pipeline/json':>14}")
    for p in protos:
        t_pipe = statistics.median(s[0] for s in samples[p])
        t_json = statistics.median(s[1] for s in samples[p])
        frames = samples[p][0][2]
        print(f"{p:<8} {frames:>8} {frames / t_pipe:>10,.0f} {t_pipe / frames * 1e6:>9.2f} {t_json / frames * 1e6:>8.2f} {t_pipe / t_json:>14.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--protocols", default=",".join(SOURCES))
    ap.add_argument("--python", action="append", default=[], help="also measure this interpreter, interleaved (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    protos = args.protocols.split(",")
    if args.child:
        print(json.dumps(measure(protos, args.events, args.repeat)))
        return
    if not args.python:
        table("", protos, measure(protos, args.events, args.repeat))
        return
    pythons = [sys.executable, *args.python]
    samples: dict[str, dict[str, list]] = {py: {p: [] for p in protos} for py in pythons}
    for _ in range(args.repeat):
        for py in pythons:
            out = subprocess.run(
                [py, __file__, "--child", "--repeat", "1", "--events", str(args.events), "--protocols", args.protocols],
                capture_output=True, text=True, check=True,
            ).stdout
            for p, rows in json.loads(out.strip().splitlines()[-1]).items():
                samples[py][p].extend(tuple(r) for r in rows)
    for py in pythons:
        table(f"\n{py}", protos, samples[py])
        print()
    base = pythons[1]
    print(f"speed-up of {sys.executable} over {base} (pipeline time, median):")
    for p in protos:
        a = statistics.median(s[0] for s in samples[sys.executable][p])
        b = statistics.median(s[0] for s in samples[base][p])
        print(f"  {p:<8} x{b / a:.2f}")


if __name__ == "__main__":
    main()
