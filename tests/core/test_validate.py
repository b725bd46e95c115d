"""Every named validation rule (SPEC R3.7, R4, R6, R7), each with a valid neighbour."""

from __future__ import annotations

import pytest

from chatkit_trace.core import (
    RULES,
    ChatCore,
    HistoryResult,
    InvalidMessageError,
    check_history,
    check_message,
    coerce_tool_errors,
    history_from_json,
    is_valid_data_kind,
    message_from_json,
)


def msg(*parts, **top):
    base = {"id": "m1", "role": "assistant", "parts": list(parts)}
    base.update(top)
    return base


TEXT = {"id": "t", "type": "text", "text": "x"}
TOOL = {"id": "tc", "type": "tool-call", "toolCallId": "c", "toolName": "n"}
MEDIA = {"id": "md", "type": "media", "placement": "inline", "mimeType": "image/png", "source": "https://x.invalid/a.png"}
DATA = {"id": "d", "type": "data", "kind": "acme.card", "data": {}}

# rule -> (breaking message, valid neighbour)
CASES = {
    "message-id": (msg(TEXT, id=""), msg(TEXT, id="a")),
    "message-role": (msg(TEXT, role="bot"), msg(TEXT, role="tool")),
    "message-run-id": (msg(TEXT, runId=""), msg(TEXT, runId="r")),
    "message-created-at": (msg(TEXT, createdAt=-1), msg(TEXT, createdAt=0)),
    "message-metadata": (msg(TEXT, metadata=[1]), msg(TEXT, metadata={})),
    "part-id": (msg({"type": "text", "text": "x"}), msg(TEXT)),
    "part-id-unique": (msg(TEXT, dict(TEXT)), msg(TEXT, dict(TEXT, id="t2"))),
    "part-text": (msg(dict(TEXT, text=5)), msg(dict(TEXT, text=""))),
    "tool-call-id": (msg(dict(TOOL, toolCallId="")), msg(TOOL)),
    "tool-name": (msg({k: v for k, v in TOOL.items() if k != "toolName"}), msg(TOOL)),
    "tool-args": (msg(dict(TOOL, args=[1])), msg(dict(TOOL, args={}))),
    "tool-status": (msg(dict(TOOL, status="done")), msg(dict(TOOL, status="cancelled"))),
    "data-kind": (msg(dict(DATA, kind="card")), msg(dict(DATA, kind="chatkit.notice"))),
    "media-mime-type": (msg(dict(MEDIA, mimeType="")), msg(MEDIA)),
    "media-placement": (msg(dict(MEDIA, placement="floating")), msg(dict(MEDIA, placement="separate"))),
    "media-source": (msg(dict(MEDIA, source={"url": "a", "data": "b"})), msg(dict(MEDIA, source={"reference": "res-1"}))),
    "media-field": (msg(dict(MEDIA, size=-1)), msg(dict(MEDIA, size=0))),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_and_its_valid_neighbour(rule):
    bad, good = CASES[rule]
    err = check_message(message_from_json(bad))
    assert isinstance(err, InvalidMessageError) and err.rule == rule, err
    assert check_message(message_from_json(good)) is None


def test_every_rule_is_documented_and_covered():
    structural = {"message-shape", "message-parts", "part-shape", "part-type"}  # refused by the reader
    history_only = {"message-id-unique", "run-snapshot", "run-snapshot-abort"}
    assert set(RULES) == set(CASES) | structural | history_only


@pytest.mark.parametrize(
    "kind, ok",
    [
        ("acme.card", True),
        ("acme.weather-card", True),
        ("a.b.c", True),
        ("v1.x2", True),
        ("chatkit.notice", True),
        ("chatkit.unknown-thing", True),  # well-formed: not a Core rejection (R7.2 -> CK305)
        ("card", False),
        ("Acme.card", False),
        ("acme..card", False),
        ("acme.card.", False),
        (".acme", False),
        ("acme.card_x", False),
        ("acme card", False),
        (3, False),
    ],
)
def test_data_kind(kind, ok):
    assert is_valid_data_kind(kind) is ok


def test_history_batch_rejected_whole_on_one_invalid_message():
    seen = []
    core = ChatCore("s1", capabilities={"history"}, on_invalid_message=seen.append)
    good = {"messages": [msg(TEXT, id="a"), msg(TEXT, id="b")], "hasMore": False}
    assert core.apply_history(good).ok
    before = core.snapshot
    bad = {"messages": [msg(TEXT, id="c"), msg(dict(DATA, kind="nope"), id="d")], "hasMore": False}
    result = core.apply_history(bad)
    assert not result.ok and result.reason == "invalid-message" and result.rule == "data-kind"
    assert core.snapshot is before  # nothing changed
    assert [m.id for m in core.snapshot.messages] == ["a", "b"]
    assert seen[-1].source == "history" and seen[-1].message_id == "d"


def test_history_duplicate_ids_and_bad_snapshots():
    dup = history_from_json({"messages": [msg(TEXT), msg(TEXT)], "hasMore": False})
    assert check_history(dup).rule == "message-id-unique"
    bad_abort = history_from_json(
        {
            "messages": [],
            "hasMore": False,
            "runSnapshots": [{"id": "r", "status": "interrupted", "abort": {"requestedAt": 5, "acceptedAt": 1, "outputSealed": True}}],
        }
    )
    assert check_history(bad_abort).rule == "run-snapshot-abort"
    # Sealed without an ack and completed instead of interrupted: valid (R9.5).
    ok = history_from_json(
        {
            "messages": [],
            "hasMore": False,
            "runSnapshots": [{"id": "r", "status": "completed", "abort": {"requestedAt": 5, "acceptedAt": None, "outputSealed": True}}],
        }
    )
    assert check_history(ok) is None
    assert check_history(HistoryResult()) is None
    no_status = history_from_json({"messages": [], "hasMore": False, "runSnapshots": [{"id": "r"}]})
    assert check_history(no_status).rule == "run-snapshot"


def test_live_projection_drops_only_the_invalid_message():
    seen = []
    core = ChatCore("s1", on_invalid_message=seen.append)
    ok = {"id": "user:r1", "role": "user", "parts": [TEXT]}
    bad = {"id": "x", "role": "nobody", "parts": [TEXT]}
    assert core.send("r1", {"text": "hi"}, project=[bad, ok]).ok
    assert [m.id for m in core.snapshot.messages] == ["user:r1"]
    assert seen[0].source == "projection" and seen[0].rule == "message-role"


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"message": "no code"}, "no code"),
        ({"code": "", "message": "empty code"}, "empty code"),
        ({"code": 7, "message": "numeric code"}, "numeric code"),
        ("boom", "boom"),
        (None, "The run failed with an error the backend did not describe."),
    ],
)
def test_a_malformed_tool_error_goes_through_to_run_error(raw, message):
    """Seed 000 §5: run failures and ToolCallPart.error use RunError, and "Core
    在准入时用 toRunError 兜底": UNKNOWN with the raw value as cause, no rejection
    (decisions.md 100).  A well-formed error is kept as it is."""
    bad = message_from_json(msg(dict(TOOL, status="failed", error=raw)))
    assert check_message(bad) is None
    fixed = coerce_tool_errors(bad)
    err = fixed.parts[0].error
    assert (err.code, err.message) == ("UNKNOWN", message)
    assert err.to_json()["cause"] == raw
    good = message_from_json(msg(dict(TOOL, status="failed", error={"code": "E", "message": "m"})))
    assert coerce_tool_errors(good) is good
    for source in ("live", "history", "projection", "content"):
        seen = []
        core = ChatCore("s1", capabilities={"history"}, on_invalid_message=seen.append)
        body = msg(dict(TOOL, status="failed", error=raw), id="m1")
        if source == "live":
            core.register_run(run_id="r1")
            assert core.emit_message(run_id="r1", event_id="e", message=body).accepted
        elif source == "history":
            assert core.apply_history({"messages": [body], "hasMore": False}).ok
        elif source == "projection":
            assert core.send("r1", {}, project=[body]).ok
        else:
            assert core.update_content(message=body).accepted
        assert seen == []
        assert core.snapshot.message("m1").parts[0].error.code == "UNKNOWN", source
