"""The seed's "my protocol" example adapter, rewritten in Python.

A hypothetical SSE protocol used to show how an adapter is written: each
event is one ``id:`` (event number) plus one ``data:`` JSON line::

    {"type": "started", "run": "r1"}                 the backend's run id
    {"type": "text", "text": "…"}                    a piece of answer text
    {"type": "tool", "id": "c1", "name": "lookup", "args": {…}}
    {"type": "tool_result", "id": "c1", "result": …}
    {"type": "done"}                                 the run completed
    {"type": "error", "code": "…", "message": "…", "retryable"?: bool}

Routes (chatkit's example): ``POST /sessions/{sid}/runs`` (run),
``GET /sessions/{sid}/runs/{rid}/events?after=`` (resume),
``POST /sessions/{sid}/runs/{rid}/stop`` (abort), ``GET /sessions/{sid}/runs``
(history: ``{"runs": [{id, status, input, created_at, frames, error?}]}``).

Id scheme (R4.3, R4.4): the answer is ``assistant:{runId}``; text parts are
``text:{segment}`` where a tool call opens a new segment; tool calls are
``tool:{toolCallId}``; the user message is ``user:{runId}`` with part
``text``.  Live and history build messages with the same :class:`Answer`, so
a refresh never renders anything twice.

Register it like any custom adapter: ``--profile
chatkit_trace.examples.my_protocol:MyProtocol`` (or the short name
``myproto``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..adapters import (
    PASSIVE_INPUT,
    AdapterProtocol,
    CompletedUpdate,
    DecodeContext,
    EncodeContext,
    EventIdentity,
    FailedUpdate,
    MessageUpdate,
    ProtocolUpdate,
)
from ..core import ABSENT, ActiveRun, HistoryResult, HistoryRunSnapshot, RunError, RuntimeMessage, SessionInfo, TextPart, ToolCallPart, freeze

__all__ = ["MyProtocol", "Answer", "to_user_message", "input_text"]


def input_text(input: Any) -> str:
    if isinstance(input, Mapping):
        return str(input.get("text", ""))
    return str(input or "")


class Answer:
    """One answer's content; live and history both build it (same ids)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.parts: list[Any] = []
        self.segment = 0
        self._pid = "text:0"  # f"text:{self.segment}", made once per segment
        self._empty: RuntimeMessage | None = None  # the answer without parts: to_message's template

    @property
    def message_id(self) -> str:
        return f"assistant:{self.run_id}"

    def append_text(self, text: str) -> str:
        pid = self._pid
        parts = self.parts
        for i in range(len(parts) - 1, -1, -1):  # ids are unique: the last part matches first when text streams
            part = parts[i]
            if part.id == pid:
                # Objects handed to the Core are frozen: replace, never mutate
                # (R13.1).  append() makes the longer part in O(1), sharing its
                # chunks with this one (part.text + text copied the whole text).
                parts[i] = part.append(text)
                return pid
        parts.append(TextPart(pid, text))
        return pid

    def apply_tool(self, event: Mapping[str, Any]) -> None:
        pid = f"tool:{event['id']}"
        if event["type"] == "tool":
            self.parts.append(
                ToolCallPart(pid, str(event["id"]), str(event["name"]), args=freeze(event.get("args", {})))
            )
            self.segment += 1
            self._pid = f"text:{self.segment}"
            return
        for i, part in enumerate(self.parts):
            if part.id == pid and isinstance(part, ToolCallPart):
                self.parts[i] = ToolCallPart(
                    part.id, part.tool_call_id, part.tool_name, args=part.args, result=freeze(event.get("result"))
                )

    def to_message(self) -> RuntimeMessage:
        empty = self._empty
        if empty is None:
            empty = self._empty = RuntimeMessage(self.message_id, "assistant", (), run_id=self.run_id)
        # The same value RuntimeMessage(...) builds, its frozen fields copied
        # from the template (one message per text event: issue 18).
        return empty.with_parts(tuple(self.parts))


def to_user_message(run_id: str, text: str) -> RuntimeMessage:
    return RuntimeMessage(f"user:{run_id}", "user", (TextPart("text", text),), run_id=run_id)


def _advance(event: Mapping[str, Any], answer: Answer) -> bool:
    """Apply a content event to ``answer``; False for any other event."""
    kind = event.get("type")
    if kind == "text":
        answer.append_text(str(event.get("text", "")))
    elif kind in ("tool", "tool_result"):
        answer.apply_tool(event)
    else:
        return False
    return True


def _apply(event: Mapping[str, Any], answer: Answer) -> list[ProtocolUpdate]:
    if _advance(event, answer):
        return [MessageUpdate(answer.to_message())]
    kind = event.get("type")
    if kind == "done":
        return [CompletedUpdate()]
    if kind == "error":
        error = RunError(
            str(event.get("code", "")), str(event.get("message", "")), event.get("retryable")
        )
        return [FailedUpdate(error)]
    return []  # started; unknown events decode to [] (R2.4)


class MyProtocol(AdapterProtocol):
    """The seed's ``createMyAdapter`` protocol."""

    name = "myproto"
    #: chatkit's words on this wire (decisions.md 279); rules.md's examples are in this protocol
    wire_terms = {
        "completed": '`{"type":"done"}`',
        "failed": '`{"type":"error","code":…,"message":…}`',
        "interrupted": "nothing: the example protocol has no interrupted event",
        "output": '`{"type":"text"}` (the whole text so far), `{"type":"tool"}`, `{"type":"tool_result"}`',
        "event id": "the SSE `id:` of every event",
    }

    def encode_input(self, input: Any, ctx: EncodeContext) -> Any:
        return {"text": input_text(input)}

    def decode_input(self, body: Any) -> Any:
        if isinstance(body, Mapping) and isinstance(body.get("text"), str):
            return {"text": body["text"]}
        return None

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        return [to_user_message(ctx.run_id, input_text(input))]

    def identify_event(self, event: Any) -> EventIdentity | None:
        if not (type(event) is dict or isinstance(event, Mapping)) or not event.get("run"):
            return None
        kind = event.get("type")
        return EventIdentity(
            run_id=str(event["run"]), starts_run=kind == "started", ends_response=kind in ("done", "error")
        )

    def event_known(self, event: Any) -> bool:
        return (type(event) is dict or isinstance(event, Mapping)) and event.get("type") in ("started", "text", "tool", "tool_result", "done", "error")

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        if type(event) is not dict and not isinstance(event, Mapping):  # a dict first: the ABC check costs more
            return []
        answer = ctx.state.get("answer")
        if answer is None:
            answer = ctx.state["answer"] = Answer(ctx.run_id)
        return _apply(event, answer)

    def event_limits(self, event: Any) -> tuple[str, ...]:
        """A ``started`` event has no field for the run's input: a run another
        client started shows no user message live (CK505, once per route)."""
        if (type(event) is dict or isinstance(event, Mapping)) and event.get("type") == "started":
            return (PASSIVE_INPUT,)
        return ()

    def history_event_ids(self, value: Any, session_id: str) -> dict[str, list[str]]:
        """History lists each run's frames with their event ids (``frames[].id``)."""
        out: dict[str, list[str]] = {}
        if isinstance(value, Mapping) and isinstance(value.get("runs"), list):
            for run in value["runs"]:
                if not isinstance(run, Mapping) or not isinstance(run.get("id"), str):
                    continue
                listed = run.get("frames")
                frames = listed if isinstance(listed, list) else []
                out[run["id"]] = [str(f["id"]) for f in frames if isinstance(f, Mapping) and f.get("id") is not None]
        return out

    def history_state(self, value: Any, session_id: str) -> dict[str, dict[str, Any]]:
        """A running run's answer so far, so resumed events continue it (R8.3)."""
        out: dict[str, dict[str, Any]] = {}
        if isinstance(value, Mapping) and isinstance(value.get("runs"), list):
            for run in value["runs"]:
                if isinstance(run, Mapping) and run.get("status") == "running":
                    answer = Answer(run["id"])
                    for frame in run.get("frames", []):
                        _advance(frame.get("event", {}), answer)
                    out[run["id"]] = {"answer": answer}
        return out

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        if not isinstance(value, Mapping) or not isinstance(value.get("runs"), list):
            raise ValueError("history has no runs")
        messages: list[RuntimeMessage] = []
        snapshots: list[HistoryRunSnapshot] = []
        active: ActiveRun | None = None
        runs = value["runs"]
        for run in runs:
            answer = Answer(run["id"])
            for frame in run.get("frames", []):
                _advance(frame.get("event", {}), answer)
            messages.append(to_user_message(run["id"], run.get("input", "")))
            if answer.parts:
                messages.append(answer.to_message())
            if run.get("status") == "running":
                frames = run.get("frames") or []
                last = frames[-1].get("id") if frames else None
                active = ActiveRun(run["id"], last)
            else:
                err = run.get("error")
                snapshots.append(
                    HistoryRunSnapshot(
                        id=run["id"],
                        status=run.get("status"),
                        origin="remote",
                        phase="idle",
                        created_at=run.get("created_at"),
                        error=RunError(str(err.get("code", "")), str(err.get("message", "")))
                        if isinstance(err, Mapping)
                        else ABSENT,
                        interrupt_reason="protocol" if run.get("status") == "interrupted" else ABSENT,
                    )
                )
        status = "running" if active else ("error" if runs and runs[-1].get("status") == "failed" else "idle")
        return HistoryResult(
            messages=tuple(messages),
            has_more=False,
            run_snapshots=tuple(snapshots),
            active_run=active,
            session=SessionInfo(session_id, status),
        )

