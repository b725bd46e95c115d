"""A trace cannot steer the terminal or break CI's XML (issue 32).

A backend controls session and run ids, message ids, texts and errors.  A
trace whose ids and texts are full of terminal escapes (set the window
title, clear the screen, print a red "OK", an 8-bit CSI, a bidi override)
goes through ``runs``, ``check`` (text, JSON, JUnit, HTML) and ``diff``: no
text output holds a raw control character (each is shown as its escape,
``\\x1b``); JSON keeps JSON's escaping; the JUnit file parses.  And for any
code point in any recorded string, the JUnit and the report's HTML stay
well-formed (a property test)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkit_trace.analyze import Finding
from chatkit_trace.cli.check import CheckResult, render_junit, render_text
from chatkit_trace.store import TraceStore
from chatkit_trace.visible import CONTROL, visible, xml_text

from .analyze.corpus import CORPUS, load_case

HOSTILE = "r1\x1b]0;pwned\x07\x1b[2J\x1b[31mOK\x1b[0m\x9b31m\u202eevil\r\x08\x00"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_trace(tmp_path: Path) -> Path:
    """CK201's case with the run id, the session id and the texts full of escapes."""
    text = (CORPUS / "CK201.json").read_text()
    text = text.replace('"r1"', json.dumps(HOSTILE)).replace(":r1", ":" + json.dumps(HOSTILE)[1:-1])
    text = text.replace('"s1"', json.dumps("s\x1b[1;1H\x1b[2Kfake")).replace('"Hello"', json.dumps("Hel\x1b[5mlo\x07"))
    case_path = tmp_path / "hostile.json"
    case_path.write_text(text)
    case, exchanges, _ = load_case(case_path)
    path = tmp_path / "hostile.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", case.get("protocol", "myproto"))
        store.set_meta("capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"])
        for ex in exchanges:
            store.add_exchange(ex)
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=180,
                          cwd=root)


def test_no_raw_escape_in_runs_check_or_diff_of_a_trace_full_of_them(tmp_path):
    trace = str(hostile_trace(tmp_path))
    outputs = {
        "runs": cli("runs", trace),
        "check": cli("check", trace),
        "diff": cli("diff", trace),
        "check-junit": cli("check", trace, "--format", "junit"),
    }
    for name, p in outputs.items():
        assert p.returncode in (0, 1), (name, p.stderr)
        assert not RAW.search(p.stdout), (name, repr(p.stdout[:2000]))
        assert not RAW.search(p.stderr), (name, repr(p.stderr))
    for name in ("runs", "check"):  # shown, as escapes (a table may wrap the cell)
        assert "\\x1b" in outputs[name].stdout and "pwned" in outputs[name].stdout, name
    assert "CK201" in outputs["check"].stdout
    assert "\\x1b" in outputs["diff"].stdout
    ET.fromstring(outputs["check-junit"].stdout.split("\n", 1)[1])  # well-formed: CI takes it
    as_json = cli("check", trace, "--format", "json")
    assert not RAW.search(as_json.stdout)  # JSON escapes them itself ...
    assert HOSTILE in {f["run_id"] for f in json.loads(as_json.stdout)["findings"]}  # ... and keeps the value


def test_the_report_of_a_trace_full_of_escapes_has_none_raw(tmp_path):
    trace = str(hostile_trace(tmp_path))
    html = tmp_path / "r.html"
    p = cli("check", trace, "--html", str(html))
    assert p.returncode in (0, 1), p.stderr
    page = html.read_text("utf-8")
    assert not RAW.search(page)
    _Strict().feed(page)


class _Strict(HTMLParser):
    """The standard library's parser, failing on what it would only warn about."""

    def error(self, message: str) -> None:  # pragma: no cover - HTMLParser calls it on broken markup
        raise AssertionError(message)


#: any code point but surrogates (which no decoded text holds), weighted to the controls
CODE_POINTS = st.one_of(
    st.characters(min_codepoint=0, max_codepoint=0x9F),
    st.characters(blacklist_categories=("Cs",)),
    st.sampled_from("\u2028\u2029\u202e\u2066\ufffe\uffff\ud800\udfff"),
)


def finding(text: str) -> Finding:
    return Finding(code="CK201", severity="error", rule="R8.4", session_id=text, run_id=text, frames=[f"0:{text}"],
                   fingerprint="f" * 16, message=f"message {text}", detail={"text": text})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(CODE_POINTS, min_size=1, max_size=12))
def test_junit_is_well_formed_for_any_recorded_string(text):
    result = CheckResult(findings=[finding(text)], baselined=0, trace=f"t{text}.db", frames=1, facts=1)
    xml = render_junit(result)
    root = ET.fromstring(xml.split("\n", 1)[1])
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("classname") == f"chatkit-trace.{xml_text(text)}.{xml_text(text)}"
    out = render_text(result)
    assert not RAW.search(out.replace("\n", "").replace("\t", ""))


def test_visible_shows_every_control_character_once_and_keeps_the_rest():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"
    assert visible("\x9b\u202e\x7f\r") == "\\x9b\\u202e\\x7f\\r"
    assert visible("plain é 😀 text") == "plain é 😀 text"
    for n in range(0x110000):
        c = chr(n)
        shown = visible(c)
        assert not CONTROL.search(shown)
        assert (shown == c) == (CONTROL.search(c) is None)
