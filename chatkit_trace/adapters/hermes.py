"""The ``hermes`` protocol: NousResearch hermes-agent's API server (SPEC R2, R11.4).

Checked against hermes-agent 0.19.0 (``gateway/platforms/api_server.py``) and
its real traffic (``recordings/captures/hermes``).  One class decodes both
event surfaces of the server; the event name is always read from the JSON
``event`` key, which is the payload's own field on ``/v1/runs`` and the SSE
``event:`` line written into the object by the wire layer (R2.8) on the
session stream (``type`` is read when ``event`` is missing).

Surfaces
--------
``/v1/runs``: ``POST /v1/runs`` -> ``202 {"run_id"}``, then
``GET /v1/runs/{id}/events`` (``data:`` lines only: no ``event:``, no ``id:``,
no ``run.started``, no ``done``, no sequence), ``POST /v1/runs/{id}/stop``
(the stop ends the stream with ``run.cancelled``) and ``GET /v1/runs/{id}``,
the status read: ``decode_status(value, session_id, run_id)`` turns it into
a :class:`~chatkit_trace.core.HistoryRunSnapshot` when it is settled
(completed, failed with RunError ``run.failed``, cancelled -> interrupted) and
``None`` while queued/running/waiting_for_approval/stopping or for another
run; the pipeline's ``status`` capability settles the run with
``ChatCore.calibrate_run(run_id, status=s.status, error=s.error)``.  It is
not a history: it has no messages, and a history replaces the baseline.

Session chat stream: ``POST /api/sessions/{id}/chat/stream`` (``event:`` +
``data:``, every payload has ``run_id`` and ``seq`` 1, 2, 3 …): ``run.started``
… ``run.completed``, then ``done``.  No stop endpoint (closing the connection
cancels the handler and nothing concludes the run).  History of both surfaces
is ``GET /api/sessions/{id}/messages`` (``/v1/runs`` only with a ``session_id``).

Ids (R4.3, R4.4)
----------------
* assistant message: ``assistant:{run_id}`` on ``/v1/runs`` (the event's own
  ``run_id``), the server's ``message_id`` (``msg_<hex>``, one per run) on the
  session stream; user message ``user:{run_id}`` (the run the event is
  decoded for, so :meth:`project_input` and the ``run.started`` echo agree);
* one assistant message per run; a tool call closes the text segment:
  ``text:{s}`` / ``reasoning:{s}`` where ``s`` is the number of tool calls
  before the segment, ``tool:{n}`` for the n-th tool call of the answer
  (Hermes' live tool events carry no call id), its ``tool_call_id`` the real
  ``call_…`` id where the wire has it, else ``{run_id}:t{n}``;
* history (``/api/sessions/{id}/messages``): rows have integer ids and no run
  id, so messages are ``user:{row id}`` and ``assistant:{first row id}`` (the
  assistant/tool rows after a user row form one answer, built by the same
  code as the live one).  Message ids therefore never match the live ones;
  part ids and types do, and so does visible text (see the tests).  The
  assistant row hermes appends when a stop cut a turn right after a tool
  ("Operation interrupted.", :func:`stop_notice`) is a text part the
  message notes as the backend's stop notice (``STOP_NOTICE``, CK117).  A
  limit of the protocol, not of the backend: :meth:`history_limits` says so
  (``history-ids``), so live and history are paired by run and position
  and only content differences are findings (CK207 states the limit once
  per route).

Frame -> update
---------------
- ``message.delta`` (runs) / ``assistant.delta`` (session): delta on
  ``text:{s}``; the first delta of a segment is a message update + phase
  ``generating`` instead.
- ``tool.started``: new tool part ``tool:{n}`` (args on the session stream),
  running; phase ``tool``.
- ``tool.completed``: the oldest running part of that tool name becomes
  ``completed`` with an empty result (``null``), or ``failed`` with RunError
  ``tool_error`` when ``error: true``; ``tool.failed``: ``failed``.  The
  wire has no result field: a limit of the protocol, not a defect of the
  backend, so the part is modelled as what the UI can show (completed, no
  output; never "absent", which reads as still running) and
  :meth:`event_limits` names it (CK306, once per route).  A later
  ``run.completed`` transcript or history fills the real result in.
- ``approval.request`` / ``approval.responded``: phase ``awaiting-input`` /
  ``tool``.
- ``reasoning.available``, ``tool.progress`` (``_thinking``): nothing (the
  turn's text again, not reasoning); ``message.started``: records the id.
- ``run.started``: the user message (string content only; equal to the
  projection, so ``no-change`` for a local run, visible for a passive one).
- ``assistant.completed``: ``content`` is the final text of the last segment
  (a message update only when it differs from what streamed).
- ``run.completed``: ``output`` (runs) is the final text, as above;
  ``messages[]`` (session stream, the server's "authoritative per-turn
  transcript") rebuilds the answer (real call ids, args, results,
  reasoning) when it holds the live tool calls in order (it may hold more:
  a call to a tool that does not exist sends no tool events live and is
  only there); then ``completed``.  Rows stamped before the run began
  (``run.started`` ``ts``) are earlier turns' (hermes sends the whole
  conversation after a failed turn): left out, and the message notes how
  many (``EARLIER_ROWS``, CK121).  A turn that streamed nothing and whose
  transcript holds no model answer equal to the final text reported a
  failure as its answer: noted (``REPORTED_FAILURE``, CK120; decisions.md
  253, 258).  On ``/v1/runs`` it says the run's reasoning could not come
  (``event_limits``: ``reasoning``, CK308).
- ``run.failed``: failed, RunError ``run.failed`` + the error text;
  ``error`` (session stream, the handler raised): RunError ``error``.  An
  empty or missing text (``str(exc)`` of an exception without a message)
  shows a fallback ("agent run failed") made with :func:`fallback_error`,
  which keeps what the backend sent, so CK302 still reports it.
- ``run.cancelled`` (a stop) and ``run.interrupted``: interrupted (the Core
  picks the reason: ``abort`` after a local stop, else ``protocol``).
- ``done``, DONE, keepalives, unknown events: nothing.  ``done`` is the end
  of the reader, never a conclusion (R3.4).

identify_event: ``run_id``; ``starts_run`` on ``run.started``;
``ends_response`` on run.completed/failed/cancelled/interrupted, ``error`` and
``done``.  No ``session_id`` is reported: ``assistant.completed`` and
``run.completed`` carry Hermes' *effective* session, which differs from the
URL's after a context compression, and routing on it would drop the run's end.
event_sequence: ``seq`` (session stream) as the source sequence.
event_known: every event name of both surfaces (those decoding to nothing,
like ``done`` or ``reasoning.available``, are known, not CK406).

Where the real server departs from SPEC R11.4's table
----------------------------------------------------
``/v1/runs`` has no ``run.started``, ``done``, ``run.interrupted``, event ids
or sequence; a stop ends with ``run.cancelled``.  The session stream has
``run.started``, ``done`` and ``seq`` but no stop, reports an LLM failure as
an answer (``assistant.completed`` with the error text, then
``run.completed``; decoded as completed, the truth of the wire, and noted
for CK120) and ``done``
follows every end.  The table's frames are still decoded when a backend adds
them (``run.started``/``run.interrupted``/``done`` on ``/v1/runs``).  The
events endpoint is a queue, not a broadcast: two subscribers split the
events and only one gets the conclusion (the other ends at ``: stream
closed`` or hangs; its run stays running until the status read settles it).

Decisions
---------
* Hermes prepends ``"\\n\\n"`` to the first text after a tool iteration (its
  own clients concatenate all turns in one bubble).  Here a tool call already
  opens a new text part, so exactly that leading ``"\\n\\n"`` is dropped from
  the first delta of a segment that follows a tool call; all other text is
  kept verbatim.  The visible text then equals history and ``output``.
* The final text (``output`` / ``assistant.completed.content``) is
  authoritative: after a recovered mid-stream error the deltas repeat pieces
  with other spacing; the last segment is replaced by it.
* ``reasoning.available`` / ``tool.progress(_thinking)`` are never reasoning
  parts.  Model reasoning appears only in history rows and in the session
  transcript, where it is decoded (``reasoning:{s}``).
* A tool started but never completed stays running: ``run.completed`` is then
  rejected ``active-work`` by the Core, which is what the wire says.
* :meth:`encode_input` sends ``{"input", "session_id", "conversation_history"}``:
  both surfaces accept ``input``; ``/v1/runs`` gives the model only
  ``conversation_history`` (never the stored session), so the client sends it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core import (
    ABSENT,
    HistoryFormatError,
    HistoryResult,
    HistoryRunSnapshot,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    freeze,
)
from ._limits import (
    EARLIER_ROWS,
    HISTORY_IDS,
    REASONING,
    REPORTED_FAILURE,
    STOP_NOTICE,
    TOOL_ARGS,
    TOOL_RESULT,
    fallback_error,
    noted,
)
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

__all__ = ["HermesProtocol", "input_text", "tool_failed"]

_ENDS = frozenset(
    {"run.completed", "run.failed", "run.cancelled", "run.interrupted", "error", "done"}
)
_KNOWN = _ENDS | {
    "message.delta", "assistant.delta", "message.started", "run.started", "tool.started",
    "tool.completed", "tool.failed", "tool.progress", "reasoning.available", "approval.request",
    "approval.responded", "assistant.completed",
}  # fmt: skip
_SETTLED = {"completed": "completed", "failed": "failed", "cancelled": "interrupted"}


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def input_text(input: Any) -> str:
    """The user's text in an input: a string, ``{text|input|message|content}``,
    or a message list whose last item is the user turn (as ``/v1/runs`` reads it)."""
    if isinstance(input, str):
        return input
    if isinstance(input, Mapping):
        for key in ("text", "input", "message", "content"):
            if key in input and input[key] is not None:
                return input_text(input[key])
        return ""
    if isinstance(input, Sequence) and not isinstance(input, (bytes, bytearray)):
        if input and isinstance(input[-1], Mapping) and "role" in input[-1]:
            return input_text(input[-1].get("content"))
        return " ".join(t for t in (input_text(b) for b in input if isinstance(b, Mapping)) if t)
    return "" if input is None else str(input)


def _user(run_id: str, text: str) -> RuntimeMessage:
    return RuntimeMessage(f"user:{run_id}", "user", (TextPart("text", text),), run_id=run_id)


def _args(v: Any) -> Any:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except Exception:  # noqa: BLE001 - unparseable arguments are left out
            return ABSENT
    return freeze(dict(v)) if isinstance(v, Mapping) else ABSENT


class _Answer:
    """One assistant answer; live decoding and history both build it (same part ids)."""

    def __init__(self, message_id: str, run_id: str | None, key: str) -> None:
        self.message_id, self.run_id, self.key = message_id, run_id, key
        self._parts: list[Any] = []
        #: deltas to the current segment's text part not yet in it:
        #: (segment, part id, index, chunks), written when the parts are read
        self._growing: tuple[int, str, int, list[str]] | None = None
        self.seg = 0  # text segment = tool calls so far
        self.tools = 0
        self.after_tool = False  # the current segment's first text is still to come
        #: part ids that are Hermes' notice about a stop (:func:`stop_notice`)
        self.notices: list[str] = []
        #: the kind of the last row added (:meth:`add_row`)
        self.last_row: str | None = None

    @property
    def parts(self) -> list[Any]:
        """The answer's parts, with the growing text part's deltas written (:meth:`delta`)."""
        growing = self._growing
        if growing is not None:
            self._growing = None
            _, _, i, chunks = growing
            self._parts[i] = self._parts[i].extend(chunks)
        return self._parts

    def _find(self, pid: str) -> int:
        for i, p in enumerate(self.parts):
            if p.id == pid:
                return i
        return -1

    def _put(self, part: Any) -> None:
        i = self._find(part.id)
        if i < 0:
            self.parts.append(part)
        else:
            self.parts[i] = part

    def message(self) -> RuntimeMessage:
        msg = RuntimeMessage(self.message_id, "assistant", tuple(self.parts), run_id=self.run_id)
        return noted(msg, {STOP_NOTICE: list(self.notices)}) if self.notices else msg

    def delta(self, text: str) -> tuple[str | None, bool]:
        """Append streamed text: (part id or None, whether the part is new)."""
        growing = self._growing
        if growing is not None and growing[0] == self.seg:
            # The part the last delta grew: the text joins its chunks, written
            # into the part when the parts are read (one new part, not one per delta).
            growing[3].append(text)
            return growing[1], False
        pid = f"text:{self.seg}"
        i = self._find(pid)
        if i >= 0:
            self._growing = (self.seg, pid, i, [text])
            return pid, False
        if self.after_tool and text.startswith("\n\n"):
            text = text[2:]  # Hermes' turn separator (module docstring)
        self.after_tool = False
        if not text:
            return None, False
        self.parts.append(TextPart(pid, text))
        return pid, True

    def add_text(self, cls: type, prefix: str, text: Any) -> None:
        if not isinstance(text, str) or not text:
            return
        pid = f"{prefix}:{self.seg}"
        i = self._find(pid)
        self._put(self.parts[i].append(text) if i >= 0 else cls(pid, text))

    def final_text(self, text: Any) -> bool:
        """The authoritative final text of the last segment; True when it changed."""
        if not isinstance(text, str) or not text:
            return False
        pid = f"text:{self.seg}"
        i = self._find(pid)
        if i >= 0 and self.parts[i].text == text:
            return False
        self._put(TextPart(pid, text))
        self.after_tool = False
        return True

    def tool_started(self, name: Any, args: Any = ABSENT, call_id: Any = None) -> None:
        n = self.tools
        self.tools += 1
        cid = _str(call_id) or f"{self.key}:t{n}"
        self.parts.append(ToolCallPart(f"tool:{n}", cid, _str(name) or "unknown", args=_args(args)))
        self.seg += 1
        self.after_tool = True

    def tool_ended(self, name: Any, status: str, error: Any = ABSENT) -> bool:
        """The oldest running call of ``name`` ends; a completed one gets an
        empty result (the wire has none: module docstring)."""
        name = _str(name) or "unknown"
        for i, p in enumerate(self.parts):
            if (
                isinstance(p, ToolCallPart)
                and p.tool_name == name
                and p.status in (ABSENT, "running")
            ):
                result = None if status == "completed" and p.result is ABSENT else p.result
                self.parts[i] = replace(p, status=status, error=error, result=result)
                return True
        return False

    def tool_result(self, call_id: Any, content: Any) -> None:
        """A tool row: the call's result; failed when Hermes' own rule calls
        the result a failure (:func:`tool_failed`, what ``tool.completed``'s
        ``error`` says live), with the live stream's error."""
        for i, p in enumerate(self.parts):
            if isinstance(p, ToolCallPart) and p.tool_call_id == call_id:
                if tool_failed(p.tool_name, content):
                    self.parts[i] = replace(p, status="failed", result=freeze(content), error=_tool_error(p.tool_name))
                else:
                    self.parts[i] = replace(p, status="completed", result=freeze(content), error=ABSENT)
                return

    def add_row(self, row: Mapping[str, Any]) -> None:
        """One assistant or tool row of history / of the session transcript."""
        after_tool, self.last_row = self.last_row == "tool", row.get("role")
        if row.get("role") == "tool":
            self.tool_result(row.get("tool_call_id"), row.get("content"))
            return
        if after_tool and stop_notice(row):
            self.add_text(TextPart, "text", row["content"])
            self.notices.append(f"text:{self.seg}")
            return
        self.add_text(
            ReasoningPart, "reasoning", _str(row.get("reasoning")) or row.get("reasoning_content")
        )
        self.add_text(
            TextPart, "text", input_text(row.get("content")) if row.get("content") else None
        )
        calls = row.get("tool_calls")
        for tc in calls if isinstance(calls, list) else ():
            if isinstance(tc, Mapping):
                fn: Any = tc.get("function") if isinstance(tc.get("function"), Mapping) else {}
                self.tool_started(
                    fn.get("name"), fn.get("arguments", ABSENT), tc.get("id") or tc.get("call_id")
                )

    def tool_names(self) -> list[str]:
        return [p.tool_name for p in self.parts if isinstance(p, ToolCallPart)]


def _in_order(live: list[str], transcript: list[str]) -> bool:
    """The live tool calls appear in the transcript, in order (the transcript
    may hold more: a tool Hermes runs without progress events, such as a call
    to a tool that does not exist, is only there)."""
    it = iter(transcript)
    return all(any(name == t for t in it) for name in live)


def _tool_error(name: Any) -> RunError:
    return RunError("tool_error", f"tool {_str(name) or 'unknown'} reported an error")


#: How hermes-agent 0.19 begins the assistant turn it appends when a stop
#: cuts a turn after a tool (``close_interrupted_tool_sequence``:
#: "Operation interrupted.", or the interrupt's own text such as "Operation
#: interrupted: waiting for model response (…)").
_STOP_NOTICE = "Operation interrupted"


def stop_notice(row: Mapping[str, Any]) -> bool:
    """Whether an assistant row is Hermes' notice about a stop rather than
    the model's text: the closing turn hermes-agent appends when a stop cut
    the turn right after a tool (no model call made it: no finish reason, no
    tool calls).  Only history can hold it: no event of either surface
    carries it (decisions.md 252)."""
    content = row.get("content")
    return (
        row.get("role") == "assistant"
        and isinstance(content, str)
        and content.startswith(_STOP_NOTICE)
        and not row.get("finish_reason")
        and not row.get("tool_calls")
    )


#: The text hermes-agent stores for a model reply that was empty (its
#: internal sentinel; the session stream then reports a notice instead).
_EMPTY_REPLY = "(empty)"


_FILE_MUTATING = frozenset({"write_file", "patch"})


def tool_failed(name: Any, result: Any) -> bool:
    """Whether Hermes reports a tool result as a failure: the rule
    hermes-agent 0.19 applies before it sends ``tool.completed`` with
    ``error: true`` (``agent/display.py::_detect_tool_failure``), so a
    history row (which has no error flag) gets the status the live event
    had.  A non-zero ``exit_code`` of ``terminal``; a JSON object with an
    ``error`` (or ``message`` with ``success: false``); else ``"error"`` /
    ``"failed"`` in the first 500 characters or a leading ``Error``.  A file
    write that landed (``bytes_written``, patch ``success: true``) is not a
    failure."""
    if not isinstance(result, str):
        return False
    try:
        data = json.loads(result.strip())
    except ValueError:
        data = None
    if name in _FILE_MUTATING and isinstance(data, Mapping) and not data.get("error"):
        if (name == "write_file" and "bytes_written" in data) or (name == "patch" and data.get("success") is True):
            return False
    if name == "terminal":
        return isinstance(data, Mapping) and data.get("exit_code") is not None and data.get("exit_code") != 0
    if isinstance(data, Mapping):
        err = data.get("error") or data.get("message")
        if err and (data.get("success") is False or "error" in data):
            return True
    lower = result[:500].lower()
    return '"error"' in lower or '"failed"' in lower or result.startswith("Error")


def _started(state: dict[str, Any], event: Mapping[str, Any]) -> None:
    """Remember when the run began (the session stream's ``ts``): rows of
    the run's transcript stamped earlier belong to earlier turns."""
    ts: Any = event.get("ts")  # JSON: checked here
    if "t0" not in state and type(ts) in (int, float) and math.isfinite(ts):
        state["t0"] = ts


def _this_turn(rows: list[Any], t0: Any) -> tuple[list[Mapping[str, Any]], int]:
    """The assistant and tool rows of a ``run.completed`` transcript that
    belong to this turn, and how many belong to earlier ones.  Hermes sends
    the whole conversation's rows when its turn start is off (after a failed
    turn left two user rows in a row): those come from its database, stamped
    before the run began; this turn's rows have no stamp yet."""
    turn: list[Mapping[str, Any]] = []
    earlier = 0
    for row in rows:
        if not isinstance(row, Mapping) or row.get("role") not in ("assistant", "tool"):
            continue
        ts = row.get("timestamp")
        if t0 is not None and type(ts) in (int, float) and ts < t0:
            earlier += 1
        else:
            turn.append(row)
    return turn, earlier


def _holds(turn: list[Mapping[str, Any]], text: str) -> bool:
    """Whether this turn's transcript holds ``text`` as a model answer (not
    Hermes' placeholder for an empty reply)."""
    want = text.strip()
    for row in turn:
        content = row.get("content")
        if row.get("role") == "assistant" and isinstance(content, str) and content != _EMPTY_REPLY:
            if content.strip() == want:
                return True
    return False


def _name(event: Mapping[str, Any]) -> str | None:
    name = event.get("event")
    if name and isinstance(name, str):
        return name
    name = event.get("type")
    return name if name and isinstance(name, str) else None


def _is_map(v: Any) -> bool:
    """``isinstance(v, Mapping)``, with JSON's dict checked first (the ABC check costs more)."""
    return type(v) is dict or isinstance(v, Mapping)


class HermesProtocol(AdapterProtocol):
    """hermes-agent's ``/v1/runs`` events and session chat stream (module docstring)."""

    name = "hermes"
    #: chatkit's words on this wire (decisions.md 279)
    wire_terms = {
        "completed": "`event: run.completed` (then `done`)",
        "failed": "`event: run.failed`, or `error` on the session chat stream",
        "interrupted": "`event: run.cancelled` (after `POST /v1/runs/{id}/stop`) or `run.interrupted`",
        "output": "`message.delta` / `assistant.delta`, `tool.started` / `tool.completed`, and `run.completed`'s "
        "`output` or `messages[]`",
        "event id": "nothing: no SSE `id:` lines (payloads carry `seq`)",
    }
    wire_examples = {
        "CK101": "GET /v1/runs/run_1/events                          SSE\n"
        '  event: message.delta    data: {"delta":"Hi","run_id":"run_1"}\n'
        '  event: run.completed    data: {"output":"Hi","run_id":"run_1"}   completed\n'
        '  event: message.delta    data: {"delta":" again","run_id":"run_1"}   after the terminal',
        "CK102": "GET /v1/runs/run_1/events                          SSE\n"
        '  event: message.delta    data: {"delta":"Hello, wor","run_id":"run_1"}\n'
        "  (the stream ends: no run.completed, run.failed or run.cancelled)",
        "CK105": "GET /v1/runs/run_1/events                          SSE\n"
        '  event: tool.started     data: {"tool":"search","run_id":"run_1"}\n'
        '  event: run.completed    data: {"output":"","run_id":"run_1"}   rejected: active-work (no tool.completed)',
        "CK302": "GET /v1/runs/run_1/events                          SSE\n"
        '  event: run.failed       data: {"error":"","run_id":"run_1"}   no reason',
    }

    # -- input ------------------------------------------------------------------

    def encode_input(self, input: Any, ctx: EncodeContext) -> Any:
        body: dict[str, Any] = {"input": input_text(input)}
        if ctx.session_id:
            body["session_id"] = ctx.session_id
        history = []
        for m in ctx.messages:
            text = "".join(p.text for p in m.parts if isinstance(p, TextPart))
            if m.role in ("user", "assistant") and text:
                history.append({"role": m.role, "content": text})
        if history:
            body["conversation_history"] = history
        return body

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        return [_user(ctx.run_id, input_text(input))]

    def decode_input(self, body: Any) -> Any:
        if not isinstance(body, Mapping):
            return None
        value = body.get("input") or body.get("message")
        return input_text(value) if value else None

    # -- events -----------------------------------------------------------------

    def identify_event(self, event: Any) -> EventIdentity | None:
        if not _is_map(event) or not _str(event.get("run_id")):
            return None
        kind = _name(event)
        return EventIdentity(
            run_id=event["run_id"], starts_run=kind == "run.started", ends_response=kind in _ENDS
        )

    def event_limits(self, event: Any) -> tuple[str, ...]:
        """``tool.completed`` carries no result on either surface,
        ``tool.started`` on ``/v1/runs`` no arguments, and no ``/v1/runs``
        event the model's reasoning: its ``run.completed`` (``output``, no
        ``messages``) says so for the run (module docstring)."""
        if not _is_map(event):
            return ()
        kind = _name(event)
        if kind == "tool.completed" and not any(k in event for k in ("result", "output", "content")):
            return (TOOL_RESULT,)
        if kind == "tool.started" and "args" not in event and "arguments" not in event:
            return (TOOL_ARGS,)
        if kind == "run.completed" and "output" in event and "messages" not in event:
            return (REASONING,)  # /v1/runs: no event carries the model's reasoning (only history has it)
        return ()

    def history_limits(self, value: Any, session_id: str) -> tuple[str, ...]:
        """History rows carry integer row ids and no run id: the live stream's
        ids (``msg_<hex>``, ``assistant:{run}``, ``user:{run}``) never reach
        history (module docstring)."""
        return (HISTORY_IDS,)

    def event_sequence(self, event: Any) -> int | float | None:
        seq = event.get("seq") if _is_map(event) else None
        if seq is None:
            return None
        return seq if isinstance(seq, (int, float)) and not isinstance(seq, bool) else None

    def event_known(self, event: Any) -> bool | None:
        """A Hermes event of either surface (one that decodes to nothing is then
        a known event without output, not an unknown type)."""
        return _is_map(event) and _name(event) in _KNOWN

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        if not _is_map(event):
            return []  # DONE, keepalives
        kind = _name(event)
        handler = _DECODERS.get(kind) if kind is not None else None
        # done, reasoning.available, tool.progress, unknown events: no update
        return handler(self, kind, event, ctx) if handler is not None else []  # type: ignore[arg-type]  # kind is a str when handler is set

    def _message_started(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        st = ctx.state
        _started(st, event)
        msg = event.get("message")
        if isinstance(msg, Mapping) and _str(msg.get("id")) and "answer" not in st:
            st["mid"] = msg["id"]
        return []

    def _run_started(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        _started(ctx.state, event)
        um = event.get("user_message")
        text = um.get("content") if isinstance(um, Mapping) else None
        return [MessageUpdate(_user(ctx.run_id, text))] if isinstance(text, str) else []

    def _delta(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        delta = event.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        answer = self._answer(event, ctx)
        ctx.state["streamed"] = True
        pid, new = answer.delta(delta)
        if pid is None:
            return []
        if new:
            return [MessageUpdate(answer.message()), PhaseUpdate("generating")]
        return [DeltaUpdate(answer.message_id, pid, delta)]

    def _tool_started(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        answer = self._answer(event, ctx)
        ctx.state["streamed"] = True
        answer.tool_started(event.get("tool") or event.get("tool_name"), event.get("args", ABSENT))
        return [MessageUpdate(answer.message()), PhaseUpdate("tool")]

    def _tool_ended(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        answer = self._answer(event, ctx)
        name = event.get("tool") or event.get("tool_name")
        failed = kind == "tool.failed" or event.get("error") is True
        err = _tool_error(name) if failed else ABSENT
        if not answer.tool_ended(name, "failed" if failed else "completed", err):
            return []
        return [MessageUpdate(answer.message())]

    def _assistant_completed(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        answer = self._answer(event, ctx)
        if isinstance(event.get("content"), str):
            ctx.state["final"] = event["content"]
        return [MessageUpdate(answer.message())] if answer.final_text(event.get("content")) else []

    def _run_completed(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        return self._completed(event, ctx)

    def _run_failed(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        return [FailedUpdate(_failure("run.failed", event.get("error"), "agent run failed"))]

    def _error(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        return [FailedUpdate(_failure("error", event.get("message"), "session chat stream failed"))]

    def _interrupted(self, kind: str, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        return [InterruptedUpdate(_str(event.get("reason")))]

    def _answer(self, event: Mapping[str, Any], ctx: DecodeContext) -> _Answer:
        answer = ctx.state.get("answer")
        if answer is None:
            rid = _str(event.get("run_id")) or ctx.run_id
            mid = ctx.state.get("mid") or _str(event.get("message_id")) or f"assistant:{rid}"
            answer = ctx.state["answer"] = _Answer(mid, ctx.run_id, rid)
        return answer

    def _completed(self, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        out: list[ProtocolUpdate] = []
        st = ctx.state
        answer = st.get("answer")
        rows = event.get("messages")
        if isinstance(rows, list):
            live = answer or self._answer(event, ctx)
            turn, earlier = _this_turn(rows, st.get("t0"))
            fresh = _Answer(live.message_id, live.run_id, live.key)
            for row in turn:
                fresh.add_row(row)
            shown = live
            if fresh.parts and _in_order(live.tool_names(), fresh.tool_names()):
                st["answer"] = shown = fresh
            notes: dict[str, Any] = {}
            if earlier:
                notes[EARLIER_ROWS] = earlier
            final = st.get("final")
            if not st.get("streamed") and isinstance(final, str) and final.strip() and not _holds(turn, final):
                notes[REPORTED_FAILURE] = final  # what Hermes reported instead of an answer (decisions.md 253)
            msg = shown.message()
            if notes:
                msg = noted(msg, notes)
            if msg != live.message() or answer is None:
                out.append(MessageUpdate(msg))
        elif "output" in event:
            live = answer or self._answer(event, ctx)
            if live.final_text(event.get("output")):
                out.append(MessageUpdate(live.message()))
        out.append(CompletedUpdate())
        return out

    # -- history and status -----------------------------------------------------

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        """``GET /api/sessions/{id}/messages`` (``{"object": "list", "data": [rows]}``)."""
        rows = value.get("data") if isinstance(value, Mapping) else value
        if not isinstance(rows, list):
            raise HistoryFormatError("hermes history has no 'data' list")
        messages: list[RuntimeMessage] = []
        answer: _Answer | None = None
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                continue
            rid = str(row["id"]) if row.get("id") is not None else f"#{i}"
            role = row.get("role")
            if role in ("user", "system"):
                if answer is not None:
                    messages.append(answer.message())
                    answer = None
                msg = RuntimeMessage(
                    f"{role}:{rid}", role, (TextPart("text", input_text(row.get("content"))),)
                )
                messages.append(msg)
            elif role in ("assistant", "tool"):
                if answer is None:
                    answer = _Answer(f"assistant:{rid}", None, f"assistant:{rid}")
                answer.add_row(row)
        if answer is not None:
            messages.append(answer.message())
        return HistoryResult(messages=tuple(m for m in messages if m.parts), has_more=False)

    def decode_status(
        self, value: Any, session_id: str | None = None, run_id: str | None = None
    ) -> HistoryRunSnapshot | None:
        """``GET /v1/runs/{id}`` -> a settled run's snapshot, or ``None`` when the
        run is still queued/running/waiting_for_approval/stopping, the body is
        not a run status, or it names another run than ``run_id``."""
        if not isinstance(value, Mapping):
            return None
        rid = _str(value.get("run_id")) or run_id
        if not rid or (run_id is not None and rid != run_id):
            return None
        status = _SETTLED.get(value["status"]) if isinstance(value.get("status"), str) else None
        if status is None:
            return None
        created: Any = value.get("created_at")  # JSON: checked by ok below
        ok = type(created) in (int, float) and math.isfinite(created * 1000) and created >= 0
        error = (
            _failure("run.failed", value.get("error"), "agent run failed")
            if status == "failed"
            else ABSENT
        )
        return HistoryRunSnapshot(
            id=rid,
            status=status,
            created_at=created * 1000 if ok else None,
            error=error,
        )


def _failure(code: str, text: Any, default: str) -> RunError:
    """A failure with the backend's text; without one (``""``, missing: what
    ``str(exc)`` gives for a bare exception) ``default`` is shown and the
    error says the backend sent none (CK302)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return fallback_error(code, default, sent=text)
    return RunError(code, _message(text, default))


def _message(v: Any, default: str) -> str:
    if isinstance(v, str) and v:
        return v
    return default if v is None or v == "" else json.dumps(v, default=str)


#: Event name -> HermesProtocol's decoder for it (both surfaces' names).
_DECODERS: dict[str, Callable[[HermesProtocol, str, Mapping[str, Any], DecodeContext], list[ProtocolUpdate]]] = {
    "message.delta": HermesProtocol._delta,
    "assistant.delta": HermesProtocol._delta,
    "message.started": HermesProtocol._message_started,
    "run.started": HermesProtocol._run_started,
    "tool.started": HermesProtocol._tool_started,
    "tool.completed": HermesProtocol._tool_ended,
    "tool.failed": HermesProtocol._tool_ended,
    "approval.request": lambda self, kind, event, ctx: [PhaseUpdate("awaiting-input")],
    "approval.responded": lambda self, kind, event, ctx: [PhaseUpdate("tool")],
    "assistant.completed": HermesProtocol._assistant_completed,
    "run.completed": HermesProtocol._run_completed,
    "run.failed": HermesProtocol._run_failed,
    "error": HermesProtocol._error,
    "run.cancelled": HermesProtocol._interrupted,
    "run.interrupted": HermesProtocol._interrupted,
}
