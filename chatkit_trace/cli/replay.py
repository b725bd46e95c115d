"""``chatkit-trace replay FIXTURE...``: a fixture as a regression test.

Decodes each fixture's frames through the current adapter and Core and
compares with its expected outcome.  Exit 0 when every fixture replays
equal, 1 when one differs (with a diff naming the first differing fact,
finding or snapshot path and the nearest expected item), 2 when a file is
not a readable fixture.  ``--update`` rewrites the expectations instead.
A directory stands for every ``*.chatkit.json`` below it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError

__all__ = ["add_parser", "expand", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help="replay fixtures through the current adapter and Core; exit 1 with a diff when one changed",
        description="Replay conformance fixtures (*.chatkit.json) through the current adapter and Core and "
        "compare facts, admission results, final snapshots and findings with what each fixture expects. "
        "A directory means every fixture below it.",
    )
    p.add_argument("fixtures", nargs="+", metavar="FIXTURE", help="fixture files or directories")
    p.add_argument("--update", action="store_true", help="rewrite the expectations with the replayed outcome")
    p.add_argument("--profile", metavar="P", help="decode with this profile/adapter instead of the fixture's")
    p.add_argument("-q", "--quiet", action="store_true", help="print only differences and errors")
    p.set_defaults(run=run)


def expand(items: list[str]) -> list[Path]:
    from ..fixtures import FIXTURE_SUFFIX

    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.rglob(f"*{FIXTURE_SUFFIX}"))
            if not found:
                raise UsageError(f"{p}: no *{FIXTURE_SUFFIX} files in this directory")
            out.extend(found)
        elif p.exists() and not p.is_file():
            raise UsageError(f"{p}: is not a regular file (a FIFO, a device): give a fixture file or a folder of them")
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    from ..core import ChatkitTraceError
    from ..fixtures import replay_fixture, update_fixture

    paths = expand(args.fixtures)
    failed = errors = 0
    for path in paths:
        try:
            result = replay_fixture(path, profile=args.profile)
        except ChatkitTraceError as err:
            print(f"chatkit-trace replay: error: {err}", file=sys.stderr)
            errors += 1
            continue
        n = f"{len(result.actual.facts)} facts, {len(result.actual.findings)} findings"
        if args.update:
            changed = update_fixture(path, result)
            if changed or not args.quiet:
                print(f"{'updated' if changed else 'unchanged'} {path} ({n})")
            continue
        if result.ok:
            if not args.quiet:
                print(f"ok {path} ({n})")
        else:
            failed += 1
            print(result.report())
    if len(paths) > 1 and not args.quiet:
        print(f"{len(paths)} fixture(s): {len(paths) - failed - errors} ok, {failed} differ, {errors} unreadable", file=sys.stderr)
    return 2 if errors else (1 if failed else 0)
