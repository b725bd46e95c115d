"""docs/rules.md ships with the package and explains every finding code:
the shipped copy is the document, every catalogue code has its entry (same
severity, title and rules), anchors are what links use, and ``explain`` /
``check --explain`` print it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from chatkit_trace.analyze import CATALOGUE, REASON_CODES
from chatkit_trace.cli import main
from chatkit_trace.rules import (
    RULE_ID,
    UnknownRule,
    cited_rules,
    code_doc,
    codes,
    explain,
    rule_anchor,
    rule_link,
    rule_text,
    rules,
    rules_markdown,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rules.md"


def test_the_shipped_copy_is_the_document():
    shipped = ROOT / "chatkit_trace" / "data" / "rules.md"
    assert shipped.read_bytes() == DOC.read_bytes(), "copy it: cp docs/rules.md chatkit_trace/data/rules.md"
    assert rules_markdown() == DOC.read_text("utf-8")


def test_the_package_data_pattern_ships_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["chatkit_trace"]
    shipped = {path for p in patterns for path in (ROOT / "chatkit_trace").glob(p)}
    assert ROOT / "chatkit_trace" / "data" / "rules.md" in shipped, patterns


def test_every_section_and_rule_of_the_numbering_is_there():
    ids = list(rules())
    assert [i for i in ids if "." not in i] == [f"R{n}" for n in range(1, 14)]
    for must in ("R1.1", "R2.5a", "R3.2a", "R3.6a", "R8.1a", "R8.4", "R11.6", "R12", "R13.11"):
        assert must in ids
    for rule in rules().values():
        assert rule.title and rule.text, rule.id
        assert rule.section == "R" + RULE_ID.fullmatch(rule.id).group(1)
        assert rule.section in rules()


def test_anchors_are_the_documented_ones_and_unique():
    text = DOC.read_text("utf-8")
    anchors = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(anchors) == len(set(anchors))
    for rule in rules().values():
        assert rule.anchor == rule_anchor(rule.id), rule.id
    assert rule_anchor("R8.4") == "r84" and rule_anchor("R2.5a") == "r25a" and rule_anchor("R8") == "r8"
    assert rule_anchor("R1.3") == "r1-3" and rule_anchor("R13") == "r13" and rule_anchor("R1.2") != rule_anchor("R12")
    assert rule_link("r8.4") == "docs/rules.md#r84" and rule_link("ck201") == "docs/rules.md#ck201"
    # every in-page link of the document names an anchor it has
    for target in re.findall(r"\]\(#([^)]+)\)", text):
        assert target in anchors, target


def test_the_document_renders_every_rule_and_code_as_a_heading_with_its_anchor():
    # CommonMark (markdown-it, which rich brings): an anchor line must not swallow its heading.
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(DOC.read_text("utf-8"))
    headings = re.findall(r'<p><a id="([a-z0-9-]+)"></a></p>\n<h[23]>(R[0-9.a-z]+|CK\d+) ', html)
    expected = [(r.anchor, r.id) for r in rules().values()] + [(c.anchor, c.code) for c in codes().values()]
    assert sorted(headings) == sorted(expected)


def test_every_catalogue_code_is_explained_with_the_catalogues_words():
    assert list(codes()) == list(CATALOGUE)
    for info in CATALOGUE.values():
        doc = code_doc(info.code)
        assert (doc.severity, doc.title) == (info.severity, info.title), info.code
        assert (" ".join(doc.rules) or "-") == info.rule, info.code
        assert all(r in rules() for r in doc.rules), info.code
        assert doc.anchor == info.code.lower()
        assert doc.meaning and doc.example and doc.ui.startswith("The UI:"), info.code


def test_the_code_table_in_rules_md_matches_the_catalogue():
    section = DOC.read_text("utf-8").split('<a id="finding-codes"></a>', 1)[1].split('<a id="ck101"></a>', 1)[0]
    rows = re.findall(r"^\| \[(CK\d+)\]\(#ck\d+\) \| (\w+) \| ([^|]+) \| ([^|]+) \|$", section, re.M)
    plain = [(c, s, re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", r).strip(), t.strip()) for c, s, r, t in rows]
    assert plain == [(c.code, c.severity, c.rule, c.title) for c in CATALOGUE.values()]


def test_every_rejection_reason_with_a_code_is_listed_with_it():
    section = DOC.read_text("utf-8").split('<a id="finding-codes"></a>', 1)[1].split("| code |", 1)[0]
    flat = " ".join(section.split())
    for reason, code in REASON_CODES.items():
        assert f"`{reason}` {code}" in flat, reason


def test_explain_a_code():
    text = explain("ck105")
    assert text.splitlines()[0] == "CK105 (error): run completed while a tool call was running"
    assert "Rules: R6.5, R3.6" in text
    assert "Example:" in text and '{"type":"done"}' in text and "The UI: the tool card spins forever" in text
    # the text of each of its rules, without Markdown links
    assert "R6.5 Conformance: no tool left running" in text and "R3.6 The thirteen reasons" in text
    assert "](#" not in text and "**" not in text
    assert "docs/rules.md#ck105" in text


def test_explain_a_rule_and_a_section():
    text = explain("R8.4")
    assert text.startswith("R8.4 History is isomorphic with the live stream  (in R8 History)")
    assert "Cited by: CK201" in text
    section = explain("R9")
    assert "R9.1 Stop asks, and keeps listening" in section and "Cited by: CK107" in section
    assert rule_text("r2.5A").startswith("On a direct run stream")


# made-up rule numbers are built, so that the reference scan does not read them as citations
@pytest.mark.parametrize("name", ["CK999", "CK1", "R" + "99.9", "R" + "8.9", "hello", ""])
def test_unknown_names_are_refused(name):
    with pytest.raises(UnknownRule):
        explain(name)


def test_cited_rules():
    assert cited_rules("CK101 (R3.5 R2.5a), again R3.5; R8-R10, R2D2") == ["R3.5", "R2.5a", "R8", "R10"]


def test_the_admission_order_keeps_the_step_numbers_scripts_cite():
    # tests/core/scripts/reject-<reason>.jsonl cite "R3.6a step N" for their reason.
    steps = {n: set(re.findall(r"`([a-z-]+)`", body)) for n, body in re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", rule_text("R3.6a"), re.M | re.S)}
    assert sorted(steps, key=int) == [str(n) for n in range(1, 12)]
    cited = 0
    for script in sorted((ROOT / "tests" / "core" / "scripts").glob("reject-*.jsonl")):
        reason = script.stem.removeprefix("reject-")
        for step in re.findall(r"R3\.6a step (\d+)", script.read_text()):
            assert reason in steps[step], (script.name, step)
            cited += 1
    assert cited >= 5


# ------------------------------------------------------------------ command line


def test_explain_command(capsys):
    assert main(["explain", "CK201", "R8.4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CK201 (error): history not isomorphic with the live stream")
    assert "\n\nR8.4 History is isomorphic with the live stream  (in R8 History)" in out


def test_check_explain_prints_the_same_and_reads_no_trace(capsys):
    assert main(["explain", "CK201"]) == 0
    expected = capsys.readouterr().out
    assert main(["check", "--explain", "ck201"]) == 0
    assert capsys.readouterr().out == expected
    assert main(["check", "no-such-trace.db", "--explain", "CK201"]) == 0
    assert capsys.readouterr().out == expected


def test_unknown_code_is_one_line_and_exit_2():
    for args in (["explain", "CK999"], ["check", "--explain", "CK999"]):
        proc = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and "unknown finding code or rule 'CK999'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_check_without_a_trace_is_a_usage_error(capsys):
    assert main(["check"]) == 2
    assert "TRACE is required" in capsys.readouterr().err


def test_check_text_output_points_at_the_explanation(tmp_path, capsys):
    from .test_cli_check import trace_from_case

    trace = trace_from_case(tmp_path, "CK101-direct")
    assert main(["check", str(trace), "--no-store"]) == 1
    out = capsys.readouterr().out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("explain a code and its rules: chatkit-trace explain CK101 --trace ") and last.endswith("(docs/rules.md#ck101)")
    assert str(trace) in last or str(trace).replace(str(tmp_path), "") in last
    assert main(["check", str(trace), "--no-store", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["code"] == "CK101"  # JSON unchanged
    clean = trace_from_case(tmp_path, "clean-myproto")
    assert main(["check", str(clean), "--no-store"]) == 0
    assert "chatkit-trace explain" not in capsys.readouterr().out


def test_the_core_scripts_doc_example_holds(tmp_path):
    from chatkit_trace.cli.admit import run_script_text

    doc = (ROOT / "docs" / "core-scripts.md").read_text("utf-8")
    script = doc.split("## Example", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    outcome = run_script_text(script, name="core-scripts.md")
    assert outcome.failures == ()
    assert [line.result for line in outcome.lines][-1] == "rejected"


# ------------------------------------------------------------------ worked examples

#: Codes whose worked example is one myproto run stream: it is replayed here
#: and must report its code, and only it (one cause, one verdict).
RUN_STREAM_EXAMPLES = ("CK101", "CK102", "CK103", "CK105", "CK302", "CK403", "CK405")
FRAME_LINE = re.compile(r"^\s+id: (\S+)\s+data: (.*?)(?:\s{2,}\S.*)?$")


def _case_from_example(example: str) -> dict:
    lines = example.splitlines()
    assert "run r1, SSE" in lines[0], lines[0]
    sse = []
    for line in lines[1:]:
        m = FRAME_LINE.match(line)
        if m is None:
            continue
        event_id, data = m.groups()
        try:
            sse.append({"id": event_id, "data": json.loads(data)})
        except ValueError:
            sse.append({"raw": f"id: {event_id}\ndata: {data}\n\n"})
    assert sse, example
    end = "reset" if "(connection reset)" in example else "complete"
    run = {"capability": "run", "session": "s1", "run": "r1", "t": 0.0, "request": {"text": "hi", "runId": "r1"}, "sse": sse, "end": end}
    return {"protocol": "myproto", "exchanges": [run]}


@pytest.mark.parametrize("code", RUN_STREAM_EXAMPLES)
def test_the_worked_example_reports_its_code(code, tmp_path):
    from chatkit_trace.analyze import analyze

    from .analyze.corpus import load_case

    path = tmp_path / f"{code}.json"
    path.write_text(json.dumps(_case_from_example(code_doc(code).example)))
    _, exchanges, adapter = load_case(path)
    _, findings = analyze(exchanges, adapter)
    assert sorted({f.code for f in findings}) == [code], [(f.code, f.message) for f in findings]


def test_explain_speaks_the_route_protocol(tmp_path, capsys):
    """decisions.md 279: with --profile (or --trace) a code's explanation goes
    on in that protocol's wire: its words for chatkit's and its example."""
    assert main(["explain", "CK102", "--profile", "hermes"]) == 0
    out = capsys.readouterr().out
    assert "On the hermes wire" in out and out.index("CK102") < out.index("On the hermes wire")
    assert "run.completed" in out and "CK102 in hermes's frames" in out and "no run.completed, run.failed or run.cancelled" in out
    assert main(["explain", "CK102", "--profile", "openai"]) == 0
    out = capsys.readouterr().out
    assert "finish_reason" in out and "[DONE]" in out
    assert main(["explain", "CK201", "--profile", "a2a"]) == 0
    assert "No a2a example of CK201" in capsys.readouterr().out
    from .test_cli_check import trace_from_case

    trace = trace_from_case(tmp_path, "CK101-direct")  # recorded with the example protocol
    assert main(["explain", "CK101", "--trace", str(trace)]) == 0
    assert '{"type":"done"}' in capsys.readouterr().out
    assert main(["explain", "CK102", "--profile", "nope"]) == 2
    assert "no profile named 'nope'" in capsys.readouterr().err
