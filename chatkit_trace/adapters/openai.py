"""The built-in ``openai`` adapter: OpenAI-compatible streaming (SPEC R2, R11.4).

Wire reference: OpenAI's API reference (Chat Completions streaming, Responses
streaming events) and the real captures in ``recordings/captures/openai``.
chatkit's TypeScript name is ``createOpenAiAdapter``; registry name ``openai``.

What a run looks like on the wire
---------------------------------
A run is one or more ``POST /v1/chat/completions`` responses (``stream:
true``), each a series of ``chat.completion.chunk`` objects ending with the
``[DONE]`` sentinel.  In the OpenAI tool loop a response that ends with
``finish_reason: tool_calls`` is followed by a *new* request of the **same
run**: the client ran the tools and sends their results as ``role: tool``
messages.  Only the finish reason of the last response concludes the run.

How it is decoded (one assistant message per run)
-------------------------------------------------
Ids come from protocol content and the run id, never from arrival order
(R4.3), exactly as in the seed's "my protocol" example, so a backend can
write a history with the same ids:

* the user message is ``user:{runId}`` with one text part ``text``
  (:meth:`OpenAIProtocol.project_input`);
* the answer is **one** message ``assistant:{runId}`` for the whole run,
  across every request of the tool loop;
* text and reasoning parts are ``text:{n}`` / ``reasoning:{n}``, where ``n``
  counts the text/reasoning *segments* of the answer from 0.  A tool call, a
  switch between reasoning and text, or a new response (the next request of
  the tool loop) closes the open segment; the next text opens a new one.
  E.g. ``reasoning:0, text:1, tool:call_a, text:2``.  Choices other than 0
  (``n > 1``) get a ``choice{c}:`` prefix and their own counter;
* a tool call is ``tool:{tool_call_id}``.  The deprecated ``function_call``
  form has no id on the wire: its calls are ``function_call:{k}``, the k-th
  such call of the run.

Updates: a part that opens, a tool call that opens or changes, and tool
results give a :class:`MessageUpdate` with the whole message; every further
text fragment of an open part is a :class:`DeltaUpdate` (O(1) in the Core).
Phases are emitted on change only: ``thinking`` (reasoning), ``generating``
(text), ``tool`` (a tool call opened), ``awaiting-input`` (the response asked
the client for tool results: the tool loop waits for its next request).

Tool calls
----------
Fragments are keyed by **(choice index, tool_calls[].index)**; ``id``,
``name`` and ``type`` come from the first fragment that has them (never
concatenated), ``function.arguments`` are concatenated.  A fragment with a
*different* id at an index already in use is a new call (servers that number
every call 0); one without an index joins the call with its id, else the last.  The part appears as
soon as it has an id and a name, **without** ``args`` (absent): partial JSON
is neither parsed nor shown (``partialResult`` is for partial *results*, not
arguments).  When the call's choice finishes, the arguments are parsed once:
an object becomes ``args``; an empty string is ``{}``; anything else (invalid
JSON, a non-object) leaves ``args`` absent and is kept in
``ctx.state["invalid_args"]`` for the analyzers.

Tool results.  The stream never carries them: the client runs the tool and
sends ``{"role": "tool", "tool_call_id", "content"}`` in the **next request**
of the run.  :func:`tool_results_from_body` reads them from that request
body, and :func:`tool_results_event` wraps them in chatkit-trace's own event
``{"type": "chatkit-trace.tool-results", "results": {id: result}}``, which
the pipeline (or a tool-loop driver) feeds through ``decode_event`` of the
same run before the continuation's chunks: it sets ``result`` on those
tool-call parts (one MessageUpdate).  A tool ``content`` that parses as JSON
becomes that value, any other string stays a string (``encode_input`` does
the inverse: strings as they are, anything else ``json.dumps``).  A call that
never gets a result stays ``running``: if the run then finishes ``stop``, the
Core rejects the completion ``active-work`` (CK105), so such a run is never
reported completed-clean by accident.

Conclusions
-----------
* ``stop`` / ``length`` / ``content_filter``: :class:`CompletedUpdate` once
  every choice seen in the response has finished (the truncation or policy
  reason stays in the frame for the analyzers; CompletedUpdate carries none).
* ``tool_calls`` / ``function_call``: **not** a conclusion: phase
  ``awaiting-input`` (the run waits for the client, which runs the tools and
  sends their results in the run's next request); the ids still waiting
  are in ``ctx.state["awaiting_tools"]``.
* ``error`` (hermes-agent) and any frame with a truthy top-level ``error``
  (``data: {"error": {...}}``): :class:`FailedUpdate` with a
  :class:`~chatkit_trace.core.RunError` whose ``code`` is the protocol's own
  code as a string (``"500"``, ``"rate_limit_exceeded"``; ``type`` when
  ``code`` is null), ``message`` the first sentence of the server's message
  and ``cause`` the raw error object (:func:`openai_run_error`).
* any other finish reason: reported in ``ctx.state["unknown_finish"]``, no
  conclusion (R3.4: the adapter never invents an outcome).
* ``[DONE]`` (:data:`chatkit_trace.wire.DONE`, or the string ``"[DONE]"``) is
  the end of the reader and **never** a conclusion; ``ctx.state["done"]`` is
  set (reset when the next response of the run begins), so a caller can tell
  "ended with ``[DONE]`` and no finish" (CK104) from a cut connection.
* the usage chunk (``choices: []``, or litellm's ``[{"index":0,"delta":{}}]``)
  has no output; its ``usage`` is kept in ``ctx.state["usage"]``.
* a stream that just ends decodes to nothing (R2.5, R3.4).

Other ``delta`` fields: ``reasoning_content`` (or ``reasoning``) is a
reasoning part; ``refusal`` is shown as text; ``<think>`` inside ``content``
stays text (the wire does not mark it).  Frames without ``choices`` and
``error`` (``run.started``, vendor ``event:`` frames such as
``hermes.tool.progress``) decode to ``[]``.  A non-streaming
``chat.completion`` body decodes like one chunk whose delta is the message.

Run identity (R11.4): chatkit's extension puts ``run_id`` on chunks and sends
``{"run_id", "type": "run.started"}``; :meth:`~OpenAIProtocol.identify_event`
answers from those, and a chunk without ``run_id`` cannot be routed.

The Responses API
-----------------
``response.*`` events decode into the same single assistant message, with
part ids from the item ids: ``text:{item_id}:{content_index}``,
``reasoning:{item_id}:s{summary_index}`` (summaries),
``reasoning:{item_id}:{content_index}`` (reasoning text) and
``tool:{call_id}``.  ``response.completed`` concludes unless a
``function_call`` of the response has no ``function_call_output`` (then it
is the tool loop, like ``finish_reason: tool_calls``);
``response.incomplete`` completes (truncated); ``response.failed`` and
``error`` fail.  ``sequence_number`` is not used as a source sequence: it
restarts with every response of a tool loop and litellm's bridge sends it out
of order.

History: OpenAI has no history endpoint; :meth:`~OpenAIProtocol.decode_history`
reads chatkit's own ``HistoryResult`` JSON (R8.1) from the route the profile
names, with :func:`chatkit_trace.core.history_from_json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import (
    ABSENT,
    HistoryResult,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    freeze,
    history_from_json,
    thaw,
)
from ..wire import DONE
from ._limits import WITHHELD
from ._protocol import AdapterProtocol, DecodeContext, EncodeContext, EventIdentity
from ._updates import (
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    MessageUpdate,
    PhaseUpdate,
    ProtocolUpdate,
)

__all__ = [
    "CONCLUSIVE_FINISH",
    "TOOL_LOOP_FINISH",
    "TOOL_RESULTS",
    "OpenAIProtocol",
    "openai_run_error",
    "tool_results_event",
    "tool_results_from_body",
    "user_message",
]

#: ``type`` of chatkit-trace's tool-results event (never sent by a server).
TOOL_RESULTS = "chatkit-trace.tool-results"
#: Finish reasons that conclude a run (``completed``).
CONCLUSIVE_FINISH = frozenset({"stop", "length", "content_filter"})
#: Finish reasons that continue the tool loop under the same run id.
TOOL_LOOP_FINISH = frozenset({"tool_calls", "function_call"})

_RETRYABLE = frozenset({"429", "rate_limit_exceeded", "rate_limit_error", "throttling_error"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_MAX_MESSAGE = 300


# --------------------------------------------------------------------------- helpers


def _content_text(content: Any) -> str:
    """The text of an OpenAI ``content`` (a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, Mapping) and isinstance(p.get("text"), str):
                out.append(p["text"])
        return "".join(out)
    return ""


def _sentence(message: Any) -> str:
    """One human sentence from a server's error message (R5.1)."""
    if not isinstance(message, str):
        return ""
    text = " ".join(message.strip().splitlines()[0].split()) if message.strip() else ""
    text = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 1].rstrip() + "…"
    return text


def openai_run_error(error: Any, *, fallback_code: str = "error") -> RunError:
    """A :class:`RunError` from an OpenAI error object.

    ``code`` is the protocol's own code as a string (``"500"`` stays
    ``"500"``, ``429`` becomes ``"429"``), or the ``type`` when the code is
    null, or ``fallback_code``; ``message`` is the first sentence of the
    server's message; ``cause`` is the raw object.  ``retryable`` is ``True``
    for rate limits and omitted otherwise (R13.9).
    """
    if isinstance(error, Mapping):
        code = error.get("code")
        etype = error.get("type")
        if not isinstance(etype, str):
            etype = None
        if isinstance(code, bool):
            code_s = str(code).lower()
        elif isinstance(code, (str, int, float)) and str(code) != "":
            code_s = str(code)
        elif etype:
            code_s = etype
        else:
            code_s = fallback_code
        message = _sentence(error.get("message")) or f"The server reported the error {code_s}."
        retryable = True if code_s in _RETRYABLE or etype in _RETRYABLE else None
        return RunError(code_s, message, retryable, freeze(dict(error)))
    if isinstance(error, str) and error.strip():
        return RunError(fallback_code, _sentence(error), None, error)
    return RunError(
        fallback_code, f"The server reported an error ({fallback_code}).", None, freeze(error)
    )


def _result_from_content(content: Any) -> Any:
    """A tool message's ``content`` as a result: JSON if it parses, else the text."""
    if isinstance(content, list):
        content = _content_text(content)  # content parts ([{type: input_text, text}])
    if not isinstance(content, str):
        return freeze(content)
    try:
        return freeze(json.loads(content))
    except (ValueError, RecursionError):
        return content


def _content_from_result(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(thaw(result), ensure_ascii=False)


def _parse_args(raw: str) -> Any:
    """Complete argument text -> an object, or ABSENT when it is not one."""
    if not raw.strip():
        return freeze({})
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return ABSENT
    return freeze(value) if isinstance(value, dict) else ABSENT


def _index(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _last_user_turn(items: Sequence[Any]) -> int:
    """Index of the last user message/item in a request body's list (-1 if none)."""
    for i in range(len(items) - 1, -1, -1):
        m = items[i]
        if isinstance(m, Mapping) and m.get("role") == "user":
            return i
    return -1


def tool_results_from_body(body: Any) -> dict[str, Any]:
    """The tool results a continuation request carries: ``{tool_call_id: result}``.

    Reads the messages after the last user message (the current run's tool
    loop): ``role: tool`` messages by ``tool_call_id``; the deprecated
    ``role: function`` messages as ``function_call:{k}`` (the k-th in order);
    Responses API bodies' ``function_call_output`` items by ``call_id``.
    Results are JSON when the content parses, else the text.  Empty when the
    body has none (a first request).
    """
    if not isinstance(body, Mapping):
        return {}
    out: dict[str, Any] = {}
    msgs = body.get("messages")
    if isinstance(msgs, list):
        k = 0
        for m in msgs[_last_user_turn(msgs) + 1 :]:
            if not isinstance(m, Mapping):
                continue
            if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
                out[m["tool_call_id"]] = _result_from_content(m.get("content"))
            elif m.get("role") == "function":
                out[f"function_call:{k}"] = _result_from_content(m.get("content"))
                k += 1
        return out
    items = body.get("input")
    if isinstance(items, list):
        for it in items[_last_user_turn(items) + 1 :]:
            if (
                isinstance(it, Mapping)
                and it.get("type") == "function_call_output"
                and isinstance(it.get("call_id"), str)
            ):
                out[it["call_id"]] = _result_from_content(it.get("output"))
    return out


def tool_results_event(body: Any, run_id: str | None = None) -> dict[str, Any] | None:
    """chatkit-trace's tool-results event for a continuation request, or ``None``.

    Feed it through ``decode_event`` of the same run before the continuation's
    chunks: ``{"type": "chatkit-trace.tool-results", "results": {...}}`` (plus
    ``run_id`` when given, so a subscription can route it).
    """
    results = tool_results_from_body(body)
    if not results:
        return None
    event: dict[str, Any] = {"type": TOOL_RESULTS, "results": results}
    if run_id is not None:
        event["run_id"] = run_id
    return event


def user_message(run_id: str, text: str) -> RuntimeMessage:
    """The user message of a run: ``user:{runId}`` with one part ``text``."""
    return RuntimeMessage(f"user:{run_id}", "user", (TextPart("text", text),), run_id=run_id)


def _messages_text(msgs: Sequence[Any]) -> str | None:
    """The last user message's text, or None for a tool-loop continuation."""
    items = [m for m in msgs if isinstance(m, Mapping)]
    if not items:
        return None
    last = items[-1]
    if last.get("role") in ("tool", "function") or last.get("type") == "function_call_output":
        return None
    i = _last_user_turn(items)
    return _content_text(items[i].get("content")) if i >= 0 else None


def _input_text(input: Any) -> str | None:
    """The user text of an input: a string, ``{"text": …}`` or a messages list."""
    if isinstance(input, str):
        return input
    if isinstance(input, Mapping):
        if "text" in input:
            text = input.get("text")
            return text if isinstance(text, str) else ("" if text is None else str(text))
        msgs = input.get("messages")
        return _messages_text(msgs) if isinstance(msgs, list) else None
    if isinstance(input, list):
        return _messages_text(input)
    return None


# --------------------------------------------------------------------------- the answer


class _Segment:
    """One text/reasoning part being written: chunks joined only when needed."""

    __slots__ = ("_cache", "chunks", "kind", "pid")

    def __init__(self, kind: str, pid: str, text: str) -> None:
        self.kind = kind
        self.pid = pid
        self.chunks = [text]
        self._cache: tuple[int, Any] | None = None

    def part(self) -> TextPart | ReasoningPart:
        cache = self._cache
        if cache is not None and cache[0] == len(self.chunks):
            return cache[1]  # type: ignore[no-any-return]
        text = "".join(self.chunks)
        self.chunks[:] = [text]
        part = (TextPart if self.kind == "text" else ReasoningPart)(self.pid, text)
        self._cache = (1, part)
        return part


class _Answer:
    """The run's one assistant message; live decoding builds it part by part.

    Text is kept as our own chunk lists (never by appending to the part
    objects handed to the Core, R13.1), so a delta costs O(1) here too.
    """

    __slots__ = ("counters", "items", "message_id", "open", "run_id", "where")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.message_id = f"assistant:{run_id}"
        self.items: list[_Segment | ToolCallPart] = []
        self.where: dict[str, int] = {}
        self.counters: dict[int, int] = {}
        self.open: dict[int, _Segment] = {}

    def message(self) -> RuntimeMessage:
        parts = tuple(i.part() if isinstance(i, _Segment) else i for i in self.items)
        return RuntimeMessage(self.message_id, "assistant", parts, run_id=self.run_id)

    def update(self) -> MessageUpdate:
        return MessageUpdate(self.message())

    def _put(self, pid: str, item: _Segment | ToolCallPart) -> None:
        at = self.where.get(pid)
        if at is None:
            self.where[pid] = len(self.items)
            self.items.append(item)
        else:
            self.items[at] = item  # a reused id replaces its part (the Core would merge it too)

    def write(self, choice: int, kind: str, text: str) -> ProtocolUpdate:
        """Chat completions: append to the choice's open segment or open the next."""
        seg = self.open.get(choice)
        if seg is not None and seg.kind == kind:
            seg.chunks.append(text)
            return DeltaUpdate(self.message_id, seg.pid, text)
        n = self.counters.get(choice, 0)
        self.counters[choice] = n + 1
        prefix = f"choice{choice}:" if choice else ""
        seg = _Segment(kind, f"{prefix}{kind}:{n}", text)
        self._put(seg.pid, seg)
        self.open[choice] = seg
        return self.update()

    def write_at(self, pid: str, kind: str, text: str) -> ProtocolUpdate:
        """Responses API: append to the part with this id, or open it."""
        at = self.where.get(pid)
        item = self.items[at] if at is not None else None
        if isinstance(item, _Segment):
            item.chunks.append(text)
            return DeltaUpdate(self.message_id, pid, text)
        self._put(pid, _Segment(kind, pid, text))
        return self.update()

    def has(self, pid: str) -> bool:
        return pid in self.where

    def close(self, choice: int | None = None) -> None:
        if choice is None:
            self.open.clear()
        else:
            self.open.pop(choice, None)

    def tool(self, call_id: str) -> ToolCallPart | None:
        at = self.where.get(f"tool:{call_id}")
        item = self.items[at] if at is not None else None
        return item if isinstance(item, ToolCallPart) else None

    def set_tool(self, part: ToolCallPart) -> None:
        self._put(part.id, part)

    def tools(self) -> list[ToolCallPart]:
        return [i for i in self.items if isinstance(i, ToolCallPart)]


class _Call:
    """One tool call being assembled from fragments (keyed by choice and index)."""

    __slots__ = ("choice", "closed", "fragments", "id", "name", "position", "shown")

    def __init__(self, choice: int, position: int = 0) -> None:
        self.choice = choice
        #: Its order among the choice's calls in this response (for a missing id).
        self.position = position
        self.id: str | None = None
        self.name: str | None = None
        self.fragments: list[str] = []
        self.shown = False
        self.closed = False


def _answer(state: dict[str, Any], run_id: str) -> _Answer:
    answer = state.get("answer")
    if answer is None:
        answer = state["answer"] = _Answer(run_id)
    return answer


def _phase(state: dict[str, Any], phase: str, out: list[ProtocolUpdate]) -> None:
    if state.get("phase") != phase:
        state["phase"] = phase
        out.append(PhaseUpdate(phase))


def _begin_response(state: dict[str, Any], answer: _Answer, response_id: Any) -> None:
    """A new response of the run (the next request of the tool loop)."""
    answer.close()
    state["calls"] = {}
    state["finish"] = {}
    state["choices"] = set()
    state["done"] = False
    state["response_id"] = response_id
    state["responses"] = state.get("responses", 0) + 1


def _has_output(delta: Any) -> bool:
    if not isinstance(delta, Mapping):
        return False
    return any(
        delta.get(k)
        for k in (
            "content",
            "reasoning_content",
            "reasoning",
            "refusal",
            "tool_calls",
            "function_call",
        )
    )


def _flush_assistant(
    text: list[str],
    calls: list[ToolCallPart],
    known: Mapping[str, Any],
    out: list[dict[str, Any]],
    used: set[str],
) -> None:
    """One request's assistant message (content + tool_calls) and its tool messages."""
    if not text and not calls:
        return
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        msg["tool_calls"] = [
            {
                "id": c.tool_call_id,
                "type": "function",
                "function": {
                    "name": c.tool_name,
                    "arguments": json.dumps(thaw(c.args) if c.args is not ABSENT else {}),
                },
            }
            for c in calls
        ]
    out.append(msg)
    for c in calls:
        out.append(
            {
                "role": "tool",
                "tool_call_id": c.tool_call_id,
                "content": _content_from_result(known[c.tool_call_id]),
            }
        )
        used.add(c.tool_call_id)
    text.clear()
    calls.clear()


# --------------------------------------------------------------------------- the protocol


class OpenAIProtocol(AdapterProtocol):
    """OpenAI-compatible chat completions (and the Responses API) as a chatkit adapter.

    :param model: the ``model`` of request bodies (an input may override it
        with ``{"text": …, "model": …}``).
    :param tools: OpenAI tool definitions to put in every request body.
    :param system_prompt: a ``role: system`` message to send first.
    :param include_usage: ask for the usage chunk (``stream_options``).
    :param api: ``"chat"`` (``/v1/chat/completions`` bodies) or
        ``"responses"`` (``/v1/responses`` bodies) for :meth:`encode_input`;
        decoding always understands both.
    """

    name = "openai"
    #: chatkit's words on this wire (decisions.md 279)
    wire_terms = {
        "completed": "a chunk with `finish_reason` \"stop\", \"length\" or \"content_filter\", then `data: [DONE]` "
        "(Chat Completions); `response.completed` or `response.incomplete` (Responses)",
        "failed": "an `error` object in the stream or `finish_reason: \"error\"` (Chat Completions); "
        "`response.failed` or `error` (Responses); an HTTP error status before the stream",
        "interrupted": "nothing: the protocol has no stop event (the client closes the stream)",
        "output": "`choices[].delta.content` and `delta.tool_calls` (Chat Completions); `response.output_text.delta` "
        "and the output items (Responses)",
        "event id": "nothing: OpenAI's SSE has no `id:` lines, so the UI cannot deduplicate or resume",
    }
    wire_examples = {
        "CK101": 'POST /v1/chat/completions                          SSE\n'
        '  data: {"choices":[{"delta":{"content":"Hi"}}]}\n'
        '  data: {"choices":[{"delta":{},"finish_reason":"stop"}]}   completed\n'
        '  data: {"choices":[{"delta":{"content":" again"}}]}        after the terminal: never shown\n'
        '  data: [DONE]',
        "CK102": 'POST /v1/chat/completions                          SSE\n'
        '  data: {"choices":[{"delta":{"content":"Hello, wor"}}]}\n'
        '  (the body ends: no chunk with finish_reason, no data: [DONE])',
        "CK105": 'POST /v1/chat/completions                          SSE\n'
        '  data: {"choices":[{"delta":{"tool_calls":[{"id":"call_1","function":{"name":"search"}}]}}]}\n'
        '  data: {"choices":[{"delta":{},"finish_reason":"stop"}]}   rejected: active-work (no tool result)\n'
        '  data: [DONE]',
        "CK302": 'POST /v1/chat/completions                          HTTP 200, SSE\n'
        '  data: {"error":{"message":""}}                         no code, empty message',
    }

    #: For a tool-loop continuation request (see the module docstring):
    #: ``{tool_call_id: result}`` it carries, and the event to decode for it.
    tool_results_from_body = staticmethod(tool_results_from_body)
    tool_results_event = staticmethod(tool_results_event)

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        include_usage: bool = False,
        api: str = "chat",
    ) -> None:
        if api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")
        self.model = model
        self.tools = [dict(t) for t in tools] if tools else []
        self.system_prompt = system_prompt
        self.include_usage = include_usage
        self.api = api

    # -- input ------------------------------------------------------------------------

    def encode_input(self, input: Any, ctx: EncodeContext) -> dict[str, Any]:
        """A streaming request body from the session's messages plus ``input``.

        ``input`` is the user's text (a string or ``{"text": …}``, optionally
        with ``"model"``), an OpenAI messages list appended as is (``{"messages":
        [...]}`` or a bare list), or a tool-loop continuation ``{"tool_results":
        {tool_call_id: result}}``.  ``ctx.messages`` become OpenAI messages:
        user text; each assistant message split at its tool calls into
        ``{role: assistant, content, tool_calls}`` plus one ``role: tool``
        message per call that has a result.  Calls without a result are left
        out (OpenAI rejects tool_calls that no tool message answers);
        reasoning and system (session event) messages are not sent.
        """
        model = self.model
        text: str | None = None
        extra: list[Any] = []
        results: dict[str, Any] = {}
        if isinstance(input, str):
            text = input
        elif isinstance(input, Mapping):
            if isinstance(input.get("model"), str):
                model = input["model"]
            if "text" in input:
                text = _input_text(input)
            if isinstance(input.get("messages"), list):
                extra = list(input["messages"])
            tr = input.get("tool_results", input.get("toolResults"))
            if isinstance(tr, Mapping):
                results = dict(tr)
        elif isinstance(input, list):
            extra = list(input)
        if self.api == "responses":
            items = self._responses_items(ctx.messages, results)
            if text is not None:
                items.append({"role": "user", "content": text})
            items.extend(extra)
            body: dict[str, Any] = {"model": model, "input": items, "stream": True}
            if self.system_prompt:
                body["instructions"] = self.system_prompt
            if self.tools:
                body["tools"] = [dict(t) for t in self.tools]
            return body
        messages: list[Any] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.extend(self._chat_messages(ctx.messages, results))
        if text is not None:
            messages.append({"role": "user", "content": text})
        messages.extend(extra)
        body = {"model": model, "messages": messages, "stream": True}
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.tools:
            body["tools"] = [dict(t) for t in self.tools]
        return body

    @staticmethod
    def _known_results(
        messages: Sequence[RuntimeMessage], given: Mapping[str, Any]
    ) -> dict[str, Any]:
        known: dict[str, Any] = {}
        for m in messages:
            for p in m.parts:
                if (
                    isinstance(p, ToolCallPart)
                    and p.result is not ABSENT
                    and isinstance(p.tool_call_id, str)
                ):
                    known[p.tool_call_id] = p.result
        known.update(given)
        return known

    def _chat_messages(
        self, messages: Sequence[RuntimeMessage], given: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        known = self._known_results(messages, given)
        out: list[dict[str, Any]] = []
        used: set[str] = set()
        for m in messages:
            if m.role == "user":
                out.append({"role": "user", "content": m.text})
            elif m.role == "assistant":
                text: list[str] = []
                calls: list[ToolCallPart] = []
                for p in m.parts:
                    if isinstance(p, TextPart) and isinstance(p.text, str):
                        if calls:
                            _flush_assistant(text, calls, known, out, used)
                        text.append(p.text)
                    elif isinstance(p, ToolCallPart) and p.tool_call_id in known:
                        calls.append(p)
                _flush_assistant(text, calls, known, out, used)
        for call_id, result in given.items():
            if call_id not in used:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": _content_from_result(result),
                    }
                )
        return out

    def _responses_items(
        self, messages: Sequence[RuntimeMessage], given: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        known = self._known_results(messages, given)
        out: list[dict[str, Any]] = []
        used: set[str] = set()
        for m in messages:
            if m.role == "user":
                out.append({"role": "user", "content": m.text})
            elif m.role == "assistant":
                for p in m.parts:
                    if isinstance(p, TextPart) and isinstance(p.text, str) and p.text:
                        out.append({"role": "assistant", "content": p.text})
                    elif isinstance(p, ToolCallPart) and p.tool_call_id in known:
                        args = thaw(p.args) if p.args is not ABSENT else {}
                        out.append(
                            {
                                "type": "function_call",
                                "call_id": p.tool_call_id,
                                "name": p.tool_name,
                                "arguments": json.dumps(args),
                            }
                        )
                        out.append(
                            {
                                "type": "function_call_output",
                                "call_id": p.tool_call_id,
                                "output": _content_from_result(known[p.tool_call_id]),
                            }
                        )
                        used.add(p.tool_call_id)
        for call_id, result in given.items():
            if call_id not in used:
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": call_id,
                        "output": _content_from_result(result),
                    }
                )
        return out

    def decode_input(self, body: Any) -> Any:
        """The inverse of :meth:`encode_input`: ``{"text": …}`` of the last user
        message, or ``None`` for a tool-loop continuation (the last message is a
        tool result) or a body with no user message."""
        if not isinstance(body, Mapping):
            return None
        msgs = body.get("messages")
        if isinstance(msgs, list):
            text = _messages_text(msgs)
            return None if text is None else {"text": text}
        items = body.get("input")
        if isinstance(items, str):
            return {"text": items}
        if isinstance(items, list):
            text = _messages_text(items)
            return None if text is None else {"text": text}
        return None

    def project_input(self, input: Any, ctx: EncodeContext) -> list[RuntimeMessage]:
        """``user:{runId}`` with the input's text (R4.5); nothing for a continuation."""
        text = _input_text(input)
        return [] if text is None else [user_message(ctx.run_id, text)]

    # -- routing ----------------------------------------------------------------------

    def identify_event(self, event: Any) -> EventIdentity | None:
        """chatkit's extension (R11.4): ``run_id`` is the identity, ``type:
        run.started`` the passive start, any choice's ``finish_reason`` the end
        of this response's reader (a ``tool_calls`` finish included: the end of
        a reader is not a conclusion).  Without ``run_id``: ``None`` (cannot route)."""
        if type(event) is not dict and not isinstance(event, Mapping):
            return None
        run_id = event.get("run_id")
        if not run_id or not isinstance(run_id, str):
            return None
        kind = event.get("type")
        choices = event.get("choices")
        ends = isinstance(choices, list) and any(
            isinstance(c, Mapping) and bool(c.get("finish_reason")) for c in choices
        )
        if kind in ("response.completed", "response.failed", "response.incomplete"):
            ends = True
        return EventIdentity(run_id=run_id, starts_run=kind == "run.started", ends_response=ends)

    # -- decoding ---------------------------------------------------------------------

    def event_known(self, event: Any) -> bool | None:
        """Chunks, Responses API events and the run-identity extension are
        known even when they carry no output (a role chunk, a usage chunk,
        ``response.created``): only other shapes count as unknown (CK406)."""
        if not isinstance(event, Mapping):
            return None
        if "choices" in event or event.get("object") == "chat.completion.chunk" or "error" in event:
            return True
        kind = event.get("type")
        return isinstance(kind, str) and (kind.startswith("response.") or kind in ("run.started", TOOL_RESULTS, "error"))

    def event_limits(self, event: Any) -> tuple[str, ...]:
        """A content policy ended the answer (``finish_reason:
        content_filter``, a Responses ``response.incomplete`` for
        ``content_filter``): the completed update has no field for the
        reason (``output-withheld``; CK122 names it when the run has no
        answer)."""
        if type(event) is not dict:
            return ()
        choices = event.get("choices")
        if choices:
            if type(choices) is list:
                for c in choices:
                    if type(c) is dict and c.get("finish_reason") == "content_filter":
                        return (WITHHELD,)
            return ()
        if event.get("type") == "response.incomplete":
            response = event.get("response")
            details = response.get("incomplete_details") if type(response) is dict else None
            if type(details) is dict and details.get("reason") == "content_filter":
                return (WITHHELD,)
        return ()

    def request_events(self, body: Any, run_id: str) -> list[Any]:
        """The tool loop's continuation request carries the tool results."""
        event = tool_results_event(body, run_id)
        return [event] if event is not None else []

    def decode_event(self, event: Any, ctx: DecodeContext) -> list[ProtocolUpdate]:
        if type(event) is not dict:
            if event is DONE or event == "[DONE]":
                ctx.state["done"] = True
                return []
            if not isinstance(event, Mapping):
                return []
        kind = event.get("type")
        if kind == TOOL_RESULTS:
            return self._tool_results(
                event.get("results"), ctx.state, _answer(ctx.state, ctx.run_id)
            )
        if isinstance(kind, str) and (kind.startswith("response.") or kind == "error"):
            return self._response_event(kind, event, ctx)
        if (
            "choices" in event
            or event.get("error")
            or event.get("object") in ("chat.completion.chunk", "chat.completion")
        ):
            return self._chunk(event, ctx)
        return []  # run.started, vendor events (hermes.tool.progress …), unknown frames

    def _tool_results(
        self, results: Any, state: dict[str, Any], answer: _Answer
    ) -> list[ProtocolUpdate]:
        """Set ``result`` on this run's tool-call parts (the tool-results event)."""
        if not isinstance(results, Mapping):
            return []
        changed = False
        for call_id, result in results.items():
            part = answer.tool(str(call_id))
            value = freeze(result)
            if part is None or (part.result is not ABSENT and part.result == value):
                continue
            answer.set_tool(
                ToolCallPart(
                    part.id,
                    part.tool_call_id,
                    part.tool_name,
                    args=part.args,
                    status=part.status,
                    result=value,
                )
            )
            changed = True
        awaiting = state.get("awaiting_tools")
        if awaiting:
            state["awaiting_tools"] = tuple(i for i in awaiting if i not in results)
        return [answer.update()] if changed else []

    # -- chat completions ---------------------------------------------------------------

    def _chunk(self, event: Mapping[str, Any], ctx: DecodeContext) -> list[ProtocolUpdate]:
        state = ctx.state
        answer = _answer(state, ctx.run_id)
        out: list[ProtocolUpdate] = []
        choices = event.get("choices")
        choices = (
            [c for c in choices if type(c) is dict or isinstance(c, Mapping)]
            if isinstance(choices, list)
            else []
        )
        rid = event.get("id")
        finished = state.get("finish", {})
        if (
            "calls" not in state
            or state.get("done")
            or (rid is not None and state.get("response_id") not in (None, rid))
            or (
                finished
                and any(
                    _index(c.get("index")) in finished
                    and _has_output(c.get("delta") or c.get("message"))
                    for c in choices
                )
            )
        ):
            _begin_response(state, answer, rid)
        elif rid is not None:
            state["response_id"] = rid
        finishes: list[tuple[int, str]] = []
        for choice in choices:
            c = _index(choice.get("index"))
            state["choices"].add(c)
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")  # a non-streaming chat.completion
            if type(delta) is dict or isinstance(delta, Mapping):
                self._delta(c, delta, state, answer, out)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                finishes.append((c, reason))
        usage = event.get("usage")
        if usage is not None and isinstance(usage, Mapping):
            state["usage"] = thaw(usage)
        for c, reason in finishes:
            self._finish_choice(c, reason, state, answer, out)
        error = event.get("error")
        if error:
            out.append(FailedUpdate(openai_run_error(error)))
            return out
        if finishes:
            self._conclude(state, answer, out)
        return out

    def _delta(
        self,
        c: int,
        delta: Mapping[str, Any],
        state: dict[str, Any],
        answer: _Answer,
        out: list[ProtocolUpdate],
    ) -> None:
        reasoning = delta.get("reasoning_content")
        if not isinstance(reasoning, str) or not reasoning:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            _phase(state, "thinking", out)
            out.append(answer.write(c, "reasoning", reasoning))
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, list):
                text = _content_text(text)
            if isinstance(text, str) and text:
                _phase(state, "generating", out)
                out.append(answer.write(c, "text", text))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for tc in tool_calls:
                if isinstance(tc, Mapping):
                    self._tool_fragment(c, tc, state, answer, out)
        fc = delta.get("function_call")
        if fc is not None and isinstance(fc, Mapping):
            self._function_call_fragment(c, fc, state, answer, out)

    @staticmethod
    def _call_for(c: int, tc: Mapping[str, Any], calls: dict[Any, _Call]) -> _Call:
        """The call a fragment belongs to, keyed by (choice, tool index).

        A fragment carrying a *different* id at an index already in use starts
        a new call (servers that number every call 0); a fragment without an
        index (the SDK would crash) joins the call with its id, else the last one.
        """
        tid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
        idx = tc.get("index")
        mine = [(k, v) for k, v in calls.items() if k[0] == c and k[1] != "function_call"]
        if isinstance(idx, int) and not isinstance(idx, bool):
            same = [v for k, v in mine if k[1] == idx]
            if same and (tid is None or same[-1].id in (None, tid)):
                return same[-1]
            key: Any = (c, idx, len(same))
        else:
            match = next((v for _, v in mine if tid is not None and v.id == tid), None)
            if match is not None:
                return match
            if tid is None and mine:
                return mine[-1][1]
            key = (c, "no-index", len(mine))
        call = calls[key] = _Call(c, len(mine))
        return call

    def _tool_fragment(
        self,
        c: int,
        tc: Mapping[str, Any],
        state: dict[str, Any],
        answer: _Answer,
        out: list[ProtocolUpdate],
    ) -> None:
        call = self._call_for(c, tc, state["calls"])
        if call.closed:
            return
        if call.id is None and isinstance(tc.get("id"), str) and tc["id"]:
            call.id = tc["id"]
        fn = tc.get("function")
        if isinstance(fn, Mapping):
            if call.name is None and isinstance(fn.get("name"), str) and fn["name"]:
                call.name = fn["name"]
            args = fn.get("arguments")
            if isinstance(args, str) and args:
                call.fragments.append(args)
        self._show(call, state, answer, out)

    def _function_call_fragment(
        self,
        c: int,
        fc: Mapping[str, Any],
        state: dict[str, Any],
        answer: _Answer,
        out: list[ProtocolUpdate],
    ) -> None:
        calls = state["calls"]
        key = (c, "function_call")
        call = calls.get(key)
        if call is None:
            call = calls[key] = _Call(c)
            k = state.get("function_calls", 0)
            state["function_calls"] = k + 1
            call.id = f"function_call:{k}"
        if call.closed:
            return
        if call.name is None and isinstance(fc.get("name"), str) and fc["name"]:
            call.name = fc["name"]
        args = fc.get("arguments")
        if isinstance(args, str) and args:
            call.fragments.append(args)
        self._show(call, state, answer, out)

    def _show(
        self, call: _Call, state: dict[str, Any], answer: _Answer, out: list[ProtocolUpdate]
    ) -> None:
        """Open the tool-call part once it has an id and a name (no args yet)."""
        if call.shown or call.id is None or call.name is None:
            return
        call.shown = True
        answer.close(call.choice)
        _phase(state, "tool", out)
        answer.set_tool(ToolCallPart(f"tool:{call.id}", call.id, call.name))
        out.append(answer.update())

    def _finish_choice(
        self, c: int, reason: str, state: dict[str, Any], answer: _Answer, out: list[ProtocolUpdate]
    ) -> None:
        state["finish"][c] = reason
        answer.close(c)
        changed = False
        for call in state["calls"].values():
            if call.choice != c or call.closed:
                continue
            call.closed = True
            if call.id is None and call.name is not None:
                call.id = (
                    f"{state.get('response_id') or 'call'}:{c}:{call.position}"  # none on the wire
                )
            if call.id is None or call.name is None:
                state.setdefault("broken_calls", []).append({"id": call.id, "name": call.name})
                continue
            if not call.shown:
                self._show(call, state, answer, out)
            raw = "".join(call.fragments)
            args = _parse_args(raw)
            if args is ABSENT:
                state.setdefault("invalid_args", {})[call.id] = raw
                continue
            part = answer.tool(call.id)
            if part is not None and part.args != args:
                answer.set_tool(
                    ToolCallPart(
                        part.id,
                        part.tool_call_id,
                        part.tool_name,
                        args=args,
                        status=part.status,
                        result=part.result,
                    )
                )
                changed = True
        if changed:
            out.append(answer.update())

    def _conclude(self, state: dict[str, Any], answer: _Answer, out: list[ProtocolUpdate]) -> None:
        """The response's outcome once every choice seen has finished."""
        finish: dict[int, str] = state["finish"]
        if any(c not in finish for c in state["choices"]):
            return
        reasons = set(finish.values())
        if reasons & TOOL_LOOP_FINISH:
            _phase(state, "awaiting-input", out)  # the client runs the tools and continues the run
            state["awaiting_tools"] = tuple(
                p.tool_call_id
                for p in answer.tools()
                if p.result is ABSENT and p.status in (ABSENT, "running")
            )
            return
        if "error" in reasons:
            out.append(
                FailedUpdate(
                    RunError("error", 'The server ended the answer with finish_reason "error".')
                )
            )
            return
        if reasons <= CONCLUSIVE_FINISH:
            out.append(CompletedUpdate())
            return
        state["unknown_finish"] = sorted(reasons - CONCLUSIVE_FINISH)

    # -- Responses API ------------------------------------------------------------------

    def _response_event(
        self, kind: str, event: Mapping[str, Any], ctx: DecodeContext
    ) -> list[ProtocolUpdate]:
        # long-function: one branch per Responses API event type (splitting it by event family is left to a later change)
        state = ctx.state
        answer = _answer(state, ctx.run_id)
        out: list[ProtocolUpdate] = []
        items: dict[str, dict[str, Any]] = state.setdefault("items", {})
        if kind in ("response.created", "response.in_progress", "response.queued"):
            resp = event.get("response")
            rid = resp.get("id") if isinstance(resp, Mapping) else None
            if state.get("response_id") != rid or "calls" not in state or state.get("done"):
                _begin_response(state, answer, rid)
                state["response_calls"] = []
            return out
        if kind == "response.output_item.added" or kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, Mapping):
                self._response_item(item, kind.endswith(".done"), state, answer, out)
            return out
        item_id = event.get("item_id")
        if not isinstance(item_id, str):
            item_id = f"output{_index(event.get('output_index'))}"
        delta = event.get("delta")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            if isinstance(delta, str) and delta:
                _phase(state, "generating", out)
                out.append(
                    answer.write_at(
                        f"text:{item_id}:{_index(event.get('content_index'))}", "text", delta
                    )
                )
            return out
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if isinstance(delta, str) and delta:
                _phase(state, "thinking", out)
                out.append(
                    answer.write_at(self._reasoning_pid(kind, item_id, event), "reasoning", delta)
                )
            return out
        if kind in ("response.output_text.done", "response.refusal.done"):
            full = event.get("text", event.get("refusal"))
            pid = f"text:{item_id}:{_index(event.get('content_index'))}"
            if isinstance(full, str) and full and not answer.has(pid):
                out.append(answer.write_at(pid, "text", full))
            return out
        if kind in ("response.reasoning_summary_text.done", "response.reasoning_text.done"):
            full = event.get("text")
            pid = self._reasoning_pid(kind, item_id, event)
            if isinstance(full, str) and full and not answer.has(pid):
                out.append(answer.write_at(pid, "reasoning", full))
            return out
        if kind == "response.function_call_arguments.delta":
            info = items.get(item_id)
            if info is not None and isinstance(delta, str):
                info["fragments"].append(delta)
            return out
        if kind == "response.function_call_arguments.done":
            info = items.get(item_id)
            if info is not None and isinstance(event.get("arguments"), str):
                self._response_args(info, event["arguments"], state, answer, out)
            return out
        if kind in ("response.completed", "response.incomplete"):
            pending = [
                i
                for i in state.get("response_calls", [])
                if (p := answer.tool(i)) is not None
                and p.result is ABSENT
                and p.status in (ABSENT, "running")
            ]
            if kind == "response.completed" and pending:
                _phase(state, "awaiting-input", out)  # the client runs the tools and continues the run
                state["awaiting_tools"] = tuple(pending)
                return out
            out.append(CompletedUpdate())
            return out
        if kind == "response.failed":
            resp = event.get("response")
            err = resp.get("error") if isinstance(resp, Mapping) else None
            out.append(FailedUpdate(openai_run_error(err or {}, fallback_code="response.failed")))
            return out
        if kind == "error":
            err = event.get("error")
            if not isinstance(err, Mapping):
                err = {
                    "code": event.get("code"),
                    "message": event.get("message"),
                    "param": event.get("param"),
                }
            out.append(FailedUpdate(openai_run_error(err)))
            return out
        return out

    @staticmethod
    def _reasoning_pid(kind: str, item_id: str, event: Mapping[str, Any]) -> str:
        if kind.startswith("response.reasoning_summary"):
            return f"reasoning:{item_id}:s{_index(event.get('summary_index'))}"
        return f"reasoning:{item_id}:{_index(event.get('content_index'))}"

    def _response_item(
        self,
        item: Mapping[str, Any],
        done: bool,
        state: dict[str, Any],
        answer: _Answer,
        out: list[ProtocolUpdate],
    ) -> None:
        itype = item.get("type")
        item_id = item.get("id")
        if itype == "function_call":
            call_id = item.get("call_id") or item_id
            name = item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                return
            info = state["items"].get(item_id) if isinstance(item_id, str) else None
            if info is None:
                info = {"call_id": call_id, "fragments": [], "closed": False}
                if isinstance(item_id, str):
                    state["items"][item_id] = info
            if answer.tool(call_id) is None:
                _phase(state, "tool", out)
                answer.set_tool(ToolCallPart(f"tool:{call_id}", call_id, name))
                state.setdefault("response_calls", []).append(call_id)
                out.append(answer.update())
            args = item.get("arguments")
            if done and isinstance(args, str):
                self._response_args(info, args, state, answer, out)
            return
        if itype == "function_call_output":
            call_id = item.get("call_id")
            if isinstance(call_id, str) and "output" in item:
                out.extend(
                    self._tool_results(
                        {call_id: _result_from_content(item.get("output"))}, state, answer
                    )
                )
            return
        if itype == "message" and done and isinstance(item_id, str):
            content = item.get("content")
            if isinstance(content, list):
                for ci, part in enumerate(content):
                    if not isinstance(part, Mapping):
                        continue
                    text = part.get("text", part.get("refusal"))
                    pid = f"text:{item_id}:{ci}"
                    if isinstance(text, str) and text and not answer.has(pid):
                        out.append(answer.write_at(pid, "text", text))
            return
        if itype == "reasoning" and done and isinstance(item_id, str):
            summary = item.get("summary")
            if isinstance(summary, list):
                for si, part in enumerate(summary):
                    text = part.get("text") if isinstance(part, Mapping) else None
                    pid = f"reasoning:{item_id}:s{si}"
                    if isinstance(text, str) and text and not answer.has(pid):
                        out.append(answer.write_at(pid, "reasoning", text))

    def _response_args(
        self,
        info: dict[str, Any],
        raw: str,
        state: dict[str, Any],
        answer: _Answer,
        out: list[ProtocolUpdate],
    ) -> None:
        if info.get("closed"):
            return
        info["closed"] = True
        call_id = info["call_id"]
        args = _parse_args(raw)
        if args is ABSENT:
            state.setdefault("invalid_args", {})[call_id] = raw
            return
        part = answer.tool(call_id)
        if part is not None and part.args != args:
            answer.set_tool(
                ToolCallPart(
                    part.id,
                    part.tool_call_id,
                    part.tool_name,
                    args=args,
                    status=part.status,
                    result=part.result,
                )
            )
            out.append(answer.update())

    # -- history ------------------------------------------------------------------------

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        """chatkit's HistoryResult JSON (R8.1, camelCase), served by the backend."""
        if isinstance(value, HistoryResult):
            return value
        return history_from_json(value)
