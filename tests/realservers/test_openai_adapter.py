"""The ``openai`` adapter against the REAL litellm proxy (1.106.12) + scripted model.

Each test drives a ChatRuntime whose ``run`` capability POSTs the body
``encode_input`` built to the real proxy and hands the runtime the bytes the
proxy sent back.  The tool test is chatkit's OpenAI tool loop: after
``finish_reason: tool_calls`` the continuation body is built by
``encode_input({"tool_results": …})`` from the Core's own messages, sent under
the same run, and its tool results reach the adapter through
``tool_results_event``.  Every test asserts that the Core rejected no fact
except idempotently (R3.8).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chatkit_trace.adapters import EncodeContext, StreamEvent, create_adapter
from chatkit_trace.adapters.openai import OpenAIProtocol, tool_results_event
from chatkit_trace.core import ABSENT, ToolCallPart
from chatkit_trace.runtime import ChatRuntime, Response, stream_events

from .harness import TODO_TOOL_CHAT, TODO_TOOL_RESPONSES, OpenAIServer

pytestmark = pytest.mark.realserver

SESSION = "s-litellm"


def _violations(rt: ChatRuntime) -> list[str]:
    return [f"{type(f).__name__}: {r.reason} {r.detail}" for f, r in rt.fact_log if r.violation]


class Client:
    """A runtime whose run capability talks to the real proxy."""

    def __init__(
        self, srv: OpenAIServer, protocol: OpenAIProtocol, *, max_events: int | None = None
    ) -> None:
        self.srv = srv
        self.protocol = protocol
        self.max_events = max_events
        self.requests: list[dict[str, Any]] = []
        self.rt = ChatRuntime(create_adapter(protocol, run=self.run), SESSION)

    async def send(self, body: dict[str, Any]) -> Response:
        self.requests.append(body)
        path = "/v1/responses" if "input" in body else "/v1/chat/completions"
        raw = await asyncio.to_thread(
            self.srv.stream, "POST", path, body, max_events=self.max_events, timeout=60
        )
        return Response(raw.status, raw.body, dict(raw.headers))

    async def run(self, request: Any) -> Any:
        first = await self.send(request.body)
        if first.status >= 400:
            return first

        async def events() -> AsyncIterator[StreamEvent]:
            resp = first
            for _ in range(3):
                async for ev in stream_events(resp):
                    yield ev
                # The reader admitted every event before asking for the next one,
                # so the Core already shows this response's tool calls.
                messages = tuple(self.rt.core.snapshot.messages)
                pending = [
                    p
                    for m in messages
                    if m.run_id == request.run_id
                    for p in m.parts
                    if isinstance(p, ToolCallPart) and p.result is ABSENT
                ]
                view = self.rt.core.run_view(request.run_id)
                if not pending or view is None or view.terminal:
                    return
                results = {
                    p.tool_call_id: {"ok": True, "planned": len(p.args.get("todos", ()))}
                    for p in pending
                }
                body = self.protocol.encode_input(
                    {"tool_results": results}, EncodeContext(SESSION, request.run_id, messages)
                )
                yield StreamEvent(tool_results_event(body, request.run_id))
                resp = await self.send(body)

        return events()

    async def ask(self, text: str, timeout: float = 60.0) -> tuple[str, Any]:
        run_id = await self.rt.send({"text": text})
        # settled, refused (the Core dropped it), or its stream ended without a conclusion
        await self.rt.wait_for(
            lambda s: (v := s.run(run_id)) is None or v.terminal or v.connection == "disconnected",
            timeout,
        )
        return run_id, self.rt.core.snapshot


def _answer(snap: Any, run_id: str) -> Any:
    return next(m for m in snap.messages if m.id == f"assistant:{run_id}")


def _drive(
    srv: OpenAIServer, protocol: OpenAIProtocol, text: str, **kw: Any
) -> tuple[Client, str, Any]:
    client = Client(srv, protocol, **kw)

    async def go() -> tuple[str, Any]:
        try:
            return await client.ask(text)
        finally:
            await client.rt.close()

    run_id, snap = asyncio.run(go())
    return client, run_id, snap


def test_text(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(
        openai_peer, OpenAIProtocol(model="fake-text", include_usage=True), "Say hello."
    )
    assert snap.run(run_id).status == "completed"
    assert [m.id for m in snap.messages] == [f"user:{run_id}", f"assistant:{run_id}"]
    answer = _answer(snap, run_id)
    assert [(p.id, p.type) for p in answer.parts] == [("text:0", "text")]
    assert answer.text == "Hello from the fake model."
    assert _violations(client.rt) == []


def test_litellm_mock_model(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(openai_peer, OpenAIProtocol(model="mock-text"), "Say hello.")
    assert snap.run(run_id).status == "completed" and _answer(snap, run_id).text
    assert _violations(client.rt) == []


def test_tool_loop_is_one_run(openai_peer: OpenAIServer):
    protocol = OpenAIProtocol(model="fake-tool", tools=[TODO_TOOL_CHAT], include_usage=True)
    client, run_id, snap = _drive(openai_peer, protocol, "Plan one task.")
    assert len(client.requests) == 2  # the continuation went out under the same run
    continuation = client.requests[1]["messages"]
    assert [m["role"] for m in continuation] == ["user", "assistant", "tool"]
    assert protocol.decode_input(client.requests[1]) is None
    assert snap.run(run_id).status == "completed"
    assert _violations(client.rt) == []
    answer = _answer(snap, run_id)
    assert [m.id for m in snap.messages] == [f"user:{run_id}", f"assistant:{run_id}"]
    (tool,) = [p for p in answer.parts if isinstance(p, ToolCallPart)]
    assert [(p.id, p.type) for p in answer.parts] == [
        (f"tool:{tool.tool_call_id}", "tool-call"),
        ("text:0", "text"),
    ]
    assert tool.tool_name == "todo" and tool.args["todos"][0]["status"] == "pending"
    assert tool.result == {"ok": True, "planned": 1}
    assert answer.text.startswith("The tool said: ")


def test_reasoning(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(openai_peer, OpenAIProtocol(model="fake-reason"), "Think first.")
    assert snap.run(run_id).status == "completed"
    answer = _answer(snap, run_id)
    assert [(p.id, p.type) for p in answer.parts] == [
        ("reasoning:0", "reasoning"),
        ("text:1", "text"),
    ]
    assert answer.parts[0].text == "The user wants a short answer."
    assert _violations(client.rt) == []


def test_midstream_error(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(openai_peer, OpenAIProtocol(model="fake-midstream"), "Break.")
    view = snap.run(run_id)
    assert view.status == "failed"
    assert view.error.code == "500"  # litellm's code, as a string
    assert view.error.message and "\n" not in view.error.message
    assert _answer(snap, run_id).text == "Partial answer "
    assert _violations(client.rt) == []


def test_length_completes(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(openai_peer, OpenAIProtocol(model="fake-length"), "Long answer.")
    assert snap.run(run_id).status == "completed" and _violations(client.rt) == []


def test_client_stop_leaves_the_run_unsettled(openai_peer: OpenAIServer):
    client, run_id, snap = _drive(
        openai_peer, OpenAIProtocol(model="fake-slow"), "Talk slowly.", max_events=4
    )
    view = snap.run(run_id)
    assert view.status == "running"  # a closed stream never implies completed (R2.2, R3.4)
    assert view.connection == "disconnected"
    assert _answer(snap, run_id).text.startswith("tick0")
    assert _violations(client.rt) == []


def test_rate_limit_before_the_stream(openai_peer: OpenAIServer):
    _client, run_id, snap = _drive(
        openai_peer, OpenAIProtocol(model="mock-ratelimit"), "Say hello."
    )
    assert snap.run(run_id) is None  # HTTP 429: the dispatch did not complete (R2.2)
    raw = openai_peer.chat("mock-ratelimit", "Say hello.")
    assert raw.status == 429
    (failed,) = OpenAIProtocol().decode_event(raw.json(), _ctx())
    assert failed.error.code == "429" and failed.error.retryable is True


def _ctx() -> Any:
    from chatkit_trace.adapters import DecodeContext

    return DecodeContext(SESSION, "r", None, {})


@pytest.mark.parametrize(
    ("model", "status", "kinds"),
    [
        ("bridge-text", "completed", ["text"]),
        ("bridge-reason", "completed", ["reasoning", "text"]),
        ("bridge-midstream", "failed", ["text"]),
    ],
)
def test_responses_api_bridge(openai_peer: OpenAIServer, model: str, status: str, kinds: list[str]):
    protocol = OpenAIProtocol(model=model, api="responses")
    client, run_id, snap = _drive(openai_peer, protocol, "Say hello.")
    assert snap.run(run_id).status == status
    assert [p.type for p in _answer(snap, run_id).parts] == kinds
    assert _violations(client.rt) == []


def test_responses_api_tool_loop(openai_peer: OpenAIServer):
    """The same loop over /v1/responses: function_call_output items in the continuation."""
    protocol = OpenAIProtocol(model="bridge-tool", api="responses", tools=[TODO_TOOL_RESPONSES])
    client, run_id, snap = _drive(openai_peer, protocol, "Plan one task.")
    assert len(client.requests) == 2
    assert [i.get("type", i.get("role")) for i in client.requests[1]["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]
    assert snap.run(run_id).status == "completed"
    assert _violations(client.rt) == []
    answer = _answer(snap, run_id)
    (tool,) = [p for p in answer.parts if isinstance(p, ToolCallPart)]
    assert tool.tool_name == "todo" and tool.args["todos"][0]["id"] == "1"
    assert tool.result == {"ok": True, "planned": 1}
    assert [p.type for p in answer.parts] == ["tool-call", "text"]
