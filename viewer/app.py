"""``chatkit-trace view``: the Textual app.

Structure (harlequin's habits): screens in their own modules
(:mod:`.runs_screen`, :mod:`.run_screen`, :mod:`.dialogs`), widgets in
:mod:`.widgets`, worker messages in :mod:`.messages`, all styling in
``viewer.tcss``, and no SQL outside :mod:`.data`.

Workers (threads, never the UI loop): the analysis of a trace that has no
derived tables yet (:mod:`.analysis`), a run's replay (:mod:`.replay`) and
text searches.  A one-second timer polls the file (its SQLite data version)
and reloads what is on screen when the recorder wrote to it (live tail).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import events, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.worker import get_current_worker

from chatkit_trace import tempfiles
from chatkit_trace.views import FindingInfo, RunInfo, TraceData
from chatkit_trace.views.analysis import AUTO_LIMIT, analyse
from chatkit_trace.visible import visible

from .idle_gc import IdleCollector
from .messages import AnalysisDone, AnalysisProgress, TraceChanged
from .render import esc, markup

__all__ = ["Source", "ViewerApp", "open_source"]

DARK, LIGHT = "textual-dark", "textual-light"

#: how often the app asks whether a full garbage collection is due (decision 208)
IDLE_GC_TICK = 0.25


@dataclass
class Source:
    """A trace to view: where it is and how to decode it."""

    path: str  # the database the viewer reads (an imported HAR/flow lands in a temporary one)
    shown: str  # what the user pointed at
    adapter: Any
    capabilities: frozenset[str] | None
    profile: str | None
    kind: str = "db"
    #: the --profile to pass when the trace is opened again (the user's, or the recorded one)
    open_profile: str | None = None
    #: ``path`` is a temporary database (an import, a re-classified copy): removed by :meth:`discard`
    temporary: bool = False

    def discard(self) -> None:
        """Remove a temporary database once the viewer is done with it."""
        if not self.temporary:
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                Path(self.path + suffix).unlink()


def open_source(path: str | Path, profile: str | None = None) -> Source:
    """Open ``path`` like every command does (clear errors for bad files), resolve the adapter.

    A recording made by ``chatkit-trace record`` names its profile in
    ``meta.recordings`` rather than ``meta.protocol``: that one is used when
    no ``--profile`` is given.
    """
    from chatkit_trace.loading import TraceInputError, open_trace

    try:
        loaded = open_trace(path, profile=profile)
    except TraceInputError:
        if not Path(path).is_file():
            raise  # a FIFO, a device: reading it for its profile would block
        recorded = None if profile is not None else _recorded_profile(path)
        if recorded is None:
            raise
        loaded = open_trace(path, profile=recorded)
        profile = recorded
    try:
        return Source(
            str(loaded.store.path),
            str(path),
            loaded.adapter,
            loaded.capabilities,
            loaded.profile,
            loaded.kind,
            profile,
            loaded.temporary and loaded.kind != "fixture",  # fixtures' folders are removed at exit
        )
    finally:
        loaded.close(keep=True)  # an imported or re-classified copy is what the viewer reads


def _recorded_profile(path: str | Path) -> str | None:
    try:
        data = TraceData(path)
        try:
            recordings = data.meta().get("recordings")
        finally:
            data.close()
    except Exception:  # noqa: BLE001 - not a trace we can read: open_trace said why
        return None
    if isinstance(recordings, list) and recordings and isinstance(recordings[-1], dict):
        rec = recordings[-1]
        return rec.get("profile") or rec.get("protocol")
    return None


class ViewerApp(App[None]):
    """Browse sessions and runs, replay a run frame by frame, see why."""

    CSS_PATH = "viewer.tcss"
    TITLE = "chatkit-trace view"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark,f1", "help", "help", key_display="?"),
        Binding("ctrl+t", "toggle_theme", "light/dark", show=False),
    ]

    def __init__(
        self,
        source: Source | str | Path,
        *,
        profile: str | None = None,
        session: str | None = None,
        run: str | None = None,
        analyse: str = "auto",  # auto | always | never
        poll: float = 1.0,
        theme: str | None = None,
        side_dir: str | Path | None = None,
        export_dir: str | Path | None = None,
    ) -> None:
        super().__init__()
        # Its side database is made in a worker thread: the temporary files'
        # SIGTERM/SIGHUP handlers are installed here, on the main thread.
        tempfiles.guard()
        self.source = source if isinstance(source, Source) else open_source(source, profile)
        self.data = TraceData(self.source.path)
        self.adapter = self.source.adapter
        self.capabilities = self.source.capabilities
        self.profile = self.source.profile
        self.user_profile = profile if profile is not None else self.source.open_profile
        self.start_session = session
        self.start_run = run
        self.analyse_mode = analyse
        self.poll_interval = poll
        self.side_dir = side_dir
        self.export_dir = (
            export_dir  # where the export key writes fixtures (default: the current directory)
        )
        self.initial_theme = theme
        self.analysed = False
        self.findings_known = False
        self.analysing: tuple[str, float | None] | None = None
        self.analysis_error: str | None = None
        self.live = False
        self._data_version: int | None = None
        self._quiet_polls = 0
        self._reanalyse_timer: Any = None
        self.counts = {"frames": 0, "exchanges": 0}
        self.behind = 0  # frames the recorder's deriver has not derived yet
        #: full garbage collections wait until the user is idle (decision 208)
        self.collector = IdleCollector()

    @property
    def source_path(self) -> str:
        return self.source.shown

    # -- start ----------------------------------------------------------------------

    def on_mount(self) -> None:
        from .runs_screen import RunsScreen

        if self.initial_theme:
            self.theme = self.initial_theme
        self.counts = self.data.counts()
        self.behind = self._backlog()
        self.analysed = self.data.has_derived()
        self.findings_known = self.data.has_findings()
        self.live = self.data.recording_pid() is not None
        self.push_screen(RunsScreen())
        self.start_analysis()
        if self.start_session or self.start_run:
            self.call_after_refresh(self._open_start_run)
        if self.poll_interval:
            self._data_version = self.data.data_version()
            self.set_interval(self.poll_interval, self.poll)
        self.collector.install()
        self.set_interval(IDLE_GC_TICK, self.collector.tick)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            self.collector.touch()  # the user is busy: a full collection waits
        await super().on_event(event)

    def _open_start_run(self) -> None:
        runs = self.data.runs()
        match = [
            r
            for r in runs
            if (self.start_session is None or r.session_id == self.start_session)
            and (self.start_run is None or r.run_id == self.start_run)
        ]
        if not match:
            what = " ".join(
                x
                for x in (
                    self.start_session and f"session {self.start_session}",
                    self.start_run and f"run {self.start_run}",
                )
                if x
            )
            self.notify(f"no {what} in this trace", severity="warning", timeout=5, markup=False)
            return
        r = match[0]
        self.open_run(r.session_id, r.run_id)

    def open_run(self, session_id: str, run_id: str, finding: FindingInfo | None = None) -> None:
        from .run_screen import RunScreen

        run = next((r for r in self.data.runs() if r.key == (session_id, run_id)), None)
        if run is None:
            self.notify(visible(f"no run {run_id} in session {session_id}"), severity="warning", markup=False)
            return
        self.push_screen(RunScreen(run, finding))

    # -- analysis -------------------------------------------------------------------------

    def start_analysis(self, *, force: bool = False) -> None:
        """Derive facts, runs and findings when the trace has none (or when asked)."""
        if self.analysing is not None:
            return
        mode = "always" if force else self.analyse_mode
        if mode == "never":
            return
        frames = self.counts["frames"]
        if mode == "auto":
            has_findings = self.data.has_findings()
            stale = self.live and frames <= AUTO_LIMIT  # the recorder derives runs, never findings
            if self.analysed and (has_findings or frames > 20_000) and not stale:
                return
            if frames > AUTO_LIMIT:
                self.notify(
                    f"{frames} frames and no derived tables: press a to analyse (or run chatkit-trace check)",
                    timeout=8,
                )
                return
            if self.counts["exchanges"] == 0:
                return
        self.analysing = ("starting", None)
        self.analysis_error = None
        self.refresh_titles()
        self.run_analysis()

    def _post_progress(self, what: str, frac: float | None) -> None:
        self.post_message(AnalysisProgress(what, frac))

    @work(thread=True, exclusive=True, group="analysis")
    def run_analysis(self) -> None:
        worker = get_current_worker()
        path = self.source.path
        write_back = False  # the viewer never writes to its input: derived tables go to a side database
        try:
            result = analyse(
                path,
                profile=self.user_profile,
                write_back=write_back,
                side_dir=self.side_dir,
                progress=self._post_progress,
                cancelled=lambda: worker.is_cancelled,
            )
        except Exception as err:  # noqa: BLE001 - shown, the viewer keeps working without derived data
            self.post_message(AnalysisDone(None, f"{type(err).__name__}: {err}"))
            return
        if result is not None:
            self.post_message(AnalysisDone(result.derived_path, None, result.findings))

    def data_looks_live(self) -> bool:
        """A stream without an end: the recorder may still be writing (do not write into it)."""
        try:
            open_stream = self.data.has_open_stream()
        except Exception:  # noqa: BLE001 - a trace that cannot be read now is treated as live: never written into
            return True
        return open_stream or self.live or self.data.recording_pid() is not None

    def on_analysis_progress(self, message: AnalysisProgress) -> None:
        self.analysing = (message.what, message.fraction)
        self.refresh_titles()

    def on_analysis_done(self, message: AnalysisDone) -> None:
        self.analysing = None
        with contextlib.suppress(Exception):
            self._data_version = self.data.data_version()
        if message.error:
            self.analysis_error = message.error
            self.notify(visible(f"analysis failed: {message.error}"), severity="error", timeout=10, markup=False)
        else:
            if message.derived_path is not None:
                self.data.set_derived(message.derived_path)
            else:
                self.data.invalidate()
            self.analysed = True
            self.findings_known = True
            self.reload_screens(derived=True)
        self.refresh_titles()

    # -- live tail -------------------------------------------------------------------------

    def poll(self) -> None:
        try:
            version = self.data.data_version()
        except Exception:  # noqa: BLE001 - the file went away: keep what is on screen
            return
        if self.analysing is not None:
            self._data_version = (
                version  # our own analysis may be writing derived tables back: not the recorder
            )
            return
        if self._data_version is not None and version != self._data_version:
            self._data_version = version
            self.live = True
            self._quiet_polls = 0
            self.data.invalidate()
            self.counts = self.data.counts()
            self.behind = self._backlog()
            self.analysed = self.data.has_derived() or self.analysed
            self.post_message(TraceChanged())
        else:
            self._data_version = version
            if self.live:
                self._quiet_polls += 1
                if (
                    self._quiet_polls * self.poll_interval > 10
                    and self.data.recording_pid() is None
                ):
                    self.live = False
                    self.refresh_titles()

    def _backlog(self) -> int:
        try:
            return self.data.derivation_backlog()
        except Exception:  # noqa: BLE001 - the title then says nothing about it
            return 0

    def on_trace_changed(self, message: TraceChanged) -> None:
        """New frames: show them now; findings (which the recorder does not derive) follow by a
        new analysis into a side database, debounced; a trace too big for that is shown with the
        tables the recorder keeps up to date itself."""
        if self.counts["frames"] <= AUTO_LIMIT and self.analyse_mode != "never":
            if self._reanalyse_timer is not None:
                self._reanalyse_timer.stop()
            self._reanalyse_timer = self.set_timer(1.5, self._reanalyse)
        elif self.data.derived_path != self.data.path:
            self.data.set_derived(None)
            self.findings_known = self.data.has_findings()
        self.reload_screens()

    def _reanalyse(self) -> None:
        self._reanalyse_timer = None
        if self.analysing is not None:
            self._reanalyse_timer = self.set_timer(1.0, self._reanalyse)
            return
        self.start_analysis(force=True)

    def reload_screens(self, *, derived: bool = False) -> None:
        from .run_screen import RunScreen
        from .runs_screen import RunsScreen

        for screen in self.screen_stack:
            if isinstance(screen, RunsScreen):
                screen.refresh_runs()
            elif isinstance(screen, RunScreen):
                screen.trace_changed(derived=derived)

    # -- titles ------------------------------------------------------------------------------

    def title_line(self, runs: list[RunInfo]) -> Content:
        name = Path(self.source_path).name
        sessions = len({r.session_id for r in runs})
        parts = [
            f"[b]chatkit-trace[/b] [$text-accent b]{esc(name)}[/]",
            esc(self.profile or self.data.meta().get("protocol") or "?"),
            f"{sessions} session(s)",
            f"{len(runs)} run(s)",
            f"{self.counts['frames']} frames",
        ]
        if self.findings_known:
            counts = self.data.finding_counts()
            if counts:
                tones = (
                    ("error", "$text-error"),
                    ("warning", "$text-warning"),
                    ("info", "$text-accent"),
                )
                shown = " ".join(
                    f"[{tone}]{counts[s]} {s}{'s' if counts[s] > 1 else ''}[/]"
                    for s, tone in tones
                    if counts.get(s)
                )
                parts.append(f"findings: {shown}")
            else:
                parts.append("[$text-success]no findings[/]")
        elif self.analysed and self.analysing is None:
            parts.append("[$text-muted]findings not computed (a: analyse)[/]")
        if self.analysing is not None:
            what, frac = self.analysing
            if frac is None:
                parts.append(f"[$text-warning]analysing: {esc(what)}…[/]")
            else:
                filled = int(frac * 10)
                parts.append(
                    f"[$text-warning]analysing {'█' * filled}{'░' * (10 - filled)} {frac * 100:.0f}% {esc(what)}[/]"
                )
        elif self.analysis_error:
            parts.append("[$text-error]analysis failed (a: retry)[/]")
        elif not self.analysed:
            parts.append("[$text-muted]not analysed (a: analyse)[/]")
        if self.live:
            parts.append("[$text-warning b]● live[/]")
        if self.behind:
            parts.append(f"[$text-warning]derivation behind by {self.behind} frame{'s' if self.behind != 1 else ''}[/]")
        return markup("  ".join(parts))

    def refresh_titles(self) -> None:
        from .run_screen import RunScreen
        from .runs_screen import RunsScreen

        for screen in self.screen_stack:
            if isinstance(screen, (RunsScreen, RunScreen)):
                screen.update_title()

    # -- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        from .dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme != LIGHT else DARK

    def on_unmount(self) -> None:
        self.collector.uninstall()
        self.data.close()
