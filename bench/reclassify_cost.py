"""What ``--profile`` re-classification costs ``check`` (issue 14).

    python bench/reclassify_cost.py [--frames 100000]

Generates the trace of ``analyze_scaling.py`` and names another profile in its
meta (as a recording made with the wrong one would), then times, each in its
own process: ``check`` as recorded (the baseline) and ``check --profile
myproto``, which copies the trace to a temporary file and matches every
exchange again before the same analysis.  Reports the ratio to the baseline
measured in the same run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyze_scaling import generate  # noqa: E402

from chatkit_trace.store import TraceStore  # noqa: E402


def timed(*args: str) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", *args, "--format", "json"],
                          capture_output=True, text=True)
    return time.perf_counter() - t, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="chatkit-bench-"))
    path = folder / "trace.db"
    frames = generate(path, args.frames)
    with TraceStore(path) as store:
        store.set_meta("profile", "openai")  # "recorded" with another profile: --profile myproto re-classifies
    base = min(timed(str(path))[0] for _ in range(args.repeat))
    runs = [timed(str(path), "--profile", "myproto") for _ in range(args.repeat)]
    recl = min(t for t, _ in runs)
    assert all(rc in (0, 1) for _, rc in runs), runs
    print(f"{frames} frames, {path.stat().st_size / 1e6:.0f} MB: check {base:.2f} s, "
          f"check --profile (re-classified copy) {recl:.2f} s, ratio x{recl / base:.2f}")


if __name__ == "__main__":
    main()
