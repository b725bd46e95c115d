"""``export --parquet`` and ``export --otlp`` beside ``check`` of the same trace:
time and size per 100k frames (issue 34).

    python bench/export_cost.py [--frames 100000] [--repeat 2] [--keep DIR]

The trace is made by ``bench/analyze_scaling.py`` (sessions of ``myproto``:
10 runs of 50 SSE frames, a history read, a few planted bugs).  Every
command runs as a user runs it (``chatkit-trace …`` in its own process),
alternating, ``--repeat`` times; the fastest counts and each is shown as a
ratio to ``check -j 1`` measured in the same run (export derives one
process's sessions in turn, as ``check -j 1`` does; ``check``'s default
uses a worker per CPU on a trace this large and is shown too).  OTLP goes to
a receiver started here (the standard library's HTTP server answering 200
and counting the bytes it was sent): the time is the export's, the size
what went over the wire (protobuf, uncompressed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "chatkit_trace.cli"]


class _Receiver(BaseHTTPRequestHandler):
    received = 0
    requests = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        type(self).received += n
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _run(argv: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", help="keep the trace and the outputs in this folder")
    args = ap.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="chatkit-export-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "trace.db"
    if not trace.exists():
        subprocess.run([sys.executable, str(HERE / "analyze_scaling.py"), "--generate", str(trace), str(args.frames)], check=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    otlp = f"http://127.0.0.1:{server.server_address[1]}"
    cases: dict[str, tuple[list[str], Path | None]] = {
        "check -j 1": (CLI + ["check", str(trace), "-j", "1", "--fail-on", "never", "-o", os.devnull], None),
        "check (default -j)": (CLI + ["check", str(trace), "--fail-on", "never", "-o", os.devnull], None),
        "export --parquet": (CLI + ["export", str(trace), "--parquet", str(folder / "pq")], folder / "pq"),
        "export --parquet --content": (CLI + ["export", str(trace), "--parquet", str(folder / "pqc"), "--content"], folder / "pqc"),
        "export --otlp": (CLI + ["export", str(trace), "--otlp", otlp], None),
        "export --otlp --frames 100": (CLI + ["export", str(trace), "--otlp", otlp, "--frames", "100"], None),
        "export --otlp --frames 100 --content": (CLI + ["export", str(trace), "--otlp", otlp, "--frames", "100", "--content"], None),
    }
    best: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, (argv, out) in cases.items():
            if out is not None:
                shutil.rmtree(out, ignore_errors=True)
            before = _Receiver.received
            dt = _run(argv)
            best[name] = min(best.get(name, dt), dt)
            if out is not None:
                sizes[name] = _size(out)
            elif "otlp" in name:
                sizes[name] = _Receiver.received - before
    server.shutdown()
    base = best["check -j 1"]
    per = 100_000 / args.frames
    print(f"trace: {args.frames:,} frames, {_size(trace) / 1e6:.1f} MB ({trace}); best of {args.repeat}; per 100k frames")
    print(f"{'command':40} {'s/100k':>8} {'x check -j 1':>13} {'MB/100k':>9}")
    for name in cases:
        size = f"{sizes[name] * per / 1e6:9.1f}" if name in sizes else f"{'':9}"
        print(f"{name:40} {best[name] * per:8.2f} {best[name] / base:13.2f} {size}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
