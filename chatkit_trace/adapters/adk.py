"""Google ADK ``adk api_server`` over HTTP: ``POST /run_sse`` + ``GET`` session.

Built against the real google-adk 2.13 source (``cli/api_server.py``,
``utils/streaming_utils.py``, ``events/event.py``, ``runners.py``) and
captures of a real server (``recordings/captures/adk``).

Wire: plain ``data: <Event JSON>`` SSE frames, no ``event:``/``id:`` lines, no
start/end/terminal frame (the response just ends); the user message is never
echoed; ``{"error": …, "error_details": …}`` is sent after an exception.
History = ``GET /apps/{app}/users/{user}/sessions/{sid}`` (``session.events``:
the non-partial events only).

Id scheme (R4.3, R4.4; identical live and from history)
-------------------------------------------------------
* message id = the ADK event ``id``.  Partial fragments of one model call and
  its aggregated ``partial:false`` event share that id, and history stores
  exactly the aggregate, so live and history agree.
* the user message is ``user:{invocationId}`` (the first user-authored content
  event of an invocation; later ones keep their event id).  ADK never streams
  it, so :meth:`project_input` shows ``user:{runId}``: the two agree only when
  the run id *is* the invocation id (``pin_invocation_id=True``, below).
* part ids come from the part's index ``i`` in the aggregated ``content.parts``:
  ``text:{i}``, ``reasoning:{i}`` (``thought: true``), ``media:{i}``
  (inlineData/fileData), ``data:{i}`` (executableCode/codeExecutionResult)
  and ``tool:{functionCall.id}`` (ADK fills ``adk-<uuid>`` ids, the same in
  partials, aggregate and history).  Partial fragments carry no index, so the
  decoder re-packs them exactly as ADK's progressive aggregator does
  (consecutive text of one kind merges; a kind switch, call or other part
  opens a new segment): the partial-built ids equal the aggregate's.
* a ``functionResponse`` (its own event, ``role:user``, authored by the agent)
  is folded into the tool-call part of the message that made the call
  (R6.2): that message is re-emitted with ``result = response`` (``None``
  when ``response`` is missing: an empty result, R6.4).  The response ADK
  writes for a call the client's stop cut (its event has ``errorCode:
  INVOCATION_ABORTED``, its response ``{"error": "Invocation was aborted by
  client."}``) is no result: the call is ``cancelled``, with that reason as
  its error (decisions.md 250).  A response whose
  call is unknown (another run's state) becomes a ``role:tool`` message with
  the event's id.
* run identity = ``invocationId`` (history messages carry it as ``runId``).

Frame -> updates
----------------
=============================================  ==========================================
frame                                          updates
=============================================  ==========================================
``partial:true``, new event id                 [phase?] message (the fragment's parts)
``partial:true``, text continuing a segment    [phase?] delta(messageId, part, text)
``partial:true``, a new segment                [phase?] message (every part so far)
``partial`` false/absent (aggregate, or a      [phase?] message: REPLACES the fragments
complete event)                                of that id with the aggregate's parts
``functionResponse`` parts                     message(s) holding the calls, with result
no content (state/artifact/agent-state only)   [] (or phase)
``longRunningToolIds`` / requested             phase ``awaiting-input``
confirmations or auth configs
``errorCode`` (not partial, no functionCall)   [message] failed(RunError(errorCode, msg))
``errorCode: INVOCATION_ABORTED``              interrupted (ADK persists it, never streams it)
``turnComplete`` (not partial, no call, no     [message] completed
error)
``{"error": …}`` frame                         failed(RunError(error_type, error_message))
``type``/``event: run.started`` (extension)    []
``type``/``event: run.completed`` (extension)  completed (failed with ``errorCode``,
                                               interrupted with ``interrupted: true``)
DONE, non-objects, unknown                     []
=============================================  ==========================================

Where the real server departs from SPEC R11.4
---------------------------------------------
Stock ``/run_sse`` sends none of the table's start/end evidence: no
``run.started``/``run.completed`` (a backend must add them), and
``turnComplete`` only from live or interactions-API models, where it is set
on *every* model turn, also one that requests tools (the run goes on), so a
``turnComplete`` event with a function call is not a conclusion.  An
``errorCode`` on a partial fragment or beside a function call is not one
either (ADK's ``Event.is_final_response`` rule: the aggregate follows / the
tools run).  ``{"error"}`` frames carry no ``invocationId`` and cannot route
(R11.7).  There are no SSE ids: no resume, no outer-id deduplication.

Live vs history (R8.4)
----------------------
History decodes through the same code (one state for the whole session), so
assistant messages have the same ids, part ids, types and content.  What
history cannot reproduce: the user message id unless pinned (``user:{runId}``
live vs ``user:{invocationId}``); the streamed text of a model call that
raised or was aborted (ADK persists no aggregate for it, only the
``errorCode`` / ``INVOCATION_ABORTED`` event); the ``{"error"}`` frame;
phases; and a response to a call made in an earlier run (live: a ``tool``
message; history pairs it with the call, session-wide).

Decisions (docs/decisions.md, Adapters)
---------------------------------------
* A stock ADK stream has **no explicit success conclusion**: the last
  model event, a clean end of the response, nothing counts (R3.4, R2.2).  A
  stock text/tool run therefore stays running (connection ``disconnected``)
  until history settles it: :meth:`decode_history` reports an invocation
  ``completed`` when its last persisted event is ADK's own "final response"
  (agent-authored, not partial, content without function calls/responses,
  no ``errorCode``, no long-running tool), ``failed`` on an ``errorCode``
  and ``interrupted`` on ``INVOCATION_ABORTED``; otherwise no snapshot
  (unknown).  Cost: until a refresh the UI shows a spinner and the session's
  slot stays taken (later sends queue, R13.4); in a multi-agent invocation a
  refresh between two agents' answers settles it early.  Backends should
  add the ``run.completed`` extension frame (CK102).
* ADK has no abort endpoint: closing the ``/run_sse`` request is the stop;
  ADK then persists ``INVOCATION_ABORTED``, which only history shows.  The
  Core can match that snapshot to its run only when the run id is the
  invocation id: ``pin_invocation_id=True`` sends ``invocationId = runId``
  (ADK's ``RunAgentRequest.invocation_id``, used as the new invocation's id
  by non-resumable apps; a *resumable* app would try to resume it and fails
  on a session without events).  Run ids must then be unique in the session.
* No regenerate/edit: stock ADK's HTTP API cannot truncate a session.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..core import (
    ABSENT,
    DataPart,
    HistoryFormatError,
    HistoryResult,
    HistoryRunSnapshot,
    MediaPart,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
)
from ._protocol import AdapterProtocol, DecodeContext, EncodeContext, EventIdentity
from ._updates import (
    TERMINAL_UPDATES,
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
    ProtocolUpdate,
)

__all__ = ["ABORTED", "ADKProtocol"]

#: ADK's errorCode on the event it persists when the client closed the run.
ABORTED = "INVOCATION_ABORTED"
_TEXT_KINDS = ("text", "thought")
_PHASES = {"thought": "thinking", "text": "generating", "call": "tool", "response": "thinking"}
_PREFIX = {"text": "text", "thought": "reasoning", "media": "media", "data": "data"}
_DATA_KINDS = {
    "executableCode": "adk.executable-code",
    "codeExecutionResult": "adk.code-execution-result",
}


def _is_map(value: Any) -> bool:
    """``isinstance(value, Mapping)``, with JSON's dict checked first (the ABC check costs more)."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def _map(value: Any) -> Mapping[str, Any]:
    return value if _is_map(value) else {}


def _parts(event: Mapping[str, Any]) -> list[Any]:
    parts = _map(event.get("content")).get("parts")
    return list(parts) if isinstance(parts, list) else []


_PART_KINDS = (
    ("functionCall", "call"),
    ("functionResponse", "response"),
    ("inlineData", "media"),
    ("fileData", "media"),
    ("executableCode", "data"),
    ("codeExecutionResult", "data"),
)


def _kind(raw: Any) -> str | None:
    """What one genai ``Part`` is, as ADK's aggregator sorts it."""
    if not _is_map(raw):
        return None
    if isinstance(raw.get("text"), str):
        return "thought" if raw.get("thought") is True else "text"
    for key, kind in _PART_KINDS:
        if _is_map(raw.get(key)):
            return kind
    return None


def _calls(parts: list[Any]) -> bool:
    return any(_kind(p) == "call" for p in parts)


def _str_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _seg(raw: Any, orphan: bool = False) -> list[Any]:
    """One part as a segment ``[kind, payload]``; text payloads are chunk lists.
    A function response is a hole (``None``: folded into its call's part)
    unless its call is unknown here (``orphan``): then it shows as a call."""
    kind = _kind(raw)
    if kind in _TEXT_KINDS:
        return [kind, [raw["text"]]]
    if kind == "call":
        return ["call", dict(raw["functionCall"])]
    if kind == "response":
        fr = raw["functionResponse"]
        return ["call", {"id": fr.get("id"), "name": fr.get("name")}] if orphan else [None, raw]
    return [kind, raw]


class _Msg:
    """One message's segments, mirroring ADK's progressive aggregation."""

    __slots__ = ("id", "open", "role", "run_id", "segs")

    def __init__(self, mid: Any, role: str, run_id: Any) -> None:
        self.id, self.role, self.run_id = mid, role, run_id
        self.segs: list[list[Any]] = []
        self.open: int | None = None  # the text segment still taking chunks

    def replace(self, parts: list[Any], orphans: frozenset[int] = frozenset()) -> None:
        """The aggregate (or a complete event): its parts, at their indexes."""
        self.segs = [_seg(raw, id(raw) in orphans) for raw in parts]
        self.open = None

    def feed(
        self, parts: list[Any], orphans: frozenset[int] = frozenset(), kinds: list[str | None] | None = None
    ) -> tuple[list[tuple[int, str]], bool]:
        """A partial fragment: (text appended to the open segment, new segment?).
        ``kinds``: each part's :func:`_kind`, when the caller has them."""
        appended: list[tuple[int, str]] = []
        grew = False
        for raw, kind in zip(parts, kinds if kinds is not None else [_kind(raw) for raw in parts], strict=True):
            if kind in _TEXT_KINDS and raw["text"]:
                if self.open is not None and self.segs[self.open][0] == kind:
                    self.segs[self.open][1].append(raw["text"])
                    appended.append((self.open, raw["text"]))
                    continue
                self.segs.append(_seg(raw))
                self.open = len(self.segs) - 1
            elif not (kind == "call" and self._continue_call(raw["functionCall"])):
                # empty text (ADK's "other part"), a new call, media, code, unknown
                self.segs.append(_seg(raw, id(raw) in orphans))
                self.open = None
            grew = True
        return appended, grew

    def _continue_call(self, fc: Mapping[str, Any]) -> bool:
        """A fragment of a call already shown (same id, or a nameless continuation)."""
        cid = _str_id(fc.get("id"))
        if cid is None and fc.get("name"):
            return False
        for seg in reversed(self.segs):
            if seg[0] == "call" and (cid is None or _str_id(seg[1].get("id")) == cid):
                seg[1] = {**seg[1], **{k: v for k, v in fc.items() if v is not None}}
                return True
        return False

    def part_id(self, index: int) -> str:
        kind, payload = self.segs[index]
        if kind == "call":
            cid = payload.get("id")
            if (
                isinstance(cid, (str, int, float))
                and sum(1 for k, p in self.segs if k == "call" and p.get("id") == cid) == 1
            ):
                return f"tool:{cid}"
            return f"tool:{index}"
        return _PREFIX[kind] + f":{index}"

    def message(self, results: Mapping[str, Any]) -> RuntimeMessage:
        out: list[Any] = []
        for i, (kind, payload) in enumerate(self.segs):
            if kind is None:
                continue
            pid = self.part_id(i)
            if kind == "text":
                out.append(TextPart(pid, "".join(payload)))
            elif kind == "thought":
                out.append(ReasoningPart(pid, "".join(payload)))
            elif kind == "call":
                cid, args = payload.get("id", ABSENT), payload.get("args")
                result = results.get(cid, ABSENT) if isinstance(cid, str) else ABSENT
                if isinstance(result, _Aborted):  # the stop cut the call (R9.4): cancelled, with ADK's reason
                    out.append(
                        ToolCallPart(pid, cid, payload.get("name", ABSENT), args=_opt(args), status="cancelled",
                                     error=_error(ABORTED, result.message))
                    )
                    continue
                out.append(
                    ToolCallPart(
                        pid, cid, payload.get("name", ABSENT), args=_opt(args), result=result
                    )
                )
            elif kind == "media":
                out.append(_media(pid, payload))
            else:
                key = (
                    "executableCode"
                    if isinstance(payload.get("executableCode"), Mapping)
                    else "codeExecutionResult"
                )
                out.append(DataPart(pid, _DATA_KINDS[key], payload[key]))
        return RuntimeMessage(self.id, self.role, tuple(out), run_id=self.run_id)


class _Aborted:
    """A function response ADK wrote for a call the client's stop cut
    (``errorCode: INVOCATION_ABORTED``): no result, the call was cancelled."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        self.message = message


def _result(event: Mapping[str, Any], response: Mapping[str, Any]) -> Any:
    """A function response's result: ``response`` (missing: ``None``, an
    empty result, R6.4), or :class:`_Aborted` on the event ADK writes when
    the client's stop cut the call (R9.4)."""
    if event.get("errorCode") == ABORTED:
        return _Aborted(event.get("errorMessage"))
    return response.get("response")


def _opt(value: Any) -> Any:
    return ABSENT if value is None else value


def _media(pid: str, raw: Mapping[str, Any]) -> MediaPart:
    inline = _map(raw.get("inlineData"))
    if inline:
        source: Any = {"data": inline.get("data")}
        blob = inline
    else:
        blob = _map(raw.get("fileData"))
        source = {"url": blob.get("fileUri")}
    name = blob.get("displayName")
    return MediaPart(pid, blob.get("mimeType", ABSENT), source, name=_opt(name))


# --------------------------------------------------------------------------- decoding


def _state(state: dict[str, Any]) -> dict[str, Any]:
    if "msgs" not in state:
        state.update(msgs={}, tools={}, results={}, users=set(), phase=None)
    return state


def _phase(event: Mapping[str, Any], parts: list[Any], kinds: list[str | None] | None = None) -> str | None:
    actions = _map(event.get("actions"))
    if (
        event.get("longRunningToolIds")
        or actions.get("requestedToolConfirmations")
        or actions.get("requestedAuthConfigs")
    ):
        return "awaiting-input"
    for kind in reversed(kinds if kinds is not None else [_kind(raw) for raw in parts]):  # the last part that names a phase
        if kind in _PHASES:
            return _PHASES[kind]
    return None


def _error(code: Any, message: Any) -> RunError:
    code = str(code)
    return RunError(code, message if isinstance(message, str) and message else code)


def _terminal(event: Mapping[str, Any], parts: list[Any]) -> ProtocolUpdate | None:
    """errorCode / turnComplete: a conclusion only on a non-partial event
    without function calls (ADK's ``is_final_response`` rule)."""
    if event.get("partial") is True or _calls(parts):
        return None
    code = event.get("errorCode")
    if code is not None and code != "":
        if code == ABORTED:
            return InterruptedUpdate()
        return FailedUpdate(_error(code, event.get("errorMessage")))
    if event.get("turnComplete") is True:
        return CompletedUpdate()
    return None


def _extension(event: Mapping[str, Any], kind: str) -> list[ProtocolUpdate]:
    if kind != "run.completed":
        return []
    code = event.get("errorCode")
    if code is not None and code != "":
        return [FailedUpdate(_error(code, event.get("errorMessage")))]
    if event.get("interrupted") is True:
        return [InterruptedUpdate()]
    return [CompletedUpdate()]


def _error_frame(event: Mapping[str, Any]) -> list[ProtocolUpdate]:
    details = _map(event.get("error_details"))
    text = event.get("error")
    text = text if isinstance(text, str) else json.dumps(text, default=str)
    code = details.get("error_type")
    if not isinstance(code, str) or not code:
        head = text.split(":", 1)[0].strip()
        code = head if head.isidentifier() else "ERROR"
    message = details.get("error_message")
    return [FailedUpdate(_error(code, message if isinstance(message, str) and message else text))]


def _decode(
    event: Any, state: dict[str, Any], run_id: Any, phases: bool = True
) -> list[ProtocolUpdate]:
    """One ADK frame -> updates; shared by live decoding and history."""
    if not _is_map(event):
        return []
    kind = event.get("type", event.get("event"))
    if isinstance(kind, str) and kind.startswith("run."):
        return _extension(event, kind)
    if "error" in event and "content" not in event and "author" not in event:
        return _error_frame(event)
    st = _state(state)
    parts = _parts(event)
    kinds = [_kind(raw) for raw in parts]  # once per frame: the phase, the content and the fragments read them
    out: list[ProtocolUpdate] = []
    phase = _phase(event, parts, kinds) if phases else None
    if phase is not None and phase != st["phase"]:
        st["phase"] = phase
        out.append(PhaseUpdate(phase))
    out.extend(_content(event, parts, st, run_id, kinds))
    end = _terminal(event, parts)
    if end is not None:
        out.append(end)
    return out


def _content(
    event: Mapping[str, Any], parts: list[Any], st: dict[str, Any], run_id: Any, kinds: list[str | None] | None = None
) -> list[ProtocolUpdate]:
    if not parts:  # state/artifact/agent-state only (ADK's artifact copy reuses the content event's id)
        return []
    msgs, results, tools = st["msgs"], st["results"], st["tools"]
    out: list[ProtocolUpdate] = []
    homes: list[str] = []  # messages whose calls got a result here (R6.2)
    orphans: set[int] = set()
    kinds = kinds if kinds is not None else [_kind(raw) for raw in parts]
    for raw, kind in zip(parts, kinds, strict=False):
        if kind == "response":
            fr = raw["functionResponse"]
            cid = _str_id(fr.get("id"))
            if cid is not None:
                results[cid] = _result(event, fr)
            home: Any = tools.get(cid) if cid is not None else None  # a key of msgs when it is in msgs
            if home in msgs:
                if home not in homes:
                    homes.append(home)
            else:
                orphans.add(id(raw))
    if homes:
        out.extend(MessageUpdate(msgs[h].message(results)) for h in homes)
    if kinds.count("response") == len(kinds) and not (orphans and any(id(p) in orphans for p in parts)):
        return out  # every part (there are some) a function response whose call this run showed
    eid = _str_id(event.get("id"))
    inv = _str_id(event.get("invocationId"))
    if event.get("author") == "user":
        role = "user"
        if inv is not None and inv not in st["users"]:
            st["users"].add(inv)
            eid = f"user:{inv}"
    elif _map(event.get("content")).get("role") == "user":
        role = "tool"  # a function response whose call this run never showed
    else:
        role = "assistant"
    msg = msgs.get(eid) if eid is not None else None
    fresh = msg is None
    if msg is None:
        msg = _Msg(eid, role, run_id)
        if eid is not None:
            msgs[eid] = msg
    frozen = frozenset(orphans)
    if event.get("partial") is True:
        appended, grew = msg.feed(parts, frozen, kinds)
        if fresh or grew:
            out.append(MessageUpdate(msg.message(results)))
        else:
            for i, text in appended:
                out.append(DeltaUpdate(eid, msg.part_id(i), text))  # type: ignore[arg-type]
    else:
        msg.replace(parts, frozen)  # the aggregate REPLACES the fragments of this id
        out.append(MessageUpdate(msg.message(results)))
    if eid is not None:
        for kind, payload in msg.segs:
            cid = _str_id(payload.get("id")) if kind == "call" else None
            if cid is not None:
                tools[cid] = eid
    return out


# --------------------------------------------------------------------------- input


def _input_parts(input: Any) -> list[Any]:
    if isinstance(input, Mapping):
        msg = input.get("newMessage", input.get("new_message"))
        if isinstance(msg, Mapping):
            input = msg
        if isinstance(input.get("parts"), list):
            return list(input["parts"])
        text = input.get("text")
        return [] if text is None else [{"text": str(text)}]
    return [] if input is None else [{"text": str(input)}]


class ADKProtocol(AdapterProtocol):
    """Google ADK ``adk api_server`` (``/run_sse`` + session history).

    ``app_name`` (omitted from the body when ``None``: ADK then uses its
    default app), ``user_id``, ``streaming`` (partial frames) and
    ``pin_invocation_id`` (send ``invocationId = runId``; see the module
    docstring) shape :meth:`encode_input`; decoding needs none of them.
    """

    name = "adk"
    #: chatkit's words on this wire (decisions.md 279)
    wire_terms = {
        "completed": "a non-partial event with `turnComplete: true` (stock `/run_sse` sends none: only a later "
        "history read settles the run)",
        "failed": "a non-partial event with `errorCode` (and `errorMessage`)",
        "interrupted": "`errorCode: INVOCATION_ABORTED`, which ADK persists in history and never streams",
        "output": "`content.parts[].text` (`partial: true` fragments, then the whole event) and "
        "`functionCall` / `functionResponse` parts",
        "event id": "nothing: no SSE `id:` lines (each event has its own `id`)",
    }
    wire_examples = {
        "CK102": "POST /run_sse                                      SSE\n"
        '  data: {"content":{"parts":[{"text":"Hello, wor"}]},"partial":true}\n'
        "  (the stream ends: no non-partial event, no turnComplete, no errorCode; no history read follows)",
        "CK105": "POST /run_sse                                      SSE\n"
        '  data: {"content":{"parts":[{"functionCall":{"id":"c1","name":"search"}}]}}\n'
        '  data: {"content":{"parts":[{"text":"Done."}]},"turnComplete":true}   rejected: active-work '
        "(no functionResponse)",
        "CK302": "POST /run_sse                                      SSE\n"
        '  data: {"errorCode":"","errorMessage":""}              no code, no message',
    }

    def wire_name(self, event: Any) -> str | None:
        """An ADK event in its own words: partial or not, what its parts carry,
        ``turnComplete``, ``errorCode`` (decisions.md 279)."""
        said = super().wire_name(event)
        if not isinstance(event, Mapping) or said and ("error" in said or "turnComplete" in said):
            return said
        parts = (event.get("content") or {}).get("parts") if isinstance(event.get("content"), Mapping) else None
        kinds = sorted({k for p in parts or () if isinstance(p, Mapping) for k in ("text", "functionCall", "functionResponse") if k in p})
        what = "event" + (f" with {'/'.join(kinds)}" if kinds else "")
        return f"{what}, {'partial: true' if event.get('partial') else 'not partial, no turnComplete'}"

    def __init__(
        self,
        app_name: str | None = None,
        user_id: str = "user",
        *,
        streaming: bool = True,
        pin_invocation_id: bool = False,
    ) -> None:
        self.app_name = app_name
        self.user_id = user_id
        self.streaming = streaming
        self.pin_invocation_id = pin_invocation_id

    # -- requests ----------------------------------------------------------------------

    def encode_input(self, input: Any, ctx: EncodeContext) -> dict[str, Any]:
        extra = input if isinstance(input, Mapping) else {}
        body: dict[str, Any] = {}
        app = extra.get("appName", self.app_name)
        if app is not None:
            body["appName"] = app
        body["userId"] = extra.get("userId", self.user_id)
        body["sessionId"] = ctx.session_id
        body["newMessage"] = {"role": "user", "parts": _input_parts(input)}
        body["streaming"] = self.streaming
        if "stateDelta" in extra:
            body["stateDelta"] = extra["stateDelta"]
        if self.pin_invocation_id:
            body["invocationId"] = ctx.run_id
        return body

    def decode_input(self, body: Any) -> Any:
        if isinstance(body, (bytes, bytearray, str)):
            try:
                body = json.loads(body)
            except ValueError:
                return None
        if not isinstance(body, Mapping):
            return None
        msg = body.get("newMessage", body.get("new_message"))
        if not isinstance(msg, Mapping) or not isinstance(msg.get("parts"), list):
            return None
        parts = msg["parts"]
        if len(parts) == 1 and isinstance(parts[0], Mapping) and set(parts[0]) == {"text"}:
            return {"text": parts[0]["text"]}
        return {"parts": list(parts)}

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        msg = _Msg(f"user:{ctx.run_id}", "user", ctx.run_id)
        msg.replace(_input_parts(input))
        return [msg.message({})]

    # -- decoding ----------------------------------------------------------------------

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        return _decode(event, ctx.state, ctx.run_id)

    def identify_event(self, event: Any) -> EventIdentity | None:
        if not _is_map(event):
            return None
        inv = _str_id(event.get("invocationId", event.get("invocation_id")))
        if inv is None:
            return None  # e.g. the {"error"} frame: cannot route (R11.7)
        kind = event.get("type", event.get("event"))
        ends = kind == "run.completed" or _terminal(event, _parts(event)) is not None
        return EventIdentity(run_id=inv, starts_run=kind == "run.started", ends_response=ends)

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        events = value.get("events") if isinstance(value, Mapping) else value
        if not isinstance(events, list):
            raise HistoryFormatError("an ADK session has no events list")
        state: dict[str, Any] = {}
        order: dict[Any, RuntimeMessage] = {}
        runs: dict[str, dict[str, Any]] = {}
        for event in events:
            if not isinstance(event, Mapping):
                continue
            inv = event.get("invocationId")
            inv = inv if isinstance(inv, str) and inv else None
            for u in _decode(event, state, inv, phases=False):
                if isinstance(u, MessageUpdate):
                    order[u.message.id] = u.message
                elif isinstance(u, DeltaUpdate):  # a partial event persisted (not by stock ADK)
                    order[u.message_id] = state["msgs"][u.message_id].message(state["results"])
                elif inv is not None and isinstance(u, TERMINAL_UPDATES):
                    runs.setdefault(inv, {}).setdefault("end", u)  # the first, like a live reader
            if inv is not None:
                run = runs.setdefault(inv, {})
                run.setdefault("first", event.get("timestamp"))
                run["last"] = event
        return HistoryResult(
            messages=tuple(order.values()),
            has_more=False,
            run_snapshots=tuple(
                s for inv, run in runs.items() if (s := _snapshot(inv, run)) is not None
            ),
        )


def _final_response(event: Mapping[str, Any]) -> bool:
    parts = _parts(event)
    return (
        event.get("author") not in (None, "user")
        and event.get("partial") is not True
        and not event.get("errorCode")
        and not event.get("longRunningToolIds")
        and bool(parts)
        and not any(_kind(p) in ("call", "response") for p in parts)
        and not (isinstance(parts[-1], Mapping) and "codeExecutionResult" in parts[-1])
    )


def _snapshot(inv: str, run: Mapping[str, Any]) -> HistoryRunSnapshot | None:
    end = run.get("end")
    first: Any = run.get("first")  # JSON: checked by ok below
    ok = (
        isinstance(first, (int, float))
        and not isinstance(first, bool)
        and math.isfinite(first * 1000)  # seconds -> ms must stay finite too
        and first >= 0
    )
    created = int(first * 1000) if ok else None
    if isinstance(end, FailedUpdate):
        return HistoryRunSnapshot(inv, "failed", created_at=created, error=end.error)
    if isinstance(end, InterruptedUpdate):
        return HistoryRunSnapshot(inv, "interrupted", created_at=created, interrupt_reason="abort")
    if isinstance(end, CompletedUpdate) or ("last" in run and _final_response(run["last"])):
        return HistoryRunSnapshot(inv, "completed", created_at=created)
    return None
