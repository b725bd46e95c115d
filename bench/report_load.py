"""The HTML report on generated traces of 10k and 100k frames: generation time,
peak memory, file size and time to interactive in Chromium, as ratios
against ``check`` on the same trace, measured in the same run.

    python bench/report_load.py [--sizes 10000,100000] [--repeat 3] [--keep DIR]

The traces are bench/analyze_scaling.py's (sessions of the example protocol:
10 runs of 50 SSE frames and a history read each, a few planted bugs).  Per
size, each in its own process (so peak RSS is its own):

* ``check``: ``chatkit-trace check TRACE --no-store --format json`` (the
  same analysis, nothing written back: the baseline);
* ``report``: ``chatkit-trace report TRACE -o report.html``;
* the file's size, in MB and bytes per frame;
* time to interactive: Debian's Chromium (headless, as the tests launch it)
  opens the file from ``file://`` until the run list and the findings are
  on screen (``html[data-ready]``; the page's own clock, from navigation
  start), and then the biggest run until its timeline and snapshot show.

Not a test: speed is reported, never asserted.  Targets (issue 17): a
100k-frame report under 15 MB, interactive within 2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from analyze_scaling import generate  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of a command run through a small Python wrapper."""
    code = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "dt = time.perf_counter() - t\n"
        "if p.returncode not in (0, 1): sys.exit(p.stderr)\n"
        "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def interactive(path: Path, repeat: int) -> tuple[float, float]:
    """Median ms to interactive (page clock) and to the biggest run's first snapshot."""
    from playwright.sync_api import sync_playwright

    ready, opened = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for _ in range(repeat):
                ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                page = ctx.new_page()
                page.goto(path.resolve().as_uri())
                page.wait_for_selector("html[data-ready='1']", state="attached", timeout=60_000)
                ready.append(page.evaluate("window.__ckReadyAt"))
                runs = page.evaluate("JSON.parse(document.getElementById('ck-index').textContent).runs.map(r => [r.s, r.r, r.fr])")
                s, r, _ = max(runs, key=lambda x: x[2])
                t0 = page.evaluate("performance.now()")
                page.evaluate("([s, r]) => { location.hash = '#session=' + encodeURIComponent(s) + '&run=' + encodeURIComponent(r); }", [s, r])
                page.wait_for_function("k => document.documentElement.dataset.run === k && document.documentElement.dataset.frame", arg=f"{s}/{r}")
                opened.append(page.evaluate("performance.now()") - t0)
                ctx.close()
        finally:
            browser.close()
    return statistics.median(ready), statistics.median(opened)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="keep the generated traces and reports in this folder")
    args = ap.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="chatkit-bench-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "chatkit_trace.cli"]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        trace = folder / f"trace-{n}.db"
        if trace.exists():
            trace.unlink()
        frames = generate(trace, n)
        out = folder / f"report-{n}.html"
        check_s, check_mb = timed([*cli, "check", str(trace), "--no-store", "--format", "json"])
        report_s, report_mb = timed([*cli, "report", str(trace), "-o", str(out)])
        size = out.stat().st_size
        tti, open_run = interactive(out, args.repeat)
        rows.append((n, frames, check_s, check_mb, report_s, report_mb, size, tti, open_run, trace.stat().st_size))
    print(f"{'frames':>8} {'check s':>8} {'report s':>9} {'x check':>8} {'check MB':>9} {'report MB':>10} {'x mem':>6}"
          f" {'file MB':>8} {'B/frame':>8} {'x db':>5} {'ready ms':>9} {'x check':>8} {'open run ms':>11}")
    for _n, frames, cs, cm, rs, rm, size, tti, op, db in rows:
        print(f"{frames:>8} {cs:>8.2f} {rs:>9.2f} {rs / cs:>8.2f} {cm:>9.0f} {rm:>10.0f} {rm / cm:>6.2f}"
              f" {size / 1e6:>8.2f} {size / frames:>8.1f} {size / db:>5.2f} {tti:>9.0f} {tti / 1000 / cs:>8.3f} {op:>11.0f}")
    print(
        json.dumps(
            [
                dict(zip(("target", "frames", "check_s", "check_mb", "report_s", "report_mb", "bytes", "ready_ms", "open_run_ms", "db_bytes"), r, strict=False))
                for r in rows
            ]
        )
    )


if __name__ == "__main__":
    main()
