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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import ABSENT, RunError, freeze

__all__ = ["HISTORY_IDS", "LIMITS", "PASSIVE_INPUT", "TOOL_ARGS", "TOOL_RESULT", "fallback_error", "fallback_sent"]

#: A completed tool call whose result the protocol has no field for.
TOOL_RESULT = "tool-result"
#: An event that starts a run has no field for the run's input, so a run
#: another client started (a passive run, R2.6) shows no user message live.
PASSIVE_INPUT = "passive-input"

#: A tool call whose arguments the protocol has no field for.
TOOL_ARGS = "tool-args"

#: A history read whose message ids are never the ids the live stream used.
HISTORY_IDS = "history-ids"

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
}

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
