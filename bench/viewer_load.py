"""Viewer load benchmark: time to first screen and peak memory for 10k, 100k and 1M frames.

Not a test.  Run::

    .venv/bin/python bench/viewer_load.py            # 10k, 100k, 1M
    .venv/bin/python bench/viewer_load.py 10000      # one size
    .venv/bin/python bench/viewer_load.py --keep DIR # keep the generated traces in DIR

Each trace is written straight into a :class:`~chatkit_trace.store.TraceStore`
(exchanges and frames only, no derived tables: the viewer must cope with a
raw recording) in the ``myproto`` SSE shape.  It holds one big run (half the
frames, at most 100k) and many ordinary runs of 500 frames, ten per session.

Each size is measured in a fresh subprocess (so peak RSS is its own), headless
(``App.run_test``), with the viewer's automatic analysis off:

* ``open``: construct the app (open the trace, resolve the adapter);
* ``first screen``: until the run list is on screen;
* ``open run``: open the big run until its timeline and the first snapshot show;
* ``page down``: the mean time of one PgDn (a repaint and the snapshot at
  the new row) over ~2000 rows of the big run, pressed through the test
  pilot (which waits for the process to go idle: at least 2 x 20 ms a key);
* ``page down key``: ~2000 rows more, the key's action called directly, until
  its snapshot is shown and the screen update painted (the pilot's waits left out);
* ``jump end``: jump to the last row and wait for the snapshot there (the
  replay runs forward through the whole run once: incremental from then on);
  then until the worker has filled in the moments behind it (a jump that
  restored a state right before the end has none: ``fill_behind``);
* ``step back``: 20 steps back from the end (served from checkpoints and cache),
  each until its snapshot is shown and its screen update painted; the slowest
  of them, and how many full collections of the cyclic GC ran meanwhile (the
  viewer defers them until the user is idle: decision 208);
* the peak RSS of the process (everything: Python, SQLite's cache, Textual).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10_000, 100_000, 1_000_000)
RUN_FRAMES = 500
RUNS_PER_SESSION = 10
BIG_MAX = 100_000


def generate(path: Path, frames: int) -> dict[str, int]:
    """A trace of ``frames`` frames (myproto SSE events), written directly."""
    from chatkit_trace.store import TraceStore
    from chatkit_trace.trace import Exchange
    from chatkit_trace.wire import Frame

    if path.exists():
        path.unlink()
    big = min(frames // 2, BIG_MAX)
    sizes = [big]
    rest = frames - big
    while rest > 0:
        sizes.append(min(RUN_FRAMES, rest))
        rest -= sizes[-1]
    words = ["Hello", " world", ",", " this", " is", " a", " long", " answer", "."]
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta(
            "capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"]
        )
        t = 1_700_000_000.0
        conn = store.db.conn
        for index, n in enumerate(sizes):
            session = "big" if index == 0 else f"s{(index - 1) // RUNS_PER_SESSION}"
            run = f"r{index}"
            start = t
            rows = []
            for i in range(n):
                if i == 0:
                    data = {"type": "started", "run": run}
                elif i == n - 1:
                    data = {"type": "done"}
                else:
                    data = {"type": "text", "text": words[i % len(words)]}
                text = json.dumps(data)
                t += 0.002
                rows.append(
                    Frame(index, i, "sse", "in", text, None, None, f"e{i}", i * 40, i * 40 + 40, t)
                )
            ex = Exchange(
                index,
                "POST",
                f"http://backend/sessions/{session}/runs",
                started_at=start,
                ended_at=t + 0.001,
                request_body=json.dumps({"text": f"question {index}", "runId": run}).encode(),
                status=200,
                response_headers=[("content-type", "text/event-stream")],
                transport="sse",
                end="complete",
                capability="run",
                session_id=session,
                run_id=run,
                run_id_source="body",
            )
            store.add_exchange(ex, with_frames=False)
            for lo in range(0, len(rows), 50_000):
                store.add_frames(rows[lo : lo + 50_000])
            conn.commit()
            t += 0.5
    return {"frames": frames, "runs": len(sizes), "big_run": big}


async def measure(path: Path) -> dict[str, float]:
    from chatkit_trace.viewer.app import ViewerApp
    from chatkit_trace.viewer.run_screen import RunScreen
    from chatkit_trace.viewer.widgets import RunsTable, TimelineView

    out: dict[str, float] = {}
    t0 = time.perf_counter()
    app = ViewerApp(str(path), analyse="never", poll=0)
    out["open"] = time.perf_counter() - t0
    async with app.run_test(size=(160, 48)) as pilot:
        while not (app.screen.query(RunsTable) and app.screen.query_one(RunsTable).row_count()):
            await pilot.pause(0.005)
        await pilot.pause()
        out["first screen"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        app.open_run("big", "r0")
        while not (isinstance(app.screen, RunScreen) and app.screen.settled):
            await pilot.pause(0.005)
        await pilot.pause()
        out["open run"] = time.perf_counter() - t1
        screen = app.screen
        view = screen.query_one(TimelineView)
        out["rows"] = view.row_count()
        view.focus()
        pages = max(1, 2000 // max(1, view.page_size))
        t2 = time.perf_counter()
        for _ in range(pages):
            await pilot.press("pagedown")
        while not screen.settled:
            await pilot.pause(0.002)
        out["page down ms"] = (time.perf_counter() - t2) / pages * 1000
        # the same, without the test pilot's idle waits (each press sleeps 20 ms at least twice):
        # the key's action, its snapshot, and the screen update that shows both
        t2 = time.perf_counter()
        for _ in range(pages):
            view.action_page(1)
            while not screen.settled:
                await asyncio.sleep(0.001)
            app.screen._on_timer_update()  # paint now (what the screen's update timer does)
        out["page down key ms"] = (time.perf_counter() - t2) / pages * 1000
        t3 = time.perf_counter()
        view.action_jump(-1)
        while not screen.settled:
            await pilot.pause(0.01)
        app.screen._on_timer_update()
        out["jump end"] = time.perf_counter() - t3
        # the worker then fills in the moments behind the end (a restore left none)
        wants_fill = getattr(screen.replayer, "wants_fill", None)  # (absent from older checkouts)
        while wants_fill is not None and wants_fill():
            await asyncio.sleep(0.001)
        out["jump filled"] = time.perf_counter() - t3
        full: list[int] = []  # the cyclic GC's full collections during the steps

        def seen(phase: str, info: dict[str, int]) -> None:
            if phase == "start" and info["generation"] == 2:
                full.append(1)

        gc.callbacks.append(seen)
        steps = []
        t4 = time.perf_counter()
        for _ in range(20):
            t5 = time.perf_counter()
            view.action_move(-1)
            while not screen.settled:
                await asyncio.sleep(0.001)
            app.screen._on_timer_update()  # each step's screen update counted (not left to the next step)
            steps.append(time.perf_counter() - t5)
        out["step back x20"] = time.perf_counter() - t4
        gc.callbacks.remove(seen)
        out["slowest step ms"] = max(steps) * 1000
        out["steps ms"] = [round(x * 1000, 1) for x in steps]
        out["full gcs in steps"] = len(full)
        out["checkpoints"] = len(screen.replayer.checkpoints) if screen.replayer else 0
    out["rss peak MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def child(path: str) -> None:
    result = asyncio.run(measure(Path(path)))
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--keep", metavar="DIR", help="write the traces here and keep them")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="viewer-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.sizes:
        path = folder / f"bench-{n}.db"
        t = time.perf_counter()
        info = generate(path, n)
        gen = time.perf_counter() - t
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append((n, info, gen, os.path.getsize(path) / 1e6, res))
        if not args.keep:
            path.unlink()
    cols = [
        "frames",
        "runs",
        "file MB",
        "open s",
        "first screen s",
        "open big run s",
        "page down ms",
        "page down key ms",
        "jump to end s",
        "… and behind filled s",
        "20 steps back s",
        "slowest step ms",
        "full GCs in steps",
        "rss peak MB",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for n, info, _gen, size, r in rows:
        vals = [
            f"{n:,}",
            str(info["runs"]),
            f"{size:.0f}",
            f"{r['open']:.2f}",
            f"{r['first screen']:.2f}",
            f"{r['open run']:.2f}",
            f"{r['page down ms']:.0f}",
            f"{r['page down key ms']:.1f}",
            f"{r['jump end']:.2f}",
            f"{r['jump filled']:.2f}",
            f"{r['step back x20']:.3f}",
            f"{r['slowest step ms']:.1f}",
            str(r["full gcs in steps"]),
            f"{r['rss peak MB']:.0f}",
        ]
        print("| " + " | ".join(vals) + " |")
    print(
        f"\nbig run: {rows[-1][1]['big_run']:,} frames; generated in {rows[-1][2]:.1f}s"
        if rows
        else ""
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
