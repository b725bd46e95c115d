"""``chatkit-trace demo`` end to end: real mitmdump with the recording addon, the demo
backend, the real HTTP client; the trace holds each bug's findings and none for the clean session."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from chatkit_trace.cli.check import run_check
from chatkit_trace.demo.client import DEMO_SESSIONS

pytestmark = pytest.mark.mitmdump

DEMO = [sys.executable, "-m", "chatkit_trace.cli", "demo", "--no-view"]


def _processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line mentions ``text`` (the trace path is unique per test)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = next(
                (
                    ln
                    for ln in (entry / "status").read_text().splitlines()
                    if ln.startswith("State:")
                ),
                "",
            )
        except OSError:
            continue
        if text in cmd and "zombie" not in state:
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    started = time.monotonic()
    proc = subprocess.run(
        [*DEMO, "--db", str(db)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return db, proc, time.monotonic() - started


def test_the_demo_runs_in_well_under_a_minute_and_every_session_matches(demo):
    _, proc, seconds = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seconds < 60
    assert "MISMATCH" not in proc.stdout
    assert "What each session shows" in proc.stdout and "finding(s):" in proc.stdout
    for s in DEMO_SESSIONS:
        assert s.id in proc.stdout


def test_the_trace_holds_each_bugs_findings_and_none_for_the_clean_session(demo):
    db, _, _ = demo
    result = run_check(str(db), profile="myproto", store_results=False)
    found: dict[str, set[str]] = defaultdict(set)
    for f in result.findings:
        if f.severity in ("error", "warning"):
            found[f.session_id].add(f.code)
    assert found["clean+close=6+lag=3"] == set()
    assert found["subscribe"] == set()
    assert found["resume+cut=6+lag=3"] == {
        "CK103"
    }  # the reset itself; the correct resume passes CK404
    assert "CK201" in found["history-ids"]
    assert found["late-chunk"] == {"CK101"}
    assert found["no-end"] == {"CK102"}
    assert found["done-marker"] == {"CK104"}
    assert found["tool-unsettled"] == {"CK105"}
    assert found["stop-ignored"] == {"CK106"}
    assert found["resume-shuffle+cut=6+lag=3"] == {"CK103", "CK404"}
    assert found["resume-skip+cut=6+lag=3"] == {"CK103", "CK404"}
    for s in DEMO_SESSIONS:
        assert s.accepts(found[s.id]), (s.id, sorted(found[s.id]))
    assert set(found) <= {s.id for s in DEMO_SESSIONS}
    # The resume findings point at the replay's frames and say what went wrong.
    (skip,) = [
        f for f in result.findings if f.code == "CK404" and f.session_id.startswith("resume-skip")
    ]
    assert skip.detail[
        "cursor"
    ] == "e2" and "skips 1 event(s) seen after the cursor: e3" in " ".join(skip.detail["problems"])
    (shuffle,) = [
        f
        for f in result.findings
        if f.code == "CK404" and f.session_id.startswith("resume-shuffle")
    ]
    assert any("out of order" in p for p in shuffle.detail["problems"])


def test_the_trace_was_recorded_through_the_addon_and_checked(demo):
    db, _, _ = demo
    with sqlite3.connect(db) as conn:
        meta = dict(conn.execute("select key, value from meta"))
        (recording,) = json.loads(meta["recordings"])
        assert recording["profile"] == "myproto" and recording["mitmproxy"]
        caps = {row[0] for row in conn.execute("select distinct capability from exchanges")}
        stored = {row[0] for row in conn.execute("select distinct code from findings")}
        ends = dict(
            conn.execute(
                "select session_id, \"end\" from exchanges where capability = 'run' and run_id = 'run-1'"
            )
        )
    assert caps >= {"run", "resume", "abort", "history", "subscribe"}
    assert {
        "CK101",
        "CK102",
        "CK104",
        "CK105",
        "CK106",
        "CK201",
        "CK404",
    } <= stored  # check wrote them for the viewer
    assert (
        ends["stop-ignored"] == "open"
        and ends["resume+cut=6+lag=3"] == "reset"
        and ends["no-end"] == "complete"
    )
    # the proxy it started is gone
    assert not _processes_naming(str(db))
    pid = recording.get("pid")
    if pid:
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        )


def _interrupt(db: Path, ready) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """Start the demo (every event paced a minute: it cannot finish on its own),
    SIGINT it once ``ready(proc, stdout_so_far)`` holds; (code, stdout, stderr)."""
    import threading

    proc = subprocess.Popen(
        [*DEMO, "--db", str(db), "--pace-ms", "60000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not ready(proc, b"".join(out).decode()) and time.monotonic() < deadline:
            assert proc.poll() is None, (b"".join(out), proc.stderr.read())
            time.sleep(0.02)
        assert ready(proc, b"".join(out).decode()), "the demo never reached the point to interrupt"
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        reader.join(10)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, b"".join(out).decode(), err.decode()


def test_ctrl_c_stops_the_demo_and_every_process_it_started(tmp_path):
    db = tmp_path / "interrupted.db"
    code, out, err = _interrupt(db, lambda proc, _: [p for p in _processes_naming(str(db)) if p != proc.pid])
    assert code == 130, (out, err)
    assert "Traceback" not in err
    assert not _processes_naming(str(db))


def test_an_early_ctrl_c_is_clean(tmp_path):
    """Ctrl-C while the commands are still being imported (the first second on a
    loaded machine), or before the demo started its proxy: 130, no traceback."""
    from chatkit_trace import cli

    calls = []

    def interrupted(name: str) -> None:  # the user presses Ctrl-C during the imports
        calls.append(name)
        raise KeyboardInterrupt

    original = cli.importlib.import_module
    cli.importlib.import_module = interrupted
    try:
        assert cli.main(["demo", "--no-view"]) == 130
    finally:
        cli.importlib.import_module = original
    assert calls == [next(iter(cli.COMMANDS.values()))]
    db = tmp_path / "early.db"
    code, out, err = _interrupt(db, lambda proc, out: "chatkit-trace demo: recording" in out)
    assert code == 130, (out, err)
    assert "Traceback" not in err and err == "", err
    assert not _processes_naming(str(db))


def test_the_demo_replaces_only_its_own_trace(tmp_path, demo):
    db, _, _ = demo
    with sqlite3.connect(db) as conn:
        assert dict(conn.execute("select key, value from meta"))["demo"] == "true"
    mine = tmp_path / "mine.db"
    mine.write_bytes(b"precious")
    proc = subprocess.run(
        [*DEMO, "--db", str(mine)], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "is not a trace the demo wrote" in proc.stderr
    assert mine.read_bytes() == b"precious"
    proc = subprocess.run(
        [*DEMO, "--db", str(tmp_path)], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_a_bad_option_is_a_usage_error():
    proc = subprocess.run(
        [*DEMO, "--pace-ms", "-1"], check=False, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and "--pace-ms must be >= 0" in proc.stderr
    assert os.path.basename(sys.executable)  # the demo runs with the same interpreter


def test_in_a_terminal_the_demo_opens_the_viewer_and_returns_when_it_closes(tmp_path):
    import fcntl
    import pty
    import select
    import struct
    import termios

    db = tmp_path / "tty.db"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatkit_trace.cli", "demo", "--db", str(db)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    os.close(slave)
    out = b""
    quit_sent = False
    deadline = time.monotonic() + 90
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
            if not quit_sent and b"\x1b[?1049h" in out:  # the viewer took the screen
                time.sleep(1.5)
                os.write(master, b"q")
                quit_sent = True
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert "What each session shows" in text
    if b"not opening the viewer" in out:  # an installation without the viewer says so
        assert not quit_sent
    else:
        assert quit_sent, text[-2000:]
    assert proc.returncode == 0, text[-2000:]
    assert not _processes_naming(str(db))


def test_the_demo_points_the_viewer_at_the_first_run_with_a_finding(demo):
    db, proc, _ = demo
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("look at it:")]
    words = line.split()
    session, run = words[words.index("--session") + 1], words[words.index("--run") + 1]
    check = subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", "check", str(db), "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )
    findings = json.loads(check.stdout)["findings"]
    bad = [(f["session_id"], f["run_id"]) for f in findings if f["severity"] == "error" and f["run_id"]]
    assert (session, run) in bad  # an error, not a warning-only run (decisions.md 281)
    order = [s.id for s in DEMO_SESSIONS]
    assert order.index(session) == min(order.index(s) for s, _ in bad)  # the first bug, not the clean session
    assert session != order[0]


def test_the_viewer_opens_on_the_first_error_before_an_earlier_warning_only_run():
    from types import SimpleNamespace

    from chatkit_trace.demo.play import DemoReport, first_finding_run

    finding = lambda sid, rid, sev: SimpleNamespace(session_id=sid, run_id=rid, severity=sev)  # noqa: E731
    report = DemoReport(Path("x.db"), outcomes=[SimpleNamespace(session_id=s) for s in ("a", "b", "c")])
    report.check = SimpleNamespace(findings=[finding("a", "r1", "warning"), finding("c", "r3", "error"), finding("b", "r2", "info")])
    assert first_finding_run(report) == ("c", "r3")
    report.check.findings = [finding("b", "r2", "warning"), finding("a", "r1", "info")]
    assert first_finding_run(report) == ("b", "r2")  # no error anywhere: the first warning
    report.check.findings = [finding("a", "r1", "info")]
    assert first_finding_run(report) is None
