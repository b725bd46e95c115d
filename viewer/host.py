"""What the screens and dialogs need from the app (:class:`.app.ViewerApp`),
as a protocol: the screens read the app through it, so they never import the
app that opens them (no import cycle in the viewer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from textual.content import Content

from chatkit_trace.views import FindingInfo, RunInfo, TraceData

from .idle_gc import IdleCollector

__all__ = ["ViewerHost"]


class ViewerHost(Protocol):
    """The app as its screens see it."""

    data: TraceData
    source: Any
    adapter: Any
    capabilities: frozenset[str] | None
    profile: str | None
    user_profile: str | None
    export_dir: str | Path | None
    analysed: bool
    live: bool
    collector: IdleCollector

    @property
    def source_path(self) -> str: ...

    def open_run(self, session_id: str, run_id: str, finding: FindingInfo | None = None) -> None: ...

    def start_analysis(self, *, force: bool = False) -> None: ...

    def title_line(self, runs: list[RunInfo]) -> Content: ...
