"""``check`` over many traces (files, folders, fixtures) with ``-j N`` worker
processes: results in input order, one exit code (the highest), nothing to
judge is 2; and one trace's sessions over workers give the same findings."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from chatkit_trace.cli import main
from chatkit_trace.cli.check import run_check

from .test_cli_check import trace_from_case

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "recordings" / "fixtures" / "myproto"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", *args], capture_output=True, text=True,
                          timeout=240, cwd=cwd)


def test_many_traces_in_input_order_with_the_highest_exit(tmp_path):
    bad = trace_from_case(tmp_path, "CK101-direct")  # an error finding: 1
    clean = trace_from_case(tmp_path, "clean-myproto")  # 0
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")  # nothing to judge: 2
    order = [str(clean), str(bad), str(empty), str(clean)]
    for jobs in ("1", "2"):
        proc = _cli(*order, "--format", "json", "-j", jobs, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        out = json.loads(proc.stdout)
        assert [t["trace"] for t in out["traces"]] == order
        assert [t.get("summary", {}).get("total") for t in out["traces"]] == [0, 1, None, 0]
        assert "nothing to judge" in out["traces"][2]["error"] or "empty" in out["traces"][2]["error"]
        assert "empty.db" in proc.stderr
    proc = _cli(str(clean), str(bad), "-j", "2", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.index(f"== {clean}") < proc.stdout.index(f"== {bad}")
    assert "2 trace(s): 1 failed (exit 1)" in proc.stdout


def test_folders_expand_to_their_traces_and_fixtures(tmp_path, capsys):
    assert main(["check", str(FIXTURES), "--format", "json", "-j", "1", "--fail-on", "never"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = sorted(str(p) for p in FIXTURES.glob("*.chatkit.json"))
    assert [t["trace"] for t in out["traces"]] == want and len(want) > 5
    (tmp_path / "nothing").mkdir()
    assert main(["check", str(tmp_path / "nothing")]) == 2
    assert "nothing to judge" in capsys.readouterr().err


def test_junit_has_one_suite_per_trace(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK101-direct")
    clean = trace_from_case(tmp_path, "clean-myproto")
    assert main(["check", str(bad), str(clean), "--format", "junit"]) == 1
    root = ET.fromstring(capsys.readouterr().out.split("\n", 1)[1])
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"chatkit-trace {bad}", f"chatkit-trace {clean}"]
    assert suites[0].get("failures") == "1" and suites[1].get("failures") == "0"


def test_sessions_over_workers_give_the_same_findings(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from analyze_scaling import generate
    finally:
        sys.path.remove(str(REPO / "bench"))
    path = tmp_path / "many-sessions.db"
    generate(path, 6000)  # 12 sessions with planted bugs
    one = run_check(str(path), jobs=1)
    two = run_check(str(path), jobs=2)
    assert [f.to_json() for f in two.findings] == [f.to_json() for f in one.findings]
    assert (two.frames, two.facts) == (one.frames, one.facts)
    assert len({f.session_id for f in one.findings}) > 2


def test_jobs_must_not_be_negative(tmp_path, capsys):
    clean = trace_from_case(tmp_path, "clean-myproto")
    assert main(["check", str(clean), "-j", "-1"]) == 2
    assert "--jobs" in capsys.readouterr().err


def _generated(tmp_path: Path, frames: int) -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from analyze_scaling import generate
    finally:
        sys.path.remove(str(REPO / "bench"))
    path = tmp_path / "many-sessions.db"
    generate(path, frames)
    return path


def _tables(path: Path) -> dict[str, list[tuple]]:
    import sqlite3

    from chatkit_trace.store import DERIVED_TABLES, RECORDED_TABLES

    conn = sqlite3.connect(path)
    try:
        out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in (*RECORDED_TABLES, *DERIVED_TABLES)
               if t != "meta"}
        out["meta"] = conn.execute("SELECT key, value FROM meta WHERE key NOT IN ('analysed', 'derivation') ORDER BY key").fetchall()
        return out
    finally:
        conn.close()


def test_sessions_over_workers_write_the_same_rows(tmp_path, capsys):
    """``redecode -j 2``: the workers derive, the parent writes what they
    send, in session order: every table (the facts' ``seq`` included) is
    the same as ``-j 1``'s, row for row."""
    path = _generated(tmp_path, 6000)  # 12 sessions
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    one.write_bytes(path.read_bytes())
    two.write_bytes(path.read_bytes())
    assert main(["redecode", str(one), "-j", "1"]) == 0
    assert main(["redecode", str(two), "-j", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("5999 frames, 5877 facts, 5 finding(s)") == 2, out
    a, b = _tables(one), _tables(two)
    assert len(a["facts"]) > 5000 and len(a["frame_results"]) == 5999 and len(a["findings"]) > 2
    for table in a:
        assert a[table] == b[table], table


_AUTO = """
import resource, sys
from chatkit_trace.cli import check
from chatkit_trace.cli import main
check.AUTO_FRAMES = int(sys.argv[1])
check.AUTO_INPUTS = int(sys.argv[2])
if __name__ == "__main__":
    code = main(["check", "--format", "json", "--fail-on", "never", *sys.argv[3:]])
    print("children", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
    raise SystemExit(code)
"""


def test_without_jobs_a_large_trace_or_many_inputs_use_a_worker_per_cpu(tmp_path):
    """Without ``-j``: one trace of AUTO_FRAMES frames or more (alone or
    among fewer than AUTO_INPUTS inputs), or AUTO_INPUTS inputs or more, is
    checked by worker processes (their peak memory is the children's), with
    the same report as one process; below both thresholds no worker is
    started.  (The thresholds are lowered here so
    the traces stay small.)"""
    path = _generated(tmp_path, 6000)
    script = tmp_path / "auto.py"
    script.write_text(_AUTO)

    def run(frames: int, inputs: int, *traces: Path) -> tuple[dict, int]:
        proc = subprocess.run([sys.executable, str(script), str(frames), str(inputs), *map(str, traces)],
                              capture_output=True, text=True, timeout=240, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        children = int(proc.stderr.rsplit("children ", 1)[1].split()[0])
        return json.loads(proc.stdout), children

    alone, none = run(10**9, 10**9, path)
    auto, some = run(1000, 10**9, path)
    assert none == 0 and some > 0
    assert auto == alone and alone["summary"]["total"] > 2
    clean = trace_from_case(tmp_path, "clean-myproto")
    few, none = run(10**9, 10**9, clean, path)
    many, some = run(10**9, 2, clean, path)
    assert none == 0 and some > 0
    assert many == few and [t["trace"] for t in many["traces"]] == [str(clean), str(path)]
    # fewer inputs than AUTO_INPUTS: one after the other, the large one over workers
    large, some = run(1000, 10**9, clean, path)
    assert some > 0 and large == few


def test_redecode_asks_only_until_one_exchange_is_understood(tmp_path, monkeypatch):
    """``redecode`` first makes sure the trace has something to judge (else
    exit 2, nothing written): it replays sessions only until one exchange is
    understood, not the whole trace a second time; with nothing understood
    it says what ``check`` says."""
    import pytest

    from chatkit_trace.cli.check import NothingToJudge, probe_check
    from chatkit_trace.derive import Deriver

    path = _generated(tmp_path, 6000)  # 12 sessions
    seen: list[str | None] = []
    real = Deriver.session

    def session(self, sid, **kw):  # type: ignore[no-untyped-def]
        seen.append(sid)
        return real(self, sid, **kw)

    monkeypatch.setattr(Deriver, "session", session)
    probe_check(str(path))
    assert len(seen) == 1
    before = path.read_bytes()
    with pytest.raises(NothingToJudge) as probed:
        probe_check(str(path), profile="adk")
    assert len(seen) == 1 + 12  # every session, none understood
    with pytest.raises(NothingToJudge) as checked:
        run_check(str(path), profile="adk")
    assert str(probed.value) == str(checked.value) and "nothing to judge" in str(probed.value)
    assert path.read_bytes() == before


_UNGUARDED = """
import sys
from chatkit_trace.cli import check, main
check.AUTO_FRAMES = 1000
check.AUTO_INPUTS = 2
code = main(["check", "--format", "json", "--fail-on", "never", *sys.argv[1:]])
print("exit", code, file=sys.stderr)
"""


def test_a_script_without_a_main_guard_still_gets_its_report(tmp_path):
    """Spawned workers run the calling script again; one without an
    ``if __name__ == "__main__":`` guard cannot have workers.  check says so
    in one line and judges in its own process: the same report as one
    process, for one large trace and for many inputs."""
    path = _generated(tmp_path, 6000)
    clean = trace_from_case(tmp_path, "clean-myproto")
    script = tmp_path / "unguarded.py"
    script.write_text(_UNGUARDED)
    for traces in ([path], [clean, path]):
        alone = run_check(str(path), jobs=1)
        proc = subprocess.run([sys.executable, str(script), *map(str, traces)], capture_output=True, text=True,
                              timeout=240, cwd=tmp_path)
        # the parent's own lines: its exit, and the one-line warning (the spawned children's tracebacks come before)
        assert proc.stderr.rstrip().endswith("exit 0"), proc.stderr[-2000:]
        assert proc.stderr.count("worker processes failed to start or died; checking in this process instead") == 1
        out = json.loads(proc.stdout)
        report = out if len(traces) == 1 else out["traces"][1]
        assert report["summary"]["total"] == len(alone.findings) > 2
