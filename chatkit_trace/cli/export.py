"""``chatkit-trace export TRACE --session S [--run R] -o FILE``: a conformance fixture.

Writes the session's exchanges (or those of some runs) with the outcome the
current adapter and Core give them (facts with their results, final
snapshot, findings) as a versioned ``*.chatkit.json`` file; see
:mod:`chatkit_trace.fixtures.export` for what is kept and normalised.
Exit 0, or 2 with one line saying what is wrong (e.g. which sessions or
runs exist).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="export recorded runs of a session as a conformance fixture (*.chatkit.json)",
        description="Export one session of a trace (or some of its runs) as a versioned JSON fixture: the "
        "exchanges in order (requests, responses, frames with relative timing and event ids, how each stream "
        "ended, history reads) and the expected outcome (facts with admission results, final snapshot, "
        "findings). Redaction is applied again; hosts, ports and times are normalised.",
    )
    p.add_argument("trace", metavar="TRACE", help="a trace database (or a HAR/flow file with --profile, or a fixture)")
    p.add_argument("--session", "-s", required=True, metavar="S", help="the session to export")
    p.add_argument("--run", "-r", action="append", dest="run_ids", default=[], metavar="R",
                   help="only this run (repeatable; default: every run of the session)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the fixture to write (*.chatkit.json; - for stdout)")
    p.add_argument("--profile", metavar="P", help="profile/adapter (default: the one the trace was recorded with)")
    p.add_argument("--redact", action="append", default=[], metavar="NAME",
                   help="also redact this header/parameter/field (header:X, query:X, field:X); repeatable")
    p.add_argument("--scrub-text", action="store_true",
                   help="replace message text with same-shape placeholders (ids and structure kept), to share the fixture")
    p.add_argument("--note", metavar="TEXT", help="a note kept in the fixture's meta (what it shows)")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..fixtures import FIXTURE_SUFFIX, dumps_fixture, export_fixture

    out = args.output
    if out != "-":
        path = Path(out)
        if path.exists() and not args.force:
            raise UsageError(f"{path} exists: use --force to replace it, or choose another -o")
        if path.is_dir():
            raise UsageError(f"{path} is a directory: give the fixture's file name")
        if not path.parent.exists():
            raise UsageError(f"{path.parent}: no such directory for the output")
    result = export_fixture(
        args.trace, args.session, args.run_ids, profile=args.profile, redact=args.redact,
        scrub_text=args.scrub_text, note=args.note,
    )
    fx = result.fixture
    text = dumps_fixture(fx)
    if out == "-":
        sys.stdout.write(text)
    else:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, "utf-8")
        tmp.replace(path)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    frames = sum(len(e.frames) for e in fx.exchanges)
    codes = ", ".join(sorted({f.code for f in fx.expected.findings})) or "none"
    print(
        f"exported session {args.session!r} (runs {', '.join(fx.meta.runs) or '-'}): {len(fx.exchanges)} exchanges, "
        f"{frames} frames, {len(fx.expected.facts)} facts, findings {codes} -> {out}",
        file=sys.stderr,
    )
    if out != "-" and not out.endswith(FIXTURE_SUFFIX):
        print(f"note: the pytest plugin collects files named *{FIXTURE_SUFFIX}", file=sys.stderr)
    return 0
