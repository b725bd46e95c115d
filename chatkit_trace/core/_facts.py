"""Facts, their admission results, and ``to_run_error`` (SPEC R3, R5.3).

A fact is what an adapter tells the Core happened on the wire.  The seven
emitters of SPEC R3.1 each have a value type here, so a fact can be stored,
replayed and compared (``Fact.to_json`` / :func:`fact_from_json`); the
ingress methods of :class:`~chatkit_trace.core.ChatCore` take the same
fields as keyword arguments.

A rejection is a value: :class:`FactResult` with one of the 13
:class:`FactRejectReason` strings of SPEC R3.6, never an exception.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ._model import RunError, RuntimeMessage, WorkItem, message_from_json, work_item_from_json
from ._values import ABSENT, freeze, quick_init, thaw

__all__ = [
    "FactRejectReason",
    "IDEMPOTENT_REASONS",
    "FactResult",
    "ACCEPTED",
    "rejected",
    "MessageFact",
    "DeltaFact",
    "PhaseFact",
    "WorkItemFact",
    "CompletedFact",
    "FailedFact",
    "InterruptedFact",
    "Fact",
    "FACT_KINDS",
    "OUTPUT_KINDS",
    "TERMINAL_KINDS",
    "fact_from_json",
    "is_run_error",
    "to_run_error",
]


class FactRejectReason(str, enum.Enum):  # noqa: UP042 - str() of a member names the member, as before; a StrEnum would print the value
    """The 13 reasons of SPEC R3.6; the value is chatkit's wire string."""

    DUPLICATE_EVENT = "duplicate-event"
    NO_CHANGE = "no-change"
    WRONG_SESSION = "wrong-session"
    MISSING_EVENT_ID = "missing-event-id"
    RUN_NOT_FOUND = "run-not-found"
    SOURCE_SEQUENCE_REGRESSED = "source-sequence-regressed"
    TERMINAL_SEALED = "terminal-sealed"
    OUTPUT_SEALED = "output-sealed"
    ACTIVE_WORK = "active-work"
    MISSING_WORK_ITEM_ID = "missing-work-item-id"
    INVALID_TRANSITION = "invalid-transition"
    RUNTIME_DISPOSED = "runtime-disposed"
    INVALID_MESSAGE = "invalid-message"

    def __str__(self) -> str:
        return self.value

    @property
    def idempotent(self) -> bool:
        """``duplicate-event`` and ``no-change`` are allowed by the protocol (R3.6)."""
        return self in IDEMPOTENT_REASONS


IDEMPOTENT_REASONS = frozenset({FactRejectReason.DUPLICATE_EVENT, FactRejectReason.NO_CHANGE})


@dataclass(frozen=True, slots=True)
class FactResult:
    """chatkit's ``FactResult``: accepted, or rejected with exactly one reason.

    ``detail`` is chatkit-trace's addition: one sentence saying what exactly
    decided (``delta to missing part 'text:1'``); it is not part of the
    contract and may change between versions.
    """

    accepted: bool
    reason: FactRejectReason | None = None
    detail: str | None = None

    @property
    def idempotent(self) -> bool:
        return self.reason is not None and self.reason in IDEMPOTENT_REASONS

    @property
    def violation(self) -> bool:
        """Rejected for a contract violation (not idempotently)."""
        return not self.accepted and not self.idempotent

    def to_json(self) -> dict[str, Any]:
        if self.accepted:
            return {"result": "accepted"}
        out: dict[str, Any] = {"result": "rejected", "reason": str(self.reason)}
        if self.detail:
            out["detail"] = self.detail
        return out

    def __bool__(self) -> bool:
        return self.accepted


ACCEPTED = FactResult(True)
_PLAIN = {r: FactResult(False, r) for r in FactRejectReason}


def rejected(reason: FactRejectReason, detail: str | None = None) -> FactResult:
    return _PLAIN[reason] if detail is None else FactResult(False, reason, detail)


# --------------------------------------------------------------------------- fact values


@dataclass(frozen=True, slots=True, kw_only=True)
class _FactBase:
    session_id: str
    run_id: str
    event_id: str | None
    source_sequence: int | float | None = None
    position: Any = None
    #: Observation time in milliseconds (recordings pass the frame's time).
    at: float | None = None
    kind: ClassVar[str] = ""

    def _base_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "sessionId": self.session_id, "runId": self.run_id}
        if self.event_id is not None:
            out["eventId"] = self.event_id
        if self.source_sequence is not None:
            out["sourceSequence"] = self.source_sequence
        if self.position is not None:
            out["position"] = thaw(self.position)
        if self.at is not None:
            out["at"] = self.at
        return out

    def common(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "run_id": self.run_id,
            "event_id": self.event_id,
            "source_sequence": self.source_sequence,
            "position": self.position,
            "at": self.at,
        }


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageFact(_FactBase):
    message: RuntimeMessage
    kind: ClassVar[str] = "message"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        out["message"] = self.message.to_json() if isinstance(self.message, RuntimeMessage) else thaw(self.message)
        return out


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class DeltaFact(_FactBase):
    message_id: str
    part_id: str
    delta: str
    kind: ClassVar[str] = "delta"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        out.update(messageId=self.message_id, partId=self.part_id, delta=self.delta)
        return out


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseFact(_FactBase):
    phase: str
    kind: ClassVar[str] = "phase"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        out["phase"] = self.phase
        return out


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkItemFact(_FactBase):
    work_item: WorkItem
    kind: ClassVar[str] = "work-item"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        out["workItem"] = self.work_item.to_json() if isinstance(self.work_item, WorkItem) else thaw(self.work_item)
        return out


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedFact(_FactBase):
    kind: ClassVar[str] = "completed"

    def to_json(self) -> dict[str, Any]:
        return self._base_json()


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FailedFact(_FactBase):
    error: Any
    kind: ClassVar[str] = "failed"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        out["error"] = self.error.to_json() if isinstance(self.error, RunError) else thaw(self.error)
        return out


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptedFact(_FactBase):
    reason: str | None = None
    kind: ClassVar[str] = "interrupted"

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        if self.reason is not None:
            out["reason"] = self.reason
        return out


Fact = MessageFact | DeltaFact | PhaseFact | WorkItemFact | CompletedFact | FailedFact | InterruptedFact
FACT_KINDS: dict[str, type] = {
    c.kind: c
    for c in (MessageFact, DeltaFact, PhaseFact, WorkItemFact, CompletedFact, FailedFact, InterruptedFact)
}
#: Facts that carry output (sealed by a stop, R9; counted for CK101).
OUTPUT_KINDS = frozenset({"message", "delta", "work-item"})
TERMINAL_KINDS = frozenset({"completed", "failed", "interrupted"})


def fact_from_json(obj: Mapping[str, Any]) -> Fact:
    """Inverse of ``Fact.to_json`` (messages are read leniently; the Core validates)."""
    kind = obj.get("kind")
    common = {
        "session_id": obj.get("sessionId"),
        "run_id": obj.get("runId"),
        "event_id": obj.get("eventId"),
        "source_sequence": obj.get("sourceSequence"),
        "position": freeze(obj.get("position")),
        "at": obj.get("at"),
    }
    if kind == "message":
        return MessageFact(message=message_from_json(obj.get("message")), **common)
    if kind == "delta":
        return DeltaFact(
            message_id=cast(str, obj.get("messageId")), part_id=cast(str, obj.get("partId")), delta=cast(str, obj.get("delta")), **common
        )
    if kind == "phase":
        return PhaseFact(phase=cast(str, obj.get("phase")), **common)
    if kind == "work-item":
        return WorkItemFact(work_item=work_item_from_json(obj.get("workItem")), **common)
    if kind == "completed":
        return CompletedFact(**common)
    if kind == "failed":
        return FailedFact(error=freeze(obj.get("error")), **common)
    if kind == "interrupted":
        return InterruptedFact(reason=obj.get("reason"), **common)
    raise ValueError(f"unknown fact kind {kind!r}")


# --------------------------------------------------------------------------- toRunError


def _said(value: Any) -> bool:
    """A string that says something: not empty, not only white space."""
    return isinstance(value, str) and bool(value.strip())


def is_run_error(value: Any) -> bool:
    """A well-formed RunError (seed 000 §5): ``code`` and ``message`` strings
    that say something, ``retryable`` absent or a bool (decisions.md 4, 273)."""
    if isinstance(value, RunError):
        return _said(value.code) and _said(value.message) and (value.retryable is None or isinstance(value.retryable, bool))
    if isinstance(value, Mapping):
        retryable = value.get("retryable", None)
        return _said(value.get("code")) and _said(value.get("message")) and (retryable is None or isinstance(retryable, bool))
    return False


def to_run_error(value: Any) -> RunError:
    """chatkit's ``toRunError`` safety net (SPEC R5.3).

    A well-formed value (:func:`is_run_error`: ``code`` a string that says
    something, ``message`` a sentence, ``retryable`` absent or a bool) becomes
    a :class:`RunError` unchanged.  Anything else becomes ``code: "UNKNOWN"``
    with the raw value as ``cause``: a numeric code (docs/decisions.md 4: the
    type says ``code: string``; adapters convert JSON-RPC's ``-32603``
    themselves), and an empty or blank ``code`` or ``message`` alike (decisions.md
    273: seed 000 §5 "code … 机器可读、稳定", "message … 给人看的一句话，界面直接渲染";
    an empty string is neither, which is what CK302 reports).
    """
    if is_run_error(value):
        if isinstance(value, RunError):
            return value
        return RunError(value["code"], value["message"], value.get("retryable", None), freeze(value.get("cause", ABSENT)))
    raw: Any = value.to_json() if isinstance(value, RunError) else value
    message = "The run failed with an error the backend did not describe."
    if isinstance(raw, Mapping) and _said(raw.get("message")):
        message = raw["message"]
    elif _said(raw):
        message = raw
    return RunError("UNKNOWN", message, None, freeze(raw))
