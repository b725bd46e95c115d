"""``chatkit-trace runs TRACE``: a table of sessions and runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from .trace import STREAM_STATES

    p = sub.add_parser(
        "runs",
        help="table of sessions and runs: status, origin, duration, frames, rejections, findings",
        description="A table of the trace's sessions and runs. The settled-by column says what concluded a run: "
        "fact (a terminal event on its stream), history or status (only a later read did). The connection "
        "column says how the run's last response stream ended in the recording, for every protocol alike: "
        + "; ".join(f"{k} ({v})" for k, v in STREAM_STATES.items()) + ".",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--profile", help="adapter/profile (default: the recorded one)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def collect(path: str, profile: str | None = None) -> list[dict]:
    from .analyze import analyze_replay
    from .loading import open_trace
    from .pipeline import replay

    loaded = open_trace(path, profile=profile)
    try:
        exchanges = loaded.exchanges()
        rep = replay(exchanges, loaded.adapter, capabilities=loaded.capabilities)
        findings = analyze_replay(rep, exchanges, loaded.adapter)
    finally:
        loaded.close()
    by_run: dict[tuple, Counter] = defaultdict(Counter)
    for f in findings:
        by_run[(f.session_id, f.run_id)][f.severity] += 1
    frames: Counter = Counter()
    times: dict[tuple, list[float]] = defaultdict(list)
    for fr in rep.frames:
        frames[(fr.session_id, fr.run_id)] += 1
        times[(fr.session_id, fr.run_id)].append(fr.at)
    rejected: Counter = Counter()
    for rec in rep.facts:
        if rec.result.violation:
            rejected[(rec.fact.session_id, rec.fact.run_id)] += 1
    rows = []
    from .trace import stream_state

    for sid, s in rep.sessions.items():
        for view in s.core.snapshot.runs:
            key = (sid, view.id)
            run_rec = s.runs.get(view.id)
            run_exchanges = [rep.exchanges[i].exchange for i in (run_rec.exchanges if run_rec else ()) if i in rep.exchanges]
            status = view.status
            if status == "running":
                status = "outcome unknown" if view.connection == "disconnected" else "running"
            t = times.get(key, [])
            rows.append(
                {
                    "session": sid,
                    "run": view.id,
                    "status": status,
                    # what concluded the run: a terminal event (fact), a later history or status read, or nothing
                    "settled_by": (run_rec.settled_by if run_rec else None) if view.terminal else None,
                    "origin": view.origin,
                    "connection": stream_state(run_exchanges),
                    "duration_s": round(max(t) - min(t), 3) if len(t) > 1 else 0.0,
                    "frames": frames.get(key, 0),
                    "rejected": rejected.get(key, 0),
                    "errors": by_run[key].get("error", 0),
                    "warnings": by_run[key].get("warning", 0),
                    "infos": by_run[key].get("info", 0),
                }
            )
    return rows


def run(args: argparse.Namespace) -> int:
    rows = collect(args.trace, args.profile)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # recorded ids (and the file's name) are plain text, never markup
    table = Table(title=Text(f"runs in {args.trace}"))
    for col in ("session", "run", "status", "settled by", "origin", "connection", "duration", "frames", "rejected", "findings"):
        table.add_column(col, justify="right" if col in ("duration", "frames", "rejected") else "left")
    colors = {"completed": "green", "failed": "red", "interrupted": "yellow", "outcome unknown": "magenta"}
    for r in rows:
        c = colors.get(r["status"], "")
        findings = " ".join(f"{n}{k[0]}" for k, n in (("error", r["errors"]), ("warning", r["warnings"]), ("info", r["infos"])) if n) or "-"
        table.add_row(
            Text(str(r["session"])), Text(str(r["run"])), Text(r["status"], style=c), Text(r["settled_by"] or "-"),
            Text(str(r["origin"])), Text(str(r["connection"])), f"{r['duration_s']:.2f}s", str(r["frames"]),
            str(r["rejected"]), findings,
        )
    Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160).print(table)
    return 0
