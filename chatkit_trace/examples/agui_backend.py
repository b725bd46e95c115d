"""A scripted AG-UI backend built on the real ``ag-ui-protocol`` package.

Needs ``pip install ag-ui-protocol`` (in chatkit-trace's ``test`` extra).
Every event is one of the library's event classes and goes out through its
``EventEncoder`` (SSE ``data:`` lines), every request is validated as its
``RunAgentInput``, so what the adapter decodes is what a Python AG-UI agent
server sends.

Scenarios (:func:`script`): ``text`` (one answer), ``tool`` (text, a tool call
with arguments in two fragments and its result, a second text message),
``fail`` (some text, then ``RUN_ERROR``), ``slow`` (text, then the stream
stays open until the client closes it), ``frontend`` (a tool call the agent
leaves for the application to answer: ``RUN_FINISHED`` with
``pendingToolCallIds``).

Two ways to serve them:

* :func:`create_backend` ``(kind)``: capability functions for
  :func:`~chatkit_trace.adapters.create_adapter` (the conformance suite's
  scripted backend): ``run``, ``regenerate`` and ``edit`` (the client sends
  the conversation it keeps, so a regenerate's ``messages`` end before the
  target: the backend stores what it is sent, which truncates) and
  ``history``.  No ``abort``: AG-UI's stop is the client closing the stream
  (``stop="close"`` in the harness); the agent then records the run
  ``interrupted``.
* :func:`make_app`: an aiohttp application (``POST /agent``, ``GET
  /threads/{threadId}/messages``) whose scenario is the user's text (``tool``,
  ``fail``, ``slow``, ``frontend``; anything else is ``text``), for recording
  through a real mitmdump.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.encoder import EventEncoder

from ..adapters import HistoryRequestArgs, RunRequest
from ..runtime import Response

__all__ = ["KINDS", "Thread", "create_backend", "make_app", "script"]

KINDS = ("text", "tool", "fail", "slow", "frontend")


def _text(mid: str, *chunks: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=mid, role="assistant"),
        *(TextMessageContentEvent(message_id=mid, delta=c) for c in chunks),
        TextMessageEndEvent(message_id=mid),
    ]


def script(kind: str, thread_id: str, run_id: str) -> list[BaseEvent]:
    """The events of one scenario, ``RUN_STARTED`` first.  Message ids are
    the backend's own (``{runId}:m1`` …), as an agent server mints them."""
    started = RunStartedEvent(thread_id=thread_id, run_id=run_id)
    finished = RunFinishedEvent(thread_id=thread_id, run_id=run_id)
    m1, m2 = f"{run_id}:m1", f"{run_id}:m2"
    if kind == "fail":
        return [started, *_text(m1, "Let me "), RunErrorEvent(code="RATE_LIMITED", message="Too many requests")]
    if kind == "slow":
        return [started, TextMessageStartEvent(message_id=m1, role="assistant"), TextMessageContentEvent(message_id=m1, delta="Working on it")]
    if kind == "tool":
        return [
            started,
            *_text(m1, "Let me look that up."),
            ToolCallStartEvent(tool_call_id="call-1", tool_call_name="lookup", parent_message_id=m1),
            ToolCallArgsEvent(tool_call_id="call-1", delta='{"q": '),
            ToolCallArgsEvent(tool_call_id="call-1", delta='"a"}'),
            ToolCallEndEvent(tool_call_id="call-1"),
            ToolCallResultEvent(message_id=f"{run_id}:t1", tool_call_id="call-1", content='{"hits": 1}', role="tool"),
            *_text(m2, "Found 1 result."),
            finished,
        ]
    if kind == "frontend":
        return [
            started,
            *_text(m1, "Please confirm in the browser."),
            ToolCallStartEvent(tool_call_id="call-fe", tool_call_name="confirm", parent_message_id=m1),
            ToolCallArgsEvent(tool_call_id="call-fe", delta='{"question": "Proceed?"}'),
            ToolCallEndEvent(tool_call_id="call-fe"),
            RunFinishedEvent(
                thread_id=thread_id, run_id=run_id, outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["call-fe"])
            ),
        ]
    return [started, *_text(m1, "This is ", "the answer"), finished]


class Thread:
    """One conversation as an agent server keeps it: AG-UI messages and runs."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.messages: list[Any] = []
        self.runs: list[dict[str, Any]] = []

    def start(self, body: Any) -> RunAgentInput:
        """Validate the request as the library's RunAgentInput; keep the
        conversation the client sent (a regenerate sends it truncated)."""
        data = RunAgentInput.model_validate(body)
        self.messages = list(data.messages)
        self.runs = [r for r in self.runs if r["runId"] != data.run_id]
        self.runs.append({"runId": data.run_id, "status": "running"})
        return data

    def _run(self, run_id: str) -> dict[str, Any]:
        return next(r for r in self.runs if r["runId"] == run_id)

    def apply(self, event: BaseEvent, run_id: str) -> None:
        """Persist what an event adds, as the agent's own store would."""
        # the event's type names its class (ag_ui's events carry a literal type)
        t = event.type.value
        if t == "TEXT_MESSAGE_START":
            started = cast(TextMessageStartEvent, event)
            self.messages.append(AssistantMessage(id=started.message_id, content=""))
        elif t == "TEXT_MESSAGE_CONTENT":
            content = cast(TextMessageContentEvent, event)
            msg = next(m for m in self.messages if m.id == content.message_id)
            msg.content = (msg.content or "") + content.delta
        elif t == "TOOL_CALL_START":
            call_start = cast(ToolCallStartEvent, event)
            msg = next(m for m in self.messages if m.id == call_start.parent_message_id)
            call = ToolCall(id=call_start.tool_call_id, function=FunctionCall(name=call_start.tool_call_name, arguments=""))
            msg.tool_calls = [*(msg.tool_calls or []), call]
        elif t == "TOOL_CALL_ARGS":
            args = cast(ToolCallArgsEvent, event)
            for m in self.messages:
                for c in getattr(m, "tool_calls", None) or []:
                    if c.id == args.tool_call_id:
                        c.function.arguments += args.delta
        elif t == "TOOL_CALL_RESULT":
            result = cast(ToolCallResultEvent, event)
            self.messages.append(ToolMessage(id=result.message_id, tool_call_id=result.tool_call_id, content=result.content))
        elif t == "RUN_FINISHED":
            self._run(run_id)["status"] = "completed"
        elif t == "RUN_ERROR":
            failed = cast(RunErrorEvent, event)
            self._run(run_id).update(status="failed", error={"code": failed.code, "message": failed.message})

    def closed(self, run_id: str) -> None:
        """The client went away: the agent stops and records the run cancelled."""
        run = self._run(run_id)
        if run["status"] == "running":
            run.update(status="interrupted", reason="cancelled")

    def history(self) -> dict[str, Any]:
        return {
            "threadId": self.thread_id,
            "messages": [m.model_dump(mode="json", by_alias=True) for m in self.messages],
            "runs": list(self.runs),
        }


async def stream(thread: Thread, kind: str, run_id: str) -> AsyncIterator[bytes]:
    """The SSE body of one run, through the library's encoder."""
    encoder = EventEncoder()
    try:
        for event in script(kind, thread.thread_id, run_id):
            thread.apply(event, run_id)
            yield encoder.encode(event).encode()
            await asyncio.sleep(0)
        if kind == "slow":
            await asyncio.Event().wait()  # until the client closes the stream
    finally:
        thread.closed(run_id)


def create_backend(kind: str) -> dict[str, Any]:
    """Capability functions acting out scenario ``kind`` (see the module docstring)."""
    threads: dict[str, Thread] = {}

    async def run(request: RunRequest) -> Response:
        thread = threads.setdefault(request.session_id, Thread(request.session_id))
        data = thread.start(request.body)
        return Response(200, stream(thread, kind, data.run_id), {"content-type": EventEncoder().get_content_type()})

    async def history(request: HistoryRequestArgs) -> Response:
        thread = threads.setdefault(request.session_id, Thread(request.session_id))
        return Response(200, json.dumps(thread.history()).encode(), {"content-type": "application/json"})

    return {"run": run, "regenerate": run, "edit": run, "history": history}


def make_app() -> Any:
    """An aiohttp app speaking AG-UI: ``POST /agent`` and ``GET /threads/{id}/messages``."""
    from aiohttp import web

    threads: dict[str, Thread] = {}

    async def agent(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        thread = threads.setdefault(str(body.get("threadId")), Thread(str(body.get("threadId"))))
        data = thread.start(body)
        last = data.messages[-1] if data.messages else None
        text = last.content if last is not None and last.role == "user" and isinstance(last.content, str) else ""
        kind = text if text in KINDS else "text"
        resp = web.StreamResponse(headers={"Content-Type": EventEncoder().get_content_type(), "Cache-Control": "no-cache"})
        await resp.prepare(request)
        async for chunk in stream(thread, kind, data.run_id):
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    async def messages(request: web.Request) -> web.Response:
        thread = threads.setdefault(request.match_info["thread"], Thread(request.match_info["thread"]))
        return web.json_response(thread.history())

    app = web.Application()
    app.router.add_post("/agent", agent)
    app.router.add_get("/threads/{thread}/messages", messages)
    return app
