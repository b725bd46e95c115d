"""Mistakes a newcomer makes get the right answer from the real CLI (issue 14):
a command's own usage, its name in front of every error, the input named for
what it is, and the bare command answering with its help."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

BIN = shutil.which("chatkit-trace")
ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    assert BIN, "the console script is installed with the package"
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_a_commands_mistake_shows_that_commands_usage():
    proc = run("check", "--bogus", "trace.db")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: chatkit-trace check ")
    assert proc.stderr.rstrip().endswith("chatkit-trace check: error: unrecognized arguments: --bogus")
    proc = run("runs", "t.db", "--frobnicate")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: chatkit-trace runs ")
    top = run("--bogus")
    assert top.returncode == 2 and top.stderr.startswith("usage: chatkit-trace [-h]")


def test_the_bare_command_answers_with_its_help():
    proc = run()
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: chatkit-trace") and "check" in proc.stdout and "record" in proc.stdout


def test_replay_errors_carry_the_command_prefix(tmp_path):
    proc = run("replay", str(tmp_path / "nope.chatkit.json"))
    assert proc.returncode == 2
    assert proc.stderr == f"chatkit-trace replay: error: {tmp_path}/nope.chatkit.json: no such fixture file\n"


def test_import_names_a_file_that_is_not_a_har_or_flow_file(tmp_path):
    notsqlite = tmp_path / "notsqlite.db"
    notsqlite.write_text("x\n")
    proc = run("import", str(notsqlite), "--profile", "openai")
    assert proc.returncode == 2
    assert proc.stderr == f"chatkit-trace import: error: {notsqlite}: not a HAR or flow file " \
        "(neither HAR JSON nor a mitmproxy flow file from mitmdump -w)\n"
    trace = tmp_path / "openai.db"
    shutil.copy(ROOT / "recordings" / "traces" / "openai.db", trace)
    proc = run("import", str(trace), "--profile", "openai")
    assert proc.returncode == 2 and "a SQLite database, not a HAR or flow file" in proc.stderr
    assert notsqlite.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notsqlite.db", "openai.db"]
