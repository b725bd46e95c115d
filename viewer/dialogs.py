"""Screens on top: live vs history, help, export."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

from chatkit_trace.views import FindingInfo, RunInfo, row_key
from chatkit_trace.views.diff import Comparison, cause_sentence, comparisons, describe, limit_sentence

from .diff import side_by_side
from .host import ViewerHost
from .render import esc, markup

__all__ = ["HELP", "DetailScreen", "DiffScreen", "ExportScreen", "HelpScreen"]


class DiffScreen(Screen[None]):
    """Live vs history for one run, side by side, differences highlighted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "back"),
        Binding("n", "cycle(1)", "next history read"),
        Binding("p", "cycle(-1)", "previous read", show=False),
    ]

    def __init__(self, run: RunInfo) -> None:
        super().__init__(id="diff-screen")
        self.run = run
        self.items: list[Comparison] = []
        self.index = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-title", classes="title")
        with VerticalScroll(id="diff-body"):
            yield Static("", id="diff-columns")
            yield Static("", id="diff-list")
        yield Footer()

    def on_mount(self) -> None:
        viewer: ViewerHost = self.app  # type: ignore[assignment]
        self.items = comparisons(
            viewer.data,
            self.run.session_for_replay,
            self.run.run_id,
            viewer.adapter,
            viewer.capabilities,
        )
        self.findings = [
            f
            for f in viewer.data.findings(self.run.session_id, self.run.run_id)
            if f.code in ("CK201", "CK202")
        ]
        self.render_diff()

    def on_resize(self) -> None:
        self.render_diff()

    def render_diff(self) -> None:
        title = self.query_one("#diff-title", Static)
        cols = self.query_one("#diff-columns", Static)
        lst = self.query_one("#diff-list", Static)
        head = f"[b]live vs history[/b] · session {esc(self.run.session_id)} · run {esc(self.run.run_id)}"
        if not self.items:
            title.update(markup(head))
            cols.update(
                markup(
                    "[$text-muted]Nothing to compare: no history read after this run covers it (record a refresh after the run).[/]"
                )
            )
            lst.update("")
            return
        c = self.items[self.index % len(self.items)]
        n = (
            f" · read {self.index % len(self.items) + 1} of {len(self.items)} (n next)"
            if len(self.items) > 1
            else ""
        )
        if c.moving is not None:
            verdict = f"[$text-warning b]{esc(c.verdict)}[/]"  # shown, not judged (diff says the same)
        elif not c.diffs and not c.explained:
            verdict = f"[$text-success]{esc(c.verdict)}[/]"
        elif not c.diffs:
            verdict = f"[$text-warning b]{esc(c.verdict)}[/]"
        else:
            verdict = f"[$text-error b]{esc(c.verdict)}[/]"
        title.update(
            markup(
                f"{head} · {esc(c.title)}{n} · {verdict}\n[$text-muted]{esc(c.baseline)}[/]"
            )
        )
        width = max(40, self.size.width - 2)
        cols.update(side_by_side(c, width))
        lines = []
        for d in c.diffs:
            lines.append(f"[$text-error]✗[/] {esc(describe(d))}")
        for d in c.explained:
            lines.append(f"[$text-warning]•[/] {esc(describe(d))} " + esc(cause_sentence(d["cause"])))
        for d in c.limited:
            lines.append(f"[$text-muted]•[/] {esc(limit_sentence(d))}")
        if c.renamed:
            lines.append("")
            lines.append(
                "[$text-warning]same message, different ids (CK202):[/] "
                + esc(", ".join(f"{a} vs {b}" for a, b in c.renamed))
            )
        for f in self.findings:
            lines.append(f"[$text-error b]{esc(f.code)}[/] {esc(f.message)}")
        lst.update(markup("\n".join(lines)))

    def action_cycle(self, delta: int) -> None:
        if self.items:
            self.index = (self.index + delta) % len(self.items)
            self.render_diff()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.app.pop_screen()


class DetailScreen(Screen[None]):
    """The selected timeline row in full, with room for long frames (Enter on the timeline)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter", "dismiss", "back"),
        Binding("x", "raw", "raw bytes"),
        Binding("up,k", "step(-1)", "previous row"),
        Binding("down,j", "step(1)", "next row"),
    ]

    def __init__(self, run_screen: Any) -> None:
        super().__init__(id="detail-screen")
        self.run_screen = run_screen

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-full-title", classes="title")
        with VerticalScroll(id="detail-full"):
            yield Static("", id="detail-full-body")
        yield Footer()

    def on_mount(self) -> None:
        self.render_detail()

    def render_detail(self) -> None:
        from .widgets import TimelineView

        rs = self.run_screen
        view = rs.query_one(TimelineView)
        row = view.get_row(view.cursor)
        if row is None:
            return
        m = rs.replayer.cached(row_key(row)) if rs.replayer is not None else None
        title, body = rs.detail(row, m)
        raw = " · raw bytes" if rs.raw else ""
        self.query_one("#detail-full-title", Static).update(
            markup(
                f"[b]{esc(title)}[/b] [$text-muted]· session {esc(rs.run.session_id)} · run {esc(rs.run.run_id)}{raw}[/]"
            )
        )
        self.query_one("#detail-full-body", Static).update(body)

    def action_raw(self) -> None:
        self.run_screen.action_raw()
        self.render_detail()

    def action_step(self, delta: int) -> None:
        from .widgets import TimelineView

        view = self.run_screen.query_one(TimelineView)
        view.cursor = view.cursor + delta
        self.call_after_refresh(self.render_detail)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.app.pop_screen()


#: (section, [(keys, what)]) for the help screen.
HELP: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Runs (the first screen)",
        [
            ("↑ ↓  j k  PgUp PgDn  Home End", "move"),
            ("Enter, double-click", "open the run"),
            ("/", "search ids, findings, frame text; status:failed code:CK101"),
            ("s", "cycle the status filter: problems, failed, outcome unknown, …"),
            ("c", "cycle the finding-code filter (codes present in the trace)"),
            ("o", "sort: time order / problems first"),
            ("a", "analyse the trace now (derive facts, runs, findings)"),
            ("Tab", "next pane; Enter on a finding opens it at its decisive frame"),
        ],
    ),
    (
        "A run",
        [
            (
                "↑ ↓  j k  PgUp PgDn  Home End",
                "move along the timeline; the snapshot follows the cursor",
            ),
            ("]  [", "next / previous problem row (rejected, undecodable, lost)"),
            ("n  N", "next / previous finding: jump to its decisive frame"),
            ("Space", "play / pause at the recorded pace"),
            ("+  -", "faster / slower: 1×, 2×, 5×, 10×, 50×, max"),
            ("Enter", "the selected row in full (↑ ↓ move, x raw bytes, Esc back)"),
            ("x", "raw bytes of the selected frame"),
            ("d", "live vs history, side by side, differences highlighted"),
            ("e", "export the run as a conformance fixture"),
            ("F", "follow new frames (live tail; on at the last row of a live trace)"),
            ("f  t  Tab", "focus findings / timeline / next pane"),
            ("Esc", "back to the runs"),
        ],
    ),
    (
        "Everywhere",
        [
            ("?  F1", "this help"),
            ("Ctrl+T", "light / dark theme"),
            ("Ctrl+P", "command palette (themes, keys)"),
            ("q", "quit"),
        ],
    ),
]

def _statuses() -> str:
    from chatkit_trace.trace import RUN_STATUSES

    return "".join(f"[b]{k}[/b]  {v}\n" for k, v in RUN_STATUSES.items())


# the run statuses as every output defines them (chatkit_trace.trace.RUN_STATUSES), then the marks
LEGEND = (
    _statuses() + "[b]not analysed[/b]  the trace is not derived yet (the viewer derives it)\n"
    "[b]▶[/b] a request (send, stop, history read)   [b]■[/b] the end of a response stream   [b $text-error]![/] something wrong\n"
    "[$text-success]✓[/] accepted   [$text-error]✗ reason[/] rejected by the Core (e.g. terminal-sealed)   "
    "[$text-error]lost[/] decoded after the reader stopped: the UI never saw it\n"
    "[b $text-error]●[/] before a run: look at it (it failed, its outcome is unknown, or it has an error finding)   "
    "[b $text-warning]● live[/] in a title: the trace is still being recorded"
)


def help_content() -> Content:
    lines = [
        markup(
            "[b $text-primary]chatkit-trace view[/]  [$text-muted]find the broken run, then the frame where it went wrong[/]"
        ),
        Content(""),
    ]
    for title, rows in HELP:
        lines.append(Content.styled(title, "bold"))
        for keys, what in rows:
            lines.append(Content.assemble("  ", (f"{keys:<30}", "bold $text-accent"), " ", what))
        lines.append(Content(""))
    lines.append(markup(LEGEND))
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,f1", "close", "close"),
        Binding("q", "app.quit", "quit"),  # a modal screen hides the app's bindings: q quits everywhere
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_content(), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class ExportScreen(ModalScreen[None]):
    """Export the run as a conformance fixture: say what will be written, write it on Enter.

    Uses :func:`chatkit_trace.fixtures.export_fixture` (what ``chatkit-trace
    export`` runs); when this installation has no fixture support, the
    screen only says what the key will do.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("enter", "write", "write the fixture"),
        Binding("q", "app.quit", "quit"),  # a modal screen hides the app's bindings: q quits everywhere
    ]

    def __init__(
        self, run: RunInfo, rows: int, findings: list[FindingInfo], folder: str | Path | None = None
    ) -> None:
        super().__init__(id="export-screen")
        self.run = run
        self.rows = rows
        self.findings = findings
        self.folder = Path(folder) if folder is not None else Path.cwd()
        self.exporter = _exporter()
        self.written: Path | None = None

    def target(self) -> Path:
        viewer: ViewerHost = self.app  # type: ignore[assignment]
        name = f"{Path(viewer.source_path).stem}-{self.run.session_id}-{self.run.run_id}"
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        path = self.folder / f"{name}.chatkit.json"
        n = 2
        while path.exists():
            path = self.folder / f"{name}-{n}.chatkit.json"
            n += 1
        return path

    def compose(self) -> ComposeResult:
        viewer: ViewerHost = self.app  # type: ignore[assignment]
        target = self.target()
        codes = ", ".join(sorted({f.code for f in self.findings})) or "none"
        what = (
            f"· session {esc(self.run.session_id)}, run {esc(self.run.run_id)}: its exchanges as recorded "
            f"({self.rows} timeline rows: requests, frames with relative timing and event ids, stream ends, history reads),\n"
            f"· the protocol ({esc(viewer.profile or viewer.data.meta().get('protocol') or '?')}) and the Core capabilities,\n"
            "· the expected outcome: facts with their admission results, the final snapshot,\n"
            f"· the findings it shows today ({esc(codes)}),\n\n"
            "a versioned JSON file that replays as a pytest regression test (the pytest plugin collects *.chatkit.json), "
            "so the bug stays found. Secrets are redacted again; hosts, ports and times are normalised."
        )
        if self.exporter is None:
            text = (
                f"[b]Export run {esc(self.run.run_id)} as a fixture[/b]\n\n"
                "[$text-warning]Fixture export is not available in this installation yet.[/]\n\n"
                f"When it is, this key writes [b]{esc(target)}[/b] with\n{what}\n\n"
                "Same as [b]chatkit-trace export TRACE --session S --run R -o FILE[/b].\n\n"
                "[$text-muted]Esc to close[/]"
            )
        else:
            text = (
                f"[b]Export run {esc(self.run.run_id)} as a fixture[/b]\n\n"
                f"Writes [b]{esc(target)}[/b] with\n{what}\n\n"
                f"Same as [b]chatkit-trace export {esc(viewer.source_path)} --session {esc(self.run.session_id)} "
                f"--run {esc(self.run.run_id)} -o {esc(target.name)}[/b]\n\n"
                "[b]Enter[/b] write it   [b]Esc[/b] cancel"
            )
        with Vertical(id="export-box"):
            yield Static(markup(text), id="export-text")

    def action_write(self) -> None:
        if self.exporter is None or self.written is not None:
            self.dismiss(None)
            return
        self.query_one("#export-text", Static).update(
            markup("[$text-muted]exporting…[/]")
        )
        self._export(self.target())

    @work(thread=True, exclusive=True)
    def _export(self, target: Path) -> None:
        viewer: ViewerHost = self.app  # type: ignore[assignment]
        try:
            from chatkit_trace.fixtures import dumps_fixture

            result = self.exporter(
                viewer.source.path,
                self.run.session_id,
                [self.run.run_id],
                profile=viewer.user_profile,
            )
            target.write_text(dumps_fixture(result.fixture), "utf-8")
            warn = "".join(f"\n[$text-warning]warning: {esc(w)}[/]" for w in result.warnings)
            text = f"[$text-success]exported[/] run {esc(self.run.run_id)} to [b]{esc(target)}[/b]{warn}\n\n[$text-muted]Enter or Esc to close[/]"
            self.written = target
        except Exception as err:  # noqa: BLE001 - shown to the user
            text = f"[$text-error]export failed: {esc(err)}[/]\n\n[$text-muted]Esc to close[/]"
            self.written = Path()
        self.app.call_from_thread(
            self.query_one("#export-text", Static).update, markup(text)
        )

    def action_close(self) -> None:
        self.dismiss(None)


def _exporter() -> Any:
    """``chatkit_trace.fixtures.export_fixture``, when this installation has it."""
    try:
        from chatkit_trace import fixtures

        return (
            getattr(fixtures, "export_fixture", None)
            if hasattr(fixtures, "dumps_fixture")
            else None
        )
    except Exception:  # noqa: BLE001 - fixture support missing or broken: say what the key will do
        return None
