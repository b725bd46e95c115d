"""The chatkit data model (SPEC R4-R10) as immutable Python values.

Names map one to one onto chatkit's TypeScript types (``RuntimeMessage``,
``TextPart`` …); attributes are snake_case in Python and camelCase on the
wire.  Every class has ``to_json()`` and a ``*_from_json`` reader, and the
round trip is lossless: keys the model does not know are kept in ``extra``.

Construction does not validate (TypeScript types are not checked at run time
either); the Core validates what it admits (:mod:`._validate`).  Readers only
refuse what cannot be represented at all (a part that is not an object, an
unknown part type), with :class:`InvalidMessageError`.

Text grows by deltas, so :class:`TextPart` and :class:`ReasoningPart` keep
their text as a shared, append-only list of chunks joined lazily: appending a
delta costs amortised O(1) and never rewrites the text so far; every older
part value still sees exactly its own prefix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ._errors import HistoryFormatError, InvalidMessageError
from ._state import PHASES
from ._values import ABSENT, FrozenDict, freeze, quick_init, thaw

__all__ = [
    "Role",
    "ROLES",
    "TOOL_STATUSES",
    "RUN_PHASES",
    "TextPart",
    "ReasoningPart",
    "ToolCallPart",
    "MediaPart",
    "DataPart",
    "RuntimePart",
    "RuntimeMessage",
    "RunError",
    "WorkItem",
    "AbortRecord",
    "HistoryRunSnapshot",
    "SessionInfo",
    "ActiveRun",
    "HistoryResult",
    "part_from_json",
    "message_from_json",
    "run_error_from_json",
    "history_from_json",
    "get_tool_call_status",
]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
TOOL_STATUSES: frozenset[str] = frozenset({"running", "completed", "failed", "cancelled"})
#: RunPhase values (SPEC R3.2a); any non-terminal phase may follow any other.
RUN_PHASES: tuple[str, ...] = PHASES

_EMPTY = FrozenDict()


def _extra(obj: Mapping[str, Any], known: frozenset[str]) -> FrozenDict:
    if len(obj) <= len(known) and all(k in known for k in obj):
        return _EMPTY
    return FrozenDict({k: freeze(v) for k, v in obj.items() if k not in known})


# --------------------------------------------------------------------------- parts


def _freeze_fields(obj: Any, names: tuple[str, ...]) -> None:
    """Deep-freeze mutable JSON fields of a frozen dataclass (R13.1)."""
    for name in names:
        value = getattr(obj, name)
        if type(value) in (dict, list, tuple):
            object.__setattr__(obj, name, freeze(value))


class _TextLike:
    """Shared implementation of TextPart and ReasoningPart (lazy chunks).

    Public attributes (``id``, ``text``, ``extra``) are read-only properties;
    the underscored slots are private and never reassigned after
    construction (the join cache aside).
    """

    __slots__ = ("_id", "_buf", "_n", "_joined", "_extra", "_size")
    type: ClassVar[str]
    #: the last superseded version's join: (its chunk buffer, its chunk count,
    #: the text).  A buffer's first ``n`` chunks never change (it only grows;
    #: a branch copies), and the entry keeps the buffer alive, so ``is``
    #: identifies it.  Replaced as a whole (one assignment: thread-safe).
    _superseded: ClassVar[tuple[Any, int, Any]] = (None, -1, None)

    def __init__(self, id: str, text: str = "", extra: Mapping[str, Any] = _EMPTY) -> None:
        self._id = id
        self._buf: list[Any] = [text]
        self._n = 1
        self._joined: Any = text
        self._extra = extra if isinstance(extra, FrozenDict) else freeze(dict(extra))
        self._size = len(text) if type(text) is str else -1

    @classmethod
    def _from_chunks(cls, id: str, buf: list[Any], n: int, extra: FrozenDict) -> Any:
        p = object.__new__(cls)
        p._id = id
        p._buf = buf
        p._n = n
        p._joined = None
        p._extra = extra
        p._size = -1
        return p

    @property
    def id(self) -> str:
        return self._id

    @property
    def extra(self) -> FrozenDict:
        return self._extra

    @property
    def text(self) -> Any:
        joined = self._joined
        if joined is None:
            buf = self._buf
            if self._n == len(buf):
                joined = self._joined = "".join(buf)
            else:
                # A superseded version (a newer one grew the buffer): joined for
                # this read only, so versions kept by old facts never each hold
                # their whole text (memory linear in a long answer, not quadratic).
                # The last such join is remembered process-wide (one text): a
                # reader that shows one old version reads it several times (the
                # viewer's step: the snapshot pane, the fact, its brief).
                n = self._n
                last = _TextLike._superseded
                if last[0] is buf and last[1] == n:
                    return last[2]
                joined = "".join(buf[:n])
                _TextLike._superseded = (buf, n, joined)
        return joined

    def same_text(self, other: Any) -> bool:
        """``self.text == other.text``; versions of one text (sharing chunks)
        compare without joining them."""
        if isinstance(other, _TextLike) and self._buf is other._buf:
            lo, hi = sorted((self._n, other._n))
            return lo == hi or not any(self._buf[lo:hi])
        return bool(self.text == getattr(other, "text", None))

    @property
    def text_length(self) -> int | None:
        """``len(self.text)`` when the text is a string (else None), without
        joining the chunks when the length is known."""
        size = self._size
        if size >= 0:
            return size
        text = self.text
        return len(text) if isinstance(text, str) else None

    @property
    def chunk_count(self) -> int:
        """How many chunks (the initial text plus one per delta) this value holds."""
        return self._n

    def append(self, delta: str) -> Any:
        """A new part whose text is this one's plus ``delta``: amortised O(1)."""
        buf = self._buf
        n = self._n
        if n == len(buf):
            buf.append(delta)  # we are the newest version: share the buffer
        else:
            buf = buf[:n]  # an older version grows a branch: copy once
            buf.append(delta)
        p = object.__new__(type(self))  # _from_chunks, inlined: once per delta
        p._id = self._id
        p._buf = buf
        p._n = n + 1
        p._joined = None
        p._extra = self._extra
        size = self._size
        p._size = size + len(delta) if size >= 0 and type(delta) is str else -1
        # This version is superseded: its joined text (if computed) is dropped,
        # so a long answer's versions, kept by the facts that carried them,
        # share one chunk buffer instead of each holding its whole text.
        # (A cache, not the value: read again, it is joined again.)
        self._joined = None
        return p

    def extend(self, chunks: list[Any]) -> Any:
        """What :meth:`append` of each of ``chunks`` in turn gives (the same
        text, chunks and shared buffer), made as one new part."""
        if not chunks:
            return self
        buf = self._buf
        n = self._n
        if n == len(buf):
            buf.extend(chunks)  # we are the newest version: share the buffer
        else:
            buf = buf[:n] + chunks  # an older version grows a branch: copy once
        p = object.__new__(type(self))
        p._id = self._id
        p._buf = buf
        p._n = n + len(chunks)
        p._joined = None
        p._extra = self._extra
        size = self._size
        p._size = size + sum(len(c) for c in chunks) if size >= 0 and all(type(c) is str for c in chunks) else -1
        self._joined = None  # superseded (as in append)
        return p

    def with_text(self, text: str) -> Any:
        return type(self)(self._id, text, self._extra)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _TextLike)
        if self._id != other._id or self._extra != other._extra:
            return False
        if self._buf is other._buf:  # versions of one text: equal unless a longer one added something
            lo, hi = self._n, other._n
            if lo == hi:
                return True
            return not any(self._buf[lo:hi] if lo < hi else self._buf[hi:lo])
        return bool(self.text == other.text)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._id, self.text))

    def __repr__(self) -> str:
        text = self.text
        shown = text if not isinstance(text, str) or len(text) <= 60 else text[:57] + "..."
        return f"{type(self).__name__}(id={self._id!r}, text={shown!r})"

    def __reduce__(self) -> Any:
        return (type(self), (self._id, self.text, dict(self._extra)))

    def to_json(self) -> dict[str, Any]:
        out = {"id": self._id, "type": self.type, "text": self.text}
        if self._extra:
            out.update(thaw(self._extra))
        return out


class TextPart(_TextLike):
    """``{id, type: 'text', text}`` (SPEC R4.1)."""

    __slots__ = ()
    type = "text"


class ReasoningPart(_TextLike):
    """``{id, type: 'reasoning', text}`` (SPEC R4.1)."""

    __slots__ = ()
    type = "reasoning"


def get_tool_call_status(part: ToolCallPart) -> str:
    """chatkit's ``getToolCallStatus`` (SPEC R6.3): explicit status wins,
    otherwise no result -> ``running``, a result (even ``None``) -> ``completed``."""
    if isinstance(part.status, str) and part.status:
        return part.status
    return "running" if part.result is ABSENT else "completed"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """``{id, type: 'tool-call', toolCallId, toolName, args?, status?, result?,
    partialResult?, error?}`` (SPEC R6.1).

    ``result`` is :data:`ABSENT` until the tool has a result; ``None`` is an
    empty result (SPEC R6.4).
    """

    id: str
    tool_call_id: str
    tool_name: str
    args: Any = ABSENT
    status: Any = ABSENT
    result: Any = ABSENT
    partial_result: Any = ABSENT
    error: Any = ABSENT
    extra: FrozenDict = field(default=_EMPTY, compare=True)
    type: ClassVar[str] = "tool-call"

    def __post_init__(self) -> None:
        _freeze_fields(self, ("args", "result", "partial_result", "extra"))

    @property
    def effective_status(self) -> str:
        return get_tool_call_status(self)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": "tool-call",
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
        }
        if self.args is not ABSENT:
            out["args"] = thaw(self.args)
        if self.status is not ABSENT:
            out["status"] = self.status
        if self.result is not ABSENT:
            out["result"] = thaw(self.result)
        if self.partial_result is not ABSENT:
            out["partialResult"] = thaw(self.partial_result)
        if self.error is not ABSENT:
            out["error"] = self.error.to_json() if isinstance(self.error, RunError) else thaw(self.error)
        if self.extra:
            out.update(thaw(self.extra))
        return out


@dataclass(frozen=True, slots=True)
class MediaPart:
    """``{id, type: 'media', attachmentId?, placement, name?, mimeType, size?, source}``
    (SPEC R4.6).  ``source`` is a URL or ``data:`` string, or an object with
    one of ``url``, ``data`` (inline base64) or ``reference``."""

    id: str
    mime_type: Any
    source: Any
    placement: Any = "inline"
    attachment_id: Any = ABSENT
    name: Any = ABSENT
    size: Any = ABSENT
    extra: FrozenDict = _EMPTY
    type: ClassVar[str] = "media"

    def __post_init__(self) -> None:
        _freeze_fields(self, ("source", "extra"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": "media"}
        if self.attachment_id is not ABSENT:
            out["attachmentId"] = self.attachment_id
        out["placement"] = self.placement
        if self.name is not ABSENT:
            out["name"] = self.name
        out["mimeType"] = self.mime_type
        if self.size is not ABSENT:
            out["size"] = self.size
        out["source"] = thaw(self.source)
        if self.extra:
            out.update(thaw(self.extra))
        return out


@dataclass(frozen=True, slots=True)
class DataPart:
    """``{id, type: 'data', kind, data}`` (SPEC R7.1); ``kind`` is ``vendor.name``."""

    id: str
    kind: Any
    data: Any = None
    extra: FrozenDict = _EMPTY
    type: ClassVar[str] = "data"

    def __post_init__(self) -> None:
        _freeze_fields(self, ("data", "extra"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": "data", "kind": self.kind, "data": thaw(self.data)}
        if self.extra:
            out.update(thaw(self.extra))
        return out


RuntimePart = TextPart | ReasoningPart | ToolCallPart | MediaPart | DataPart

_TEXT_KEYS = frozenset({"id", "type", "text"})
_TOOL_KEYS = frozenset(
    {"id", "type", "toolCallId", "toolName", "args", "status", "result", "partialResult", "error"}
)
_MEDIA_KEYS = frozenset(
    {"id", "type", "attachmentId", "placement", "name", "mimeType", "size", "source"}
)
_DATA_KEYS = frozenset({"id", "type", "kind", "data"})


def part_from_json(obj: Any, message_id: str | None = None, source: str = "live") -> RuntimePart:
    """Read one part of chatkit's wire shape; refuses only what cannot be represented."""
    if not isinstance(obj, Mapping):
        raise InvalidMessageError("part-shape", message_id, None, source, "a part must be an object")
    pid = obj.get("id", ABSENT)
    ptype = obj.get("type")
    pid_s = pid if isinstance(pid, str) else None
    if ptype == "text" or ptype == "reasoning":
        cls = TextPart if ptype == "text" else ReasoningPart
        return cls(pid, obj.get("text", ABSENT), _extra(obj, _TEXT_KEYS))
    if ptype == "tool-call":
        error = obj.get("error", ABSENT)
        if isinstance(error, Mapping):
            error = run_error_from_json(error)
        return ToolCallPart(
            id=pid,
            tool_call_id=obj.get("toolCallId", ABSENT),
            tool_name=obj.get("toolName", ABSENT),
            args=freeze(obj.get("args", ABSENT)),
            status=obj.get("status", ABSENT),
            result=freeze(obj.get("result", ABSENT)),
            partial_result=freeze(obj.get("partialResult", ABSENT)),
            error=freeze(error),
            extra=_extra(obj, _TOOL_KEYS),
        )
    if ptype == "media":
        return MediaPart(
            id=pid,
            mime_type=obj.get("mimeType", ABSENT),
            source=freeze(obj.get("source", ABSENT)),
            placement=obj.get("placement", ABSENT),
            attachment_id=obj.get("attachmentId", ABSENT),
            name=obj.get("name", ABSENT),
            size=obj.get("size", ABSENT),
            extra=_extra(obj, _MEDIA_KEYS),
        )
    if ptype == "data":
        return DataPart(
            id=pid,
            kind=obj.get("kind", ABSENT),
            data=freeze(obj.get("data", None)),
            extra=_extra(obj, _DATA_KEYS),
        )
    raise InvalidMessageError(
        "part-type", message_id, pid_s, source, f"unknown part type {ptype!r}"
    )


# --------------------------------------------------------------------------- messages


@quick_init
@dataclass(frozen=True, slots=True)
class RuntimeMessage:
    """``{id, role, parts, runId?, createdAt?, metadata?}`` (SPEC R4.1)."""

    id: str
    role: Any
    parts: tuple[RuntimePart, ...] = ()
    run_id: Any = None
    created_at: Any = None
    metadata: Any = ABSENT
    extra: FrozenDict = _EMPTY

    def __post_init__(self) -> None:
        if type(self.parts) is not tuple:
            object.__setattr__(self, "parts", tuple(self.parts))
        _freeze_fields(self, ("metadata", "extra"))

    def part(self, part_id: str) -> RuntimePart | None:
        for p in self.parts:
            if p.id == part_id:
                return p
        return None

    def part_index(self, part_id: str) -> int:
        parts = self.parts
        for i in range(len(parts) - 1, -1, -1):
            if parts[i].id == part_id:
                return i
        return -1

    def with_parts(self, parts: tuple[RuntimePart, ...]) -> RuntimeMessage:
        if type(parts) is not tuple:
            return RuntimeMessage(self.id, self.role, parts, self.run_id, self.created_at, self.metadata, self.extra)
        # Every other field is this message's, frozen already: copied as they
        # are (the Core's delta path: one new message per delta).
        new = object.__new__(RuntimeMessage)
        _set_id(new, self.id)
        _set_role(new, self.role)
        _set_parts(new, parts)
        _set_run_id(new, self.run_id)
        _set_created_at(new, self.created_at)
        _set_metadata(new, self.metadata)
        _set_extra(new, self.extra)
        return new

    def with_run_id(self, run_id: str | None) -> RuntimeMessage:
        if run_id == self.run_id:
            return self
        return RuntimeMessage(self.id, self.role, self.parts, run_id, self.created_at, self.metadata, self.extra)

    @property
    def text(self) -> str:
        """The visible text parts joined (a convenience for people and tests)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart) and isinstance(p.text, str))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "parts": [p.to_json() if hasattr(p, "to_json") else thaw(p) for p in self.parts],
        }
        if self.run_id is not None:
            out["runId"] = self.run_id
        if self.created_at is not None:
            out["createdAt"] = self.created_at
        if self.metadata is not ABSENT:
            out["metadata"] = thaw(self.metadata)
        if self.extra:
            out.update(thaw(self.extra))
        return out


_MESSAGE_KEYS = frozenset({"id", "role", "parts", "runId", "createdAt", "metadata"})
(_set_id, _set_role, _set_parts, _set_run_id, _set_created_at, _set_metadata, _set_extra) = (
    getattr(RuntimeMessage, name).__set__
    for name in ("id", "role", "parts", "run_id", "created_at", "metadata", "extra")
)


def message_from_json(obj: Any, source: str = "live") -> RuntimeMessage:
    """Read a RuntimeMessage from chatkit's camelCase JSON."""
    if not isinstance(obj, Mapping):
        raise InvalidMessageError("message-shape", None, None, source, "a message must be an object")
    mid = obj.get("id", ABSENT)
    mid_s = mid if isinstance(mid, str) else None
    parts = obj.get("parts", ABSENT)
    if not isinstance(parts, (list, tuple)):
        raise InvalidMessageError("message-parts", mid_s, None, source, "parts must be a list")
    return RuntimeMessage(
        id=mid,
        role=obj.get("role", ABSENT),
        parts=tuple(part_from_json(p, mid_s, source) for p in parts),
        run_id=obj.get("runId"),
        created_at=obj.get("createdAt"),
        metadata=freeze(obj.get("metadata", ABSENT)),
        extra=_extra(obj, _MESSAGE_KEYS),
    )


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True, slots=True)
class RunError:
    """``{code, message, retryable?, cause?}`` (SPEC R5.1).  ``code`` is the
    protocol's own stable code, untranslated; ``retryable`` is ``None`` when
    unknown (omitted on the wire, R13.9)."""

    code: str
    message: str
    retryable: bool | None = None
    cause: Any = ABSENT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retryable is not None:
            out["retryable"] = self.retryable
        if self.cause is not ABSENT:
            out["cause"] = thaw(self.cause)
        return out


def run_error_from_json(obj: Mapping[str, Any]) -> Any:
    """A RunError when ``obj`` has its shape, else the raw (frozen) value."""
    code, message = obj.get("code"), obj.get("message")
    retryable = obj.get("retryable")
    if isinstance(code, str) and isinstance(message, str) and (retryable is None or isinstance(retryable, bool)):
        return RunError(code, message, retryable, freeze(obj.get("cause", ABSENT)))
    return freeze(obj)


# --------------------------------------------------------------------------- history


@dataclass(frozen=True, slots=True)
class WorkItem:
    """A tracked unit of a run's work, e.g. one tool call (SPEC R3.2a)."""

    id: Any
    status: Any = "running"
    kind: Any = ABSENT
    title: Any = ABSENT
    error: Any = ABSENT
    extra: FrozenDict = _EMPTY

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status}
        if self.kind is not ABSENT:
            out["kind"] = self.kind
        if self.title is not ABSENT:
            out["title"] = self.title
        if self.error is not ABSENT:
            out["error"] = self.error.to_json() if isinstance(self.error, RunError) else thaw(self.error)
        if self.extra:
            out.update(thaw(self.extra))
        return out


_WORK_KEYS = frozenset({"id", "status", "kind", "title", "error"})


def work_item_from_json(obj: Any) -> WorkItem:
    if not isinstance(obj, Mapping):
        return WorkItem(id=ABSENT, status=ABSENT, extra=FrozenDict({"value": freeze(obj)}))
    error = obj.get("error", ABSENT)
    if isinstance(error, Mapping):
        error = run_error_from_json(error)
    return WorkItem(
        id=obj.get("id", ABSENT),
        status=obj.get("status", "running"),
        kind=obj.get("kind", ABSENT),
        title=obj.get("title", ABSENT),
        error=error,
        extra=_extra(obj, _WORK_KEYS),
    )


@dataclass(frozen=True, slots=True)
class AbortRecord:
    """``HistoryRunSnapshot.abort`` (SPEC R9.5): ``requested_at`` finite and
    >= 0, ``accepted_at`` ``None`` or >= ``requested_at``, ``output_sealed``."""

    requested_at: Any
    accepted_at: Any = None
    output_sealed: Any = False

    def to_json(self) -> dict[str, Any]:
        return {
            "requestedAt": self.requested_at,
            "acceptedAt": self.accepted_at,
            "outputSealed": self.output_sealed,
        }

    def problem(self) -> str | None:
        r, a = self.requested_at, self.accepted_at
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0:
            return "requestedAt must be a finite number >= 0"
        if a is not None and (
            isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < r
        ):
            return "acceptedAt must be null or a number >= requestedAt"
        if not isinstance(self.output_sealed, bool):
            return "outputSealed must be a boolean"
        return None


@dataclass(frozen=True, slots=True)
class HistoryRunSnapshot:
    """A finished run as history reports it (SPEC R8.1, R8.2)."""

    id: Any
    status: Any
    origin: Any = "remote"
    phase: Any = "idle"
    created_at: Any = None
    work_items: Any = _EMPTY
    error: Any = ABSENT
    interrupt_reason: Any = ABSENT
    abort: Any = ABSENT
    extra: FrozenDict = _EMPTY

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "origin": self.origin,
            "status": self.status,
            "phase": self.phase,
            "createdAt": self.created_at,
            "workItems": {
                k: (v.to_json() if isinstance(v, WorkItem) else thaw(v)) for k, v in self.work_items.items()
            }
            if isinstance(self.work_items, Mapping)
            else thaw(self.work_items),
        }
        if self.error is not ABSENT:
            out["error"] = self.error.to_json() if isinstance(self.error, RunError) else thaw(self.error)
        if self.interrupt_reason is not ABSENT:
            out["interruptReason"] = self.interrupt_reason
        if self.abort is not ABSENT:
            out["abort"] = self.abort.to_json() if isinstance(self.abort, AbortRecord) else thaw(self.abort)
        if self.extra:
            out.update(thaw(self.extra))
        return out


_RUN_SNAPSHOT_KEYS = frozenset(
    {"id", "origin", "status", "phase", "createdAt", "workItems", "error", "interruptReason", "abort"}
)


def run_snapshot_from_json(obj: Any) -> HistoryRunSnapshot:
    if not isinstance(obj, Mapping):
        raise HistoryFormatError("a run snapshot must be an object")
    work = obj.get("workItems", {})
    if isinstance(work, Mapping):
        work = FrozenDict({k: work_item_from_json(v) for k, v in work.items()})
    else:
        work = freeze(work)
    error = obj.get("error", ABSENT)
    if isinstance(error, Mapping):
        error = run_error_from_json(error)
    abort = obj.get("abort", ABSENT)
    if isinstance(abort, Mapping):
        abort = AbortRecord(
            abort.get("requestedAt", ABSENT), abort.get("acceptedAt"), abort.get("outputSealed", False)
        )
    return HistoryRunSnapshot(
        id=obj.get("id", ABSENT),
        status=obj.get("status", ABSENT),
        origin=obj.get("origin", "remote"),
        phase=obj.get("phase", "idle"),
        created_at=obj.get("createdAt"),
        work_items=work,
        error=error,
        interrupt_reason=obj.get("interruptReason", ABSENT),
        abort=abort,
        extra=_extra(obj, _RUN_SNAPSHOT_KEYS),
    )


SESSION_STATUSES = frozenset({"running", "idle", "error"})


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """``SessionInfo{id, status, …}`` (SPEC R8.1a); ``status`` is ``running``,
    ``idle`` or ``error``; a session with no info has status ``unknown``."""

    id: Any
    status: Any = "unknown"
    title: Any = ABSENT
    extra: FrozenDict = _EMPTY

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status}
        if self.title is not ABSENT:
            out["title"] = self.title
        if self.extra:
            out.update(thaw(self.extra))
        return out


def session_info_from_json(obj: Any) -> SessionInfo:
    if not isinstance(obj, Mapping):
        raise HistoryFormatError("session must be an object")
    return SessionInfo(
        id=obj.get("id", ABSENT),
        status=obj.get("status", "unknown"),
        title=obj.get("title", ABSENT),
        extra=_extra(obj, frozenset({"id", "status", "title"})),
    )


@dataclass(frozen=True, slots=True)
class ActiveRun:
    """``{runId, eventId?}``: the run history reports as still running."""

    run_id: str
    event_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runId": self.run_id}
        if self.event_id is not None:
            out["eventId"] = self.event_id
        return out


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """``HistoryResult{messages, runSnapshots?, activeRun?, session?, cursor?,
    hasMore}`` (SPEC R8.1).  ``active_run`` is ``None`` for "known idle" and
    :data:`ABSENT` when the backend did not say."""

    messages: tuple[RuntimeMessage, ...] = ()
    has_more: bool = False
    run_snapshots: tuple[HistoryRunSnapshot, ...] | Any = ABSENT
    active_run: ActiveRun | None | Any = ABSENT
    session: SessionInfo | Any = ABSENT
    cursor: str | Any = ABSENT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"messages": [m.to_json() for m in self.messages]}
        if self.run_snapshots is not ABSENT:
            out["runSnapshots"] = [r.to_json() for r in self.run_snapshots]
        if self.active_run is not ABSENT:
            out["activeRun"] = None if self.active_run is None else self.active_run.to_json()
        if self.session is not ABSENT:
            out["session"] = self.session.to_json()
        if self.cursor is not ABSENT:
            out["cursor"] = self.cursor
        out["hasMore"] = self.has_more
        return out


def history_from_json(obj: Any) -> HistoryResult:
    """Read a HistoryResult.  A malformed envelope raises
    :class:`HistoryFormatError`; a message that cannot be represented raises
    :class:`InvalidMessageError` with ``source='history'`` (the whole batch is
    rejected, SPEC R3.7).  Message *rules* are checked by the Core."""
    if not isinstance(obj, Mapping):
        raise HistoryFormatError("a HistoryResult must be an object")
    messages = obj.get("messages")
    if not isinstance(messages, (list, tuple)):
        raise HistoryFormatError("HistoryResult.messages must be a list")
    has_more = obj.get("hasMore")
    if not isinstance(has_more, bool):
        raise HistoryFormatError("HistoryResult.hasMore must be a boolean")
    snaps: Any = ABSENT
    if "runSnapshots" in obj:
        raw = obj["runSnapshots"]
        if not isinstance(raw, (list, tuple)):
            raise HistoryFormatError("HistoryResult.runSnapshots must be a list")
        snaps = tuple(run_snapshot_from_json(r) for r in raw)
    active: Any = ABSENT
    if "activeRun" in obj:
        raw = obj["activeRun"]
        if raw is None:
            active = None
        elif isinstance(raw, Mapping) and isinstance(raw.get("runId"), str):
            ev = raw.get("eventId")
            if ev is not None and not isinstance(ev, str):
                raise HistoryFormatError("HistoryResult.activeRun.eventId must be a string")
            active = ActiveRun(raw["runId"], ev)
        else:
            raise HistoryFormatError("HistoryResult.activeRun must be null or {runId, eventId?}")
    session: Any = ABSENT
    if "session" in obj and obj["session"] is not None:
        session = session_info_from_json(obj["session"])
    cursor: Any = ABSENT
    if "cursor" in obj and obj["cursor"] is not None:
        if not isinstance(obj["cursor"], str):
            raise HistoryFormatError("HistoryResult.cursor must be a string")
        cursor = obj["cursor"]
    return HistoryResult(
        messages=tuple(message_from_json(m, "history") for m in messages),
        has_more=has_more,
        run_snapshots=snaps,
        active_run=active,
        session=session,
        cursor=cursor,
    )


def messages_from_json(items: Iterable[Any], source: str = "live") -> tuple[RuntimeMessage, ...]:
    return tuple(message_from_json(m, source) for m in items)
