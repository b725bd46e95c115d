"""``chatkit-trace diff``: both sides, sentences, --full, read and scope named,
exit status as diff(1) (0 isomorphic, 1 differences, 2 trouble)."""

from __future__ import annotations

import json
from pathlib import Path

from chatkit_trace.cli import main
from chatkit_trace.store import TraceStore

from .analyze.corpus import CORPUS, build_exchange
from .test_cli_check import trace_from_case

LONG = ("The quick brown fox jumps over the lazy dog near the riverbank while " * 6).strip() + " THE-END"
MARKUP = "[bold red]not markup[/bold red] [link=http://x]y[/link]"


def trace_of(tmp_path: Path, case: dict) -> Path:
    path = tmp_path / "t.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", case["protocol"])
        store.set_meta("capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"])
        for i, spec in enumerate(case["exchanges"]):
            store.add_exchange(build_exchange(i, spec))
    return path


def content_case(live_text: str, history_text: str) -> dict:
    case = json.loads((CORPUS / "CK201-id-first.json").read_text())
    run, hist = case["exchanges"]
    run["sse"] = [run["sse"][0], run["sse"][2]]
    run["sse"][0]["data"]["updates"][0]["message"]["parts"][0]["text"] = live_text
    hist["json"]["messages"] = [hist["json"]["messages"][0], json.loads(json.dumps(run["sse"][0]["data"]["updates"][0]["message"]))]
    hist["json"]["messages"][1]["parts"][0]["text"] = history_text
    hist["json"]["messages"][1]["id"] = "a1"
    return case


def test_isomorphic_is_0_and_names_read_scope_and_baseline(tmp_path, capsys):
    assert main(["diff", str(trace_from_case(tmp_path, "clean-same-text-two-runs"))]) == 0
    out = capsys.readouterr().out
    assert out.count("isomorphic") == 2  # both runs compared
    assert "history read 2 (session scope)" in out and "run settled live" in out and "as of frame 0:1" in out


def test_differences_are_1_with_both_columns_and_sentences(tmp_path, capsys):
    assert main(["diff", str(trace_from_case(tmp_path, "CK201"))]) == 1
    out = capsys.readouterr().out
    # history's column holds history's items
    line = next(x for x in out.splitlines() if "assistant assistant:r1" in x)
    assert "assistant msg_8f2c" in line
    assert "The live assistant message assistant:r1 is msg_8f2c in history (same run, same place, same content)" in out
    assert "{'" not in out and "'what'" not in out  # sentences, not dict reprs


def test_nothing_to_compare_is_2(tmp_path, capsys):
    assert main(["diff", str(trace_from_case(tmp_path, "CK102"))]) == 2
    assert "nothing to compare" in capsys.readouterr().err


def test_long_text_ends_in_an_ellipsis_and_full_shows_it(tmp_path, capsys):
    path = trace_of(tmp_path, content_case(LONG, LONG.replace("THE-END", "OTHER-END")))
    assert main(["diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert "…" in out and "THE-END" not in out
    assert main(["diff", str(path), "--full"]) == 1
    out = capsys.readouterr().out
    assert "THE-END" in out and "OTHER-END" in out


def test_recorded_text_is_never_markup(tmp_path, capsys):
    path = trace_of(tmp_path, content_case(MARKUP, MARKUP + "!"))
    assert main(["diff", str(path), "--full"]) == 1
    out = capsys.readouterr().out
    assert "[bold red]not markup[/bold red]" in out and "[link=http://x]y[/link]" in out


def test_explained_difference_names_its_cause(tmp_path, capsys):
    assert main(["diff", str(trace_from_case(tmp_path, "CK117-sealed-notice"))]) == 1
    out = capsys.readouterr().out
    assert "explained:" in out and "CK117" in out and "frame 0:1" in out


def test_check_prints_recorded_text_in_findings_literally(tmp_path, capsys):
    path = trace_of(tmp_path, content_case(MARKUP, MARKUP + "!"))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "CK201" in out and "[bold red]not markup[/bold red]" in out
