"""Findings: the public contract of ``chatkit-trace check`` (docs/rules.md#finding-codes).

A code never changes meaning and is never reused; new codes go into a free
slot of the right family.  Every non-idempotent FactRejectReason the Core
can reach from traffic has a code (:data:`REASON_CODES`), so ``check`` never
passes a trace whose facts the Core rejects (R3.8).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["clip", "Finding", "CodeInfo", "CATALOGUE", "REASON_CODES", "SEVERITIES", "severity_rank", "make_finding"]

SEVERITIES = ("error", "warning", "info")


def severity_rank(severity: str) -> int:
    """0 for error, 1 for warning, 2 for info (most severe first)."""
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class CodeInfo:
    code: str
    severity: str
    rule: str
    title: str


CATALOGUE: dict[str, CodeInfo] = {
    c.code: c
    for c in (
        CodeInfo("CK101", "error", "R3.5 R2.5a", "output after the run's terminal"),
        CodeInfo("CK102", "warning", "R3.4 R2.5", "stream ended without a conclusion"),
        CodeInfo("CK103", "warning", "R3.4 R12", "connection broke mid-run"),
        CodeInfo("CK104", "error", "R3.4", "end-of-reader marker without a conclusion"),
        CodeInfo("CK105", "error", "R6.5 R3.6", "run completed while a tool call was running"),
        CodeInfo("CK106", "warning", "R9.1 R9.4", "stop accepted but nothing ended the run"),
        CodeInfo("CK107", "error", "R3.6 R9", "output after the stop sealed the run"),
        CodeInfo("CK108", "error", "R3.6", "a transition the run state machine forbids"),
        CodeInfo("CK109", "error", "R3.2a", "work item without an id"),
        CodeInfo("CK110", "warning", "R2.2", "request failed at the HTTP level"),
        CodeInfo("CK111", "error", "R3.2", "fact without an event id"),
        CodeInfo("CK112", "info", "R3.4", "stream ended without a conclusion; only a later read settled the run"),
        CodeInfo("CK113", "warning", "R9 R3.6", "stop notice carried by the terminal frame is dropped"),
        CodeInfo("CK114", "info", "R3.4", "the stream ended waiting for the client; no continuation recorded"),
        CodeInfo("CK115", "info", "R9.1", "a stop by closing the stream cannot be confirmed"),
        CodeInfo("CK116", "warning", "R3.4", "no terminal event for this run, though other runs on its route had one; only a read settled it"),
        CodeInfo("CK117", "info", "R9.4 R8.2", "the backend's notice about a stop reaches the UI only through history"),
        CodeInfo("CK118", "warning", "R9.1", "the backend ignored a stop by closing the stream and kept generating"),
        CodeInfo("CK119", "error", "R6.2 R5.2", "run failed while a tool call was still running"),
        CodeInfo("CK120", "error", "R3.4 R5.1", "the backend reported a failed turn as a completed answer"),
        CodeInfo("CK121", "warning", "R8.2", "the run's final transcript carries messages of earlier turns"),
        CodeInfo("CK122", "warning", "R3.4 R5.1", "a content policy ended the answer and the run completed without a reason"),
        CodeInfo("CK201", "error", "R8.4", "history not isomorphic with the live stream"),
        CodeInfo("CK202", "error", "R4.3", "same content, different ids"),
        CodeInfo("CK203", "info", "R4.3", "ids look generated from time or randomness"),
        CodeInfo("CK204", "error", "R4.4", "part id reused across a segment boundary"),
        CodeInfo("CK205", "error", "R4.2", "duplicate message or part id"),
        CodeInfo("CK206", "error", "R10.2", "history still holds replaced content after regenerate/edit"),
        CodeInfo("CK207", "info", "R8.4 R4.3", "the protocol's history cannot carry the live message ids"),
        CodeInfo("CK301", "error", "R3.7 R4 R7", "invalid message"),
        CodeInfo("CK302", "error", "R5.1 R5.3", "failure without a usable error code or message"),
        CodeInfo("CK303", "warning", "R4.5", "user input not visible before the answer"),
        CodeInfo("CK304", "warning", "R6.4", "ambiguous tool result"),
        CodeInfo("CK305", "warning", "R7.2", "reserved chatkit. data kind used"),
        CodeInfo("CK306", "info", "R6.4", "the protocol cannot carry a tool result"),
        CodeInfo("CK307", "info", "R6.1", "the protocol cannot carry a tool call's arguments"),
        CodeInfo("CK308", "info", "R4.1 R8.4", "the protocol cannot carry the model's reasoning"),
        CodeInfo("CK401", "info", "R3.2 R11.7", "events carry no outer event id"),
        CodeInfo("CK402", "error", "R3.2", "source sequence went backwards"),
        CodeInfo("CK403", "info", "R3.6", "duplicate events dropped idempotently"),
        CodeInfo("CK404", "error", "R11.6", "resume did not replay completely and in order"),
        CodeInfo("CK405", "error", "R2.5", "frame could not be decoded"),
        CodeInfo("CK406", "info", "R2.4", "unknown event types ignored"),
        CodeInfo("CK501", "error", "R10.1 R11.5", "event names another session"),
        CodeInfo("CK502", "error", "R11.2", "subscription event cannot be routed"),
        CodeInfo("CK503", "error", "R3.6", "fact names an unknown run"),
        CodeInfo("CK504", "error", "R11.5", "local command and subscription use different run ids"),
        CodeInfo("CK505", "info", "R2.6 R8.4", "the protocol cannot carry a passive run's input"),
        CodeInfo("CK601", "info", "-", "slow first event"),
        CodeInfo("CK602", "info", "-", "stall between events"),
        CodeInfo("CK701", "info", "-", "trace recorded with secrets kept"),
        CodeInfo("CK702", "warning", "-", "the recording has a gap: the recorder lost part of what passed"),
        CodeInfo("CK703", "info", "-", "an event over the recorder's limit was kept as its head, length and hash"),
    )
}

#: FactRejectReason -> code (docs/rules.md#finding-codes); idempotent reasons have none.
REASON_CODES: dict[str, str] = {
    "terminal-sealed": "CK101",
    "active-work": "CK105",
    "output-sealed": "CK107",
    "invalid-transition": "CK108",
    "missing-work-item-id": "CK109",
    "missing-event-id": "CK111",
    "invalid-message": "CK301",
    "source-sequence-regressed": "CK402",
    "wrong-session": "CK501",
    "run-not-found": "CK503",
    # runtime-disposed cannot be reached from traffic: a recording never disposes.
}


@dataclass
class Finding:
    """One finding (the fields of docs/rules.md#finding-codes, in its order)."""

    code: str
    severity: str
    rule: str
    session_id: str | None
    run_id: str | None
    frames: list[str]
    fingerprint: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "rule": self.rule,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "frames": list(self.frames),
            "fingerprint": self.fingerprint,
            "message": self.message,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Finding:
        return cls(
            obj["code"],
            obj["severity"],
            obj["rule"],
            obj.get("session_id"),
            obj.get("run_id"),
            list(obj.get("frames") or []),
            obj["fingerprint"],
            obj["message"],
            dict(obj.get("detail") or {}),
        )

    @property
    def info(self) -> CodeInfo:
        return CATALOGUE[self.code]


def _fingerprint(code: str, session_id: str | None, run_id: str | None, keys: Iterable[Any], frame: str | None) -> str:
    """Stable across re-imports and re-decodes: code, session, run, the
    message/part ids (``keys``) and the decisive frame's position, never
    database row ids."""
    material = json.dumps([code, session_id, run_id, [str(k) for k in keys], frame], separators=(",", ":"))
    return code + "-" + hashlib.sha256(material.encode()).hexdigest()[:16]


def make_finding(
    code: str,
    *,
    session_id: str | None,
    run_id: str | None,
    frames: Sequence[str] = (),
    message: str,
    detail: Mapping[str, Any] | None = None,
    keys: Iterable[Any] = (),
    severity: str | None = None,
    frame_in_fingerprint: bool = True,
) -> Finding:
    """Build a finding with its catalogue severity and rule and a stable fingerprint."""
    info = CATALOGUE[code]
    frames = list(dict.fromkeys(frames))  # each frame once, decisive first
    return Finding(
        code=code,
        severity=severity or info.severity,
        rule=info.rule,
        session_id=session_id,
        run_id=run_id,
        frames=frames,
        fingerprint=_fingerprint(code, session_id, run_id, keys, frames[0] if frames and frame_in_fingerprint else None),
        message=message,
        detail=dict(detail or {}),
    )


def clip(value: Any, limit: int | None = 120) -> str:
    """``value`` as one line of at most ``limit`` characters: cut at a word
    boundary when one is near, always marked with an ellipsis (None: whole)."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split()) if "\n" in text or "\r" in text or "\t" in text else text
    if limit is None or len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    space = cut.rfind(" ")
    if space >= max(1, len(cut) - 20):
        cut = cut[:space]
    return cut.rstrip() + "…"
