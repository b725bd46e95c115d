"""Messages the viewer's workers post to the UI (thread-safe; floods coalesce)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

__all__ = ["AnalysisDone", "AnalysisProgress", "MomentReady", "SearchDone", "TraceChanged"]


class AnalysisProgress(Message):
    """Analysis is under way; only the latest one matters."""

    def __init__(self, what: str, fraction: float | None) -> None:
        super().__init__()
        self.what = what
        self.fraction = fraction

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AnalysisProgress)


class AnalysisDone(Message):
    def __init__(self, derived_path: Any, error: str | None = None, findings: int = 0) -> None:
        super().__init__()
        self.derived_path = derived_path
        self.error = error
        self.findings = findings


class TraceChanged(Message):
    """The trace file changed on disk (live tail)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TraceChanged)


class MomentReady(Message):
    """The replay worker computed the snapshot at a row."""

    def __init__(self, tag: Any, key: Any, moment: Any, error: str | None = None) -> None:
        super().__init__()
        self.tag = tag
        self.key = key
        self.moment = moment
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MomentReady)


class SearchDone(Message):
    def __init__(self, query: str, exchanges: set[int]) -> None:
        super().__init__()
        self.query = query
        self.exchanges = exchanges
