"""The model (SPEC R4-R9): immutability, ABSENT vs None, lossless camelCase JSON."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkit_trace.core import (
    ABSENT,
    AbortRecord,
    DataPart,
    FrozenDict,
    HistoryFormatError,
    HistoryResult,
    InvalidMessageError,
    MediaPart,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    freeze,
    get_tool_call_status,
    history_from_json,
    message_from_json,
    thaw,
    to_run_error,
)

FULL_MESSAGE = {
    "id": "assistant:r1",
    "role": "assistant",
    "runId": "r1",
    "createdAt": 1700000000000,
    "metadata": {"model": "m", "nested": [1, {"a": None}]},
    "parts": [
        {"id": "reasoning:0", "type": "reasoning", "text": "think"},
        {"id": "text:0", "type": "text", "text": "Hello"},
        {
            "id": "tool:c1",
            "type": "tool-call",
            "toolCallId": "c1",
            "toolName": "lookup",
            "args": {"q": "paris"},
            "status": "failed",
            "result": None,
            "partialResult": {"p": 1},
            "error": {"code": "TOOL_DOWN", "message": "down", "retryable": True, "cause": {"raw": 1}},
        },
        {
            "id": "m1",
            "type": "media",
            "attachmentId": "att-1",
            "placement": "separate",
            "name": "cat.png",
            "mimeType": "image/png",
            "size": 12,
            "source": {"url": "https://example.invalid/cat.png"},
        },
        {"id": "d1", "type": "data", "kind": "acme.weather-card", "data": {"t": 21}},
        {"id": "text:1", "type": "text", "text": "Bye", "vendorExtra": {"kept": True}},
    ],
    "unknownTopLevel": "kept too",
}


def test_message_json_round_trip_is_lossless():
    msg = message_from_json(FULL_MESSAGE)
    assert msg.to_json() == FULL_MESSAGE
    assert message_from_json(json.loads(json.dumps(msg.to_json()))) == msg


def test_absent_is_not_none_for_tool_results():
    running = message_from_json(
        {"id": "m", "role": "assistant", "parts": [{"id": "t", "type": "tool-call", "toolCallId": "c", "toolName": "n"}]}
    )
    empty = message_from_json(
        {
            "id": "m",
            "role": "assistant",
            "parts": [{"id": "t", "type": "tool-call", "toolCallId": "c", "toolName": "n", "result": None}],
        }
    )
    assert running.parts[0].result is ABSENT and "result" not in running.to_json()["parts"][0]
    assert empty.parts[0].result is None and empty.to_json()["parts"][0]["result"] is None
    assert get_tool_call_status(running.parts[0]) == "running"
    assert get_tool_call_status(empty.parts[0]) == "completed"
    assert running != empty
    assert not ABSENT and repr(ABSENT) == "ABSENT"
    assert copy.deepcopy(ABSENT) is ABSENT and pickle.loads(pickle.dumps(ABSENT)) is ABSENT


def test_values_are_immutable():
    msg = message_from_json(FULL_MESSAGE)
    with pytest.raises(AttributeError):
        msg.id = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        msg.parts[1].text = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        msg.metadata["model"] = "other"
    with pytest.raises(TypeError):
        msg.parts[2].args.update(q=1)
    assert isinstance(msg.metadata["nested"], tuple)
    assert isinstance(msg.metadata, FrozenDict) and msg.metadata == {"model": "m", "nested": (1, {"a": None})}


def test_text_part_appends_share_history_without_changing_old_values():
    a = TextPart("t", "a")
    b = a.append("b")
    c = b.append("c")
    branch = b.append("X")  # an older value grows a branch: copied, never corrupted
    d = c.append("d")
    assert [a.text, b.text, c.text, branch.text, d.text] == ["a", "ab", "abc", "abX", "abcd"]
    assert c == TextPart("t", "abc") and hash(c) == hash(TextPart("t", "abc"))
    assert ReasoningPart("t", "abc") != TextPart("t", "abc")
    assert pickle.loads(pickle.dumps(d)) == d


def test_unknown_part_type_and_non_object_part_cannot_be_represented():
    with pytest.raises(InvalidMessageError) as e:
        message_from_json({"id": "m", "role": "user", "parts": [{"id": "p", "type": "video"}]})
    assert e.value.rule == "part-type" and e.value.part_id == "p"
    with pytest.raises(InvalidMessageError) as e:
        message_from_json({"id": "m", "role": "user", "parts": "nope"})
    assert e.value.rule == "message-parts"
    with pytest.raises(InvalidMessageError) as e:
        message_from_json(["not", "a", "message"])
    assert e.value.rule == "message-shape"


def test_run_error_round_trip_and_retryable_omitted_when_unknown():
    assert RunError("E", "m").to_json() == {"code": "E", "message": "m"}
    assert RunError("E", "m", False, {"x": 1}).to_json() == {"code": "E", "message": "m", "retryable": False, "cause": {"x": 1}}
    assert RunError("E", "m", None, None).to_json() == {"code": "E", "message": "m", "cause": None}


@pytest.mark.parametrize(
    "value",
    [
        None,
        "boom",
        42,
        {"code": -32603, "message": "Internal error"},  # numeric JSON-RPC code: decision 4
        {"code": "", "message": "x"},
        {"message": "only a message"},
        {"code": "X", "message": "m", "retryable": "yes"},
        RunError("", "m"),
    ],
)
def test_to_run_error_falls_back_to_unknown_with_cause(value):
    err = to_run_error(value)
    assert err.code == "UNKNOWN"
    assert err.cause is not ABSENT
    assert isinstance(err.message, str) and err.message


def test_to_run_error_keeps_well_formed_values():
    assert to_run_error({"code": "RATE_LIMITED", "message": "slow down", "retryable": True}) == RunError(
        "RATE_LIMITED", "slow down", True
    )
    same = RunError("X", "y")
    assert to_run_error(same) is same


def test_history_result_round_trip_and_active_run_null_vs_absent():
    raw = {
        "messages": [FULL_MESSAGE],
        "runSnapshots": [
            {
                "id": "r0",
                "origin": "remote",
                "status": "failed",
                "phase": "idle",
                "createdAt": 5,
                "workItems": {"c1": {"id": "c1", "status": "failed"}},
                "error": {"code": "E", "message": "m"},
                "abort": {"requestedAt": 1, "acceptedAt": None, "outputSealed": True},
            }
        ],
        "activeRun": None,
        "session": {"id": "s1", "status": "idle", "title": "t"},
        "cursor": "c2",
        "hasMore": True,
    }
    hist = history_from_json(raw)
    assert hist.active_run is None
    assert hist.to_json() == raw
    absent = history_from_json({"messages": [], "hasMore": False})
    assert absent.active_run is ABSENT and "activeRun" not in absent.to_json()


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ([], "must be an object"),
        ({"messages": {}, "hasMore": False}, "messages must be a list"),
        ({"messages": []}, "hasMore"),
        ({"messages": [], "hasMore": False, "activeRun": {"eventId": "e"}}, "activeRun"),
        ({"messages": [], "hasMore": False, "cursor": 3}, "cursor"),
    ],
)
def test_history_envelope_errors(raw, fragment):
    with pytest.raises(HistoryFormatError, match=fragment):
        history_from_json(raw)


@pytest.mark.parametrize(
    "record, ok",
    [
        (AbortRecord(0), True),
        (AbortRecord(5, 5, True), True),
        (AbortRecord(5, None, True), True),  # sealed before the ack: valid (R9.5)
        (AbortRecord(-1), False),
        (AbortRecord(float("inf")), False),
        (AbortRecord(5, 4), False),
        (AbortRecord(5, 6, "yes"), False),
    ],
)
def test_abort_record_rules(record, ok):
    assert (record.problem() is None) is ok


def test_freeze_thaw_round_trip():
    value = {"a": [1, {"b": [2, 3]}], "c": None}
    frozen = freeze(value)
    assert frozen == {"a": (1, {"b": (2, 3)}), "c": None}
    assert thaw(frozen) == value
    assert json.loads(json.dumps(frozen)) == value


def test_parts_have_their_type_names():
    assert [c.type for c in (TextPart, ReasoningPart, ToolCallPart, MediaPart, DataPart)] == [
        "text",
        "reasoning",
        "tool-call",
        "media",
        "data",
    ]
    assert HistoryResult().to_json() == {"messages": [], "hasMore": False}
    assert RuntimeMessage("m", "user").to_json() == {"id": "m", "role": "user", "parts": []}


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.lists(st.text(max_size=3), max_size=3), st.booleans()),
        max_size=40,
    ),
    st.lists(st.integers(0, 40), max_size=60),
)
def test_reading_versions_in_any_order_gives_each_its_own_text(steps, reads):
    """Superseded versions are joined on read, and the last such join is
    remembered: repeated reads, reads of other versions and branches in
    between must never hand one version another's text."""
    versions = [(TextPart("t", "a"), "a")]
    for pick, chunks, one_by_one in steps:
        part, text = versions[pick % len(versions)]
        if one_by_one:
            for c in chunks:
                part, text = part.append(c), text + c
        else:
            part, text = part.extend(chunks), text + "".join(chunks)
        versions.append((part, text))
        assert versions[pick % len(versions)][0].text == versions[pick % len(versions)][1]
    for r in reads:
        part, text = versions[r % len(versions)]
        assert part.text == text
        assert part.text == text  # read again: from the remembered join, still its own
