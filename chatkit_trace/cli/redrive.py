"""``chatkit-trace redrive FIXTURE --upstream URL``: has the live backend regressed?

Sends the fixture's recorded requests to a live backend (keeping the
recording's causality), records the new traffic, and compares its structure
with the recording: run outcomes, message and part ids and types, tool
names and states, findings; text that models vary is ignored.  Exit 0 when
the structure is the same (findings that vanished are reported as fixed),
1 on a structural regression or a new error or warning finding, 2 on a usage
or input error.  See :mod:`chatkit_trace.fixtures.redrive`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "redrive",
        help="send a fixture's recorded requests to a live backend and compare the structure; exit 1 on a regression",
        description="Send the fixture's recorded requests to a live backend, record the new traffic and compare its "
        "structure with the recording (run outcomes, message/part ids and types, tool names, findings), ignoring "
        "text. A finding the recording had and the new traffic does not is reported as fixed (never a regression); "
        "a new error or warning finding is one. Exit 1 on a structural regression.",
    )
    p.add_argument("fixture", metavar="FIXTURE", help="a *.chatkit.json fixture")
    p.add_argument("--upstream", "-u", required=True, metavar="URL", help="the live backend's base URL (http://host:port)")
    p.add_argument("--header", "-H", action="append", default=[], metavar="'NAME: VALUE'",
                   help="send this header instead of the recorded one (e.g. real credentials for redacted ones); repeatable")
    p.add_argument("--speed", default="max", metavar="1|10|max",
                   help="also keep the recorded start times divided by this (default max: causality only)")
    p.add_argument("--timeout", type=float, default=15.0, metavar="S", help="longest wait for data or for a dependency (default 15)")
    p.add_argument("--exact-ids", action="store_true", help="ids must be equal, not only consistently renamed")
    p.add_argument("--trace", metavar="TRACE.db", help="also store the new traffic in this trace database")
    p.add_argument("--save", metavar="FILE", help="write the new traffic as a fixture (e.g. to replace the old one)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..fixtures import dump_fixture, load_fixture
    from ..fixtures.redrive import redrive_fixture
    from ..fixtures.server import parse_speed

    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http(s):// URL, not {args.upstream!r}")
    headers = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {h!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    try:
        speed = parse_speed(args.speed)
    except ValueError as err:
        raise UsageError(f"--speed: {err}") from None
    if args.timeout <= 0:
        raise UsageError("--timeout must be > 0")
    if args.trace and Path(args.trace).exists():
        raise UsageError(f"{args.trace} exists: choose a new trace file")
    fixture = load_fixture(args.fixture)
    result = redrive_fixture(fixture, args.upstream, speed=speed, timeout=args.timeout, headers=headers,
                             exact_ids=args.exact_ids, store_path=args.trace)
    print(result.report())
    if args.save:
        dump_fixture(result.new_fixture, args.save)
        print(f"wrote the new traffic as a fixture: {args.save}", file=sys.stderr)
    return 0 if result.ok else 1
