"""ProtocolUpdate: what ``decode_event`` returns (SPEC R2.4).

Six kinds, applied in order: ``message`` (create or replace a whole
message; it must carry every part it still wants), ``delta`` (append to an
existing text/reasoning part), ``phase``, ``completed``, ``failed`` (a
RunError with code and message) and ``interrupted``.  An unknown event
decodes to ``[]``.

Updates may also be given as chatkit's plain objects (``{"type": "delta",
"messageId": …}``); :func:`update_from_json` reads them, so a custom adapter
can be written either way.

The updates are frozen ``msgspec.Struct`` values (made in about a quarter of
a frozen dataclass's time: one or more per recorded frame, issue 18):
positional or keyword construction, equality and hashing as before; a
changed copy is ``msgspec.structs.replace(update, ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ..core import RunError, RuntimeMessage, message_from_json, thaw

__all__ = [
    "MessageUpdate",
    "DeltaUpdate",
    "PhaseUpdate",
    "CompletedUpdate",
    "FailedUpdate",
    "InterruptedUpdate",
    "ProtocolUpdate",
    "TERMINAL_UPDATES",
    "update_from_json",
    "update_to_json",
]


class MessageUpdate(msgspec.Struct, frozen=True):
    message: RuntimeMessage
    type = "message"


class DeltaUpdate(msgspec.Struct, frozen=True):
    message_id: str
    part_id: str
    delta: str
    type = "delta"


class PhaseUpdate(msgspec.Struct, frozen=True):
    phase: str
    type = "phase"


class CompletedUpdate(msgspec.Struct, frozen=True):
    type = "completed"


class FailedUpdate(msgspec.Struct, frozen=True):
    error: Any  # a RunError, or anything (the Core's to_run_error decides)
    type = "failed"


class InterruptedUpdate(msgspec.Struct, frozen=True):
    reason: str | None = None
    type = "interrupted"


ProtocolUpdate = MessageUpdate | DeltaUpdate | PhaseUpdate | CompletedUpdate | FailedUpdate | InterruptedUpdate
TERMINAL_UPDATES = (CompletedUpdate, FailedUpdate, InterruptedUpdate)


def update_from_json(obj: Any) -> ProtocolUpdate:
    """Read chatkit's plain-object ProtocolUpdate; pass our values through."""
    if isinstance(obj, (MessageUpdate, DeltaUpdate, PhaseUpdate, CompletedUpdate, FailedUpdate, InterruptedUpdate)):
        return obj
    if not isinstance(obj, Mapping):
        raise TypeError(f"not a ProtocolUpdate: {obj!r}")
    kind = obj.get("type")
    if kind == "message":
        msg = obj.get("message")
        return MessageUpdate(msg if isinstance(msg, RuntimeMessage) else message_from_json(msg))
    if kind == "delta":
        return DeltaUpdate(obj.get("messageId"), obj.get("partId"), obj.get("delta"))  # type: ignore[arg-type]  # passed on as given; the Core judges the values
    if kind == "phase":
        return PhaseUpdate(obj.get("phase"))  # type: ignore[arg-type]  # passed on as given; the Core judges the value
    if kind == "completed":
        return CompletedUpdate()
    if kind == "failed":
        return FailedUpdate(obj.get("error"))
    if kind == "interrupted":
        return InterruptedUpdate(obj.get("reason"))
    raise TypeError(f"unknown ProtocolUpdate type {kind!r}")


def update_to_json(update: ProtocolUpdate) -> dict[str, Any]:
    if isinstance(update, MessageUpdate):
        return {"type": "message", "message": update.message.to_json()}
    if isinstance(update, DeltaUpdate):
        return {"type": "delta", "messageId": update.message_id, "partId": update.part_id, "delta": update.delta}
    if isinstance(update, PhaseUpdate):
        return {"type": "phase", "phase": update.phase}
    if isinstance(update, FailedUpdate):
        err = update.error
        return {"type": "failed", "error": err.to_json() if isinstance(err, RunError) else thaw(err)}
    if isinstance(update, InterruptedUpdate):
        return {"type": "interrupted", **({"reason": update.reason} if update.reason else {})}
    return {"type": "completed"}
