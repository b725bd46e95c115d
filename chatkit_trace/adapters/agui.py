"""AG-UI (the Agent-User Interaction protocol, ``ag-ui-protocol`` 1.0) as a
chatkit adapter.  The worked example of docs/adapters.md.

Wire: the client POSTs a ``RunAgentInput`` (``threadId``, ``runId``,
``messages`` (the conversation so far, the new user message last),
``tools``, ``context``, ``state``, ``forwardedProps``) to the agent's URL; the
answer is an SSE stream whose ``data:`` lines are the events, each with a
``type``.  No SSE ``id:`` lines, no resume, no abort endpoint (a stop is the
client closing the stream), no history endpoint in the protocol.

Events (decoded by ``type``; every AG-UI event type is *known*, CK406 is only
for types the protocol does not have):

=========================  ====================================================
``RUN_STARTED``            nothing to show
``TEXT_MESSAGE_START``     a message ``messageId`` (role ``assistant`` unless
                           given; ``developer`` is ``system``) with an empty
                           text part ``text``
``TEXT_MESSAGE_CONTENT``   a delta on part ``text`` of ``messageId``
``TEXT_MESSAGE_CHUNK``     start and content in one (``messageId`` may be
                           left out after the first chunk of a message)
``REASONING_MESSAGE_*``    the same with a reasoning part ``reasoning``
``TOOL_CALL_START``        a tool-call part ``tool:{toolCallId}`` in the
                           message ``parentMessageId`` (else a message of its
                           own named ``toolCallId``), running, no args yet
``TOOL_CALL_ARGS``/``END`` the argument fragments, parsed at the end
``TOOL_CALL_CHUNK``        start and arguments in one
``TOOL_CALL_RESULT``       the part's ``result`` (the ``content`` string as
                           sent; the tool message is folded into the call,
                           as chatkit models a tool result, R6.2)
``RUN_FINISHED``           ``completed``; ``interrupted`` (reason
                           ``pending-tool-calls``) when tool calls of the run
                           have no result (frontend tools the application
                           answers in its next run, ``pendingToolCallIds``);
                           ``interrupt`` / ``cancelled`` outcomes are
                           ``interrupted`` with that reason
``RUN_ERROR``              ``failed`` with ``code`` and ``message`` as sent
                           (no ``code``: the Core's ``UNKNOWN``, CK302)
everything else            nothing (state, steps, activity, custom, raw …)
=========================  ====================================================

Id scheme (R4.3, R4.4): message ids are AG-UI's own ``messageId`` (the
backend mints them, so a history that stores them gives the same ids);
part ids are ``text``, ``reasoning`` and ``tool:{toolCallId}``; the user
message is the ``messages`` item ``encode_input`` sends, ``user:{runId}``
with part ``text``, which ``project_input`` shows at once (R4.5).  One run
may answer in several messages (one per text message): declare
``multi_message_answers`` in the conformance harness.

History: AG-UI has no history endpoint.  A backend that offers one can
answer with a list of AG-UI messages, or ``{"messages": [...], "runs":
[{"runId", "status": "completed|failed|interrupted|running", "error"?:
{"code", "message"}}]}`` (chatkit-trace's convention: the run snapshots let a
refresh settle a run, R8.1); ``decode_history`` reads both, tool messages
folded into their calls as live.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import (
    ABSENT,
    HistoryResult,
    HistoryRunSnapshot,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    SessionInfo,
    TextPart,
    ToolCallPart,
    freeze,
)
from ._protocol import AdapterProtocol, DecodeContext, EncodeContext
from ._updates import CompletedUpdate, DeltaUpdate, FailedUpdate, InterruptedUpdate, MessageUpdate, ProtocolUpdate

__all__ = ["AGUIProtocol", "EVENT_TYPES", "input_text", "to_agui_messages"]

#: Every event type of AG-UI 1.0 (``ag_ui.core.EventType``).
EVENT_TYPES = frozenset(
    {
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TEXT_MESSAGE_CHUNK",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_CHUNK", "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT", "STATE_DELTA", "MESSAGES_SNAPSHOT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
        "RAW", "CUSTOM", "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
        "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END",
        "REASONING_MESSAGE_CHUNK", "REASONING_END", "REASONING_ENCRYPTED_VALUE",
        "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR",
        # before 1.0 (the TypeScript client still translates them)
        "THINKING_START", "THINKING_END", "THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
    }
)
_ROLES = {"assistant": "assistant", "user": "user", "system": "system", "developer": "system", "tool": "tool"}


def input_text(input: Any) -> str:
    """The user's text in a chat input: a string or ``{"text": …}``."""
    if isinstance(input, Mapping):
        return str(input.get("text", ""))
    return "" if input is None else str(input)


def _content_text(content: Any) -> str:
    """An AG-UI ``content``: a string, or a list of parts whose text parts count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def _args(text: str) -> Any:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return ABSENT
    return freeze(value) if isinstance(value, dict) else ABSENT


def to_agui_messages(messages: Sequence[RuntimeMessage]) -> list[dict[str, Any]]:
    """The session's chatkit messages as AG-UI ``messages`` (what a run sends)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        text = "".join(p.text for p in m.parts if isinstance(p, TextPart))
        if m.role == "user":
            out.append({"id": m.id, "role": "user", "content": text})
        elif m.role == "system":
            out.append({"id": m.id, "role": "system", "content": text})
        elif m.role == "assistant":
            calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
            msg: dict[str, Any] = {"id": m.id, "role": "assistant"}
            if text:
                msg["content"] = text
            if calls:
                msg["toolCalls"] = [
                    {
                        "id": p.tool_call_id,
                        "type": "function",
                        "function": {
                            "name": p.tool_name,
                            "arguments": json.dumps(p.to_json().get("args", {})),
                        },
                    }
                    for p in calls
                ]
            out.append(msg)
            for p in calls:
                if p.result is not ABSENT:
                    result = p.to_json().get("result")
                    out.append(
                        {
                            "id": f"result:{p.tool_call_id}",
                            "role": "tool",
                            "toolCallId": p.tool_call_id,
                            "content": result if isinstance(result, str) else json.dumps(result),
                        }
                    )
    return out


class _Answer:
    """The messages one run builds, by AG-UI message id (decode state, R2.7)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._messages: dict[str, tuple[str, list[Any]]] = {}  # id -> (role, parts)
        #: deltas to one text part not yet in it: (message id, part id, index, chunks)
        self._growing: tuple[str, str, int, list[str]] | None = None
        self.tools: dict[str, str] = {}  # toolCallId -> message id
        self.args: dict[str, str] = {}  # toolCallId -> argument text so far
        self.last_text: str | None = None  # the message a TEXT_MESSAGE_CHUNK without id continues
        self.last_reasoning: str | None = None

    @property
    def messages(self) -> dict[str, tuple[str, list[Any]]]:
        """id -> (role, parts), with the growing part's deltas written (:meth:`text`)."""
        growing = self._growing
        if growing is not None:
            self._growing = None
            mid, _, i, chunks = growing
            parts = self._messages[mid][1]
            parts[i] = parts[i].extend(chunks)
        return self._messages

    def message(self, mid: str) -> MessageUpdate:
        role, parts = self.messages[mid]
        return MessageUpdate(RuntimeMessage(mid, role, tuple(parts), run_id=self.run_id))

    def open(self, mid: str, role: str = "assistant") -> list[Any]:
        if mid not in self.messages:
            self.messages[mid] = (role, [])
        return self.messages[mid][1]

    def text(self, mid: str, part_id: str, kind: type[Any], delta: str, role: str = "assistant") -> list[ProtocolUpdate]:
        growing = self._growing
        if growing is not None and growing[1] == part_id and growing[0] == mid:
            # The part the last delta grew: this one joins its chunks, written
            # into the part when the messages are read (one new part, not one per delta).
            if not delta:
                return []
            growing[3].append(delta)
            return [DeltaUpdate(mid, part_id, delta)]
        messages = self.messages
        entry = messages.get(mid)  # open(), inlined: once per text event
        if entry is None:
            entry = messages[mid] = (role, [])
        parts = entry[1]
        for i in range(len(parts) - 1, -1, -1):  # part ids are unique: the streaming part is usually the last
            p = parts[i]
            if p.id == part_id:
                if not delta:
                    return []
                # frozen: replace, never mutate (R13.1); the chunks are appended
                # to the part's buffer (O(1) each), where rebuilding from
                # p.text + delta copied the whole text per delta
                if type(p) is kind and not p.extra:
                    self._growing = (mid, part_id, i, [delta])
                else:
                    parts[i] = kind(part_id, p.text + delta)
                return [DeltaUpdate(mid, part_id, delta)]
        parts.append(kind(part_id, delta))
        return [self.message(mid)]

    def tool(self, call_id: str, name: str, parent: str | None) -> list[ProtocolUpdate]:
        if call_id in self.tools:
            return []
        mid = parent or call_id
        self.tools[call_id] = mid
        self.open(mid).append(ToolCallPart(f"tool:{call_id}", call_id, name))
        return [self.message(mid)]

    def update_tool(self, call_id: str, **changes: Any) -> list[ProtocolUpdate]:
        mid = self.tools.get(call_id)
        if mid is None:
            return []
        parts = self.messages[mid][1]
        for i, p in enumerate(parts):
            if isinstance(p, ToolCallPart) and p.tool_call_id == call_id:
                fields = {
                    "args": p.args,
                    "status": p.status,
                    "result": p.result,
                    **changes,
                }
                parts[i] = ToolCallPart(p.id, p.tool_call_id, p.tool_name, **fields)
                return [self.message(mid)]
        return []

    def pending_tools(self) -> list[str]:
        out = []
        for call_id, mid in self.tools.items():
            for p in self.messages[mid][1]:
                if isinstance(p, ToolCallPart) and p.tool_call_id == call_id and p.result is ABSENT:
                    out.append(call_id)
        return out


class AGUIProtocol(AdapterProtocol):
    """AG-UI 1.0 (``--profile agui``)."""

    name = "agui"
    #: chatkit's words on this wire (decisions.md 279)
    wire_terms = {
        "completed": "`RUN_FINISHED`",
        "failed": "`RUN_ERROR` (with `code` and `message`)",
        "interrupted": "`RUN_FINISHED` with an interrupt outcome",
        "output": "`TEXT_MESSAGE_CONTENT`, `TOOL_CALL_*` events",
        "event id": "SSE `id:` lines when the server sends them",
    }

    # -- requests --------------------------------------------------------------------

    def encode_input(self, input: Any, ctx: EncodeContext) -> dict[str, Any]:
        """A ``RunAgentInput``: the conversation so far plus the new user message."""
        messages = to_agui_messages(ctx.messages)
        messages.append({"id": f"user:{ctx.run_id}", "role": "user", "content": input_text(input)})
        tools = list(input.get("tools", [])) if isinstance(input, Mapping) else []
        return {
            "threadId": ctx.session_id,
            "runId": ctx.run_id,
            "messages": messages,
            "tools": tools,
            "context": [],
            "state": dict(input.get("state", {})) if isinstance(input, Mapping) else {},
            "forwardedProps": {},
        }

    def decode_input(self, body: Any) -> Any:
        """The user text of a recorded ``RunAgentInput`` (its last message), or
        None when the run continues without new user input (the last message is
        a tool result: frontend tools answered)."""
        if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return None
        last = body["messages"][-1]
        if not isinstance(last, Mapping) or last.get("role") != "user":
            return None
        return {"text": _content_text(last.get("content"))}

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        return [RuntimeMessage(f"user:{ctx.run_id}", "user", (TextPart("text", input_text(input)),), run_id=ctx.run_id)]

    # -- events ------------------------------------------------------------------------

    def event_known(self, event: Any) -> bool:
        return isinstance(event, Mapping) and event.get("type") in EVENT_TYPES

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        # long-function: one branch per AG-UI event type, in the protocol's order
        if type(event) is not dict and not isinstance(event, Mapping):
            return []
        answer = ctx.state.get("answer")
        if answer is None:
            answer = ctx.state["answer"] = _Answer(ctx.run_id)
        kind = event.get("type")
        if kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            mid = event.get("messageId") or answer.last_text
            if not isinstance(mid, str) or not mid:
                return []
            answer.last_text = mid
            role = _ROLES.get(str(event.get("role") or "assistant"), "assistant")
            return answer.text(mid, "text", TextPart, str(event.get("delta") or ""), role)
        if kind in ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK"):
            mid = event.get("messageId") or answer.last_reasoning
            if not isinstance(mid, str) or not mid:
                return []
            answer.last_reasoning = mid
            return answer.text(mid, "reasoning", ReasoningPart, str(event.get("delta") or ""))
        if kind in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
            call_id = event.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                return []
            out = answer.tool(call_id, str(event.get("toolCallName") or ""), event.get("parentMessageId"))
            if kind == "TOOL_CALL_CHUNK" and event.get("delta"):
                answer.args[call_id] = answer.args.get(call_id, "") + str(event["delta"])
                args = _args(answer.args[call_id])
                if args is not ABSENT:
                    out = answer.update_tool(call_id, args=args)
            return out
        if kind == "TOOL_CALL_ARGS":
            call_id = event.get("toolCallId")
            if isinstance(call_id, str):
                answer.args[call_id] = answer.args.get(call_id, "") + str(event.get("delta") or "")
            return []
        if kind == "TOOL_CALL_END":
            call_id = event.get("toolCallId")
            if not isinstance(call_id, str):
                return []
            args = _args(answer.args.get(call_id, ""))
            if args is ABSENT:
                ctx.state.setdefault("invalid_args", {})[call_id] = answer.args.get(call_id, "")
                return []
            return answer.update_tool(call_id, args=args)
        if kind == "TOOL_CALL_RESULT":
            call_id = event.get("toolCallId")
            if not isinstance(call_id, str):
                return []
            return answer.update_tool(call_id, result=freeze(event.get("content")))
        if kind == "RUN_FINISHED":
            outcome: Any = event.get("outcome") if isinstance(event.get("outcome"), Mapping) else {}
            if outcome.get("type") in ("interrupt", "cancelled"):
                return [InterruptedUpdate(str(outcome["type"]))]
            if answer.pending_tools() or outcome.get("pendingToolCallIds"):
                return [InterruptedUpdate("pending-tool-calls")]
            return [CompletedUpdate()]
        if kind == "RUN_ERROR":
            code = event.get("code")
            return [FailedUpdate({"code": code, "message": event.get("message")} if code else dict(event))]
        return []  # known events without output, and unknown ones (R2.4)

    # -- history -----------------------------------------------------------------------

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        # long-function: one pass over a history's messages, one branch per AG-UI role
        runs: Any
        if isinstance(value, list):
            items, runs = value, []
        elif isinstance(value, Mapping) and isinstance(value.get("messages"), list):
            items, runs = value["messages"], value.get("runs") or []
        else:
            raise ValueError("AG-UI history is a list of messages or {messages: [...], runs?: [...]}")
        messages: list[RuntimeMessage] = []
        results = {
            m.get("toolCallId"): m.get("content")
            for m in items
            if isinstance(m, Mapping) and m.get("role") == "tool"
        }
        for m in items:
            if not isinstance(m, Mapping):
                continue
            role, mid = m.get("role"), str(m.get("id"))
            if role in ("user", "system", "developer"):
                messages.append(RuntimeMessage(mid, _ROLES[role], (TextPart("text", _content_text(m.get("content"))),)))
            elif role == "reasoning":
                messages.append(RuntimeMessage(mid, "assistant", (ReasoningPart("reasoning", _content_text(m.get("content"))),)))
            elif role == "assistant":
                parts: list[Any] = []
                if m.get("content"):
                    parts.append(TextPart("text", _content_text(m["content"])))
                for call in m.get("toolCalls") or []:
                    fn = call.get("function") or {}
                    cid = str(call.get("id"))
                    parts.append(
                        ToolCallPart(
                            f"tool:{cid}",
                            cid,
                            str(fn.get("name", "")),
                            args=_args(str(fn.get("arguments", ""))),
                            result=freeze(results[cid]) if cid in results else ABSENT,
                        )
                    )
                messages.append(RuntimeMessage(mid, "assistant", tuple(parts)))
        snapshots = []
        status = "idle"
        for run in runs:
            if not isinstance(run, Mapping):
                continue
            rid, st = str(run.get("runId") or run.get("id")), run.get("status")
            if st == "running":
                status = "running"
                continue
            err = run.get("error")
            snapshots.append(
                HistoryRunSnapshot(
                    id=rid,
                    status=st,
                    origin="remote",
                    phase="idle",
                    error=RunError(str(err.get("code", "")), str(err.get("message", ""))) if isinstance(err, Mapping) else ABSENT,
                    interrupt_reason=str(run.get("reason") or "protocol") if st == "interrupted" else ABSENT,
                )
            )
        return HistoryResult(
            messages=tuple(messages),
            has_more=False,
            run_snapshots=tuple(snapshots),
            session=SessionInfo(session_id, status),
        )
