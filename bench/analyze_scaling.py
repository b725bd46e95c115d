"""``check`` on generated traces of 10k, 100k and 1M frames: time, peak memory,
growth ratio between sizes.

    python bench/analyze_scaling.py [--sizes 10000,100000,1000000] [--keep DIR]
    python bench/analyze_scaling.py --python /tmp/base18/.venv/bin/python   # before/after
    python bench/analyze_scaling.py --jobs 1,auto   # one process, and check's default

Each trace holds sessions of the example protocol (``myproto``): 10 runs of
50 SSE frames each plus a history read, with a few planted bugs (a chunk
after the terminal, a stream without conclusion) so the analyzers have work.
Each ``check`` runs in its own process (``run_check`` storing its results,
as ``redecode`` does; ``--no-store``: as ``chatkit-trace check``), so its peak RSS is its own; its worker processes'
largest peak is shown apart.  ``--jobs`` says how many workers derive the
sessions: ``auto`` is check's default (one per CPU for a trace of 50,000
frames or more).  Targets (issue 5): near-linear growth, and peak memory
bounded by streaming through the store (sessions are analysed one at a
time, in each process) rather than growing with the trace.

``--python OTHER`` also checks each trace with another interpreter (e.g. a
baseline worktree's environment), alternating with this one ``--repeat``
times on the same generated file; the table then has one row per
interpreter and size, and the speed-up per size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange, frames_from_body

RUNS_PER_SESSION = 10
FRAMES_PER_RUN = 50


def run_body(run_id: str, n: int, late: bool, unfinished: bool) -> bytes:
    out = [f'id: e0\ndata: {{"type": "started", "run": "{run_id}"}}\n\n']
    for i in range(1, n - 1):
        out.append(f'id: e{i}\ndata: {{"type": "text", "text": "word{i} "}}\n\n')
    if not unfinished:
        out.append(f'id: e{n - 1}\ndata: {{"type": "done"}}\n\n')
    if late:
        out.append(f'id: e{n}\ndata: {{"type": "text", "text": " (late)"}}\n\n')
    return "".join(out).encode()


def generate(path: Path, frames: int) -> int:
    sessions = max(1, frames // (RUNS_PER_SESSION * FRAMES_PER_RUN))
    written = 0
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("capabilities", ["abort", "history", "resume"])
        index = 0
        t = 1_700_000_000.0
        for s in range(sessions):
            sid = f"s{s}"
            history_runs = []
            for r in range(RUNS_PER_SESSION):
                rid = f"{sid}-r{r}"
                late = r == 3 and s % 7 == 0
                unfinished = r == RUNS_PER_SESSION - 1 and s % 5 == 0
                body = run_body(rid, FRAMES_PER_RUN, late, unfinished)
                ex = Exchange(
                    index, "POST", f"http://backend/sessions/{sid}/runs", started_at=t, ended_at=t + 1,
                    request_body=json.dumps({"runId": rid, "text": f"question {r}"}).encode(), status=200,
                    transport="sse", frames=frames_from_body(body, index, at=t + 0.01, spacing=0.01), end="complete",
                    capability="run", session_id=sid, run_id=rid,
                )
                store.add_exchange(ex)
                written += len(ex.frames)
                index += 1
                t += 2
                history_runs.append(
                    {
                        "id": rid,
                        "status": "running" if unfinished else "completed",
                        "input": f"question {r}",
                        "created_at": 1,
                        "frames": [
                            {"id": f"e{i}", "event": ({"type": "started", "run": rid} if i == 0 else {"type": "text", "text": f"word{i} "})}
                            for i in range(FRAMES_PER_RUN - 1)
                        ]
                        + ([] if unfinished else [{"id": f"e{FRAMES_PER_RUN - 1}", "event": {"type": "done"}}]),
                    }
                )
            store.add_exchange(
                Exchange(index, "GET", f"http://backend/sessions/{sid}/runs", started_at=t, ended_at=t + 0.1, status=200,
                         response_body=json.dumps({"runs": history_runs}).encode(), capability="history", session_id=sid)
            )
            index += 1
            t += 1
            store.commit()
    return written


def check(path: Path, python: str = sys.executable, jobs: str = "auto", store: bool = True) -> tuple[float, float, int, float]:
    """Seconds, peak RSS (MB) of the checking process and of its largest
    worker (0: none), and the number of findings.  ``jobs``: ``auto`` (the
    CLI's default: one worker per CPU for a trace this large) or a number;
    an interpreter whose ``run_check`` has no ``jobs`` checks in one process.
    ``store``: the derived tables are written, as ``redecode`` does (else as
    ``chatkit-trace check`` runs: nothing written)."""
    code = (
        "import inspect, resource, sys, time\n"
        "try:\n"
        "    from chatkit_trace.cli.check import run_check\n"
        "except ImportError:  # a baseline from before the cli/ layout\n"
        "    from chatkit_trace.checkcmd import run_check\n"
        f"jobs = {None if jobs == 'auto' else int(jobs)!r}\n"
        "kw = {'jobs': jobs} if 'jobs' in inspect.signature(run_check).parameters else {}\n"
        "if __name__ == '__main__':\n"
        "    t = time.perf_counter()\n"
        f"    r = run_check({str(path)!r}, store_results={store!r}, **kw)\n"
        "    print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(r.findings),"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    # cwd: the trace's folder, so the script never imports a checkout's chatkit_trace from the current directory;
    # a file, not "-c": the workers are spawned and import the main module
    script = path.with_name(f"{path.stem}-check.py")
    script.write_text(code)
    try:
        out = subprocess.run([python, str(script)], capture_output=True, text=True, check=True, cwd=path.parent).stdout.split()
    finally:
        script.unlink(missing_ok=True)
    return float(out[0]), int(out[1]) / 1024.0, int(out[2]), int(out[3]) / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--keep", help="keep the generated traces in this folder")
    ap.add_argument("--python", action="append", default=[], help="also check with this interpreter, interleaved")
    ap.add_argument("--repeat", type=int, default=1, help="checks per interpreter and size (the fastest counts)")
    ap.add_argument("--jobs", default="auto",
                    help="comma-separated: 'auto' (check's default) and/or worker counts, each measured for this "
                    "interpreter (an interpreter given with --python checks with its own default)")
    ap.add_argument("--no-store", action="store_true",
                    help="check as `chatkit-trace check` does (nothing written) instead of storing the results as redecode")
    ap.add_argument("--generate", nargs=2, metavar=("PATH", "FRAMES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        print(generate(Path(args.generate[0]), int(args.generate[1])))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="chatkit-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    # (label, interpreter, jobs) per configuration: this interpreter with each --jobs, the others as they are
    configs = [(f"{sys.executable[-30:]} -j {j}", sys.executable, j) for j in args.jobs.split(",")]
    configs += [(py[-40:], py, "auto") for py in args.python]
    rows = []
    for n in sizes:
        path = folder / f"trace-{n}.db"
        if path.exists():
            path.unlink()
        t0 = time.perf_counter()
        if args.python:
            # Written by the last baseline's code: a newer trace schema is
            # one an older chatkit-trace refuses, an older one every
            # version reads.  (Run as a file, so sys.path[0] is bench/ and
            # the interpreter imports its own chatkit_trace.)
            out = subprocess.run([args.python[-1], __file__, "--generate", str(path), str(n)],
                                 capture_output=True, text=True, check=True, cwd=path.parent)
            frames = int(out.stdout.split()[-1])
        else:
            frames = generate(path, n)
        gen = time.perf_counter() - t0
        best: dict[str, tuple[float, float, int, float]] = {}
        for _ in range(args.repeat):
            for label, py, jobs in configs:
                # each check on its own copy: check stores its results, and a
                # newer version upgrades the file to a schema an older refuses
                work = path.with_name(f"{path.stem}-check.db")
                shutil.copyfile(path, work)
                try:
                    seconds, peak_mb, findings, worker_mb = check(work, py, jobs, not args.no_store)
                finally:
                    for leftover in (work, work.with_name(work.name + "-wal"), work.with_name(work.name + "-shm")):
                        leftover.unlink(missing_ok=True)
                was = best.get(label)
                if was is None or seconds < was[0]:
                    best[label] = (seconds, max(peak_mb, was[1] if was else 0), findings, max(worker_mb, was[3] if was else 0))
        for label, _, _ in configs:
            seconds, peak_mb, findings, worker_mb = best[label]
            rows.append((label, n, frames, gen, seconds, peak_mb, worker_mb, findings, os.path.getsize(path) / 1e6))
    print(
        f"{'configuration':<40}{'target':>9} {'frames':>9} {'generate s':>10} {'check s':>8} {'frames/s':>9} {'peak MB':>8} {'worker MB':>9} {'findings':>8} {'db MB':>7}"  # noqa: E501 - a table row
    )
    for label, n, frames, gen, seconds, peak, worker, findings, size in rows:
        print(f"{label:<40}{n:>9} {frames:>9} {gen:>10.1f} {seconds:>8.1f} {frames / seconds:>9,.0f} {peak:>8.0f} {worker:>9.0f} {findings:>8} {size:>7.0f}")  # noqa: E501 - a table row
    for label, _, _ in configs:
        mine = [r for r in rows if r[0] == label]
        for a, b in zip(mine, mine[1:], strict=False):
            print(f"{label}: growth {a[1]} -> {b[1]}: frames x{b[2] / a[2]:.1f}, time x{b[4] / a[4]:.2f}, "
                  f"peak memory x{b[5] / a[5]:.2f}, worker peak memory x{(b[6] / a[6]) if a[6] else 0:.2f}")
    if args.python:
        base_label = configs[-1][0]
        for n in sizes:
            mine = {r[0]: r for r in rows if r[1] == n}
            base = mine[base_label]
            for label, _, _ in configs[:-1]:
                me = mine[label]
                if me[7] != base[7]:
                    print(f"{n}: findings differ ({label}: {me[7]} vs {base[7]})")
                print(f"{n}: {label} x{base[4] / me[4]:.2f} faster than {base_label}, peak RSS {me[5]:.0f} "
                      f"(workers {me[6]:.0f}) vs {base[5]:.0f} MB")

if __name__ == "__main__":
    main()
