"""The run list is computed in one place (chatkit_trace.views.runs): the
``runs`` command, the viewer and the report say the same status, duration
and counts for every run of every corpus case, and the line's rules hold."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.cli.check import run_check
from chatkit_trace.cli.runs import collect
from chatkit_trace.fixtures.replay import fixture_to_store
from chatkit_trace.report import write_report
from chatkit_trace.views import END, START, TraceData, parse_ref
from chatkit_trace.views import runs as lines

from ..analyze.corpus import CORPUS
from ..viewer.conftest import corpus_trace

CASES = sorted(p.stem for p in CORPUS.glob("*.json"))
RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
TRACES = sorted(p.name for p in (RECORDINGS / "traces").glob("*.db"))
FIXTURES = sorted(str(p.relative_to(RECORDINGS / "fixtures")) for p in (RECORDINGS / "fixtures").rglob("*.chatkit.json"))


def _report_runs(trace: Path, out: Path) -> list[dict[str, Any]]:
    write_report(trace, out)
    page = out.read_text()
    m = re.search(r'<script type="application/json" id="ck-index">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))["runs"]


def _same_list(trace: Path, out: Path) -> None:
    """``runs``, the viewer (on the derived tables ``check`` wrote) and the
    report give every run the Core started the same line."""
    cli = {(r["session"], r["run"]): r for r in collect(str(trace))}
    data = TraceData(trace)
    try:
        viewer = {r.key: r for r in data.runs()}
    finally:
        data.close()
    report = {(r["s"], r["r"]): r for r in _report_runs(trace, out)}
    # every run the Core started is in all three; a run the Core never started
    # is in `runs` when its send was refused, in the viewer and the report when a finding names it
    started = {k for k, r in cli.items() if r["status"] != "not started"}
    assert started <= set(viewer) and started <= set(report)
    assert {k for k, v in viewer.items() if v.status != "not started"} == started
    assert {k for k, r in report.items() if r["st"] != "not started"} == started
    for key in set(cli) & set(viewer) & set(report):
        c, v, r = cli[key], viewer[key], report[key]
        assert c["status"] == v.status == r["st"], key
        # a run the Core never started: `runs` says the user sent it (local), the viewer and the report show none
        assert c["origin"] == (v.origin or "local") and v.origin == r["o"], key
        assert c["frames"] == v.frames == r["fr"], key
        assert v.facts == r["fa"], key
        assert c["rejected"] == v.rejected == r["rj"], key
        assert list(v.exchanges) == r["x"], key
        assert c["connection"] == v.connection, key  # how the run's last stream ended (the report: the Core's)
        assert c["duration_s"] == round(v.duration or 0.0, 3) == (r["d"] or 0.0), key
        assert c["settled_by"] == (v.settled_by if v.terminal else None), key
        assert (c["errors"], c["warnings"], c["infos"]) == (v.errors, v.warnings, v.infos), key


@pytest.mark.parametrize("case", CASES)
def test_runs_the_viewer_and_the_report_say_the_same_of_every_corpus_case(tmp_path, case):
    _same_list(corpus_trace(tmp_path, case, check=True), tmp_path / "report.html")


@pytest.mark.parametrize("name", TRACES)
def test_runs_the_viewer_and_the_report_say_the_same_of_every_committed_trace(tmp_path, name):
    trace = tmp_path / name
    shutil.copy(RECORDINGS / "traces" / name, trace)  # check writes the derived tables: never into the input
    run_check(str(trace), store_results=True)
    _same_list(trace, tmp_path / "report.html")


@pytest.mark.parametrize("name", FIXTURES)
def test_runs_the_viewer_and_the_report_say_the_same_of_every_fixture(tmp_path, name):
    store, _ = fixture_to_store(RECORDINGS / "fixtures" / name, tmp_path / "fixture.db")
    store.close()
    run_check(str(tmp_path / "fixture.db"), store_results=True)
    _same_list(tmp_path / "fixture.db", tmp_path / "report.html")


def test_a_run_the_core_never_started_is_not_started_unless_the_recording_lost_part_of_it():
    class X:
        def __init__(self, index: int, capability: str, started_at: float, ended_at: float) -> None:
            self.index, self.capability, self.started_at, self.ended_at = index, capability, started_at, ended_at

    exchanges = {3: X(3, "run", 10.0, 12.5), 7: X(7, "history", 20.0, 20.1)}
    found = lines.Tally()
    found.add("error", "CK110", 1, ["3", "7:0"])
    info = lines.not_started("s", "r", [3], exchanges.get, found, refs=found.refs)
    assert info.status == "not started" and info.core_status is None and not info.terminal
    assert info.exchanges == (3, 7)  # its own, then each one a finding names, once
    assert info.duration == 2.5 and info.first_at == 10.0  # the wait: from the run's request to its end
    assert (info.errors, info.codes) == (1, ("CK110",))
    found.add("warning", "CK702")
    assert lines.not_started("s", "r", [3], exchanges.get, found).status == "recording incomplete"


def test_a_line_reads_the_one_vocabulary():
    from chatkit_trace.trace import RUN_STATUSES

    class Row:
        session_id, run_id, origin, phase, error, interrupt_reason = "s", "r", "local", None, None, None
        created_at, settled_at, settled_by, exchanges, frames, facts, rejected = 5000.0, None, None, "[1]", 4, 3, 1
        first_at, last_at = None, None

        def __init__(self, status: str, connection: str) -> None:
            self.status, self.connection = status, connection

    for status, connection, shown in [
        ("running", "disconnected", "outcome unknown"),
        ("running", "connected", "running"),
        ("completed", "disconnected", "completed"),
    ]:
        info = lines.from_row(Row(status, connection))  # type: ignore[arg-type]
        assert info.status == shown and shown in RUN_STATUSES
        assert info.duration is None and info.first_at == 5.0  # no wait span: the Core's creation time
        assert info.terminal == (status == "completed")


def test_a_frame_reference_reads_as_the_rows_name_it():
    assert parse_ref("4") == (4, START)
    assert parse_ref("4:12") == (4, 12)
    assert parse_ref("4:end") == (4, END)  # Row.ref of an end of stream
    with pytest.raises(ValueError):
        parse_ref("4:x")
