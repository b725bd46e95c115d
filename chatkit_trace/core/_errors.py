"""Exceptions of the Core.

::

    ChatkitTraceError                  base of every chatkit-trace exception
    ├── InvalidMessageError(ValueError)  a message breaks a validation rule (R3.7)
    └── HistoryFormatError(ValueError)   a HistoryResult envelope is not of its shape (R8.1)

Rejections of facts are *values* (:class:`~chatkit_trace.core.FactResult`),
never exceptions: the Core raises only on misuse and for whole history
batches, as chatkit's ``history.refresh()`` does.
"""

from __future__ import annotations

__all__ = ["ChatkitTraceError", "InvalidMessageError", "HistoryFormatError"]


class ChatkitTraceError(Exception):
    """Base class of every exception chatkit-trace raises on purpose."""


class InvalidMessageError(ChatkitTraceError, ValueError):
    """A message (or a history batch) breaks a validation rule (SPEC R3.7).

    Carries the rule's name, the message and part ids and where the message
    came from (``live``, ``projection``, ``history``, ``rewrite``,
    ``content``), never the message's content.
    """

    def __init__(
        self,
        rule: str,
        message_id: str | None = None,
        part_id: str | None = None,
        source: str = "live",
        detail: str | None = None,
    ) -> None:
        self.rule = rule
        self.message_id = message_id
        self.part_id = part_id
        self.source = source
        self.detail = detail
        where = []
        if message_id is not None:
            where.append(f"message {message_id!r}")
        if part_id is not None:
            where.append(f"part {part_id!r}")
        text = f"invalid message ({rule})"
        if where:
            text += " at " + ", ".join(where)
        if detail:
            text += f": {detail}"
        super().__init__(text)

    def with_source(self, source: str) -> InvalidMessageError:
        return InvalidMessageError(self.rule, self.message_id, self.part_id, source, self.detail)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"rule": self.rule, "source": self.source}
        if self.message_id is not None:
            out["messageId"] = self.message_id
        if self.part_id is not None:
            out["partId"] = self.part_id
        if self.detail:
            out["detail"] = self.detail
        return out

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (
            InvalidMessageError,
            (self.rule, self.message_id, self.part_id, self.source, self.detail),
        )


class HistoryFormatError(ChatkitTraceError, ValueError):
    """A HistoryResult is not of the shape SPEC R8.1 gives (not a message rule)."""
