"""``chatkit-trace redecode TRACE``: recompute facts, results and findings
from the raw frames with the current adapters and Core (a recording never
has to be made twice)."""

from __future__ import annotations

import argparse
import sys

from .analyze import Options


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("redecode", help="recompute facts and findings from the stored frames")
    p.add_argument("trace", metavar="TRACE", help="a trace database")
    p.add_argument("--profile", help="decode with this profile/adapter instead of the recorded one")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .checkcmd import run_check
    from .loading import kind_of
    from pathlib import Path

    if kind_of(Path(args.trace)) != "db":
        from .cli import UsageError

        raise UsageError(f"{args.trace}: redecode rewrites a trace database; import HAR/flow files first")
    result = run_check(args.trace, profile=args.profile, options=Options(), store_results=True, show_progress=sys.stderr.isatty())
    if args.profile:
        from .store import TraceStore

        from .capture.profiles import load_profile

        prof = load_profile(args.profile)  # loaded above already: no new error here
        with TraceStore(args.trace) as store:
            store.set_meta("profile", args.profile)
            # later commands decode with what the derived tables were made with
            store.set_meta("protocol", prof.protocol)
            if prof.adapter_spec is None:
                store.set_meta("capabilities", list(prof.capabilities))
    s = result.summary()
    print(f"redecoded {args.trace}: {s['frames']} frames, {s['facts']} facts, {s['total']} finding(s) "
          f"({s['error']} error, {s['warning']} warning, {s['info']} info)")
    return 0
