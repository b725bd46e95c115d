"""``chatkit-trace runs TRACE``: a table of sessions and runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..views import RunInfo


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def collect(path: str, profile: str | None = None) -> list[dict[str, Any]]:
    """One row per run, as ``check`` derives the trace (the same engine, the
    same findings), a run the Core never started included (``not started``);
    each line made as the viewer and the report make theirs
    (:mod:`chatkit_trace.views.runs`)."""
    from ..derive import Deriver, unstarted_runs
    from ..loading import open_trace
    from ..trace import stream_state
    from ..views import runs as lines

    started: list[tuple[Any, str]] = []
    unstarted: list[tuple[str, Any, Any, str]] = []

    def session_done(derived: Any) -> None:
        recs = derived.replay.exchanges

        def exchange(i: int) -> Any:
            return recs[i].exchange if i in recs else None

        for run in derived.runs():
            started.append((run, stream_state([recs[i].exchange for i in run.exchanges if i in recs])))
        for sid, rec, _start, _end in unstarted_runs(derived.replay):
            unstarted.append((sid, rec, exchange, stream_state([recs[i].exchange for i in rec.exchanges if i in recs])))

    loaded = open_trace(path, profile=profile)
    try:
        findings = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities).run(on_session=session_done).findings
    finally:
        loaded.close()
    found = lines.tally(findings)  # CK702/CK703 among the codes: the recording is incomplete
    rows = []
    for run, connection in started:
        rows.append(_row(lines.from_summary(run, found.get((run.session_id, run.run_id))), connection))
    for sid, rec, exchange, connection in unstarted:
        info = lines.not_started(sid, rec.run_id, rec.exchanges, exchange, found.get((sid, rec.run_id)))
        rows.append(_row(info, connection, origin="local"))
    return rows


def _row(info: RunInfo, connection: str, origin: str | None = None) -> dict[str, Any]:
    return {
        "session": info.session_id,
        "run": info.run_id,
        # the one vocabulary (chatkit_trace.trace.RUN_STATUSES)
        "status": info.status,
        # what concluded the run: a terminal event (fact), a later history or status read, or nothing
        "settled_by": info.settled_by if info.terminal else None,
        "origin": origin or info.origin,
        "connection": connection,
        # how long the user waited: from the run's request to the end they saw (decisions.md 278)
        "duration_s": round(info.duration or 0.0, 3),
        "frames": info.frames,
        "rejected": info.rejected,
        "errors": info.errors,
        "warnings": info.warnings,
        "infos": info.infos,
    }


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
