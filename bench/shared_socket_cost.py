"""What judging a socket several sessions share costs ``check`` (issue 20).

    python bench/shared_socket_cost.py [--sessions 20] [--runs 10]

Writes the same traffic twice with the example shared-socket adapter
(``chatkit_trace/examples/shared_socket.py``): once as one WebSocket per
session (the baseline: each session's replay reads its own socket), once as
one WebSocket that carries every session, interleaved (each session's replay
reads the whole socket and records its own frames: docs/decisions.md 172).
Derives each as ``check`` does (``chatkit_trace.derive.Deriver``), in this process, best of ``--repeat``, and
reports the ratio to the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatkit_trace.derive import Deriver  # noqa: E402
from chatkit_trace.route import IdentityTracker, apply_match, load_profile, resolve_from_frames  # noqa: E402
from chatkit_trace.store import TraceStore  # noqa: E402
from chatkit_trace.trace import Exchange  # noqa: E402
from chatkit_trace.wire import ws_frame  # noqa: E402

PROFILE = load_profile(str(ROOT / "chatkit_trace" / "examples" / "shared_socket.toml"))


def messages(sid: str, runs: int, deltas: int) -> list[tuple[bool, dict]]:
    out: list[tuple[bool, dict]] = [(True, {"type": "subscribe", "sessionId": sid})]
    n = 0
    for r in range(runs):
        rid = f"{sid}-r{r}"
        out.append((True, {"type": "run", "sessionId": sid, "runId": rid, "input": {"text": "q"}}))
        for kind, extra in [("run.started", {})] + [("text.delta", {"messageId": f"m-{rid}", "delta": "word "})] * deltas \
                + [("run.completed", {})]:
            n += 1
            out.append((False, {"type": kind, **extra, "sessionId": sid, "runId": rid, "eventId": f"{sid}:{n}"}))
    return out


def socket(index: int, items: list[tuple[bool, dict]]) -> Exchange:
    ex = Exchange(index, "GET", "http://backend/ws", started_at=1.0, ended_at=10_000.0, status=101, transport="ws",
                  end="complete")
    for k, (client, body) in enumerate(items):
        ex.frames.append(ws_frame(json.dumps(body).encode(), True, client, 1.0 + 0.001 * k, index, k))
    m = PROFILE.match("GET", ex.url, [], None)
    apply_match(ex, IdentityTracker().assign(resolve_from_frames(m, ex.frames), index))
    return ex


def write(path: Path, exchanges: list[Exchange]) -> None:
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", PROFILE.protocol)
        store.set_meta("capabilities", list(PROFILE.capabilities))
        for ex in exchanges:
            store.add_exchange(ex)


def timed(path: Path, repeat: int) -> tuple[float, int]:
    adapter = PROFILE.create_adapter()
    best, n = float("inf"), 0
    for _ in range(repeat):
        with TraceStore(path, readonly=True) as store:
            t = time.perf_counter()
            result = Deriver(store, adapter, capabilities=PROFILE.capabilities).run()
            findings, counts = result.findings, result.counts
            best = min(best, time.perf_counter() - t)
            n = counts["frames"]
            assert not [f for f in findings if f.severity != "info"], [f.message for f in findings][:3]
    return best, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--deltas", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    per = {f"s{i}": messages(f"s{i}", args.runs, args.deltas) for i in range(args.sessions)}
    folder = Path(tempfile.mkdtemp(prefix="chatkit-bench-"))
    own = folder / "one-socket-per-session.db"
    write(own, [socket(i, items) for i, items in enumerate(per.values())])
    shared_items: list[tuple[bool, dict]] = []
    longest = max(len(v) for v in per.values())
    for k in range(longest):  # interleaved, message by message
        for items in per.values():
            if k < len(items):
                shared_items.append(items[k])
    shared = folder / "one-shared-socket.db"
    write(shared, [socket(0, shared_items)])
    base, n1 = timed(own, args.repeat)
    mux, n2 = timed(shared, args.repeat)
    assert n1 == n2, (n1, n2)
    print(f"{args.sessions} sessions x {args.runs} runs, {n1} frames: one socket per session {base:.2f} s, "
          f"one shared socket {mux:.2f} s, ratio x{mux / base:.2f}")


if __name__ == "__main__":
    main()
