"""``chatkit-trace redecode TRACE``: recompute facts, results and findings
from the raw frames with the current adapters and Core, and store them in
the trace (a recording never has to be made twice).

``--profile`` re-classifies every stored exchange with the profile given now
(``chatkit_trace.loading.reclassify``) and stores that classification too, so
a recording made with the wrong profile, or with none, is rescued for good.
Nothing is written unless the new decoding has something to judge: a wrong
``--profile`` is exit 2 with the sentence ``check`` prints, and the trace is
left as it was.  Only what is derived from the recorded bytes is rewritten
(identity columns, the ``body`` frames of a JSON response, derived tables,
meta); the recorded bytes never change.
"""

from __future__ import annotations

import argparse
import sys

from ..analyze import Options
from ..errors import UsageError
from .check import AUTO_FRAMES


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "redecode",
        help="recompute facts and findings from the stored frames and store them in the trace",
        description="Recompute facts, admission results and findings from the stored frames with the current adapters "
        "and Core, and store them in TRACE. With --profile, every exchange is matched against that profile again "
        "(a recording made with the wrong profile is recovered). Nothing is written when there is nothing to judge.",
    )
    p.add_argument("trace", metavar="TRACE", help="a trace database")
    p.add_argument("--profile", help="re-classify and decode with this profile/adapter instead of the recorded one")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="worker processes deriving the sessions (the rows are written by this one); 0 = one per CPU; "
                   f"default: one per CPU for a trace of {AUTO_FRAMES:,} frames or more, else 1")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..loading import kind_of
    from .check import jobs_option, probe_check, run_check

    if kind_of(Path(args.trace)) != "db":
        raise UsageError(f"{args.trace}: redecode rewrites a trace database; import HAR/flow files first")
    jobs = jobs_option(args.jobs)
    progress = sys.stderr.isatty()
    # First read-only (a route profile re-classifies a temporary copy), only
    # until one exchange is understood: a profile that matches nothing
    # (NothingToJudge, exit 2) must not wipe the classification that works.
    probe_check(args.trace, profile=args.profile)
    result = run_check(args.trace, profile=args.profile, options=Options(), store_results=True, show_progress=progress, jobs=jobs)
    _settle(args.trace, args.profile)
    s = result.summary()
    print(f"redecoded {args.trace}: {s['frames']} frames, {s['facts']} facts, {s['total']} finding(s) "
          f"({s['error']} error, {s['warning']} warning, {s['info']} info)")
    return 0


def _settle(path: str, profile: str | None) -> None:
    """Name an adapter-only ``--profile`` (``pkg.mod:Class``) in the meta (a
    route profile was stored by the re-classification), and leave no
    -wal/-shm files next to a trace nothing else has open."""
    from ..loading import _route_profile
    from ..store import TraceStore

    with TraceStore(path) as store:
        prof = _route_profile(profile) if profile else None
        if profile and (prof is None or prof.adapter_spec is not None):
            # an adapter named alone decoded the stored classification: later
            # commands decode with what the derived tables were made with
            store.set_meta("profile", profile)
            if prof is not None:
                store.set_meta("protocol", prof.protocol)
            store.commit()
        store.settle()
