"""What judging resumed subscriptions costs ``check``, as a ratio to ``check``
on the same traffic without cursors, measured in the same run.

    python bench/resume_check_cost.py [--sessions 300] [--repeat 3]

Each session of the generated trace (example protocol, ``myproto``): a page
subscribes, sends two runs of 12 events each on a session-wide id counter,
the server ends the subscription mid-way through the second run, the
``EventSource`` reconnects with ``Last-Event-ID`` and the backend replays
from the start (the bug: one CK404 per session), then a history read that
lists every event id.  The baseline is the same trace with the reconnect's
cursor and header removed (a plain second subscription: nothing to judge as
a resume).  Each ``check`` runs in its own process; the best of
``--repeat`` runs is kept for each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange, frames_from_body

EVENTS = 12


def _events(run: str, first: int) -> list[tuple[int, dict]]:
    out = [(first, {"type": "started", "run": run})]
    for k in range(1, EVENTS - 1):
        out.append((first + k, {"type": "text", "run": run, "text": f"w{k} "}))
    out.append((first + EVENTS - 1, {"type": "done", "run": run}))
    return out


def _sse(items: list[tuple[int, dict]]) -> bytes:
    return b"".join(f"id: {i}\ndata: {json.dumps(e)}\n\n".encode() for i, e in items)


def make(path: Path, sessions: int, *, cursors: bool) -> None:
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("capabilities", ["run", "subscribe", "resume", "abort", "history"])
        n = 0
        t = 1000.0
        for s in range(sessions):
            sid = f"s{s}"
            evs = _events("r1", 1) + _events("r2", 1 + EVENTS)
            cut = EVENTS + 4
            url = f"http://backend/api/chat/events?sessionId={sid}"

            def add(ex: Exchange, body: bytes | None = None) -> None:
                if body is not None:
                    ex.frames = frames_from_body(body, ex.index, at=ex.started_at + 0.001, spacing=0.001)
                store.add_exchange(ex)

            add(Exchange(n, "GET", url, started_at=t, ended_at=t + 0.1, status=200, transport="sse", end="complete",
                         capability="subscribe", session_id=sid), _sse(evs[:cut]))
            add(Exchange(n + 1, "POST", "http://backend/api/chat/send", started_at=t + 0.0005, ended_at=t + 0.0006,
                         status=202, request_body=json.dumps({"sessionId": sid, "runId": "r1", "text": "a"}).encode(),
                         capability="run", session_id=sid, run_id="r1"))
            add(Exchange(n + 2, "POST", "http://backend/api/chat/send", started_at=t + 0.0125, ended_at=t + 0.0126,
                         status=202, request_body=json.dumps({"sessionId": sid, "runId": "r2", "text": "b"}).encode(),
                         capability="run", session_id=sid, run_id="r2"))
            cursor = str(cut)
            add(Exchange(n + 3, "GET", url, started_at=t + 0.2, ended_at=t + 0.3, status=200, transport="sse",
                         end="complete", capability="subscribe", session_id=sid,
                         request_headers=[("Last-Event-ID", cursor)] if cursors else [],
                         cursor=cursor if cursors else None), _sse(evs))
            history = {"runs": [{"id": r, "status": "completed", "input": {"r1": "a", "r2": "b"}[r], "created_at": 1,
                                 "frames": [{"id": str(i), "event": {k: v for k, v in e.items() if k != "run"}}
                                            for i, e in evs if e["run"] == r]} for r in ("r1", "r2")]}
            add(Exchange(n + 4, "GET", f"http://backend/api/chat/sessions/{sid}/runs", started_at=t + 0.4,
                         ended_at=t + 0.41, status=200, response_body=json.dumps(history).encode(),
                         capability="history", session_id=sid))
            n += 5
            t += 1.0
        store.settle()


def check(path: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", str(path), "--format", "json", "--fail-on", "never"],
                         capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "200"})
    return time.perf_counter() - t0, json.loads(out.stdout)["summary"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        resumed, plain = Path(d) / "resumed.db", Path(d) / "plain.db"
        make(resumed, args.sessions, cursors=True)
        make(plain, args.sessions, cursors=False)
        best = {"plain": float("inf"), "resumed": float("inf")}
        summaries = {}
        for _ in range(args.repeat):
            for name, path in (("plain", plain), ("resumed", resumed)):
                secs, summary = check(path)
                best[name] = min(best[name], secs)
                summaries[name] = summary
    print(f"{args.sessions} sessions, {summaries['resumed']['frames']} frames")
    print(f"check without cursors: {best['plain']:.2f}s  findings {summaries['plain']['by_code']}")
    print(f"check with resumes:    {best['resumed']:.2f}s  findings {summaries['resumed']['by_code']}")
    print(f"ratio resumed / plain: {best['resumed'] / best['plain']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
