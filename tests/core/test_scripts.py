"""Golden Core behaviour as data: every ``tests/core/scripts/*.jsonl`` passes ``--check``.

Each script feeds commands and facts into a fresh Core and states, on every
line, what the Core must do (SPEC R3-R13; the format is docs/core-scripts.md, see
``chatkit_trace.cli.admit``).  Scripts named ``bug-*.jsonl`` show a Core bug:
they are listed in :data:`BUGS`, kept out of the passing parametrization and
expected to fail until the Core is fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chatkit_trace.cli.admit import run_script
from chatkit_trace.core import FactRejectReason

SCRIPTS = Path(__file__).parent / "scripts"
ALL = sorted(p.name for p in SCRIPTS.glob("*.jsonl"))

#: Scripts that show a Core bug (they fail ``--check`` until it is fixed).
#: Fixed so far: history-snapshot-of-queued-run, history-refresh-during-active-run.
BUGS: set[str] = set()
PASSING = [name for name in ALL if name not in BUGS]


@pytest.mark.parametrize("name", PASSING)
def test_script_passes_check(name: str) -> None:
    outcome = run_script(SCRIPTS / name)
    assert outcome.ok, "\n".join(str(f) for f in outcome.failures)


@pytest.mark.parametrize("name", ALL)
def test_script_has_header_and_expects_every_line(name: str) -> None:
    """A comment header citing SPEC rules, then an expectation on every line but ``open``."""
    lines = (SCRIPTS / name).read_text("utf-8").splitlines()
    assert lines[0].startswith("#"), f"{name} has no comment header"
    header = " ".join(line for line in lines if line.startswith("#"))
    assert "R" in header and any(ch.isdigit() for ch in header), f"{name}: the header cites no SPEC rule"
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        obj = json.loads(line)
        if obj["op"] != "open":
            assert "expect" in obj, f"{name}:{number}: no expectation"


def test_bug_scripts_still_fail() -> None:
    """Every ``bug-*`` script is listed in BUGS and still fails.  When one starts
    passing, the Core was fixed: rename it, drop the ``bug-`` prefix and take
    it out of BUGS, so it guards the fix."""
    assert BUGS == {name for name in ALL if name.startswith("bug-")}
    for name in sorted(BUGS):
        outcome = run_script(SCRIPTS / name)
        assert not outcome.ok, f"{name} passes now: the Core bug is fixed, move it out of BUGS"


def test_every_reject_reason_has_its_script() -> None:
    for reason in FactRejectReason:
        assert f"reject-{reason.value}.jsonl" in ALL, f"no script for {reason.value}"
        outcome = run_script(SCRIPTS / f"reject-{reason.value}.jsonl")
        seen = {r.reason for r in outcome.lines if r.result == "rejected"}
        assert reason.value in seen


def test_every_r12_check_has_its_script() -> None:
    for rule in ("r3-8", "r4-5", "r5-3", "r6-5", "r8-4", "r9-3", "r10-2"):
        assert any(name.startswith(rule + "-") for name in PASSING), f"no script for {rule}"


def test_one_script_through_the_real_cli() -> None:
    script = SCRIPTS / "r3-8-conformance-scenarios.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", "admit", str(script), "--format", "json", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert out[0] == {"line": 5, "op": "open", "result": "done"}
    assert set(out[-1]) == {"snapshot"}
    assert out[-1]["snapshot"]["sessionId"] == "s1"
    assert all(set(o) <= {"line", "op", "result", "reason", "rule", "error"} for o in out[:-1])
    assert len(out) - 1 == len(run_script(script).lines)
