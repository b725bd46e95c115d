"""A2A (Agent2Agent) JSON-RPC over SSE: the built-in ``a2a`` adapter.

Modelled on the real a2a-sdk 1.3 server (its captures: ``recordings/captures/a2a``), both
protocol versions: **1.0** (header ``A2A-Version: 1.0``; ``SendStreamingMessage``,
``GetTask``, ``CancelTask``, ``SubscribeToTask``, ``ListTasks``; results wrapped
as ``{task|message|statusUpdate|artifactUpdate}``, ``TASK_STATE_*`` /
``ROLE_*`` enums, no ``final``, default fields omitted) and **0.3** (no header;
``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``;
objects discriminated by ``kind``).  Decoding reads both shapes whatever
``version`` the instance was made with; ``version`` only chooses what
:meth:`A2AProtocol.encode_input` and :meth:`A2AProtocol.request` write (send
:attr:`A2AProtocol.headers` with them).

Id scheme (R4.3, R4.4; identical live, on resubscribe and from ``tasks/get``)
----------------------------------------------------------------------------
* An A2A **Message** (the user's, or an agent message carried in
  ``status.message``) is one chatkit message with id = its ``messageId``;
  role ``user`` for user/ROLE_USER, ``assistant`` otherwise; its
  ``metadata`` is kept as the message metadata.
* An **artifact** is one assistant message with id
  ``artifact:{taskId}:{artifactId}`` (artifact ids are only unique within a task).
* Part ids are per segment and named by the index of the segment's first
  A2A part in the message / artifact (every streamed chunk is one more part
  in the stored artifact, so live and history count alike):
  consecutive text parts form one ``text:{i}`` part, consecutive thought
  parts (ADK ``adk_thought``) one ``reasoning:{i}``; a data part is
  ``data:{i}`` (kind ``a2a.data``), a file part ``file:{i}`` (MediaPart), a
  tool call ``tool:{callId}``, anything else ``part:{i}`` (kind ``a2a.part``).
* The user message id is client-chosen: ``encode_input`` sends
  ``input["messageId"]`` or ``{runId}:user`` and ``project_input`` projects
  that id, so the Task frame's echo and ``tasks/get`` history agree with the
  projection.  ``contextId`` is sent as the session id, so the server's
  conversation *is* the session (R11.5).

Tool calls: A2A standardises none.  Data parts marked with ADK's convention
(part metadata ``adk_type: function_call`` with data ``{id, name, args}``,
``function_response`` with ``{id, name, response}``; google-adk's A2A bridge)
become a ToolCallPart in the calling message; the response sets its
``result`` (the calling message is re-emitted) and is not shown again.  Any
other data part - e.g. the a2a peer's ``{"toolCall": {...}}`` status message
and its ``tool-result-1`` artifact - is an ``a2a.data`` DataPart: chatkit
does not render an unregistered kind (R7.3), which is what the UI would do.

Frame -> updates
----------------
=========================================  ==============================================
frame (the envelope's result or error)     updates
=========================================  ==============================================
Task (first frame; resubscribe snapshot)   message per ``history`` entry, artifact and
                                           ``status.message`` that is new or changed,
                                           then as a status update of its state
status update, ``status.message``          message (``messageId``)
status ``working``                         phase ``generating`` (``tool`` while a call has
                                           no response), only when it changes
status ``submitted`` / ``unknown``         nothing
status ``completed``                       completed
status ``failed`` / ``rejected``           failed ``RunError(code=<state as sent>,
                                           message=<status message text>)``; without
                                           a text, a fallback that keeps what was
                                           sent (``fallback_error``: CK302)
status ``canceled``                        interrupted ``canceled``
status ``input-required`` / ``auth-req.``  interrupted ``input-required`` / ``auth-required``
artifact update ``append`` false/absent    message (the artifact, replaced whole)
artifact update ``append: true``           delta on the last text/reasoning segment when
                                           only that segment grew, else message (to an
                                           unknown artifact: starts it)
Message result (message-only reply)        message, completed (the SDK ends the exchange)
JSON-RPC ``error``                         failed ``RunError(str(code), message, cause=data)``
v0.3 ``final``                             nothing (end of reader only: identify_event's
                                           ``ends_response``)
DONE, non-objects, unknown results         nothing
=========================================  ==============================================

Decisions (also ``docs/decisions.md``, Adapters)
------------------------------------------------
* ``input-required`` / ``auth-required`` are conclusions of the *run*
  (interrupted), not of the task: the server closes the stream and the
  next user message continues the same task as a new chatkit run.
  ``canceled`` is interrupted; ``failed`` and ``rejected`` are failed.
* ``final`` is never a conclusion; a stream that ends without a terminal
  state (crash frame aside, which is a JSON-RPC error) decodes to nothing
  terminal (R3.4).
* contextId (R11.5): ``identify_event`` returns ``session_id=contextId`` so
  the factory's ``route()`` keeps other conversations' events out, and the
  pipeline admits a direct stream's foreign event under its own session so
  the Core says wrong-session (CK501).  ``check_context = True`` makes
  ``decode_event`` raise :class:`ContextMismatch` instead (a decode error
  that ends the read, R2.5), for callers without that check.
  History skips tasks of other contexts.
* History order: per task, ``history`` (user messages and superseded status
  messages), then ``artifacts``, then the current ``status.message`` - the
  SDK does not keep how status messages and artifact chunks interleaved.
  ``ListTasks`` pages are newest first; they are reversed.

Where the real server departs from SPEC R11.4
---------------------------------------------
* v1.0 has no ``final``; end of reader is the state (terminal or interrupted).
* A task outlives a run: an ``input-required`` follow-up streams the same
  ``taskId`` (no Task frame, no user echo), so a subscription routing by
  taskId meets a run it already settled (terminal-sealed).
* Run ids are minted by the server (uuid4): a client's local run id never
  equals the taskId, so history's run snapshots (keyed by taskId) cannot
  calibrate a local run unless a proxy unifies the ids (R11.5).
* No SSE ids, no cursor: resume is ``tasks/resubscribe`` (a Task snapshot,
  then live), so history reports an active task without an event id.
* A crash ends the stream with a JSON-RPC error frame (no taskId: it cannot be
  routed, R11.7) while ``tasks/get`` then shows ``failed`` without an error code.
* Tool activity has no standard shape (see above); google-adk's bridge also
  sends its final answer twice, as a status message and as an artifact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core import (
    ABSENT,
    ActiveRun,
    DataPart,
    HistoryFormatError,
    HistoryResult,
    HistoryRunSnapshot,
    MediaPart,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    SessionInfo,
    TextPart,
    ToolCallPart,
    freeze,
)
from ._limits import fallback_error
from ._protocol import AdapterProtocol, DecodeContext, EncodeContext, EventIdentity
from ._updates import (
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
    ProtocolUpdate,
)

__all__ = ["METHODS", "A2AProtocol", "ContextMismatch", "state_name", "unwrap"]

METHODS = {
    "1.0": {
        "send": "SendMessage",
        "stream": "SendStreamingMessage",
        "get": "GetTask",
        "cancel": "CancelTask",
        "resubscribe": "SubscribeToTask",
        "list": "ListTasks",
    },
    "0.3": {
        "send": "message/send",
        "stream": "message/stream",
        "get": "tasks/get",
        "cancel": "tasks/cancel",
        "resubscribe": "tasks/resubscribe",
    },
}
_SEND_METHODS = frozenset(
    m for v in METHODS.values() for k, m in v.items() if k in ("send", "stream")
)
_WRAPPERS = {
    "task": "task",
    "message": "message",
    "statusUpdate": "status",
    "artifactUpdate": "artifact",
}
_WRAPPER_KEYS = frozenset(_WRAPPERS)
_KINDS = {
    "task": "task",
    "message": "message",
    "status-update": "status",
    "artifact-update": "artifact",
}
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
_NO_META: Mapping[str, Any] = {}
INTERRUPTED = frozenset({"input-required", "auth-required"})


class ContextMismatch(ValueError):
    """An event of another A2A context reached this session's decoder (R11.5)."""


def state_name(raw: Any) -> str | None:
    """``TASK_STATE_INPUT_REQUIRED`` / ``input-required`` -> ``input-required``."""
    if not isinstance(raw, str) or not raw:
        return None
    s = raw.lower().removeprefix("task_state_").replace("_", "-")
    return "canceled" if s == "cancelled" else s


def _is_map(v: Any) -> bool:
    """``isinstance(v, Mapping)``, with JSON's dict checked first (the ABC check costs more)."""
    return type(v) is dict or (v is not None and isinstance(v, Mapping))


def unwrap(event: Any) -> tuple[str | None, Any]:
    """``(kind, object)`` of one frame in either version: kind is ``task``,
    ``message``, ``status``, ``artifact``, ``error`` or None (not A2A)."""
    if not _is_map(event):
        return None, None
    error = event.get("error")
    if error is not None and _is_map(error):
        return "error", error
    obj = event.get("result", event)
    if not _is_map(obj):
        return None, None
    kind = obj.get("kind")
    if type(kind) is str or isinstance(kind, str):
        return (_KINDS[kind], obj) if kind in _KINDS else (None, None)
    if len(obj) == 1:  # v1.0's usual shape: the wrapper key alone
        ((key, inner),) = obj.items()
        k = _WRAPPERS.get(key)
        if k is not None and _is_map(inner):
            return k, inner
    present = obj.keys() & _WRAPPER_KEYS  # v1.0: the one wrapper key an event has, found in C
    if present:
        for key, k in _WRAPPERS.items():  # in _WRAPPERS' order, as before; an absent key never matched
            if key in present and _is_map(obj[key]):
                return k, obj[key]
    if "taskId" in obj and _is_map(obj.get("status")):
        return "status", obj
    if "taskId" in obj and _is_map(obj.get("artifact")):
        return "artifact", obj
    if "id" in obj and _is_map(obj.get("status")):
        return "task", obj  # GetTask / CancelTask results are not wrapped
    if "messageId" in obj and isinstance(obj.get("parts"), list):
        return "message", obj
    return None, None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else []


# --------------------------------------------------------------------------- parts


def _norm(p: Any) -> tuple[str, Any]:
    """One A2A part (either version) as ``(kind, value)``."""
    if not _is_map(p):
        return "other", p
    meta = p.get("metadata")
    if not _is_map(meta):
        meta = _NO_META
    kind = p.get("kind")
    if isinstance(p.get("text"), str) and kind in (None, "text"):
        return ("reasoning" if meta.get("adk_thought") is True else "text"), p["text"]
    if "data" in p and kind in (None, "data"):
        data, adk = p["data"], meta.get("adk_type")
        if isinstance(data, Mapping) and adk == "function_call" and _str(data.get("name")):
            return "call", data
        if isinstance(data, Mapping) and adk == "function_response" and _str(data.get("id")):
            return "response", data
        return "data", data
    f = p.get("file") if kind == "file" else p
    if isinstance(f, Mapping) and (
        _str(f.get("uri")) or _str(f.get("url")) or "bytes" in f or "raw" in f
    ):
        url = _str(f.get("uri")) or _str(f.get("url"))
        return "file", {
            "mime": _str(f.get("mimeType"))
            or _str(f.get("mediaType"))
            or "application/octet-stream",
            "source": {"url": url} if url else {"data": f.get("bytes", f.get("raw"))},
            "name": _str(f.get("name")) or _str(f.get("filename")),
        }
    return "other", p


def _segments(
    owner: str, parts: list[tuple[str, Any]], calls: dict[str, str], results: dict[str, Any]
) -> list[Any]:
    out: list[Any] = []
    used: set[str] = set()
    for i, (kind, value) in enumerate(parts):
        if kind in ("text", "reasoning"):
            last = out[-1] if out else None
            if last is not None and last.type == kind and parts[i - 1][0] == kind:
                out[-1] = last.with_text(last.text + value)
            else:
                out.append((TextPart if kind == "text" else ReasoningPart)(f"{kind}:{i}", value))
            continue
        if kind == "response" and value["id"] in calls:
            continue  # shown as the call's result
        if kind == "call":
            cid = _str(value.get("id")) or f"{owner}:{i}"
            pid = f"tool:{cid}" if f"tool:{cid}" not in used else f"tool:{cid}:{i}"
            args = value.get("args")
            part: Any = ToolCallPart(
                pid,
                cid,
                value["name"],
                args=args if isinstance(args, Mapping) else ABSENT,
                result=results.get(cid, ABSENT),
            )
        elif kind == "file":
            part = MediaPart(
                f"file:{i}", value["mime"], value["source"], name=value["name"] or ABSENT
            )
        elif kind in ("data", "response"):
            part = DataPart(f"data:{i}", "a2a.data", value)
        else:
            part = DataPart(f"part:{i}", "a2a.part", value)
        used.add(part.id)
        out.append(part)
    return out


class _Book:
    """The chatkit messages of one task, built alike live and from history."""

    def __init__(self) -> None:
        self.parts: dict[Any, list[tuple[str, Any]]] = {}
        self.info: dict[Any, tuple[str, Any]] = {}
        self._built: dict[Any, RuntimeMessage] = {}
        #: text chunks appended to a built message's last part, not yet in it:
        #: (message id, run id, kind, chunks, part id), written when ``built`` is read
        self._growing: tuple[Any, str, str, list[str], str] | None = None
        self.calls: dict[str, Any] = {}  # tool call id -> message id
        self.results: dict[str, Any] = {}
        self.order: list[Any] = []

    @property
    def built(self) -> dict[Any, RuntimeMessage]:
        """The messages as last sent, by id, with the growing text's chunks
        written (:meth:`_append_text`)."""
        growing = self._growing
        if growing is not None:
            self._growing = None
            mid, chunks = growing[0], growing[3]
            prev = self._built[mid]
            self._built[mid] = prev.with_parts(prev.parts[:-1] + (prev.parts[-1].extend(chunks),))  # type: ignore[union-attr]  # a text part: _append_text checked it
        return self._built

    def _build(self, mid: Any, run_id: str) -> RuntimeMessage:
        role, meta = self.info[mid]
        parts = _segments(str(mid), self.parts[mid], self.calls, self.results)
        return RuntimeMessage(mid, role, tuple(parts), run_id=run_id, metadata=meta)

    def _emit(self, mid: Any, run_id: str, out: list[ProtocolUpdate]) -> None:
        msg = self._build(mid, run_id)
        if msg.parts and self.built.get(mid) != msg:
            self.built[mid] = msg
            out.append(MessageUpdate(msg))

    def _put(self, mid: Any, role: str, meta: Any, parts: list[tuple[str, Any]]) -> list[Any]:
        if mid not in self.parts:
            self.order.append(mid)
        self.parts[mid], self.info[mid] = parts, (role, meta)
        owners = []
        for i, (kind, value) in enumerate(parts):
            if kind == "call":
                self.calls.setdefault(_str(value.get("id")) or f"{mid}:{i}", mid)
            elif kind == "response" and value["id"] in self.calls:
                result = value.get("response")
                if self.results.get(value["id"], ABSENT) != result:
                    self.results[value["id"]] = result
                    owners.append(self.calls[value["id"]])
        return owners

    def message(self, msg: Mapping[str, Any], run_id: str, out: list[ProtocolUpdate]) -> None:
        role = "user" if msg.get("role") in ("user", "ROLE_USER") else "assistant"
        meta = msg.get("metadata")
        meta = meta if isinstance(meta, Mapping) and meta else ABSENT
        mid = msg.get("messageId")
        mid = mid if isinstance(mid, str) else None  # the Core rejects it: invalid-message
        for owner in self._put(mid, role, meta, [_norm(p) for p in _list(msg.get("parts"))]):
            if owner != mid:
                self._emit(owner, run_id, out)
        self._emit(mid, run_id, out)

    def artifact(
        self,
        task_id: Any,
        art: Mapping[str, Any],
        append: bool,
        run_id: str,
        out: list[ProtocolUpdate],
    ) -> None:
        mid = f"artifact:{task_id}:{art.get('artifactId')}"
        new = [_norm(p) for p in _list(art.get("parts"))]
        old = self.parts.get(mid) if append else None
        if old and new and self._append_text(mid, old, new, run_id, out):
            return
        for owner in self._put(mid, "assistant", ABSENT, (old or []) + new):
            if owner != mid:
                self._emit(owner, run_id, out)
        prev, msg = self.built.get(mid), self._build(mid, run_id)
        if old is not None and prev is not None and _grown(prev, msg):
            delta = msg.parts[-1].text[len(prev.parts[-1].text) :]  # type: ignore[union-attr]  # _grown: both end in a text part
            self.built[mid] = msg
            if delta:
                out.append(DeltaUpdate(mid, msg.parts[-1].id, delta))
            return
        self._emit(mid, run_id, out)

    def _append_text(
        self, mid: str, old: list[tuple[str, Any]], new: list[tuple[str, Any]], run_id: str, out: list[ProtocolUpdate]
    ) -> bool:
        """The streaming fast path: text chunks appended to an artifact whose
        last segment is text of the same kind grow that segment by a delta in
        O(chunk), instead of rebuilding every segment (which made a long
        answer quadratic).  Gives exactly what :func:`_segments` would.

        Consecutive chunks to the same message's text are kept as chunks and
        written into its last part when ``built`` is read (one new part and
        message, not one per chunk)."""
        growing = self._growing
        if growing is not None and growing[0] == mid and growing[1] == run_id and len(new) == 1 and new[0][0] == growing[2]:
            old.extend(new)  # this book's own list: appended in place
            delta = new[0][1]
            if delta:
                growing[3].append(delta)
                out.append(DeltaUpdate(mid, growing[4], delta))
            return True
        kind = old[-1][0]
        prev = self.built.get(mid)
        if (
            kind not in ("text", "reasoning")
            or prev is None
            or not prev.parts
            or prev.parts[-1].type != kind
        ):
            return False
        if len(new) == 1:  # one chunk per event: the streaming case
            if new[0][0] != kind:
                return False
            delta = new[0][1]
        elif any(k != kind for k, _ in new):
            return False
        else:
            delta = "".join(v for _, v in new)
        old.extend(new)  # this book's own list: appended in place
        if not delta:
            return True
        if prev.run_id == run_id and prev.created_at is None and not prev.extra:
            # the same fields, nothing to freeze again: the chunk waits in _growing
            part_id = prev.parts[-1].id
            self._growing = (mid, run_id, kind, [delta], part_id)
            out.append(DeltaUpdate(mid, part_id, delta))
            return True
        last = prev.parts[-1].append(delta)  # type: ignore[union-attr]  # checked above: the last part is a text part of this kind
        parts = prev.parts[:-1] + (last,)
        self.built[mid] = RuntimeMessage(prev.id, prev.role, parts, run_id=run_id, metadata=prev.metadata)
        out.append(DeltaUpdate(mid, last.id, delta))
        return True

    def task(self, task: Mapping[str, Any], run_id: str, out: list[ProtocolUpdate]) -> None:
        for m in _list(task.get("history")):
            if isinstance(m, Mapping):
                self.message(m, run_id, out)
        for a in _list(task.get("artifacts")):
            if isinstance(a, Mapping):
                self.artifact(task.get("id"), a, False, run_id, out)
        status = task.get("status")
        if isinstance(status, Mapping) and isinstance(status.get("message"), Mapping):
            self.message(status["message"], run_id, out)

    def pending_call(self) -> bool:
        return any(cid not in self.results for cid in self.calls)

    def messages(self, run_id: str) -> list[RuntimeMessage]:
        return [m for m in (self._build(mid, run_id) for mid in self.order) if m.parts]


def _grown(prev: RuntimeMessage, msg: RuntimeMessage) -> bool:
    """Only the last text/reasoning part of ``prev`` grew (a delta can say it)."""
    if len(prev.parts) != len(msg.parts) or not msg.parts or prev.parts[:-1] != msg.parts[:-1]:
        return False
    a, b = prev.parts[-1], msg.parts[-1]
    return (
        isinstance(b, (TextPart, ReasoningPart))
        and type(a) is type(b)
        and a.id == b.id
        and b.text.startswith(a.text)
    )


def _text(msg: Any) -> str:
    if not isinstance(msg, Mapping):
        return ""
    return "".join(
        p["text"]
        for p in _list(msg.get("parts"))
        if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )


def _status_error(status: Mapping[str, Any], st: str, *, live: bool = False) -> RunError:
    text = _text(status.get("message"))
    if text.strip():
        return RunError(str(status.get("state")), text)
    default = "the task failed" if st == "failed" else "the agent rejected the task"
    if live:
        # The state is no reason: the backend sent none (CK302); the UI gets a fallback.
        return fallback_error(str(status.get("state")), default, sent=status.get("message"))
    return RunError(str(status.get("state")), default)


def _snapshot(run_id: Any, status: Any) -> HistoryRunSnapshot | None:
    status = status if isinstance(status, Mapping) else {}
    st = state_name(status.get("state"))
    if st == "completed":
        return HistoryRunSnapshot(run_id, "completed")
    if st in ("failed", "rejected"):
        return HistoryRunSnapshot(run_id, "failed", error=_status_error(status, st))
    if st == "canceled" or st in INTERRUPTED:
        return HistoryRunSnapshot(run_id, "interrupted", interrupt_reason=st)
    return None


def _tasks(value: Any) -> tuple[list[Any], str | None]:
    """The Task objects of a tasks/get | GetTask | ListTasks answer (or a list of them)."""
    if isinstance(value, list):
        tasks: list[Any] = []
        for item in value:
            tasks += _tasks(item)[0]
        return tasks, None
    if not isinstance(value, Mapping):
        raise HistoryFormatError(
            f"A2A history must be a Task or a JSON-RPC response, not {type(value).__name__}"
        )
    if isinstance(value.get("error"), Mapping):
        err = value["error"]
        raise HistoryFormatError(f"A2A history call failed: {err.get('code')} {err.get('message')}")
    if "result" in value:
        return _tasks(value["result"])
    if isinstance(value.get("tasks"), list):  # ListTasks: newest first
        return list(reversed(value["tasks"])), _str(value.get("nextPageToken"))
    kind, obj = unwrap(value)
    if kind == "task":
        return [obj], None
    raise HistoryFormatError("A2A history holds no Task")


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _json(body: Any) -> Any:
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


class A2AProtocol(AdapterProtocol):
    """A2A JSON-RPC + SSE (v1.0 and v0.3); see the module docstring."""

    name = "a2a"
    #: chatkit's words on this wire (decisions.md 279)
    wire_terms = {
        "completed": "a `status-update` with `state: completed` and `final: true` (or a Task in that state)",
        "failed": "state `failed` or `rejected`, or a JSON-RPC `error`",
        "interrupted": "state `canceled` (after `tasks/cancel`), `input-required` or `auth-required`",
        "output": "`artifact-update` parts and `status-update` messages",
        "event id": "nothing: JSON-RPC over SSE has no `id:` lines (a resubscribe replays from the task)",
    }
    wire_examples = {
        "CK101": "POST / message/stream                              SSE\n"
        '  data: {"result":{"kind":"status-update","status":{"state":"completed"},"final":true}}   completed\n'
        '  data: {"result":{"kind":"artifact-update","artifact":{"parts":[{"text":"late"}]}}}   after the terminal',
        "CK102": "POST / message/stream                              SSE\n"
        '  data: {"result":{"kind":"status-update","status":{"state":"working"},"final":false}}\n'
        "  (the stream ends: no status-update with a final state and final: true)",
        "CK105": "POST / message/stream                              SSE\n"
        '  data: {"result":{"kind":"status-update","status":{"state":"working","message":{"parts":[{"kind":"data",'
        '"data":{"id":"c1","name":"search"},"metadata":{"adk_type":"function_call"}}]}}}}\n'
        '  data: {"result":{"kind":"status-update","status":{"state":"completed"},"final":true}}   rejected: active-work',
        "CK302": "POST / message/stream                              SSE\n"
        '  data: {"result":{"kind":"status-update","status":{"state":"failed"},"final":true}}   no message: no reason',
    }
    #: Raise :class:`ContextMismatch` for an event of another context (R11.5).
    #: A caller that checks ``identify_event``'s session itself and admits such
    #: events under their own session (so the Core rejects them wrong-session)
    #: sets this to False.
    check_context: bool = False
    #: the last event :meth:`_unwrap` read and what it found (a class default:
    #: a subclass that skips ``__init__`` still has it)
    _last: tuple[Any, tuple[str | None, Any]] = (None, (None, None))

    def __init__(self, version: str = "1.0") -> None:
        if version not in METHODS:
            raise ValueError(f"A2A version must be one of {sorted(METHODS)}, not {version!r}")
        self.version = version

    @property
    def headers(self) -> dict[str, str]:
        """Request headers that select this version (a missing header means 0.3)."""
        return {"A2A-Version": "1.0"} if self.version == "1.0" else {}

    def request(self, method: str, params: Any, request_id: Any) -> dict[str, Any]:
        """A JSON-RPC request; ``method`` is a logical name (stream, get, cancel …) or literal."""
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": METHODS[self.version].get(method, method),
            "params": params,
        }

    # -- input ---------------------------------------------------------------

    def user_message(self, input: Any, ctx: EncodeContext) -> dict[str, Any]:
        """The A2A user message for ``input`` (a string or ``{text, messageId?,
        parts?, taskId?, contextId?, metadata?}``), in this version's shape."""
        fields = (
            input if isinstance(input, Mapping) else {"text": "" if input is None else str(input)}
        )
        v10 = self.version == "1.0"
        parts = fields.get("parts")
        if not isinstance(parts, list):
            text = str(fields.get("text", ""))
            parts = [{"text": text}] if v10 else [{"kind": "text", "text": text}]
        msg: dict[str, Any] = {} if v10 else {"kind": "message"}
        msg.update(
            messageId=_str(fields.get("messageId")) or f"{ctx.run_id}:user",
            role="ROLE_USER" if v10 else "user",
            parts=parts,
            contextId=_str(fields.get("contextId")) or ctx.session_id,
        )
        if _str(fields.get("taskId")):
            msg["taskId"] = fields["taskId"]
        if isinstance(fields.get("metadata"), Mapping):
            msg["metadata"] = fields["metadata"]
        return msg

    def encode_input(self, input: Any, ctx: EncodeContext) -> Any:
        return self.request("stream", {"message": self.user_message(input, ctx)}, ctx.run_id)

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        book = _Book()
        out: list[ProtocolUpdate] = []
        book.message(self.user_message(input, ctx), ctx.run_id, out)
        return [u.message for u in out if isinstance(u, MessageUpdate)]

    def decode_input(self, body: Any) -> Any:
        req = _json(body)
        if not isinstance(req, Mapping) or req.get("method") not in _SEND_METHODS:
            return None
        params = req.get("params")
        msg = params.get("message") if isinstance(params, Mapping) else None
        if not isinstance(msg, Mapping):
            return None
        out: dict[str, Any] = {"text": _text(msg), "parts": _list(msg.get("parts"))}
        for key in ("messageId", "taskId", "contextId", "metadata"):
            if msg.get(key) is not None:
                out[key] = msg[key]
        return out

    # -- events --------------------------------------------------------------

    def _unwrap(self, event: Any) -> tuple[str | None, Any]:
        """:func:`unwrap`, once per event: the pipeline asks ``identify_event``
        and then ``decode_event`` about the same event, one after the other.
        (The last event is kept, so its identity cannot be another's.)"""
        last = self._last
        if last[0] is event:
            return last[1]
        out = unwrap(event)
        self._last = (event, out)
        return out

    def identify_event(self, event: Any) -> EventIdentity | None:
        kind, obj = self._unwrap(event)
        if kind is None or kind == "error":
            return None  # a JSON-RPC error frame names no task (R11.7)
        task_id = _str(obj.get("id") if kind == "task" else obj.get("taskId"))
        if task_id is None:
            return None
        status = obj.get("status")
        st = state_name(status.get("state")) if _is_map(status) else None
        return EventIdentity(
            run_id=task_id,
            session_id=_str(obj.get("contextId")),
            starts_run=st in ("submitted", "working"),
            ends_response=kind == "message"
            or obj.get("final") is True
            or st in TERMINAL
            or st in INTERRUPTED,
        )

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        kind, obj = self._unwrap(event)
        if kind is None:
            return []
        if kind == "error":
            code, message = obj.get("code"), obj.get("message")
            if code is None:
                return [FailedUpdate(freeze(obj))]  # the Core's to_run_error judges it (UNKNOWN)
            return [
                FailedUpdate(
                    RunError(
                        str(code),
                        message if isinstance(message, str) else "",
                        cause=freeze(obj["data"]) if obj.get("data") is not None else ABSENT,
                    )
                )
            ]
        context = _str(obj.get("contextId"))
        if self.check_context and context is not None and context != ctx.session_id:
            raise ContextMismatch(
                f"A2A contextId {context!r} is not this session {ctx.session_id!r} (R11.5)"
            )
        book = ctx.state.get("book")
        if book is None:
            book = ctx.state["book"] = _Book()
        out: list[ProtocolUpdate] = []
        if kind == "message":
            book.message(obj, ctx.run_id, out)
            return [*out, CompletedUpdate()]
        if kind == "artifact":
            if _is_map(obj.get("artifact")):
                book.artifact(
                    obj.get("taskId"), obj["artifact"], obj.get("append") is True, ctx.run_id, out
                )
            return out
        status = obj.get("status")
        if kind == "task":
            book.task(obj, ctx.run_id, out)
        elif isinstance(status, Mapping) and isinstance(status.get("message"), Mapping):
            book.message(status["message"], ctx.run_id, out)
        if not isinstance(status, Mapping):
            return out
        st = state_name(status.get("state"))
        if st == "working":
            phase = "tool" if book.pending_call() else "generating"
            if ctx.state.get("phase") != phase:
                ctx.state["phase"] = phase
                out.append(PhaseUpdate(phase))
        elif st == "completed":
            out.append(CompletedUpdate())
        elif st in ("failed", "rejected"):
            out.append(FailedUpdate(_status_error(status, st, live=True)))
        elif st == "canceled" or st in INTERRUPTED:
            out.append(InterruptedUpdate(st))
        return out

    # -- history -------------------------------------------------------------

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        tasks, cursor = _tasks(value)
        messages: list[RuntimeMessage] = []
        snapshots: list[HistoryRunSnapshot] = []
        active: ActiveRun | None = None
        last: str | None = None
        for task in tasks:
            if not isinstance(task, Mapping) or not _str(task.get("id")):
                raise HistoryFormatError("an A2A task must be an object with an id")
            if _str(task.get("contextId")) not in (None, session_id):
                continue  # another conversation's task (R11.5)
            book: _Book = _Book()
            book.task(task, task["id"], [])
            messages += book.messages(task["id"])
            snap = _snapshot(task["id"], task.get("status"))
            if snap is not None:
                snapshots.append(snap)
                last = snap.status
            elif state_name(_status(task).get("state")) in ("submitted", "working"):
                active, last = ActiveRun(task["id"]), "running"
        status = {"running": "running", "failed": "error"}.get(last or "", "idle")
        return HistoryResult(
            messages=tuple(messages),
            has_more=cursor is not None,
            run_snapshots=tuple(snapshots),
            active_run=active,
            session=SessionInfo(session_id, "running" if active else status),
            cursor=cursor if cursor is not None else ABSENT,
        )

    def decode_status(self, value: Any, session_id: str, run_id: str) -> HistoryRunSnapshot | None:
        """A ``tasks/get`` / ``tasks/cancel`` answer as ``run_id``'s snapshot, once finished."""
        try:
            tasks, _ = _tasks(value)
        except HistoryFormatError:
            return None
        task = tasks[0] if tasks and isinstance(tasks[0], Mapping) else {}
        return _snapshot(run_id, task.get("status"))
