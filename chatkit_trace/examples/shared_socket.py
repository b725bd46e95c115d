"""A shared-WebSocket protocol: one socket, many sessions (chatkit's third way).

chatkit offers three ways to send and receive (seed 003): one endpoint that
streams the run, separate endpoints (send + a per-session subscription), and
a **shared WebSocket**: ``run`` sends over the socket, ``subscribe`` returns
the session's event sequence from that same socket, one socket serves several
sessions, and every event names its session and run.  This adapter decodes
such a backend (``tests/integration/shared_socket_backend.py`` is one; its
profile is ``shared_socket.toml`` next to this file)::

    client -> server
    {"type": "subscribe", "sessionId": "s1"}                        subscribe (and resubscribe, with "after")
    {"type": "run", "sessionId": "s1", "runId": "r1", "input": {"text": "hi"}}
    {"type": "stop", "sessionId": "s1", "runId": "r1"}
    server -> client (every event: sessionId, runId, eventId)
    {"type": "run.started", …}
    {"type": "text.delta", "messageId": "m-r1", "delta": "…", …}
    {"type": "run.completed" | "run.interrupted", …}
    {"type": "run.failed", "error": {"code": "…", "message": "…"}, …}

History is ``GET /sessions/{sessionId}/history``::

    {"sessionId": "s1", "messages": [{"id", "role", "runId", "text"}],
     "runs": [{"id", "status", "error"?}]}

Id scheme (R4.3): the user message is ``user:{runId}`` (projected at dispatch
from the run message's ``input``, R4.5), the answer is the backend's
``messageId`` with one text part ``text``; history uses the same ids.

Use it with ``--profile chatkit_trace.examples.shared_socket:SharedSocket``
(its profile file comes with it) or a profile file naming it as ``protocol``.
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
    InterruptedUpdate,
    MessageUpdate,
    ProtocolUpdate,
)
from ..core import ABSENT, HistoryResult, HistoryRunSnapshot, RunError, RuntimeMessage, SessionInfo, TextPart

__all__ = ["SharedSocket", "EVENT_TYPES"]

#: Every server event type the protocol has.
EVENT_TYPES = ("run.started", "text.delta", "run.completed", "run.failed", "run.interrupted")
_ENDS = ("run.completed", "run.failed", "run.interrupted")


def _text(input: Any) -> str:
    if isinstance(input, Mapping):
        return str(input.get("text", ""))
    return str(input or "")


def _user(run_id: str, text: str) -> RuntimeMessage:
    return RuntimeMessage(f"user:{run_id}", "user", (TextPart("text", text),), run_id=run_id)


def _error(value: Any) -> RunError:
    err = value if isinstance(value, Mapping) else {}
    return RunError(str(err.get("code", "")), str(err.get("message", "")))


class SharedSocket(AdapterProtocol):
    """The shared-socket protocol above."""

    name = "shared-socket"
    profile = "shared_socket.toml"

    def encode_input(self, input: Any, ctx: EncodeContext) -> Any:
        return {"type": "run", "sessionId": ctx.session_id, "runId": ctx.run_id, "input": {"text": _text(input)}}

    def decode_input(self, body: Any) -> Any:
        if isinstance(body, Mapping):
            inner = body.get("input", body)
            if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                return {"text": inner["text"]}
        return None

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        return [_user(ctx.run_id, _text(input))]

    def identify_event(self, event: Any) -> EventIdentity | None:
        if not isinstance(event, Mapping) or not isinstance(event.get("runId"), str):
            return None
        kind = event.get("type")
        session = event.get("sessionId")
        event_id = event.get("eventId")
        return EventIdentity(
            run_id=event["runId"],
            session_id=session if isinstance(session, str) else None,
            starts_run=kind == "run.started",
            ends_response=kind in _ENDS,
            # a WebSocket message has no outer id: the event's own deduplicates (R11.7)
            event_id=event_id if isinstance(event_id, str) else None,
        )

    def event_limits(self, event: Any) -> tuple[str, ...]:
        """``run.started`` has no field for the run's input: a run another
        client started shows no user message live (CK505, once per route)."""
        if isinstance(event, Mapping) and event.get("type") == "run.started":
            return (PASSIVE_INPUT,)
        return ()

    def event_known(self, event: Any) -> bool:
        return isinstance(event, Mapping) and event.get("type") in EVENT_TYPES

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        if not isinstance(event, Mapping):
            return []
        kind = event.get("type")
        if kind == "text.delta":
            mid = str(event.get("messageId") or f"assistant:{ctx.run_id}")
            text = ctx.state.get(mid, "") + str(event.get("delta", ""))
            ctx.state[mid] = text
            return [MessageUpdate(RuntimeMessage(mid, "assistant", (TextPart("text", text),), run_id=ctx.run_id))]
        if kind == "run.completed":
            return [CompletedUpdate()]
        if kind == "run.failed":
            return [FailedUpdate(_error(event.get("error")))]
        if kind == "run.interrupted":
            return [InterruptedUpdate("user")]
        return []

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        if not isinstance(value, Mapping) or not isinstance(value.get("messages"), list):
            raise ValueError("history has no messages")
        messages = []
        for m in value["messages"]:
            if not isinstance(m, Mapping):
                continue
            run_id = str(m.get("runId", ""))
            if m.get("role") == "user":
                messages.append(_user(run_id, str(m.get("text", ""))))
            else:
                messages.append(RuntimeMessage(str(m.get("id")), "assistant", (TextPart("text", str(m.get("text", ""))),),
                                               run_id=run_id))
        snapshots = []
        for run in value.get("runs") or ():
            if not isinstance(run, Mapping) or run.get("status") == "running":
                continue
            snapshots.append(HistoryRunSnapshot(
                id=str(run.get("id")), status=run.get("status"), origin="remote", phase="idle",
                error=_error(run["error"]) if isinstance(run.get("error"), Mapping) else ABSENT,
                interrupt_reason="protocol" if run.get("status") == "interrupted" else ABSENT,
            ))
        running = any(isinstance(r, Mapping) and r.get("status") == "running" for r in value.get("runs") or ())
        return HistoryResult(messages=tuple(messages), has_more=False, run_snapshots=tuple(snapshots),
                             session=SessionInfo(session_id, "running" if running else "idle"))
