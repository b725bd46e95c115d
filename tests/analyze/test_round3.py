"""Verdicts, round three (issue 33) at the analysis level: a tool call history
settles is no difference, a missing field is quoted as absent (not null), a
stop by close counts as ignored only when history holds clearly more."""

from __future__ import annotations

import json

from chatkit_trace.analyze import analyze
from chatkit_trace.analyze._compare import Pair, describe, diff_pairs
from chatkit_trace.core import RunError, RuntimeMessage, TextPart, ToolCallPart

from .corpus import CORPUS, load_case


def _msg(*parts) -> RuntimeMessage:
    return RuntimeMessage("m1", "assistant", tuple(parts), run_id="r1")


def test_a_running_call_history_settles_is_no_difference():
    live = _msg(TextPart("text:0", "Checking."), ToolCallPart("tool:1", "call_1", "check_visa", args={"c": "PE"}))
    for settled in (
        ToolCallPart("tool:1", "call_1", "check_visa", args={"c": "PE"}, status="cancelled",
                     error=RunError("INVOCATION_ABORTED", "aborted")),
        ToolCallPart("tool:1", "call_1", "check_visa", args={"c": "PE"}, result={"visa": "no"}),
        ToolCallPart("tool:1", "call_1", "check_visa", args={"c": "PE"}, status="failed", error=RunError("x", "y")),
    ):
        diffs, _ = diff_pairs([Pair(live, _msg(TextPart("text:0", "Checking."), settled), "id")])
        assert diffs == [], settled
    # other fields still count
    other = ToolCallPart("tool:1", "call_1", "check_visa", args={"c": "FR"}, status="cancelled")
    [d] = diff_pairs([Pair(live, _msg(TextPart("text:0", "Checking."), other), "id")])[0]
    assert d["fields"] == ["args"]


def test_a_field_one_side_lacks_is_quoted_absent_not_null():
    done = ToolCallPart("tool:1", "call_1", "lookup", status="completed", result=None)
    running_cancelled = ToolCallPart("tool:1", "call_1", "lookup", status="cancelled")
    [d] = diff_pairs([Pair(_msg(done), _msg(running_cancelled), "id")])[0]
    assert "result" in d["fields"] and "result" in d["live"] and "result" not in d["history"]
    sentence = describe(d)
    assert "result: absent" in sentence and "result: null" in sentence  # live sent an empty result, history none


def _ck118_case(tmp_path, extra_ticks: int) -> tuple[list, object]:
    """The CK118 corpus case whose history holds ``extra_ticks`` more deltas than the UI showed."""
    case = json.loads((CORPUS / "CK118-hermes-ignored-stop.json").read_text())
    ticks = [f"tick{i}" for i in range(4 + extra_ticks)]
    case["exchanges"][1]["json"]["data"][1]["content"] = " ".join(ticks)
    path = tmp_path / f"case-{extra_ticks}.json"
    path.write_text(json.dumps(case))
    _, exchanges, adapter = load_case(path)
    return exchanges, adapter


def test_one_chunk_in_flight_at_the_close_is_no_ignored_stop(tmp_path):
    for extra, want in ((1, "CK115"), (2, "CK115"), (5, "CK118")):
        exchanges, adapter = _ck118_case(tmp_path, extra)
        codes = {f.code for f in analyze(exchanges, adapter)[1]}
        assert want in codes and ({"CK115", "CK118"} - {want}).isdisjoint(codes), (extra, codes)

