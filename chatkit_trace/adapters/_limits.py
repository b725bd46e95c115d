"""What an adapter tells analysis besides updates (docs/decisions.md 129-131).

A finding blames the backend only for what the backend controls.  Two
things an adapter knows and analysis cannot see in the updates alone:

* **A protocol limit**: the protocol has no field for something chatkit
  models (Hermes ``tool.completed`` carries no result).  The adapter models
  the traffic consistently (the tool call is completed, with an empty
  result) and :meth:`~chatkit_trace.adapters.AdapterProtocol.event_limits`
  names the limit for the event; analysis reports it once per route as an
  info (CK306), never per run.  A start event without the run's input
  (:data:`PASSIVE_INPUT`) costs only runs another client started; analysis
  reports it once per route (CK505) where such a run was seen.
* **A history limit**: the protocol's history cannot carry something the
  live stream has (Hermes ``/api/sessions/{id}/messages`` names messages by
  integer row ids and no run, never the ids the live stream used).
  :meth:`~chatkit_trace.adapters.AdapterProtocol.history_limits` names it
  for the read; analysis then pairs live and history by run and position
  without an id difference and reports the limit once per route as an info
  (CK207), while real content differences stay CK201.
* **A fallback text**: the backend sent a failure without a reason (Hermes
  ``run.failed`` with ``"error": ""``) and the adapter shows its own text so
  the failure card is not empty.  :func:`fallback_error` keeps what the
  backend sent in the error's ``cause``; the finding (CK302) still reports
  what the backend sent.
* **A note on a message** (decisions.md 250-256): what the adapter knows
  about a message that no update field carries, kept in the message's
  ``metadata`` under :data:`NOTE` (the adapter's own field, which the Core
  stores and never interprets, R4.1): the text the backend reported as the
  answer of a turn that failed (:data:`REPORTED_FAILURE`, CK120), how many
  messages of earlier turns the run's final transcript carried and the
  adapter left out (:data:`EARLIER_ROWS`, CK121), the parts of a history
  message that are the backend's notice about a stop (:data:`STOP_NOTICE`,
  CK117).  :func:`noted` writes a note, :func:`notes_of` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core import ABSENT, RunError, RuntimeMessage, freeze

__all__ = [
    "EARLIER_ROWS",
    "HISTORY_IDS",
    "LIMITS",
    "NOTE",
    "PASSIVE_INPUT",
    "REASONING",
    "REPORTED_FAILURE",
    "STOP_NOTICE",
    "TOOL_ARGS",
    "TOOL_RESULT",
    "WITHHELD",
    "fallback_error",
    "fallback_sent",
    "noted",
    "notes_of",
]

#: A completed tool call whose result the protocol has no field for.
TOOL_RESULT = "tool-result"
#: An event that starts a run has no field for the run's input, so a run
#: another client started (a passive run, R2.6) shows no user message live.
PASSIVE_INPUT = "passive-input"

#: A tool call whose arguments the protocol has no field for.
TOOL_ARGS = "tool-args"

#: A history read whose message ids are never the ids the live stream used.
HISTORY_IDS = "history-ids"

#: A run's stream has no event for the model's reasoning (Hermes ``/v1/runs``:
#: ``reasoning.available`` repeats the answer's text), which history holds.
REASONING = "reasoning"

#: The event ends the run because a content policy withheld (or cut) the
#: output (OpenAI ``finish_reason: content_filter``, a Responses
#: ``response.incomplete`` for ``content_filter``): the completed update has no
#: field for the reason (CK122).
WITHHELD = "output-withheld"

#: limit -> (what it costs the user, for the finding's message)
LIMITS: dict[str, str] = {
    TOOL_RESULT: "tool calls complete without a result (the protocol has no field for it): the UI shows them "
    "completed with no output",
    PASSIVE_INPUT: "a run another client started shows no user message live (the start event has no field for "
    "the input): the UI shows that run's answer without its question until a refresh loads it from history",
    TOOL_ARGS: "tool calls start without their arguments (the protocol has no field for them): the UI shows "
    "them with no arguments until history fills them in",
    HISTORY_IDS: "history names every message by its own id, never by the id the live stream used (the protocol "
    "has no field that carries one to the other): a refresh replaces each live message with the same content "
    "under another id",
    REASONING: "the model's reasoning never reaches the UI live (the stream has no event that carries it): the UI "
    "shows the answer without it until a refresh loads it from history",
    WITHHELD: "a run a content policy ended completes without a reason (the completed update has no field for it)",
}

#: The metadata key of an adapter's notes on a message (:func:`noted`).
NOTE = "chatkit_trace.note"
#: The backend reported a failed turn as the turn's answer: the text it sent.
REPORTED_FAILURE = "reported-failure"
#: The run's final transcript carried this many messages of earlier turns (left out).
EARLIER_ROWS = "earlier-rows"
#: The part ids of a history message that are the backend's notice about a stop.
STOP_NOTICE = "stop-notice"


def noted(message: RuntimeMessage, notes: Mapping[str, Any]) -> RuntimeMessage:
    """``message`` with ``notes`` added to its adapter notes (``metadata[NOTE]``)."""
    meta = dict(message.metadata) if isinstance(message.metadata, Mapping) else {}
    old = meta.get(NOTE)
    meta[NOTE] = {**(dict(old) if isinstance(old, Mapping) else {}), **notes}
    return replace(message, metadata=freeze(meta))


def notes_of(message: Any) -> Mapping[str, Any]:
    """The adapter's notes on a message (empty when it has none)."""
    meta = getattr(message, "metadata", None)
    note = meta.get(NOTE) if isinstance(meta, Mapping) else None
    return note if isinstance(note, Mapping) else {}

_MARK = "chatkit_trace.fallback"


def fallback_error(code: str, message: str, *, sent: Any) -> RunError:
    """A RunError showing the adapter's ``message`` where the backend sent no
    usable reason; ``sent`` is what it sent (``None``: nothing at all)."""
    return RunError(code, message, cause=freeze({_MARK: "message", "sent": sent}))


def fallback_sent(error: Any) -> tuple[bool, Any]:
    """``(True, what the backend sent)`` for an error made by :func:`fallback_error`."""
    cause = getattr(error, "cause", ABSENT) if isinstance(error, RunError) else (
        error.get("cause", ABSENT) if isinstance(error, Mapping) else ABSENT
    )
    if isinstance(cause, Mapping) and cause.get(_MARK) == "message":
        return True, cause.get("sent")
    return False, None
