"""``chatkit-trace diff TRACE``: what the UI showed of each run from the live
stream against every later history read that covers it, side by side.

The comparisons are the ones ``check`` judges (CK201, CK202:
:func:`chatkit_trace.analyze.identity.comparisons`): each names its history
read and that read's scope (session, run or task, page), and the live
baseline it used (the run as the UI had it just before the read, and how the
run had settled).  Exit status as diff(1): 0 every comparison is
isomorphic, 1 differences, 2 trouble (nothing to compare, unreadable input).
A run no read was judged against is still shown with the latest read that
covers it while it was moving (its stream open, named active, a stop never
confirmed): marked "not judged", as check makes no finding of it; its
differences count for the exit status.  With nothing at all to compare,
the message says why for the run asked about (never started, only status
reads, no read after it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

#: Characters of a part's text shown in a cell (``--full``: all of it).
CELL = 160


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff",
        help="live snapshot vs history, side by side (R8.4); exit 0 isomorphic, 1 differences, 2 trouble",
        description="Each run the live stream carried against every later history read that covers it "
        "(the read's scope: session, run or task, page), side by side. Exit status as diff(1): "
        "0 isomorphic, 1 differences, 2 trouble (nothing to compare included).",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--session", help="only this session")
    p.add_argument("--run", dest="run_id", metavar="RUN", help="only this run")
    p.add_argument("--profile", help="adapter/profile (default: the recorded one)")
    p.add_argument("--full", action="store_true", help="show whole texts (default: long texts end in …)")
    p.set_defaults(run=run)


def message_lines(m: Any, limit: int | None) -> list[str]:
    """A message as lines: ``role id``, then one line per part."""
    from ..analyze import clip
    from ..analyze.identity import visible

    out = [f"{m.role} {m.id}"]
    for p in m.parts:
        v = visible(p)
        text = v["text"] if "text" in v else ", ".join(f"{k}: {json.dumps(v[k], ensure_ascii=False, default=str)}" for k in v)
        out.append(f"  {p.id} [{p.type}] {clip(str(text), limit)}")
    return out


def _rows(c: Any, limit: int | None) -> list[tuple[str, str, bool]]:
    """(live line, history line, differs) for each line of the paired messages."""
    rows: list[tuple[str, str, bool]] = []
    for pair in c.pairs:
        left = message_lines(pair.live, limit) if pair.live is not None else []
        right = message_lines(pair.history, limit) if pair.history is not None else []
        if pair.live is None:
            left = ["(not shown live)"]
        if pair.history is None:
            right = ["(missing in history)" if c.scope != "page" else "(not in this page)"]
        head_differs = c.head_differs(pair)
        lparts = list(pair.live.parts) if pair.live is not None else []
        hparts = list(pair.history.parts) if pair.history is not None else []
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            if i == 0:
                differs = head_differs
            else:
                k = i - 1
                lp = lparts[k] if k < len(lparts) else None
                hp = hparts[k] if k < len(hparts) else None
                differs = c.part_differs(lp, hp)
            rows.append((a, b, differs))
    return rows


def run(args: argparse.Namespace) -> int:
    # long-function: derive, then one table per comparison in the order found, then the exit status
    from rich.table import Table
    from rich.text import Text

    from ..analyze import Context
    from ..analyze.identity import cause_sentence, comparisons, describe, limit_sentence, open_comparisons
    from ..derive import Deriver
    from ..loading import open_trace
    from ._output import SafeConsole

    found: list[Any] = []
    contexts: list[Any] = []

    def session_done(derived: Any) -> None:
        ctx = Context(derived.replay, {e.index: e for e in derived.exchanges}, loaded.adapter, deriver.options)
        contexts.append(ctx)
        found.extend(comparisons(ctx))
        # a run no read was judged against, shown with the latest read that
        # covers it while it was still moving (not judged: the UI kept its live copy)
        found.extend(open_comparisons(ctx))

    loaded = open_trace(args.trace, profile=args.profile)
    try:
        deriver = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities)
        deriver.run(analyse=False, on_session=session_done)
    finally:
        loaded.close()
    console = SafeConsole(file=sys.stdout, width=None if sys.stdout.isatty() else 160, highlight=False)  # control characters shown
    limit = None if args.full else CELL
    shown = differing = 0
    for c in found:
        if (args.session and c.session_id != args.session) or (args.run_id and c.run_id != args.run_id):
            continue
        shown += 1
        title = Text.assemble(
            ("session ", "bold"), c.session_id, ("  run ", "bold"), str(c.run_id),
            (f"\n{c.baseline}", ""), ("  vs  ", "bold"), (c.title, ""),
        )
        table = Table(title=title, expand=True, show_lines=False)
        table.add_column(Text(f"live (as of {'frame' if c.live_at and c.live_at[1] is not None else 'request'} "
                              f"{':'.join(str(x) for x in c.live_at if x is not None) if c.live_at else '?'})"))
        table.add_column(Text(f"history read {c.read} ({c.scope} scope)"))
        for a, b, differs in _rows(c, limit):
            style = "bold red" if differs else ""
            table.add_row(Text(a, style=style), Text(b, style=style))
        console.print(table)
        if c.diffs or c.explained:
            differing += 1
        for d in c.diffs:
            console.print(Text.assemble(("  differs: ", "red"), describe(d, limit)))
        for d in c.explained:
            console.print(Text.assemble(("  explained: ", "yellow"), describe(d, limit), " ", cause_sentence(d["cause"])))
        for d in c.limited:
            console.print(Text.assemble(("  limit: ", "cyan"), limit_sentence(d)))
        if c.moving is not None:
            console.print(Text.assemble(("  not judged", "yellow"), f": {c.moving}; no finding is made of it."))
        elif not c.diffs and not c.explained:
            word, rest = c.verdict.split(":", 1)
            console.print(Text.assemble((f"  {word}", "green"), f":{rest}"))
    if not shown:
        print(f"chatkit-trace diff: nothing to compare: {_why_nothing(contexts, args)}", file=sys.stderr)
        return 2
    return 1 if differing else 0


def _why_nothing(contexts: list[Any], args: argparse.Namespace) -> str:
    """Why no read was compared, for the run (or session) asked about."""
    general = "no history read covers a run the live stream carried (record a refresh after a run)."
    if not args.run_id:
        return ("for that session: " + general) if args.session else general
    runs = [
        (ctx, s, s.runs[args.run_id])
        for ctx in contexts
        for s in ctx.replay.sessions.values()
        if args.run_id in s.runs and (not args.session or s.session_id == args.session)
    ]
    if not runs:
        return f"the trace has no run {args.run_id!r}{' in that session' if args.session else ''} (see chatkit-trace runs)."
    ctx, s, rec = runs[0]
    exchanges = [ctx.exchanges[i] for i in rec.exchanges if i in ctx.exchanges]
    if rec.live is None:
        failed = [e for e in exchanges if e.capability in ("run", "regenerate", "edit") and e.failed]
        how = f" (its request failed: HTTP {failed[0].status})" if failed and failed[0].status else ""
        return f"run {args.run_id} never started{how}: the UI showed nothing of it live, so there is nothing to compare."
    start = min((e.started_at for e in exchanges), default=0.0)
    status = sorted(e.index for e in ctx.exchanges.values() if e.capability == "status" and e.run_id == args.run_id)
    reads = [h for h in s.history if h.at >= start]
    if reads:
        listed = ", ".join(f"{h.exchange_index} ({h.scope} scope{', run ' + h.run_id if h.run_id else ''})" for h in reads)
        return f"the history reads after run {args.run_id} ({listed}) do not cover it or hold none of its messages."
    if status:
        return (f"only status reads follow run {args.run_id} (exchange {', '.join(map(str, status))}): a status read "
                "holds no messages (decisions.md 120); record a history read after the run.")
    return f"no history read follows run {args.run_id} in session {s.session_id} (record a refresh after the run)."
