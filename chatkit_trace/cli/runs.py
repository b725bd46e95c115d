"""``chatkit-trace runs TRACE``: a table of sessions and runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from ..trace import RUN_STATUSES, STREAM_STATES

    p = sub.add_parser(
        "runs",
        help="table of sessions and runs: status, origin, duration, frames, rejections, findings",
        description="A table of the trace's sessions and runs. The status column uses the one vocabulary of every "
        "output: " + "; ".join(f"{k} ({v})" for k, v in RUN_STATUSES.items()) + ". The duration is how long the user "
        "waited: from the run's request to the end they saw. The settled-by column says what concluded a run: "
        "fact (a terminal event on its stream), history or status (only a later read did). The connection "
        "column says how the run's last response stream ended in the recording, for every protocol alike: "
        + "; ".join(f"{k} ({v})" for k, v in STREAM_STATES.items()) + ".",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--profile", help="adapter/profile (default: the recorded one)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def collect(path: str, profile: str | None = None) -> list[dict]:
    """One row per run, as ``check`` derives the trace (the same engine, the
    same findings), a run the Core never started included (``not started``)."""
    # long-function: the derive, then one row per run in the one status vocabulary
    from ..derive import Deriver, unstarted_runs
    from ..loading import open_trace
    from ..trace import run_status, stream_state

    runs: list[tuple[Any, str]] = []
    unstarted: list[tuple[Any, str]] = []

    def session_done(derived: Any) -> None:
        recs = derived.replay.exchanges
        for run in derived.runs():
            runs.append((run, stream_state([recs[i].exchange for i in run.exchanges if i in recs])))
        for item in unstarted_runs(derived.replay):
            unstarted.append((item, stream_state([recs[i].exchange for i in item[1].exchanges if i in recs])))

    loaded = open_trace(path, profile=profile)
    try:
        findings = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities).run(on_session=session_done).findings
    finally:
        loaded.close()
    by_run: dict[tuple, Counter] = defaultdict(Counter)
    codes: dict[tuple, set[str]] = defaultdict(set)
    for f in findings:
        by_run[(f.session_id, f.run_id)][f.severity] += 1
        codes[(f.session_id, f.run_id)].add(f.code)  # CK702/CK703: the recording is incomplete

    def counts(key: tuple) -> dict[str, int]:
        return {"errors": by_run[key].get("error", 0), "warnings": by_run[key].get("warning", 0), "infos": by_run[key].get("info", 0)}

    rows = []
    for run, connection in runs:
        view, key, t = run.view, (run.session_id, run.run_id), run.frame_times
        rows.append(
            {
                "session": run.session_id,
                "run": view.id,
                # the one vocabulary (chatkit_trace.trace.RUN_STATUSES)
                "status": run_status(view.status, view.connection, codes[key]),
                # what concluded the run: a terminal event (fact), a later history or status read, or nothing
                "settled_by": (run.record.settled_by if run.record else None) if view.terminal else None,
                "origin": view.origin,
                "connection": connection,
                # how long the user waited: from the run's request to the end they saw (decisions.md 278)
                "duration_s": round(run.duration, 3),
                "frames": len(t),
                "rejected": run.violations,
                **counts(key),
            }
        )
    for (sid, rec, start, end), connection in unstarted:
        rows.append(
            {
                "session": sid,
                "run": rec.run_id,
                "status": run_status(None, None, codes[(sid, rec.run_id)]),
                "settled_by": None,
                "origin": "local",
                "connection": connection,
                "duration_s": round(max(0.0, (end or 0.0) - (start or 0.0)), 3),
                "frames": 0,
                "rejected": 0,
                **counts((sid, rec.run_id)),
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    rows = collect(args.trace, args.profile)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table
    from rich.text import Text

    from ._output import console

    # recorded ids (and the file's name) are plain text, never markup
    table = Table(title=Text(f"runs in {args.trace}"))
    for col in ("session", "run", "status", "settled by", "origin", "connection", "duration", "frames", "rejected", "findings"):
        table.add_column(col, justify="right" if col in ("duration", "frames", "rejected") else "left")
    colors = {"completed": "green", "failed": "red", "interrupted": "yellow", "outcome unknown": "magenta", "not started": "red",
              "recording incomplete": "bold yellow"}
    for r in rows:
        c = colors.get(r["status"], "")
        findings = " ".join(f"{n}{k[0]}" for k, n in (("error", r["errors"]), ("warning", r["warnings"]), ("info", r["infos"])) if n) or "-"
        table.add_row(
            Text(str(r["session"])), Text(str(r["run"])), Text(r["status"], style=c), Text(r["settled_by"] or "-"),
            Text(str(r["origin"])), Text(str(r["connection"])), f"{r['duration_s']:.2f}s", str(r["frames"]),
            str(r["rejected"]), findings,
        )
    console(file=sys.stdout, width=None if sys.stdout.isatty() else 160).print(table)  # control characters shown
    return 0
