"""The built-in ``openai`` adapter (chatkit_trace/adapters/openai.py).

Real traffic first: every stream of ``recordings/captures/openai`` (litellm
proxy 1.106.12 in front of the scripted model) and the OpenAI-compatible
streams of ``recordings/captures/hermes`` go through the SSE parser, the
adapter and a Core; then each rule of the adapter's docstring is
pinned on hand-written chunks; a hypothesis fuzz shows that no JSON value
makes ``decode_event`` raise or emit an invalid message.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkit_trace.adapters import (
    CompletedUpdate,
    DecodeContext,
    DeltaUpdate,
    EncodeContext,
    EventIdentity,
    FailedUpdate,
    MessageUpdate,
    PhaseUpdate,
    create_adapter,
    load_protocol,
)
from chatkit_trace.adapters.openai import (
    TOOL_RESULTS,
    OpenAIProtocol,
    openai_run_error,
    tool_results_event,
    tool_results_from_body,
    user_message,
)
from chatkit_trace.core import (
    ABSENT,
    ChatCore,
    HistoryFormatError,
    HistoryResult,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    check_message,
    thaw,
)
from chatkit_trace.wire import DONE, SSEParser, event_json, frame_from_sse

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "recordings" / "captures" / "openai"
HERMES = ROOT / "recordings" / "captures" / "hermes"
RUN = "r1"


# --------------------------------------------------------------------------- helpers


def sse_values(body: bytes, split: list[int] | None = None) -> list[Any]:
    """The event values of an SSE body (``DONE`` for ``[DONE]``), fed in pieces."""
    parser = SSEParser()
    events = []
    cuts = [0, *(split or []), len(body)]
    for a, b in itertools.pairwise(cuts):
        events.extend(parser.feed(body[a:b]))
    events.extend(parser.flush())
    out = []
    for i, ev in enumerate(events):
        value, err = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert err is None, err
        if value is not None:
            out.append(value)
    return out


class Session:
    """One run of one session: adapter decoder + Core, fed event by event."""

    def __init__(self, protocol: OpenAIProtocol | None = None, text: str = "hi") -> None:
        self.protocol = protocol or OpenAIProtocol()
        self.adapter = create_adapter(self.protocol)
        self.core = ChatCore("s1", capabilities=self.adapter.capabilities)
        self.decoder = self.adapter.decoder("s1")
        self.core.send(RUN, {"text": text}, project=self.decoder.project({"text": text}, RUN))
        self.core.take_requests()
        self.core.dispatch_settled(RUN, True)
        self.results: list[Any] = []
        self.updates: list[Any] = []
        self.n = 0
        self.stopped = False

    def feed(self, values: list[Any]) -> Session:
        for value in values:
            if self.stopped:
                break  # a direct reader stops at the terminal (R2.5a)
            d = self.decoder.decode(value, run_id=RUN, fallback_id=f"x:{self.n}")
            self.n += 1
            assert d.error is None, d.error
            self.updates.extend(d.updates)
            for fact in d.facts:
                self.results.append((fact, self.core.admit(fact)))
            self.stopped = d.terminal
        return self

    @property
    def violations(self) -> list[str]:
        return [
            f"{type(f).__name__}: {r.reason} {r.detail}" for f, r in self.results if r.violation
        ]

    @property
    def view(self) -> Any:
        return self.core.snapshot.run(RUN)

    @property
    def answer(self) -> RuntimeMessage:
        return next(m for m in self.core.snapshot.messages if m.id == f"assistant:{RUN}")

    def parts(self) -> list[tuple[str, str]]:
        return [(p.id, p.type) for p in self.answer.parts]


def ctx(state: dict[str, Any] | None = None) -> DecodeContext:
    return DecodeContext("s1", RUN, None, state if state is not None else {})


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    index: int = 0,
    cid: str = "chatcmpl-1",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


def decode_all(events: list[Any], state: dict[str, Any] | None = None) -> list[Any]:
    p = OpenAIProtocol()
    c = ctx(state)
    out = []
    for ev in events:
        out.extend(p.decode_event(ev, c))
    return out


def capture(name: str) -> bytes:
    return (CAPTURES / name).read_bytes()


# --------------------------------------------------------------------------- registry


def test_registry_loads_the_builtin():
    p = load_protocol("openai")
    assert isinstance(p, OpenAIProtocol)
    assert p.name == "openai"
    for hook in (
        "encode_input",
        "decode_event",
        "project_input",
        "identify_event",
        "decode_history",
        "decode_input",
    ):
        assert p.implements(hook), hook
    assert not p.implements("event_sequence")  # sequence_number restarts per response (docstring)


# --------------------------------------------------------------------------- real captures


def test_capture_text():
    s = Session().feed(sse_values(capture("text.stream.sse")))
    assert s.view.status == "completed"
    assert s.parts() == [("text:0", "text")]
    assert s.answer.text == "Hello from the fake model."
    assert not s.violations


def test_capture_litellm_mock_text():
    s = Session().feed(sse_values(capture("mock_text.stream.sse")))
    assert s.view.status == "completed" and s.answer.text and not s.violations


def test_capture_reasoning_is_its_own_segment():
    s = Session().feed(sse_values(capture("reasoning.stream.sse")))
    assert s.view.status == "completed"
    assert s.parts() == [("reasoning:0", "reasoning"), ("text:1", "text")]
    assert s.answer.parts[0].text == "The user wants a short answer."
    assert s.answer.text == "Here is a short answer."
    phases = [u.phase for u in s.updates if isinstance(u, PhaseUpdate)]
    assert phases == ["thinking", "generating"]
    assert not s.violations


def test_capture_length_completes():
    s = Session().feed(sse_values(capture("length.stream.sse")))
    assert s.view.status == "completed" and s.answer.text == "This answer is cut"


def test_a_content_filter_finish_names_the_withheld_output():
    """finish_reason content_filter completes the run (the protocol's
    mapping) and the event says a content policy ended it, which the
    completed update cannot carry (output-withheld, CK122)."""
    proto = OpenAIProtocol()
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}
    assert proto.event_limits(chunk) == ("output-withheld",)
    stop = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert proto.event_limits(stop) == () and proto.event_limits({"choices": []}) == () and proto.event_limits("[DONE]") == ()
    incomplete = {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "content_filter"}}}
    assert proto.event_limits(incomplete) == ("output-withheld",)
    assert proto.event_limits({**incomplete, "response": {"incomplete_details": {"reason": "max_output_tokens"}}}) == ()
    s = Session().feed([{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}, chunk])
    assert s.view.status == "completed" and not s.violations


def test_capture_midstream_error_fails_with_the_servers_code():
    s = Session().feed(sse_values(capture("midstream.stream.sse")))
    assert s.view.status == "failed"
    err = s.view.error
    assert isinstance(err, RunError) and err.code == "500" and err.message
    assert "\n" not in err.message
    assert s.answer.text == "Partial answer "  # partial text kept
    assert not s.violations


def test_capture_client_stop_leaves_the_outcome_unknown():
    s = Session().feed(sse_values(capture("slow_stop.stream.sse")))
    assert s.view.status == "running"  # R3.4: no conclusion invented
    assert s.answer.text.startswith("tick0")


def _tool_loop_values(with_results: bool) -> list[Any]:
    exchange = json.loads((CAPTURES / "tool.exchange.json").read_text())
    turn2 = next(st["request"]["body"] for st in exchange["steps"] if st["step"] == "turn2")
    values = sse_values(capture("tool.turn1.sse"))
    if with_results:
        values.append(tool_results_event(turn2))
    return values + sse_values(capture("tool.turn2.sse"))


def test_capture_tool_loop_is_one_run_and_one_answer():
    s = Session().feed(_tool_loop_values(with_results=True))
    assert s.view.status == "completed"
    assert not s.violations
    (tool,) = [p for p in s.answer.parts if isinstance(p, ToolCallPart)]
    assert s.parts() == [(tool.id, "tool-call"), ("text:0", "text")]
    assert tool.id == f"tool:{tool.tool_call_id}" and tool.tool_name == "todo"
    assert tool.args["todos"][0]["status"] == "pending"
    assert tool.result == {"ok": True}
    assert s.answer.text.startswith("The tool said")
    assert [m.id for m in s.core.snapshot.messages] == [f"user:{RUN}", f"assistant:{RUN}"]


def test_capture_tool_loop_without_results_is_never_completed_clean():
    s = Session().feed(_tool_loop_values(with_results=False))
    # The second response finishes "stop" while the call never got a result:
    # the Core refuses the completion (active-work, CK105) instead of hiding it.
    assert [r.reason for _, r in s.results if r.violation] == ["active-work"]
    assert s.view.status == "running"


def test_tool_calls_finish_is_not_a_conclusion():
    state: dict[str, Any] = {}
    s = Session()
    s.decoder._state[RUN] = state  # watch the run's decode state
    s.feed(sse_values(capture("tool.turn1.sse")))
    assert s.view.status == "running"
    assert s.view.phase == "awaiting-input"  # the client runs the tools (tool loop)
    assert state["done"] is True
    assert len(state["awaiting_tools"]) == 1


@pytest.mark.parametrize(
    ("name", "status", "kinds"),
    [
        ("responses_text.stream.sse", "completed", ["text"]),
        ("responses_reasoning.stream.sse", "completed", ["reasoning", "text"]),
        ("responses_midstream.stream.sse", "failed", ["text"]),
        (
            "responses_tool.stream.sse",
            "running",
            ["tool-call"],
        ),  # completed with a pending call: tool loop
    ],
)
def test_capture_responses_api(name: str, status: str, kinds: list[str]):
    s = Session().feed(sse_values(capture(name)))
    assert s.view.status == status
    assert [t for _, t in s.parts()] == kinds
    assert not s.violations
    for pid, _ in s.parts():
        assert pid.split(":")[0] in ("text", "reasoning", "tool")
    if status == "failed":
        assert s.view.error.code == "server_error"


def test_capture_responses_tool_args_parsed_from_fragments():
    s = Session().feed(sse_values(capture("responses_tool.stream.sse")))
    (tool,) = s.answer.parts
    assert tool.tool_name == "todo" and tool.args["todos"][0]["id"] == "1" and tool.result is ABSENT


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("chat_text.stream.sse", "completed"),
        ("chat_tool.stream.sse", "completed"),
        ("chat_fail.stream.sse", "failed"),  # finish_reason "error" + a top-level error object
        ("responses_tool.stream.sse", "completed"),
        (
            "responses_fail.stream.sse",
            "completed",
        ),  # hermes streams the failure as output_text (§2)
    ],
)
def test_capture_hermes_openai_endpoints(name: str, status: str):
    # hermes-agent runs its tools server-side; vendor `event:` frames decode to nothing.
    s = Session().feed(sse_values((HERMES / name).read_bytes()))
    assert s.view.status == status
    assert not s.violations
    if status == "failed":
        assert (
            s.view.error.code == "agent_error"
            and s.view.error.message == "HTTP 400: fake bad request"
        )
        return
    for p in s.answer.parts:
        if isinstance(p, ToolCallPart):
            assert p.result is not ABSENT  # function_call_output in the stream settled it


@pytest.mark.parametrize(
    "name", ["text.stream.sse", "reasoning.stream.sse", "tool.turn1.sse", "midstream.stream.sse"]
)
def test_any_byte_split_gives_the_same_facts(name: str):
    body = capture(name)
    whole = Session().feed(sse_values(body))
    one = Session().feed(sse_values(body, split=list(range(1, len(body)))))
    rng = random.Random(name)
    some = Session().feed(sse_values(body, split=sorted(rng.sample(range(1, len(body)), 12))))
    expect = [(f.to_json(), r.to_json()) for f, r in whole.results]
    assert [(f.to_json(), r.to_json()) for f, r in one.results] == expect
    assert [(f.to_json(), r.to_json()) for f, r in some.results] == expect


# --------------------------------------------------------------------------- text and segments


def test_text_opens_with_a_message_then_appends_with_deltas():
    ups = decode_all(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
        ]
    )
    kinds = [type(u) for u in ups]
    assert kinds == [PhaseUpdate, MessageUpdate, DeltaUpdate]
    assert ups[1].message.id == f"assistant:{RUN}" and ups[1].message.parts == (
        TextPart("text:0", "Hel"),
    )
    assert ups[2] == DeltaUpdate(f"assistant:{RUN}", "text:0", "lo")


def test_segments_switch_between_reasoning_text_and_tools():
    s = Session().feed(
        [
            chunk({"reasoning": "hmm"}),  # the `reasoning` spelling of some servers
            chunk({"content": "A"}),
            chunk({"reasoning_content": "again"}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                }
            ),
            chunk({"content": "B"}),
            chunk({}, "stop"),
        ]
    )
    assert s.parts() == [
        ("reasoning:0", "reasoning"),
        ("text:1", "text"),
        ("reasoning:2", "reasoning"),
        ("tool:c1", "tool-call"),
        ("text:3", "text"),
    ]
    assert not s.violations or s.violations == [
        "CompletedFact: active-work tool call 'c1' is still running"
    ]


def test_refusal_is_shown_as_text_and_think_tags_stay_text():
    s = Session().feed(
        [chunk({"refusal": "I can't."}), chunk({"content": " <think>x</think>"}), chunk({}, "stop")]
    )
    assert s.parts() == [("text:0", "text")] and s.answer.text == "I can't. <think>x</think>"


def test_a_new_response_opens_a_new_segment():
    s = Session().feed(
        [
            chunk({"content": "one"}, cid="a"),
            chunk({"content": "two"}, cid="b"),
            chunk({}, "stop", cid="b"),
        ]
    )
    assert s.parts() == [("text:0", "text"), ("text:1", "text")]


def test_each_choice_has_its_own_parts_and_the_run_ends_when_all_finished():
    s = Session().feed(
        [
            chunk({"content": "zero"}, index=0),
            chunk({"content": "one"}, index=1),
            chunk({}, "stop", index=0),
        ]
    )
    assert s.view.status == "running"  # choice 1 has not finished
    s.feed([chunk({}, "length", index=1)])
    assert s.view.status == "completed"
    assert s.parts() == [("text:0", "text"), ("choice1:text:0", "text")]


def test_non_streaming_completion_body():
    body = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Whole answer."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"total_tokens": 3},
    }
    s = Session().feed([body])
    assert s.view.status == "completed" and s.answer.text == "Whole answer."


# --------------------------------------------------------------------------- tool calls


def test_tool_fragments_are_keyed_by_choice_and_index():
    state: dict[str, Any] = {}
    s = Session()
    s.decoder._state[RUN] = state
    s.feed(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        },
                        {
                            "index": 1,
                            "id": "b",
                            "type": "function",
                            "function": {"name": "g", "arguments": '{"y"'},
                        },
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {"index": 1, "function": {"arguments": ": 2}"}},
                        {"index": 0, "function": {"arguments": '{"x": 1}'}},
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "zz",
                            "type": "function",
                            "function": {"name": "other", "arguments": "{}"},
                        }
                    ]
                },
                index=1,
            ),
            chunk({}, "tool_calls"),
            chunk({}, "tool_calls", index=1),
        ]
    )
    tools = {p.tool_call_id: p for p in s.answer.parts if isinstance(p, ToolCallPart)}
    assert tools["a"].args == {"x": 1} and tools["a"].tool_name == "f"
    assert tools["b"].args == {"y": 2} and tools["b"].tool_name == "g"
    assert tools["zz"].tool_name == "other"  # choice 1, index 0: a different call
    assert s.view.status == "running" and s.view.phase == "awaiting-input"
    assert set(state["awaiting_tools"]) == {"a", "b", "zz"}
    assert not s.violations


def test_repeated_id_and_name_are_not_concatenated():
    # The SDK's accumulator would make "call_1call_1"; litellm repeats "type".
    frag = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a"'},
    }
    frag2 = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": ": 1}"},
    }
    s = Session().feed(
        [chunk({"tool_calls": [frag]}), chunk({"tool_calls": [frag2]}), chunk({}, "tool_calls")]
    )
    (tool,) = s.answer.parts
    assert (tool.tool_call_id, tool.tool_name, tool.args) == ("call_1", "f", {"a": 1})


def test_partial_arguments_are_never_shown():
    ups = decode_all(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"q": "'},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'x"}'}}]}),
        ]
    )
    msgs = [u.message for u in ups if isinstance(u, MessageUpdate)]
    assert (
        len(msgs) == 1 and msgs[0].parts[0].args is ABSENT
    )  # shown once, no args until the finish


def test_fragments_without_index_continue_the_last_call():
    s = Session().feed(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"a":'},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"function": {"arguments": " 1}"}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    assert s.answer.parts[0].args == {"a": 1}


@pytest.mark.parametrize(
    ("raw", "args"),
    [("", {}), ("{}", {}), ('{"a": [1]}', {"a": [1]}), ("[1, 2]", ABSENT), ('{"a": ', ABSENT)],
)
def test_arguments_are_parsed_once_complete(raw: str, args: Any):
    state: dict[str, Any] = {}
    decode_all(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": raw},
                        }
                    ]
                }
            ),
            chunk({}, "tool_calls"),
        ],
        state,
    )
    part = state["answer"].tool("c")
    assert thaw(part.args) == args if args is not ABSENT else part.args is ABSENT
    if args is ABSENT:
        assert state["invalid_args"] == {"c": raw}


def test_a_call_without_id_gets_one_from_the_response():
    s = Session().feed(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                },
                cid="chatcmpl-7",
            ),
            chunk({}, "tool_calls", cid="chatcmpl-7"),
        ]
    )
    assert s.answer.parts[0].tool_call_id == "chatcmpl-7:0:0"


def test_deprecated_function_call_form():
    s = Session().feed(
        [
            chunk({"function_call": {"name": "get", "arguments": '{"k"'}}),
            chunk({"function_call": {"arguments": ': "v"}'}}),
            chunk({}, "function_call"),
        ]
    )
    assert s.view.status == "running"  # the tool loop, like tool_calls
    (tool,) = s.answer.parts
    assert (tool.id, tool.tool_call_id, tool.tool_name, tool.args) == (
        "tool:function_call:0",
        "function_call:0",
        "get",
        {"k": "v"},
    )
    body = {
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "function_call": {}},
            {"role": "function", "name": "get", "content": "ok"},
        ]
    }
    s.feed(
        [tool_results_event(body), chunk({"content": "done"}, cid="2"), chunk({}, "stop", cid="2")]
    )
    assert s.view.status == "completed" and s.answer.parts[0].result == "ok"
    assert not s.violations


def test_tool_results_event_sets_results_once():
    state: dict[str, Any] = {}
    decode_all(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                }
            ),
            chunk({}, "tool_calls"),
        ],
        state,
    )
    p = OpenAIProtocol()
    ups = p.decode_event({"type": TOOL_RESULTS, "results": {"c": None, "unknown": 1}}, ctx(state))
    (u,) = ups
    assert u.message.parts[0].result is None  # an empty result, not absent (R6.4)
    assert state["awaiting_tools"] == ()
    assert (
        p.decode_event({"type": TOOL_RESULTS, "results": {"c": None}}, ctx(state)) == []
    )  # no change


def test_tool_results_from_body():
    body = {
        "messages": [
            {"role": "user", "content": "old"},
            {
                "role": "tool",
                "tool_call_id": "old",
                "content": "x",
            },  # before the last user message: another run
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "a", "content": '{"ok": true}'},
            {"role": "tool", "tool_call_id": "b", "content": "plain text"},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "[1]"}]},
        ]
    }
    assert thaw(tool_results_from_body(body)) == {"a": {"ok": True}, "b": "plain text", "c": [1]}
    responses = {
        "input": [
            {"role": "user", "content": "q"},
            {"type": "function_call_output", "call_id": "x", "output": "42"},
        ]
    }
    assert tool_results_from_body(responses) == {"x": 42}
    assert tool_results_from_body({"messages": [{"role": "user", "content": "q"}]}) == {}
    assert tool_results_event({"messages": []}) is None
    assert tool_results_event(body, "r9")["run_id"] == "r9"
    assert OpenAIProtocol.tool_results_from_body(body) == tool_results_from_body(body)


# --------------------------------------------------------------------------- conclusions


def test_done_is_never_a_conclusion_and_is_remembered():
    state: dict[str, Any] = {}
    assert decode_all([chunk({"content": "x"}), DONE], state) == [
        PhaseUpdate("generating"),
        MessageUpdate(state["answer"].message()),
    ]
    assert state["done"] is True
    assert decode_all(["[DONE]"], state) == []
    decode_all([chunk({"content": "y"}, cid="next")], state)  # the next response of the run
    assert state["done"] is False and state["responses"] == 2


@pytest.mark.parametrize("reason", ["stop", "length", "content_filter"])
def test_conclusive_finish_reasons(reason: str):
    ups = decode_all([chunk({}, reason)])
    assert ups == [CompletedUpdate()]


def test_unknown_finish_reason_is_reported_not_concluded():
    state: dict[str, Any] = {}
    assert (
        decode_all([chunk({"content": "x"}), chunk({}, "eos_token")], state)[-1]
        != CompletedUpdate()
    )
    assert state["unknown_finish"] == ["eos_token"]
    # litellm leaves the finish_reason key out instead of sending null
    assert (
        decode_all([{"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}])[
            -1
        ].message.text
        == "a"
    )


def test_usage_chunks_have_no_output():
    state: dict[str, Any] = {}
    decode_all([chunk({"content": "x"}), chunk({}, "tool_calls")], state)
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert decode_all([{"id": "chatcmpl-1", "choices": [], "usage": usage}], state) == []
    assert (
        decode_all(
            [{"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}}], "usage": usage}], state
        )
        == []
    )
    assert state["usage"] == usage


def test_error_frame_fails_with_a_string_code_and_one_sentence():
    ups = decode_all(
        [
            chunk({"content": "partial"}),
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o. Please try again in 20s.\nTrace: …",
                    "type": "requests",
                    "param": None,
                    "code": 429,
                }
            },
        ]
    )
    fail = ups[-1]
    assert isinstance(fail, FailedUpdate)
    err = fail.error
    assert (
        err.code == "429"
        and err.message == "Rate limit reached for gpt-4o."
        and err.retryable is True
    )
    assert err.cause["code"] == 429


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"message": "m", "type": "server_error", "code": None}, "server_error"),
        ({"message": "m", "type": None, "code": None}, "error"),
        ({"message": "m", "code": "500"}, "500"),
        ("just text", "error"),
        ({"code": "x"}, "x"),
    ],
)
def test_error_codes(error: Any, code: str):
    err = openai_run_error(error)
    assert err.code == code and err.message and err.code != "UNKNOWN"


def test_long_error_messages_are_cut():
    assert len(openai_run_error({"message": "x" * 1000, "code": "c"}).message) <= 300


def test_hermes_finish_error_fails_once():
    frame = chunk(
        {"content": "so far"}, "error", error={"message": "Model call failed.", "type": "upstream"}
    )
    ups = decode_all([frame])
    fails = [u for u in ups if isinstance(u, FailedUpdate)]
    assert len(fails) == 1 and fails[0].error.code == "upstream"
    (only,) = [u for u in decode_all([chunk({}, "error")]) if isinstance(u, FailedUpdate)]
    assert only.error.code == "error"


def test_frames_that_are_not_chunks_decode_to_nothing():
    for ev in (
        {"run_id": "r", "type": "run.started"},
        {"tool": "todo", "toolCallId": "c", "status": "running", "event": "hermes.tool.progress"},
        {"type": "response.output_item.added"},
        {"object": "list"},
        ["not", "an", "event"],
        None,
        42,
    ):
        assert decode_all([ev]) == []


def test_the_run_concludes_only_at_the_last_response_of_the_tool_loop():
    s = Session().feed(
        [
            chunk({"content": "Let me check."}, cid="a"),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                },
                cid="a",
            ),
            chunk({}, "tool_calls", cid="a"),
            DONE,
            {"type": TOOL_RESULTS, "results": {"c1": {"v": 1}}},
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                },
                cid="b",
            ),
            chunk({}, "tool_calls", cid="b"),
            DONE,
            {"type": TOOL_RESULTS, "results": {"c2": "ok"}},
            chunk({"content": "Done."}, cid="c"),
            chunk({}, "stop", cid="c"),
            DONE,
        ]
    )
    assert s.view.status == "completed" and not s.violations
    assert s.parts() == [
        ("text:0", "text"),
        ("tool:c1", "tool-call"),
        ("tool:c2", "tool-call"),
        ("text:1", "text"),
    ]


# --------------------------------------------------------------------------- Responses API details


def test_responses_tool_loop_and_server_run_tools():
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": "",
    }
    events = [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ": 1}"},
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "arguments": '{"a": 1}',
        },
        {"type": "response.output_item.done", "item": {**item, "arguments": '{"a": 1}'}},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
    ]
    s = Session().feed(events)
    assert s.view.status == "running" and s.view.phase == "awaiting-input"
    assert s.answer.parts[0].args == {"a": 1}
    s.feed(
        [
            tool_results_event(
                {
                    "input": [
                        {"role": "user", "content": "q"},
                        {"type": "function_call_output", "call_id": "call_1", "output": "{}"},
                    ]
                }
            ),
            {"type": "response.created", "response": {"id": "resp_2"}},
            {
                "type": "response.output_text.delta",
                "item_id": "msg_2",
                "content_index": 0,
                "delta": "Fine.",
            },
            {
                "type": "response.incomplete",
                "response": {"id": "resp_2", "incomplete_details": {"reason": "max_output_tokens"}},
            },
        ]
    )
    assert s.view.status == "completed" and not s.violations
    assert s.parts() == [("tool:call_1", "tool-call"), ("text:msg_2:0", "text")]


def test_responses_done_events_fill_in_parts_that_had_no_deltas():
    s = Session().feed(
        [
            {
                "type": "response.output_item.done",
                "item": {
                    "type": "message",
                    "id": "m",
                    "content": [{"type": "output_text", "text": "All at once."}],
                },
            },
            {
                "type": "response.output_item.done",
                "item": {
                    "type": "reasoning",
                    "id": "rs",
                    "summary": [{"type": "summary_text", "text": "why"}],
                },
            },
            {
                "type": "response.output_text.done",
                "item_id": "m",
                "content_index": 0,
                "text": "All at once.",
            },
            {"type": "response.completed", "response": {"id": "r"}},
        ]
    )
    assert s.parts() == [("text:m:0", "text"), ("reasoning:rs:s0", "reasoning")]
    assert s.view.status == "completed"


@pytest.mark.parametrize(
    ("event", "code"),
    [
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down."},
            "rate_limit_exceeded",
        ),
        (
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "code": None, "message": "Bad."},
            },
            "invalid_request_error",
        ),
        (
            {
                "type": "response.failed",
                "response": {"error": {"code": "server_error", "message": "Boom."}},
            },
            "server_error",
        ),
        ({"type": "response.failed", "response": {"error": None}}, "response.failed"),
    ],
)
def test_responses_failures(event: dict[str, Any], code: str):
    (u,) = decode_all([event])
    assert isinstance(u, FailedUpdate) and u.error.code == code and u.error.message


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize(
    ("event", "identity"),
    [
        ({"run_id": "r", "type": "run.started"}, EventIdentity("r", starts_run=True)),
        (
            {"run_id": "r", "choices": [{"delta": {"content": "x"}, "finish_reason": None}]},
            EventIdentity("r"),
        ),
        (
            {"run_id": "r", "choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]},
            EventIdentity("r", ends_response=True),
        ),
        (
            {
                "run_id": "r",
                "choices": [
                    {"index": 1, "delta": {}},
                    {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
                ],
            },
            EventIdentity("r", ends_response=True),
        ),
        ({"run_id": "r", "type": "response.completed"}, EventIdentity("r", ends_response=True)),
        ({"run_id": "r", "error": {"message": "m"}}, EventIdentity("r")),
        (
            {"choices": [{"delta": {}, "finish_reason": "stop"}]},
            None,
        ),  # no run_id: cannot route (R11.7)
        ({"run_id": "", "type": "run.started"}, None),
        (DONE, None),
        ("[DONE]", None),
    ],
)
def test_identify_event(event: Any, identity: EventIdentity | None):
    assert OpenAIProtocol().identify_event(event) == identity


def test_seed_subscription_example_decodes():
    # seed 003: publish({run_id, type: 'run.started'}); publish({run_id, choices: [{delta: {content}, finish_reason: 'stop'}]})
    s = Session().feed(
        [
            {"run_id": RUN, "type": "run.started"},
            {"run_id": RUN, "choices": [{"delta": {"content": "已收到"}, "finish_reason": "stop"}]},
        ]
    )
    assert s.view.status == "completed" and s.answer.text == "已收到"


# --------------------------------------------------------------------------- input and history


def test_encode_input_is_a_streaming_chat_completions_body():
    p = OpenAIProtocol(model="m1")
    assert p.encode_input({"text": "Hi"}, EncodeContext("s1", "r1")) == {
        "model": "m1",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
    }
    assert p.encode_input("Hi", EncodeContext("s1", "r1"))["messages"] == [
        {"role": "user", "content": "Hi"}
    ]
    assert p.encode_input({"text": "Hi", "model": "m2"}, EncodeContext("s1", "r1"))["model"] == "m2"
    full = OpenAIProtocol(
        model="m",
        tools=[{"type": "function", "function": {"name": "f"}}],
        system_prompt="Be brief.",
        include_usage=True,
    )
    body = full.encode_input({"text": "Hi"}, EncodeContext("s1", "r1"))
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (
        body["stream_options"] == {"include_usage": True}
        and body["tools"][0]["function"]["name"] == "f"
    )


def _history() -> tuple[RuntimeMessage, ...]:
    return (
        user_message("r0", "First?"),
        RuntimeMessage(
            "assistant:r0",
            "assistant",
            (
                TextPart("text:0", "Checking."),
                ToolCallPart("tool:a", "a", "f", args={"x": 1}, result={"ok": True}),
                ToolCallPart("tool:b", "b", "g", args={}, result="done"),
                ToolCallPart(
                    "tool:never", "never", "h"
                ),  # no result: not sent (OpenAI would reject it)
                TextPart("text:1", "Answer."),
            ),
            run_id="r0",
        ),
        RuntimeMessage("sys", "system", (TextPart("t", "divider"),)),
    )


def test_encode_input_sends_the_session_messages_before_the_run():
    body = OpenAIProtocol(model="m").encode_input(
        {"text": "Second?"}, EncodeContext("s1", "r1", _history())
    )
    assert body["messages"] == [
        {"role": "user", "content": "First?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": '{"ok": true}'},
        {"role": "tool", "tool_call_id": "b", "content": "done"},
        {"role": "assistant", "content": "Answer."},
        {"role": "user", "content": "Second?"},
    ]


def test_encode_input_tool_loop_continuation():
    msgs = (
        user_message("r1", "Plan."),
        RuntimeMessage(
            "assistant:r1",
            "assistant",
            (ToolCallPart("tool:c", "c", "todo", args={"a": 1}),),
            run_id="r1",
        ),
    )
    p = OpenAIProtocol(model="m")
    body = p.encode_input({"tool_results": {"c": {"ok": True}}}, EncodeContext("s1", "r1", msgs))
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "todo", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": '{"ok": true}'},
    ]
    assert p.decode_input(body) is None  # a continuation carries no user input
    assert tool_results_from_body(body) == {"c": {"ok": True}}


def test_encode_input_for_the_responses_api():
    p = OpenAIProtocol(model="m", api="responses")
    body = p.encode_input({"text": "Second?"}, EncodeContext("s1", "r1", _history()))
    assert body["stream"] is True and body["model"] == "m"
    types = [i.get("type", i.get("role")) for i in body["input"]]
    assert types == [
        "user",
        "assistant",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
    ]
    assert p.decode_input(body) == {"text": "Second?"}
    with pytest.raises(ValueError):
        OpenAIProtocol(api="legacy")


@pytest.mark.parametrize(
    "input", ["Hi there", {"text": "Hi there"}, [{"role": "user", "content": "Hi there"}]]
)
def test_decode_input_inverts_encode_input(input: Any):
    p = OpenAIProtocol()
    body = p.encode_input(input, EncodeContext("s1", "r1", _history()))
    assert p.decode_input(body) == {"text": "Hi there"}


def test_decode_input_edge_cases():
    p = OpenAIProtocol()
    assert p.decode_input(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}
            ]
        }
    ) == {"text": "a"}
    assert p.decode_input({"messages": []}) is None
    assert p.decode_input({"input": "plain"}) == {"text": "plain"}
    assert p.decode_input("nope") is None
    assert p.decode_input({"prompt": "legacy"}) is None


def test_project_input_is_the_user_message_of_the_id_scheme():
    p = OpenAIProtocol()
    (m,) = p.project_input({"text": "Hi"}, EncodeContext("s1", "r7"))
    assert m == RuntimeMessage("user:r7", "user", (TextPart("text", "Hi"),), run_id="r7")
    assert check_message(m) is None
    assert p.project_input({"tool_results": {"c": 1}}, EncodeContext("s1", "r7")) == []


def test_decode_history_reads_chatkits_history_result():
    value = {
        "messages": [
            {
                "id": "user:r1",
                "role": "user",
                "parts": [{"id": "text", "type": "text", "text": "hi"}],
                "runId": "r1",
            },
            {
                "id": "assistant:r1",
                "role": "assistant",
                "parts": [{"id": "text:0", "type": "text", "text": "yo"}],
                "runId": "r1",
            },
        ],
        "runSnapshots": [
            {
                "id": "r1",
                "origin": "remote",
                "status": "completed",
                "phase": "idle",
                "createdAt": 1,
                "workItems": {},
            }
        ],
        "activeRun": None,
        "session": {"id": "s1", "status": "idle"},
        "hasMore": False,
    }
    p = OpenAIProtocol()
    result = p.decode_history(value, "s1")
    assert (
        isinstance(result, HistoryResult)
        and result.messages[1].text == "yo"
        and result.active_run is None
    )
    assert p.decode_history(result, "s1") is result
    with pytest.raises(HistoryFormatError):
        p.decode_history({"messages": []}, "s1")  # hasMore is required


# --------------------------------------------------------------------------- fuzz

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_text = st.one_of(
    st.none(), st.text(max_size=6), st.integers(), st.lists(st.text(max_size=3), max_size=2)
)
_tool = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(0, 2), st.none(), st.text(max_size=2)),
        "id": st.one_of(st.sampled_from(["a", "b", ""]), st.none(), st.integers()),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(st.sampled_from(["f", "g", ""]), st.none()),
                "arguments": _text,
            },
        ),
    },
)
_delta = st.fixed_dictionaries(
    {},
    optional={
        "role": st.just("assistant"),
        "content": _text,
        "reasoning_content": _text,
        "reasoning": _text,
        "refusal": _text,
        "tool_calls": st.one_of(st.lists(_tool, max_size=3), _json),
        "function_call": st.one_of(
            st.fixed_dictionaries({}, optional={"name": _text, "arguments": _text}), _json
        ),
    },
)
_choice = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(0, 2), st.none(), st.booleans()),
        "delta": st.one_of(_delta, _json),
        "message": _delta,
        "finish_reason": st.one_of(
            st.none(),
            st.sampled_from(
                [
                    "stop",
                    "length",
                    "tool_calls",
                    "function_call",
                    "content_filter",
                    "error",
                    "weird",
                    "",
                ]
            ),
        ),
    },
)
_chunk = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["chatcmpl-a", "chatcmpl-b", None]),
        "object": st.sampled_from(["chat.completion.chunk", "chat.completion"]),
        "choices": st.one_of(st.lists(_choice, max_size=3), _json),
        "usage": _json,
        "error": st.one_of(
            st.none(),
            _json,
            st.fixed_dictionaries({"message": _text, "code": _json, "type": _json}),
        ),
        "run_id": st.one_of(st.none(), st.text(max_size=3)),
        "type": st.sampled_from(
            [
                "run.started",
                TOOL_RESULTS,
                "response.output_text.delta",
                "response.completed",
                "error",
            ]
        ),
        "results": _json,
    },
)
_response_event = st.builds(
    lambda t, extra: {"type": t, **extra},
    st.sampled_from(
        [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.output_text.delta",
            "response.output_text.done",
            "response.reasoning_summary_text.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.completed",
            "response.incomplete",
            "response.failed",
            "error",
        ]
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "item",
                "item_id",
                "delta",
                "text",
                "arguments",
                "response",
                "content_index",
                "output_index",
                "code",
                "message",
                "error",
            ]
        ),
        _json,
        max_size=4,
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_chunk, _response_event, _json, st.just(DONE)), max_size=8))
def test_fuzz_decode_never_raises_and_messages_are_valid(events: list[Any]):
    p = OpenAIProtocol()
    c = ctx()
    for ev in events:
        for u in p.decode_event(ev, c):
            if isinstance(u, MessageUpdate):
                assert check_message(u.message) is None, u.message
            elif isinstance(u, FailedUpdate):
                assert isinstance(u.error, RunError) and u.error.code and u.error.message
        p.identify_event(ev)


def test_a_new_id_at_a_used_index_is_a_new_call():
    # Some servers number every call 0; the id tells the calls apart.
    def call(cid: str, args: str) -> dict[str, Any]:
        frag = {
            "index": 0,
            "id": cid,
            "type": "function",
            "function": {"name": "f", "arguments": args},
        }
        return chunk({"tool_calls": [frag]})

    s = Session().feed([call("a", '{"n": 1}'), call("b", '{"n": 2}'), chunk({}, "tool_calls")])
    assert [(p.tool_call_id, thaw(p.args)) for p in s.answer.parts] == [
        ("a", {"n": 1}),
        ("b", {"n": 2}),
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_chunk, _response_event, st.just(DONE)), max_size=10))
def test_fuzz_the_core_rejects_nothing_but_running_tools(events: list[Any]):
    # Whatever the server sends, the adapter's own facts are consistent: no delta
    # to a missing part, no invalid message; only a completion with a tool still
    # running (the server's contradiction, CK105) may be refused.
    s = Session().feed(events)
    assert {r.reason.value for _, r in s.results if r.violation} <= {"active-work"}
