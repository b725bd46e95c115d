"""``chatkit-trace admit``: the Core-script runner and its command line (docs/core-scripts.md)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from chatkit_trace.cli import UsageError, main
from chatkit_trace.cli.admit import (
    Outcome,
    parse_script,
    render_json,
    render_text,
    run_script,
    run_script_text,
)

OPEN = '{"op": "open", "session": "s1", "capabilities": {"abort": true}}'
MSG = {"id": "a1", "role": "assistant", "parts": [{"id": "a1:0", "type": "text", "text": "Hi"}]}


def script(*lines: object) -> str:
    return "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


# --------------------------------------------------------------------------- running


def test_results_map_facts_and_commands() -> None:
    out = run_script_text(
        script(
            OPEN,
            {"op": "send", "run": "r1", "input": {"text": "hi"}},
            {"op": "emit_message", "run": "r1", "event": "e1", "message": MSG},
            {"op": "emit_message", "run": "r1", "event": "e1", "message": MSG},
            {"op": "abort", "run": "nope"},
            {"op": "history", "result": {"messages": [{"id": "x", "role": "robot", "parts": []}], "hasMore": False}},
            {"op": "annotate_run", "run": "r1", "attributes": {"deep": {"a": 1}}},
        )
    )
    assert isinstance(out, Outcome)
    assert [r.to_json() for r in out.lines] == [
        {"line": 1, "op": "open", "result": "done"},
        {"line": 2, "op": "send", "result": "done"},
        {"line": 3, "op": "emit_message", "result": "accepted"},
        {"line": 4, "op": "emit_message", "result": "rejected", "reason": "duplicate-event"},
        {"line": 5, "op": "abort", "result": "error", "error": "unknown run 'nope'"},
        {"line": 6, "op": "history", "result": "rejected", "reason": "invalid-message", "rule": "message-role"},
        {
            "line": 7,
            "op": "annotate_run",
            "result": "error",
            "error": "TypeError: annotate_run: attribute 'deep' must be a flat primitive (R3.3)",
        },
    ]
    assert out.ok and out.expectations == 0
    assert out.snapshot.run("r1").status == "running"


def test_dispatch_is_accepted_and_stop_acknowledged() -> None:
    out = run_script_text(
        script(
            OPEN,
            {"op": "send", "run": "r1", "input": "a"},
            {"op": "send", "run": "r2", "input": "b"},
            {"op": "abort", "run": "r1"},
            {"op": "emit_interrupted", "run": "r1", "event": "e1"},
        )
    )
    r1, r2 = out.snapshot.runs
    assert r1.dispatch == "accepted" and r1.abort.remote == "confirmed" and r1.abort.output_sealed
    # the queued run, dispatched when r1 settled, was accepted too
    assert r2.status == "running" and r2.dispatch == "accepted"
    # time in a script is its line number
    assert r1.abort.requested_at == 4 and r1.abort.accepted_at == 4


def test_line_numbers_are_physical_lines() -> None:
    text = "# header\n\n" + OPEN + "\r\n   \n  # indented comment\n" + json.dumps({"op": "register_run", "run": "r1"})
    out = run_script_text(text)
    assert [(r.line, r.op) for r in out.lines] == [(3, "open"), (6, "register_run")]


def test_fact_fields_reach_the_core() -> None:
    out = run_script_text(
        script(
            OPEN,
            {"op": "register_run", "run": "r1"},
            {"op": "emit_message", "run": "r1", "event": "e1", "sequence": 3, "session": "s1", "message": MSG},
            {"op": "emit_delta", "run": "r1", "event": "e2", "sequence": 2, "messageId": "a1", "partId": "a1:0", "delta": "!"},
            {"op": "emit_delta", "run": "r1", "event": "e3", "session": "s2", "messageId": "a1", "partId": "a1:0", "delta": "!"},
            {"op": "emit_phase", "run": "r1", "phase": "thinking"},
            {"op": "emit_work_item", "run": "r1", "event": "e4", "workItem": {"status": "running"}},
            {"op": "emit_failed", "run": "r1", "event": "e5", "error": {"code": "c", "message": "m"}},
        )
    )
    assert [r.reason for r in out.lines[2:]] == [
        None,
        "source-sequence-regressed",
        "wrong-session",
        "missing-event-id",
        "missing-work-item-id",
        None,
    ]
    assert out.snapshot.run("r1").error.code == "c"


# --------------------------------------------------------------------------- expectations


def test_expect_result_reason_and_rule() -> None:
    out = run_script_text(
        script(
            OPEN,
            {"op": "register_run", "run": "r1", "expect": {"result": "accepted"}},
            {"op": "register_run", "run": "r1", "expect": {"result": "rejected", "reason": "no-change"}},
            {"op": "register_run", "run": "r1", "expect": {"result": "rejected"}},
            {"op": "register_run", "run": "r1", "expect": {"reason": "terminal-sealed"}},
            {
                "op": "history",
                "result": {"messages": [{"id": "x", "role": "robot", "parts": []}], "hasMore": False},
                "expect": {"result": "rejected", "reason": "invalid-message", "rule": "message-id"},
            },
        )
    )
    assert [(f.line, f.op) for f in out.failures] == [(5, "register_run"), (6, "history")]
    assert "terminal-sealed" in out.failures[0].expected and "no-change" in out.failures[0].got
    assert "message-role" in out.failures[1].got


def test_expect_snapshot_is_a_partial_deep_match() -> None:
    base = [OPEN, {"op": "register_run", "run": "r1"}, {"op": "emit_message", "run": "r1", "event": "e1", "message": MSG}]

    def check(expected: dict) -> list[str]:
        out = run_script_text(script(*base, {"op": "resume_active_run", "expect": {"snapshot": expected}}))
        return [f.got for f in out.failures]

    assert check({}) == []
    assert check({"sessionId": "s1"}) == []
    assert check({"runs": [{"id": "r1", "status": "running"}]}) == []
    assert check({"messages": [{"parts": [{"text": "Hi"}]}]}) == []
    assert check({"runs": [{"status": "completed"}]}) == ['runs[0].status: expected "completed", got "running"']
    assert check({"runs": []}) == ['runs: expected 0 items, got 1: [{"id": "r1", "status": "running", '
                                   '"origin": "remote", "phase": "idle", "connection": "connected"}]']
    assert check({"disposed": True}) == ["disposed: expected true, got nothing"]
    assert check({"messages": {"id": "a1"}}) == ['messages: expected an object, got [{"id": "a1", "role": '
                                                 '"assistant", "parts": [{"id": "a1:0", "type": "text", "text": '
                                                 '"Hi"}], "runId": "r1"}]']
    # JSON equality: true is not 1
    assert check({"messages": [{"parts": [{"text": "Hi"}], "role": 1}]}) != []


def test_check_exits_1_and_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        script(
            OPEN,
            "# a comment keeps its line",
            {"op": "register_run", "run": "r1", "expect": {"result": "accepted"}},
            {"op": "register_run", "run": "r1", "expect": {"result": "accepted"}},
        ),
    )
    assert main(["admit", str(path), "--check"]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"{path}:4: register_run: expected {{\"result\": \"accepted\"}}, "
        f"got {{\"result\": \"rejected\", \"reason\": \"no-change\"}}\n"
    )
    assert "FAIL" in captured.out
    # without --check the same script exits 0 (the failure is still reported)
    assert main(["admit", str(path), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert f"{path}:4: register_run" in captured.err


def test_check_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, script(OPEN, {"op": "register_run", "run": "r1", "expect": {"result": "accepted"}}))
    assert main(["admit", str(path), "--check", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert lines[:2] == [
        {"line": 1, "op": "open", "result": "done"},
        {"line": 2, "op": "register_run", "result": "accepted"},
    ]
    assert lines[2]["snapshot"]["runs"][0]["id"] == "r1"


# --------------------------------------------------------------------------- bad input


BAD = [
    ("{not json", 1, "invalid JSON"),
    ("[1, 2]", 1, "a line must be a JSON object, not list"),
    ('{"session": "s1"}', 1, 'missing "op"'),
    ('{"op": "launch"}', 1, "unknown op 'launch'"),
    ('{"op": "register_run", "run": "r1"}', 1, 'the first line must be an "open"'),
    ('{"op": "open"}', 1, "open: missing 'session'"),
    ('{"op": "open", "session": 5}', 1, "open: session must be a string, not 5"),
    ('{"op": "open", "session": "s", "capabilities": {"teleport": true}}', 1, "unknown capability 'teleport'"),
    ('{"op": "open", "session": "s", "capabilities": {"abort": "yes"}}', 1, "capability 'abort' must be true or false"),
    ('{"op": "open", "session": "s", "capabilities": ["abort"]}', 1, "capabilities must be an object"),
    (OPEN + "\n" + OPEN, 2, '"open" may appear only once'),
    (OPEN + '\n{"op": "emit_delta", "run": "r1", "event": "e", "messageId": "m", "delta": "x"}', 2, "emit_delta: missing 'partId'"),
    (OPEN + '\n{"op": "emit_phase", "run": 1, "event": "e", "phase": "idle"}', 2, "emit_phase: run must be a string"),
    (OPEN + '\n{"op": "emit_phase", "run": "r", "event": 7, "phase": "idle"}', 2, "event must be a string or null"),
    (OPEN + '\n{"op": "emit_phase", "run": "r", "event": "e", "sequence": "3", "phase": "idle"}', 2, "sequence must be a number"),
    (OPEN + '\n{"op": "emit_phase", "run": "r", "event": "e", "sequence": true, "phase": "idle"}', 2, "sequence must be a number"),
    (OPEN + '\n{"op": "emit_phase", "run": "r", "event": "e", "phase": "idle", "evnt": "x"}', 2, "emit_phase: unknown key 'evnt'"),
    (OPEN + '\n{"op": "register_run", "run": "r", "event": "e"}', 2, "register_run: unknown key 'event'"),
    (OPEN + '\n{"op": "annotate_run", "run": "r", "attributes": [1]}', 2, "attributes must be an object"),
    (OPEN + '\n{"op": "send", "run": "r", "input": 1, "project": {}}', 2, "project must be a list"),
    (OPEN + '\n{"op": "send", "run": "r"}', 2, "send: missing 'input'"),
    (OPEN + '\n{"op": "dispose", "expect": {"result": "ok"}}', 2, "expect.result must be one of"),
    (OPEN + '\n{"op": "dispose", "expect": {"reason": "sealed"}}', 2, "is not one of the 13 reject reasons"),
    (OPEN + '\n{"op": "dispose", "expect": {"snapshot": []}}', 2, "expect.snapshot must be an object"),
    (OPEN + '\n{"op": "dispose", "expect": {"results": "done"}}', 2, "unknown expect key 'results'"),
    (OPEN + '\n{"op": "dispose", "expect": "done"}', 2, "expect must be an object"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_bad_input_is_a_usage_error_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "\n" * 0 + text + "\n")
    with pytest.raises(UsageError) as err:
        run_script(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)
    assert main(["admit", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"chatkit-trace admit: error: {err.value}\n"


def test_bad_input_stops_before_anything_runs() -> None:
    with pytest.raises(UsageError, match=r"^x:4: invalid JSON"):
        parse_script(OPEN + '\n{"op": "dispose"}\n\n{oops', name="x")


def test_empty_script(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="the script is empty"):
        run_script(write(tmp_path, "# only a comment\n\n"))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(OPEN.encode() + b'\n{"op": "dispose", "x": "\xe9"}\n')
    with pytest.raises(UsageError, match=rf"^{path}:2: not UTF-8"):
        run_script(path)


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_failed_expectation_through_the_real_cli(tmp_path: Path) -> None:
    wrong = write(tmp_path, script(OPEN, {"op": "dispose", "expect": {"result": "error"}}), "wrong.jsonl")
    proc = _cli("admit", str(wrong), "--check")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == f'{wrong}:2: dispose: expected {{"result": "error"}}, got {{"result": "done"}}\n'


def test_bad_input_through_the_real_cli_has_no_traceback(tmp_path: Path) -> None:
    bad = write(tmp_path, OPEN + '\n{"op": "emit_delta", "run": "r1"', "bad.jsonl")
    proc = _cli("admit", str(bad))
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"chatkit-trace admit: error: {bad}:2: invalid JSON")


def test_bad_input_through_the_console_script(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("chatkit-trace")
    assert exe.exists(), "pip install -e '.[test]' installs the chatkit-trace console script next to this Python"
    bad = write(tmp_path, OPEN + '\n{"op": "emit_delta", "run": "r1"', "bad.jsonl")
    proc = subprocess.run([str(exe), "admit", str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"chatkit-trace admit: error: {bad}:2: invalid JSON: Expecting ',' delimiter (column 33)\n"


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = script(OPEN, {"op": "register_run", "run": "r1", "expect": {"result": "rejected"}})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    assert main(["admit", "-", "--check"]) == 1
    assert capsys.readouterr().err.startswith("<stdin>:2: register_run: expected")


# --------------------------------------------------------------------------- rendering


def test_render_json_is_the_pinned_format() -> None:
    out = run_script_text(script(OPEN, {"op": "dispose"}))
    text = render_json(out)
    assert text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines == [
        {"line": 1, "op": "open", "result": "done"},
        {"line": 2, "op": "dispose", "result": "done"},
        {"snapshot": {"sessionId": "s1", "messages": [], "runs": [], "disposed": True}},
    ]


def test_render_text_without_a_terminal() -> None:
    out = run_script_text(
        script(
            OPEN,
            {"op": "register_run", "run": "r1", "expect": {"result": "accepted"}},
            {"op": "emit_message", "run": "r1", "event": "e1", "message": MSG},
            {"op": "emit_delta", "run": "r1", "event": "e2", "messageId": "a1", "partId": "zz", "delta": "!",
             "expect": {"result": "accepted"}},
            {"op": "emit_failed", "run": "r1", "event": "e3", "error": {"code": 5}},
        ),
        name="demo-ish.jsonl",
    )
    text = render_text(out, width=120)
    assert text.isascii()
    assert "\x1b" not in text
    assert text.startswith("demo-ish.jsonl: session s1, 5 lines, 2 with expectations, 1 expectation(s) FAILED")
    assert "invalid-transition (delta to missing" in text and "'zz'" in text
    assert "FAIL: expected" in text
    assert 'a1:0 text "Hi"' in text
    assert "error UNKNOWN" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_demo_script_runs_clean(capsys: pytest.CaptureFixture[str]) -> None:
    text = resources.files("chatkit_trace").joinpath("data/demo.jsonl").read_text("utf-8")
    out = run_script_text(text, name="demo.jsonl")
    assert out.ok and out.expectations > 0
    results = {(r.result, r.reason) for r in out.lines}
    assert ("rejected", "terminal-sealed") in results
    assert any(r.op == "history" and r.result == "done" for r in out.lines)
    # ``chatkit-trace demo`` itself (the recorded demo) is tested in tests/demo/.
