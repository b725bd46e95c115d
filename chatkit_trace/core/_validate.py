"""Message validation: every rule has a name (SPEC R3.7, R4, R5, R6, R7).

A live message that breaks a rule is dropped alone; a history batch that
contains one is rejected whole (:func:`check_history`).  Each check returns an
:class:`InvalidMessageError` (or ``None``) instead of raising, so the hot path
of admission pays no exception cost.  The error carries the rule, the
message and part ids and the source, never the content.

Rules (the ``rule`` strings are stable: findings and fixtures store them):

==========================  ===========================================================
rule                        broken when
==========================  ===========================================================
``message-shape``           the message is not an object
``message-id``              ``id`` is missing or not a non-empty string (R4.1)
``message-role``            ``role`` is not system, user, assistant or tool (R4.1)
``message-parts``           ``parts`` is not a list (R4.1)
``message-run-id``          ``runId`` is present and not a non-empty string
``message-created-at``      ``createdAt`` is present and not a finite number >= 0 (ms)
``message-metadata``        ``metadata`` is present and not an object
``message-id-unique``       two messages of one history batch share an id (R4.2)
``part-shape``              a part is not an object
``part-type``               a part's ``type`` is not one of the five (R4.1)
``part-id``                 a part has no non-empty string ``id`` (R4.2, decisions.md)
``part-id-unique``          two parts of one message share an id (R4.2)
``part-text``               a text/reasoning part's ``text`` is not a string
``tool-call-id``            a tool-call part has no non-empty ``toolCallId`` (R6.1)
``tool-name``               a tool-call part has no non-empty ``toolName`` (R6.1)
``tool-args``               ``args`` is present and not an object (R6.1)
``tool-status``             ``status`` is present and not running/completed/failed/cancelled
``data-kind``               a data part's ``kind`` is not ``vendor.name`` (R7.1)
``media-mime-type``         a media part has no non-empty string ``mimeType`` (R4.6)
``media-placement``         ``placement`` is not ``inline`` or ``separate`` (R4.6)
``media-source``            ``source`` is not a URL/data string or {url|data|reference} (R4.6)
``media-field``             ``attachmentId``/``name`` not strings, ``size`` not an integer >= 0
``run-snapshot``            a history run snapshot lacks an id or a finished status (R8.1a:
                            runSnapshots hold finished runs; decisions.md 274)
``run-snapshot-abort``      a run snapshot's abort record breaks R9.5
==========================  ===========================================================

A tool-call part's ``error`` that is not a well-formed RunError is not a
rule: the Core admits it through ``toRunError`` like a run failure's error
(``code: 'UNKNOWN'``, the raw value as ``cause``; seed 000 §5, decisions.md
100), see :func:`coerce_tool_errors`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeVar

from ._errors import InvalidMessageError
from ._facts import is_run_error, to_run_error
from ._model import (
    ROLES,
    TOOL_STATUSES,
    AbortRecord,
    DataPart,
    HistoryResult,
    MediaPart,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
)
from ._values import ABSENT

__all__ = [
    "RULES",
    "check_message",
    "check_history",
    "coerce_tool_errors",
    "is_valid_data_kind",
    "BUILTIN_DATA_KINDS",
]

RULES: tuple[str, ...] = (
    "message-shape",
    "message-id",
    "message-role",
    "message-parts",
    "message-run-id",
    "message-created-at",
    "message-metadata",
    "message-id-unique",
    "part-shape",
    "part-type",
    "part-id",
    "part-id-unique",
    "part-text",
    "tool-call-id",
    "tool-name",
    "tool-args",
    "tool-status",
    "data-kind",
    "media-mime-type",
    "media-placement",
    "media-source",
    "media-field",
    "run-snapshot",
    "run-snapshot-abort",
)

_KIND = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")
#: Data kinds chatkit's SDK defines itself (SPEC R7.2).
BUILTIN_DATA_KINDS = frozenset({"chatkit.notice", "chatkit.date-divider"})
#: A run snapshot's status: runSnapshots hold "已经结束的轮次及其结果" (seed 000
#: §8), so running and queued are as invalid as an unknown word (decisions.md 274).
_RUN_STATUSES = frozenset({"completed", "failed", "interrupted"})


def is_valid_data_kind(kind: object) -> bool:
    """chatkit's ``isValidDataKind`` (SPEC R7.1): lowercase letters, digits and
    hyphens, at least two dot-separated non-empty segments."""
    return isinstance(kind, str) and _KIND.fullmatch(kind) is not None


def _nonempty_str(v: object) -> bool:
    return isinstance(v, str) and v != ""


def _is_error(v: object) -> bool:
    return isinstance(v, RunError) and is_run_error(v)


def _check_part(part: Any, mid: str, source: str) -> InvalidMessageError | None:
    pid = getattr(part, "id", None)
    if not _nonempty_str(pid):
        return InvalidMessageError("part-id", mid, None, source, "every part needs a string id")
    t = type(part)
    if t is TextPart or t is ReasoningPart:
        if part.text_length is None:  # the text is not a string (known without joining its chunks)
            return InvalidMessageError("part-text", mid, pid, source, "text must be a string")
        return None
    if t is ToolCallPart:
        if not _nonempty_str(part.tool_call_id):
            return InvalidMessageError("tool-call-id", mid, pid, source, "toolCallId is required")
        if not _nonempty_str(part.tool_name):
            return InvalidMessageError("tool-name", mid, pid, source, "toolName is required")
        if part.args is not ABSENT and not isinstance(part.args, Mapping):
            return InvalidMessageError("tool-args", mid, pid, source, "args must be an object")
        if part.status is not ABSENT and part.status not in TOOL_STATUSES:
            return InvalidMessageError(
                "tool-status", mid, pid, source, f"unknown tool status {part.status!r}"
            )
        return None
    if t is DataPart:
        if not is_valid_data_kind(part.kind):
            return InvalidMessageError(
                "data-kind", mid, pid, source, f"kind {part.kind!r} is not vendor.name"
            )
        return None
    if t is MediaPart:
        if not _nonempty_str(part.mime_type):
            return InvalidMessageError("media-mime-type", mid, pid, source, "mimeType is required")
        if part.placement not in ("inline", "separate"):
            return InvalidMessageError(
                "media-placement", mid, pid, source, "placement must be inline or separate"
            )
        src = part.source
        ok = _nonempty_str(src) or (
            isinstance(src, Mapping)
            and sum(1 for k in ("url", "data", "reference") if _nonempty_str(src.get(k))) == 1
        )
        if not ok:
            return InvalidMessageError(
                "media-source", mid, pid, source, "source must be a URL or {url|data|reference}"
            )
        for name in ("attachment_id", "name"):
            v = getattr(part, name)
            if v is not ABSENT and not isinstance(v, str):
                return InvalidMessageError("media-field", mid, pid, source, f"{name} must be a string")
        size = part.size
        if size is not ABSENT and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            return InvalidMessageError("media-field", mid, pid, source, "size must be an integer >= 0")
        return None
    return InvalidMessageError("part-type", mid, pid if isinstance(pid, str) else None, source)


_M = TypeVar("_M")


def coerce_tool_errors(msg: _M) -> _M:
    """``msg`` with every tool-call part's malformed ``error`` passed through
    ``toRunError`` (seed 000 §5: "run failure and ToolCallPart.error use
    RunError"; "Core 在准入时用 toRunError 兜底").  Returns ``msg`` itself when
    nothing needs it (the common case costs one pass over the parts)."""
    if not isinstance(msg, RuntimeMessage) or not isinstance(msg.parts, tuple):
        return msg
    new: list[Any] | None = None
    for i, part in enumerate(msg.parts):
        if type(part) is ToolCallPart and part.error is not ABSENT and not _is_error(part.error):
            if new is None:
                new = list(msg.parts)
            new[i] = replace(part, error=to_run_error(part.error))
    return msg if new is None else msg.with_parts(tuple(new))  # type: ignore[return-value]  # a RuntimeMessage in, one out


def check_message(
    msg: Any, source: str = "live", previous: RuntimeMessage | None = None
) -> InvalidMessageError | None:
    """The first rule ``msg`` breaks, or ``None`` when it is valid.

    ``previous`` is the admitted message this one replaces: parts that are the
    very same (immutable) objects were validated then and are not checked
    again, so re-sending a long message with one changed part costs little.
    """
    if not isinstance(msg, RuntimeMessage):
        return InvalidMessageError("message-shape", None, None, source, "not a RuntimeMessage")
    mid = msg.id
    if not _nonempty_str(mid):
        return InvalidMessageError("message-id", None, None, source, "id must be a non-empty string")
    if msg.role not in ROLES:
        return InvalidMessageError("message-role", mid, None, source, f"unknown role {msg.role!r}")
    parts = msg.parts
    if not isinstance(parts, tuple):
        return InvalidMessageError("message-parts", mid, None, source, "parts must be a sequence")
    if msg.run_id is not None and not _nonempty_str(msg.run_id):
        return InvalidMessageError("message-run-id", mid, None, source, "runId must be a string")
    ca = msg.created_at
    if ca is not None and (
        isinstance(ca, bool) or not isinstance(ca, (int, float)) or not math.isfinite(ca) or ca < 0
    ):
        return InvalidMessageError(
            "message-created-at", mid, None, source, "createdAt must be milliseconds >= 0"
        )
    if msg.metadata is not ABSENT and not isinstance(msg.metadata, Mapping):
        return InvalidMessageError("message-metadata", mid, None, source, "metadata must be an object")
    if len(parts) == 1:
        return _check_part(parts[0], mid, source)
    seen: set[str] = set()
    known = {id(p) for p in previous.parts} if previous is not None and len(previous.parts) > 4 else ()
    for part in parts:
        if id(part) not in known:
            err = _check_part(part, mid, source)
            if err is not None:
                return err
        if part.id in seen:
            return InvalidMessageError("part-id-unique", mid, part.id, source, "part ids repeat")
        seen.add(part.id)
    return None


def check_history(result: HistoryResult) -> InvalidMessageError | None:
    """The first rule a history batch breaks (the whole batch is rejected, R3.7)."""
    seen: set[str] = set()
    for msg in result.messages:
        err = check_message(msg, "history")
        if err is not None:
            return err
        if msg.id in seen:
            return InvalidMessageError("message-id-unique", msg.id, None, "history", "message ids repeat")
        seen.add(msg.id)
    if result.run_snapshots is not ABSENT:
        for snap in result.run_snapshots:
            if not _nonempty_str(snap.id) or snap.status not in _RUN_STATUSES:
                return InvalidMessageError(
                    "run-snapshot", None, None, "history",
                    f"a run snapshot needs an id and a finished status (completed, failed or interrupted), got {snap.status!r}",
                )
            if snap.abort is not ABSENT:
                problem = (
                    snap.abort.problem() if isinstance(snap.abort, AbortRecord) else "abort must be an object"
                )
                if problem:
                    return InvalidMessageError("run-snapshot-abort", None, None, "history", problem)
    return None
