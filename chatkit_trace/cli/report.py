"""``chatkit-trace report TRACE -o report.html``: the self-contained HTML report.

One file (HTML, CSS, JavaScript and the data inlined; no network), to hand
to someone who is not at this terminal: a CI artifact, a bug report, a mail
attachment.  It shows what ``check`` and the viewer show, computed by the
same code: see :mod:`chatkit_trace.report`.  Exit 0 when written, 2 on a
usage or input error (one line).
"""

from __future__ import annotations

import argparse
import sys

from ..analyze import Options
from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report (runs, frames, snapshots, findings) to share",
        description="Analyse a trace as check does and write one self-contained HTML file: the runs with their "
        "status and findings (filter by code and severity, search), each run's frames with facts and admission "
        "results, the snapshot at any frame, live vs history, raw bytes, deep links to a frame. No network: it "
        "opens from file://, a CI artifact or a mail attachment. TRACE is a trace database, a HAR or mitmproxy "
        "flow file (with --profile) or a fixture.",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the report to write (report.html)")
    p.add_argument("--profile", help="adapter/profile to decode with (default: the one the trace was recorded with)")
    p.add_argument("--scrub-text", action="store_true",
                   help="replace message text with same-shape placeholders, as export does (ids and structure kept)")
    p.add_argument("--title", metavar="TEXT", help="the page's title (default: the trace's file name)")
    p.add_argument("--first-event", type=float, default=Options.first_event, metavar="SECONDS", help="CK601 threshold")
    p.add_argument("--stall", type=float, default=Options.stall, metavar="SECONDS", help="CK602 threshold")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..report import write_report

    for name in ("first_event", "stall"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0")
    result = write_report(
        args.trace,
        args.output,
        profile=args.profile,
        options=Options(first_event=args.first_event, stall=args.stall),
        scrub_text=args.scrub_text,
        title=args.title,
    )
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    s = {sev: sum(1 for f in result.findings if f.severity == sev) for sev in ("error", "warning", "info")}
    print(
        f"wrote {result.path} ({result.size / 1e6:.1f} MB): {result.runs} run(s), {result.frames} frame(s), "
        f"{len(result.findings)} finding(s) ({s['error']} error, {s['warning']} warning, {s['info']} info)",
        file=sys.stderr,
    )
    return 0
