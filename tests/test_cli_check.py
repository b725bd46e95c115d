"""``check``, ``runs``, ``diff`` and ``redecode`` on real trace files."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chatkit_trace.cli import main
from chatkit_trace.store import TraceStore

from .analyze.corpus import CORPUS, load_case


def trace_from_case(tmp_path: Path, name: str) -> Path:
    case, exchanges, _ = load_case(CORPUS / f"{name}.json")
    path = tmp_path / f"{name}.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", case.get("protocol", "myproto"))
        store.set_meta("capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"])
        for ex in exchanges:
            store.add_exchange(ex)
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120)


def test_check_json_exit_codes_and_fields(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK101-direct")
    assert main(["check", str(bad), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in out["findings"]] == ["CK101"]
    assert set(out["findings"][0]) == {"code", "severity", "rule", "session_id", "run_id", "frames", "fingerprint", "message", "detail"}
    assert out["summary"]["error"] == 1 and out["summary"]["total"] == 1
    clean = trace_from_case(tmp_path, "clean-myproto")
    assert main(["check", str(clean), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_fail_on_select_ignore(tmp_path, capsys):
    warn = trace_from_case(tmp_path, "CK102")  # a warning only
    assert main(["check", str(warn)]) == 0
    assert main(["check", str(warn), "--fail-on", "warning"]) == 1
    assert main(["check", str(warn), "--fail-on", "warning", "--ignore", "CK1"]) == 0
    assert main(["check", str(warn), "--fail-on", "warning", "--select", "CK2"]) == 0
    capsys.readouterr()
    assert main(["check", str(warn), "--select", "CK9"]) == 2
    assert "unknown finding code" in capsys.readouterr().err


def test_baseline_accepts_known_findings_only(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK101-direct")
    baseline = tmp_path / "baseline.json"
    assert main(["check", str(bad), "--write-baseline", str(baseline)]) == 0
    assert main(["check", str(bad), "--baseline", str(baseline)]) == 0
    assert "1 in the baseline" in capsys.readouterr().out
    other = trace_from_case(tmp_path, "CK105")
    assert main(["check", str(other), "--baseline", str(baseline)]) == 1
    (tmp_path / "junk.json").write_text("[1, 2]")
    assert main(["check", str(bad), "--baseline", str(tmp_path / "junk.json")]) == 2


def _junit(out: str) -> ET.Element:
    return ET.fromstring(out.split("\n", 1)[1])


def test_junit_failures_are_exactly_the_findings_that_fail_the_gate(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK404")  # CK404 error, CK103 warning, CK403 info
    assert main(["check", str(bad), "--format", "junit"]) == 1
    suite = _junit(capsys.readouterr().out).find("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "0"
    failed = {c.find("failure").get("type") for c in cases if c.find("failure") is not None}
    assert failed == {"CK404 error"}
    passed = [c for c in cases if c.find("failure") is None]
    assert {c.get("name").split()[0] for c in passed} == {"CK103", "CK403"}
    assert all("below --fail-on error" in c.find("system-out").text for c in passed)
    # --fail-on moves the line: warning fails CK103 too, never fails nothing
    assert main(["check", str(bad), "--format", "junit", "--fail-on", "warning"]) == 1
    assert _junit(capsys.readouterr().out).find("testsuite").get("failures") == "2"
    assert main(["check", str(bad), "--format", "junit", "--fail-on", "never"]) == 0
    suite = _junit(capsys.readouterr().out).find("testsuite")
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) == 3


def test_text_groups_by_run_and_names_rule_and_frames(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK201")
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "session s1  run r1" in out and "CK201" in out and "(R8.4)" in out and "frames 1" in out
    assert out.index("CK201") < out.index("CK202")


def test_check_never_writes_and_redecode_stores_the_findings(tmp_path, capsys):
    bad = trace_from_case(tmp_path, "CK101-direct")
    before = bad.read_bytes()
    assert main(["check", str(bad)]) == 1
    assert bad.read_bytes() == before  # no command writes to its input
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CK101-direct.db"]
    with TraceStore(bad, readonly=True) as store:
        assert store.db["findings"].count == 0
    assert main(["redecode", str(bad)]) == 0
    assert "1 finding(s)" in capsys.readouterr().out
    with TraceStore(bad, readonly=True) as store:
        assert [r["code"] for r in store.rows("findings")] == ["CK101"]
        assert store.db["facts"].count > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CK101-direct.db"]  # no -wal/-shm left


def test_runs_and_diff(tmp_path, capsys):
    path = trace_from_case(tmp_path, "CK201")
    assert main(["runs", str(path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"session": "s1", "run": "r1", "status": "completed", "settled_by": "fact", "origin": "local", "connection": "closed",
                     "duration_s": 0.02, "frames": 2, "rejected": 0, "errors": 2, "warnings": 0, "infos": 0}]
    assert main(["diff", str(path)]) == 1  # diff(1): differences
    out = capsys.readouterr().out
    assert "assistant:r1" in out and "msg_8f2c" in out and "differs" in out


@pytest.mark.parametrize(
    "content, fragment",
    [(b"garbage" * 50, "not a SQLite database"), (None, "no such file")],
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, fragment):
    path = tmp_path / "t.db"
    if content is not None:
        path.write_bytes(content)
    proc = cli("check", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert fragment in proc.stderr and proc.stderr.count("\n") == 1


def test_a_trace_without_traffic_is_nothing_recorded_exit_2(tmp_path):
    path = tmp_path / "t.db"
    TraceStore(path, create=True).close()
    proc = cli("check", str(path))
    assert proc.returncode == 2 and "nothing recorded" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("protocol", ["adk", "a2a", "hermes", "openai"])
def test_the_connection_column_means_the_same_for_every_protocol(protocol, capsys):
    """How the run's last stream ended: a run whose stream ended cleanly is
    'closed' whatever the protocol (OpenAI said disconnected, A2A/Hermes connected)."""
    from chatkit_trace.trace import STREAM_STATES

    trace = Path(__file__).resolve().parents[1] / "recordings" / "traces" / f"{protocol}.db"
    assert main(["runs", str(trace), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["connection"] for r in rows} <= set(STREAM_STATES)
    assert {r["connection"] for r in rows if r["status"] in ("completed", "failed")} == {"closed"}


def _text(*args: str, columns: int | None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def test_text_wraps_at_the_terminal_width_with_a_hanging_indent():
    trace = str(Path(__file__).resolve().parents[1] / "recordings" / "traces" / "hermes.db")
    narrow = _text(trace, columns=90).splitlines()
    assert max(len(line) for line in narrow) <= 90
    findings = [i for i, line in enumerate(narrow) if line.startswith("  ") and line.split()[0] in ("error", "warning", "info")]
    assert findings
    continued = 0
    for i in findings:
        indent = narrow[i].index("(")  # the message column: after "  error   CK201 "
        j = i + 1
        while j < len(narrow) and narrow[j].startswith(" " * indent) and narrow[j].strip():
            assert not narrow[j][indent].isspace()  # hanging indent, aligned under the message
            continued += 1
            j += 1
    assert continued > 0
    wide = _text(trace, columns=160).splitlines()
    assert 110 < max(len(line) for line in wide) <= 160  # the terminal's width, not a fixed 110
    assert "trace-wide (protocol and route limits)" in wide and not any("session -" in line for line in wide)
    unwrapped = _text(trace, columns=None).splitlines()  # a pipe: one line per finding
    assert len(unwrapped) < len(narrow)


def test_a_frame_is_named_once():
    fixture = Path(__file__).resolve().parents[1] / "recordings" / "fixtures" / "myproto" / "resume-shuffle.chatkit.json"
    proc = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", str(fixture), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    findings = json.loads(proc.stdout)["findings"]
    assert findings and all(len(f["frames"]) == len(set(f["frames"])) for f in findings)
    assert [f["frames"] for f in findings if f["code"] == "CK404"] == [["30:0"]]
    text = _text(str(fixture), columns=None)
    assert "frames 30:0" in text and "30:0, 30:0" not in text


def test_runs_duration_is_how_long_the_user_waited(tmp_path, capsys):
    """From the run's request to the end the user saw (decisions.md 278): a
    failure that arrives as the stream's only frame 9.7 s after the request
    (an HTTP 500 behind the backend's retries) is 9.7 s, not 0.00 s; a send
    that failed at the HTTP level is listed as not started, with its wait."""
    from .test_cli_diff import trace_of

    failed = {"capability": "run", "session": "s1", "run": "r1", "t": 0.0, "spacing": 9.7, "request": {"text": "hi", "runId": "r1"},
              "sse": [{"id": "e1", "data": {"type": "error", "code": "HTTP_500", "message": "upstream failed after 3 retries"}}]}
    refused = {"capability": "run", "session": "s1", "run": "r2", "t": 20.0, "ended_at": 24.5, "request": {"text": "again", "runId": "r2"},
               "sse": [], "status": 500}
    path = trace_of(tmp_path, {"protocol": "myproto", "exchanges": [failed, refused]})
    assert main(["runs", str(path), "--format", "json"]) == 0
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["r1"]["status"] == "failed" and rows["r1"]["frames"] == 1 and rows["r1"]["duration_s"] == 9.7
    assert rows["r2"]["status"] == "not started" and rows["r2"]["duration_s"] == 4.5
