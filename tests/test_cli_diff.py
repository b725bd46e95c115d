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
    assert "…" in out
    # the cells end in …; the sentence quotes both texts around their first
    # difference, not their identical shortened starts (issue 33)
    cells = [x for x in out.splitlines() if "│" in x and "THE-END" in x]
    assert not cells
    sentence = " ".join(out.split("differs:", 1)[1].split())
    assert "first differ at character" in sentence and "while THE-END”" in sentence and "while OTHER-END”" in sentence
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


def _stored(tmp_path: Path, exchanges: list, protocol: str) -> Path:
    path = tmp_path / "w.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", protocol)
        store.set_meta("capabilities", ["abort", "history"])
        for ex in exchanges:
            store.add_exchange(ex)
    return path


def test_a_run_whose_stop_no_read_settles_is_shown_with_the_later_read_not_judged(tmp_path, capsys):
    """Hermes session stream, stopped by closing it: no read ever settles the
    run (session reads carry no run), so check judges no read against it; diff
    still finds the later session reads and shows the latest, marked not
    judged (issue 33: it said "no history read covers" and exited 2)."""
    from .analyze.wire_cases import build, capture_calls

    create, stream, hist = capture_calls("session_text", "hermes")
    raw = stream.raw.split(b"\n\n")
    stream.raw = b"\n\n".join(raw[:4]) + b"\n\n"  # run.started, message.started, two deltas; then the client leaves
    stream.end = "client-gone"
    later = type(hist)(**{**hist.__dict__, "t": hist.t + 5})
    exchanges, _ = build([create, stream, hist, later], "hermes")
    run_id = exchanges[1].run_id
    path = _stored(tmp_path, exchanges, "hermes")
    assert main(["diff", str(path), "--run", run_id]) == 1
    out = capsys.readouterr().out
    assert "history read 3 (session scope)" in out and "not judged" in out
    assert "stop was never confirmed" in out and "Hello from the fake model." in out


def test_nothing_to_compare_says_why_for_the_run(tmp_path, capsys):
    from .analyze.wire_cases import build, capture_calls

    calls = capture_calls("runs_text", "hermes")
    exchanges, _ = build(calls, "hermes")
    path = _stored(tmp_path, exchanges, "hermes")
    run_id = next(e.run_id for e in exchanges if e.run_id)
    assert main(["diff", str(path), "--run", run_id]) == 2
    assert "only status reads follow run" in capsys.readouterr().err
    assert main(["diff", str(path), "--run", "nope"]) == 2
    assert "the trace has no run 'nope'" in capsys.readouterr().err
