"""``chatkit-trace view TRACE``: browse sessions and runs, replay a run frame by frame (the Textual viewer)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "view",
        help="browse runs, replay a run frame by frame with the UI's snapshot, findings and live vs history",
        description="Open a trace in the Textual viewer. TRACE is a trace database (it may still be recording: "
        "new frames appear as they arrive), a HAR or mitmproxy flow file (with --profile) or a fixture.",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument(
        "--profile",
        help="adapter/profile to decode with (default: the one the trace was recorded with)",
    )
    p.add_argument("--session", help="open this session's (first) run")
    p.add_argument("--run", dest="run_id", metavar="RUN", help="open this run")
    p.add_argument(
        "--analyse",
        choices=("auto", "always", "never"),
        default="auto",
        help="derive facts and findings when the trace has none: auto (up to 200k frames), always, never",
    )
    p.add_argument(
        "--theme", help="a Textual theme, e.g. textual-light, textual-dark (Ctrl+T toggles)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..viewer import ViewerApp, open_source

    source = open_source(args.trace, args.profile)  # bad input: one clear line, exit 2 (cli.main)
    app = ViewerApp(
        source,
        profile=args.profile,
        session=args.session,
        run=args.run_id,
        analyse=args.analyse,
        theme=args.theme,
    )
    try:
        app.run()
    finally:
        source.discard()
    return int(app.return_code or 0)
