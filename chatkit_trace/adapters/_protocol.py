"""The adapter protocol: what a protocol author writes (SPEC R2.3).

Subclass :class:`AdapterProtocol` and implement ``encode_input`` and
``decode_event``; the other hooks are optional and absent by default.  The
factory (:func:`~chatkit_trace.adapters.create_adapter`) does the rest:
requests, cancellation, per-(session, run) decode state, deduplication by
outer event id and subscription routing.

TypeScript names: ``encodeInput`` is :meth:`encode_input`, ``decodeEvent``
:meth:`decode_event`, ``projectInput`` :meth:`project_input`,
``identifyEvent`` :meth:`identify_event`, ``decodeHistory``
:meth:`decode_history`, ``replayHistory`` :meth:`replay_history`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core import HistoryResult, HistoryRunSnapshot, RuntimeMessage
from ..wire import DONE
from ._updates import ProtocolUpdate

__all__ = [
    "AdapterProtocol",
    "DecodeContext",
    "EncodeContext",
    "EventIdentity",
    "StreamEvent",
    "RunRequest",
    "AbortRequestArgs",
    "ResumeRequestArgs",
    "HistoryRequestArgs",
]


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """``{data, eventId?}`` (SPEC R2.2): one event of a stream."""

    data: Any
    event_id: str | None = None


class DecodeContext(msgspec.Struct):
    """What ``decode_event`` knows about the event (``{sessionId, runId, eventId?}``).

    ``state`` is this (session, run)'s decode state (tool-argument fragments,
    text segments …): a dict owned by the factory, created on first use and
    released at the run's terminal update or when the run is unbound (R2.7).
    ``source`` is ``stream`` or ``history``.
    """

    session_id: str
    run_id: str
    event_id: str | None = None
    state: dict[str, Any] = msgspec.field(default_factory=dict)
    source: str = "stream"


@dataclass(frozen=True, slots=True)
class EncodeContext:
    """``{sessionId, runId, messages}`` for ``encode_input``: ``messages`` are
    the session's messages before this run."""

    session_id: str
    run_id: str
    messages: tuple[RuntimeMessage, ...] = ()


class EventIdentity(msgspec.Struct, frozen=True):
    """``identifyEvent``'s answer (SPEC R2.6, R11.2): whose event this is.

    ``session_id``: the session the event names (on a socket shared by several
    sessions it routes the event there; on a stream of one session another
    session is rejected ``wrong-session``).  ``event_id``: the id the event
    carries, for a transport without outer ids (a WebSocket message): it is
    the event's ``eventId`` (R2.2 ``StreamEvent``), so the factory
    deduplicates by it and a resume can name it (R11.7).  On SSE the outer
    ``id:`` stays the event id (inner ids do not count, R11.7).
    """

    run_id: str
    session_id: str | None = None
    starts_run: bool = False
    ends_response: bool = False
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What ``run`` / ``regenerate`` / ``edit`` capability functions receive
    (chatkit's ``{sessionId, runId, body, messages}``; docs/adapters.md, "The
    scripted backend").

    Return a :class:`chatkit_trace.runtime.Response` streaming the answer
    (its body bytes or an async iterator of bytes, read as SSE), an async
    iterable of events, ``Response(202)``/``Response(204)`` when the answer
    comes through ``subscribe``, or ``False`` to refuse; raising means the
    call did not complete (R2.2).
    """

    #: The session (chatkit's sessionId).
    session_id: str
    #: The run this request starts; for regenerate/edit the *new* run (R10.2).
    run_id: str
    #: What ``encode_input`` (and ``transform_input``) made of the input.
    body: Any
    #: The session's messages before this run (before the target for regenerate/edit).
    messages: tuple[RuntimeMessage, ...] = ()
    #: regenerate/edit: the run being replaced; the backend drops it and everything after it.
    target_run_id: str | None = None
    #: The chat input before encoding.
    input: Any = None


@dataclass(frozen=True, slots=True)
class AbortRequestArgs:
    """What the ``abort`` capability receives: stop ``run_id`` (R9).  Return
    an accepted response (2xx: the stop is acknowledged and output sealed);
    ``False``, a 4xx/5xx or raising leaves the stop unknown (R9.4)."""

    session_id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class ResumeRequestArgs:
    """What the ``resume`` capability receives: replay ``run_id`` from after
    ``event_id`` (an opaque cursor, R11.6), then continue live."""

    session_id: str
    run_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class HistoryRequestArgs:
    """What the ``history`` capability receives: return the JSON your
    ``decode_history`` reads (a value, or a Response whose body is JSON);
    ``cursor`` is None for the first page (R13.6)."""

    session_id: str
    cursor: str | None = None


def _q(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str | bool | int | float) or value is None else "…"


def wire_name(event: Any) -> str | None:
    """An event in its wire's words, read from the places protocols put them:
    ``[DONE]``; the SSE ``event:`` field or a ``type`` / ``kind`` / ``object``
    (a JSON-RPC ``result``'s too); beside it what concludes or fails a run
    (``finish_reason``, ``state`` and ``final``, ``turnComplete``, ``errorCode``,
    an ``error``).  None for anything else."""
    if event is DONE or event == "[DONE]":
        return "data: [DONE]"
    if not isinstance(event, Mapping):
        return None
    body: Mapping[str, Any] = event
    result = event.get("result")
    if isinstance(result, Mapping) and event.get("jsonrpc") is not None:
        body = result
    name = next((body[k] for k in ("event", "type", "kind", "object") if isinstance(body.get(k), str)), None)
    extra: list[str] = []
    choices = body.get("choices")
    if isinstance(choices, list):
        reasons = [c.get("finish_reason") for c in choices if isinstance(c, Mapping) and c.get("finish_reason")]
        extra.extend(f"finish_reason: {_q(r)}" for r in reasons[:1])
    status = body.get("status")
    state = status.get("state") if isinstance(status, Mapping) else body.get("state")
    if isinstance(state, str):
        extra.append(f"state: {_q(state)}")
    for key in ("final", "turnComplete", "partial", "interrupted", "errorCode"):
        v = body.get(key)
        if v is None or (v is False and key != "final"):
            continue
        extra.append(f"{key}: {_q(v)}")
    err = event.get("error")
    if err:
        code = err.get("code") if isinstance(err, Mapping) else None
        extra.append(f"error{' ' + _q(code) if code is not None else ''}")
    if name is None and not extra:
        return None
    return ", ".join(([name] if name else []) + extra)


class AdapterProtocol:
    """Base class of protocol implementations.  Override what you need.

    A hook left as the base implementation counts as absent: e.g. without
    :meth:`project_input` the backend must echo the user message (R4.5).
    """

    #: Registry name (``openai``, ``adk`` …); custom adapters pick their own.
    name: str = "custom"
    #: A profile file the adapter ships (a path relative to the module that
    #: defines the class): the routes ``--profile <adapter>`` records with.
    #: None: an adapter named as ``--profile`` records every streamed response.
    profile: str | None = None

    def encode_input(self, input: Any, ctx: EncodeContext) -> Any:
        """The request body for ``input`` (required)."""
        raise NotImplementedError

    def decode_event(self, event: Any, ctx: DecodeContext) -> Sequence[ProtocolUpdate | dict[str, Any]]:
        """Decode one event, synchronously, sending nothing (required)."""
        raise NotImplementedError

    def project_input(self, input: Any, ctx: EncodeContext) -> Sequence[RuntimeMessage] | None:
        """The user messages to show for ``input`` at dispatch (R4.5), or ``None``."""
        return None

    def identify_event(self, event: Any) -> EventIdentity | None:
        """The run an interleaved subscription event belongs to (R2.6, R11.2),
        and on a socket its session and event id (:class:`EventIdentity`)."""
        return None

    def decode_history(self, value: Any, session_id: str) -> HistoryResult:
        """A HistoryResult from the history capability's JSON (R8)."""
        raise NotImplementedError

    def history_state(self, value: Any, session_id: str) -> dict[str, dict[str, Any]]:
        """Decode state for runs history reports still running, keyed by run
        id, so events resumed after history continue its partial answer (the
        seed's example primes its ``answers`` map in decodeHistory)."""
        return {}

    def history_event_ids(self, value: Any, session_id: str) -> Mapping[str, Sequence[str]]:
        """chatkit-trace's extension: the outer event ids (SSE ``id:``) a
        history lists for each run, in order (``{run_id: [event ids]}``), when
        the protocol's history carries them (the example protocol's
        ``frames[].id``).  Analysis uses them to tell what a resumed stream
        repeated or skipped (CK404).  Empty by default."""
        return {}

    def replay_history(self, value: Any, session_id: str) -> Iterable[tuple[Any, RuntimeMessage]] | None:
        """History as live-shaped ``(event, message)`` steps (R13.8), or ``None``."""
        return None

    def decode_input(self, body: Any) -> Any:
        """chatkit-trace's extension: the chat input a recorded request body
        carried (the inverse of :meth:`encode_input`), so replaying a recording
        can project the user's message as the UI did (R4.5).  ``None`` when
        the body has no user input (e.g. an OpenAI tool-loop continuation)."""
        return None

    def request_events(self, body: Any, run_id: str) -> list[Any]:
        """chatkit-trace's extension: events a *request* carries for a run
        that is already running, decoded before the response's frames (the
        OpenAI tool loop's continuation carries the tool results).  Empty
        by default."""
        return []

    def event_known(self, event: Any) -> bool | None:
        """chatkit-trace's extension: whether an event that decodes to no
        update is a *known* event without output (a start marker, a usage
        chunk) rather than an unknown type (CK406).  ``None``: no opinion, an
        event decoding to nothing counts as unknown."""
        return None

    def decode_status(self, value: Any, session_id: str, run_id: str) -> HistoryRunSnapshot | None:
        """chatkit-trace's extension: a run status read (e.g. Hermes ``GET
        /v1/runs/{id}``) as a run snapshot that can settle the run, or ``None``
        while it is still running."""
        return None

    def event_limits(self, event: Any) -> Sequence[str]:
        """chatkit-trace's extension: what this event cannot express because the
        protocol has no field for it (``"tool-result"``: a tool completion
        without a result; ``"tool-args"``: a tool start without arguments;
        ``chatkit_trace.adapters.LIMITS``).  The adapter models the event
        consistently anyway; analysis reports each limit once per route as an
        info (CK306, CK307), never as the backend's defect, and a history that
        has the field is no live/history difference.  Empty by default."""
        return ()

    def history_limits(self, value: Any, session_id: str) -> Sequence[str]:
        """chatkit-trace's extension: what this history read cannot express
        because the protocol has no field for it (``"history-ids"``: history's
        message ids are never the ids the live stream used;
        ``chatkit_trace.adapters.LIMITS``).  Analysis then pairs history with
        the live stream by run and position, reports real content
        differences (CK201) but no id difference (CK201/CK202), and states
        the limit once per route as an info (CK207).  Empty by default."""
        return ()

    def event_sequence(self, event: Any) -> int | float | None:
        """A source sequence the event carries (R3.2), if the protocol has one."""
        return None

    #: chatkit-trace's extension: chatkit's words in this protocol's own wire
    #: (decisions.md 279), so a finding says both ("no completed, failed or
    #: interrupted; on the wire: no ``run.completed`` …") and ``explain CODE
    #: --profile`` speaks the route's protocol.  Keys: ``completed``,
    #: ``failed``, ``interrupted`` (what concludes a run as each), ``output``
    #: (what carries the answer), ``event id`` (what deduplicates and resumes).
    wire_terms: Mapping[str, str] = {}
    #: chatkit-trace's extension: worked examples of finding codes in this
    #: protocol's wire (``{"CK102": "frames…"}``), shown by ``explain CODE
    #: --profile`` after rules.md's example in chatkit's example protocol.
    wire_examples: Mapping[str, str] = {}

    def wire_name(self, event: Any) -> str | None:
        """chatkit-trace's extension: one event as the protocol's own wire
        names it (``[DONE]``, ``finish_reason: "stop"``, ``run.completed``,
        ``status-update, state: completed, final: true``), for findings to
        quote next to chatkit's words.  The default reads the usual places
        (:func:`wire_name`)."""
        return wire_name(event)

    # -- introspection used by the factory -------------------------------------------

    def implements(self, hook: str) -> bool:
        """Whether a hook is overridden (not the base class's default)."""
        mine = getattr(type(self), hook, None)
        base = getattr(AdapterProtocol, hook, None)
        return mine is not None and mine is not base
