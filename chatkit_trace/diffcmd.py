"""``chatkit-trace diff TRACE``: the live snapshot (when each run settled)
against every later history read, side by side, differences highlighted."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diff", help="live snapshot vs history, side by side (R8.4)")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--session", help="only this session")
    p.add_argument("--run", dest="run_id", metavar="RUN", help="only this run")
    p.add_argument("--profile", help="adapter/profile (default: the recorded one)")
    p.set_defaults(run=run)


def _lines(messages: list[Any]) -> list[str]:
    from .analyze.identity import visible

    out = []
    for m in messages:
        out.append(f"{m.role} {m.id}")
        for p in m.parts:
            v = visible(p)
            text = v.get("text") if "text" in v else ", ".join(f"{k}={v[k]!r}" for k in v)
            text = str(text).replace("\n", " ")
            out.append(f"  {p.id} [{p.type}] {text[:60]}")
    return out


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .analyze.identity import _comparisons
    from .analyze import Context
    from .loading import open_trace
    from .pipeline import replay

    loaded = open_trace(args.trace, profile=args.profile)
    try:
        exchanges = loaded.exchanges()
        rep = replay(exchanges, loaded.adapter, capabilities=loaded.capabilities)
    finally:
        loaded.close()
    ctx = Context(rep, {e.index: e for e in exchanges}, loaded.adapter)
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160)
    shown = 0
    for c in _comparisons(ctx):
        sid, run_id, h, live, hist = c.session_id, c.run_id, c.history, c.live, c.seen
        if (args.session and sid != args.session) or (args.run_id and run_id != args.run_id):
            continue
        shown += 1
        diffs, renamed = c.diff()
        table = Table(title=f"session {sid}  run {run_id}: live when settled vs history read {h.exchange_index}", expand=True)
        table.add_column("live")
        table.add_column("history")
        left, right = _lines(live), _lines(hist)
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            style = "bold red" if a != b else ""
            table.add_row(Text(a, style=style), Text(b, style=style))
        console.print(table)
        if diffs:
            for d in diffs:
                console.print(f"  [red]differs[/red] {d}", highlight=False)
        else:
            console.print("  [green]isomorphic[/green]: same ids, types and content")
    if not shown:
        console.print("No settled run with a later history read to compare (record a refresh after a run).")
    return 0
