"""Screens on top: live vs history, help, export."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Markdown, Static

from .data import FindingInfo, RunInfo
from .diff import Comparison, comparisons, describe, side_by_side
from .render import esc

if TYPE_CHECKING:
    from .app import ViewerApp

__all__ = ["DiffScreen", "HelpScreen", "ExportScreen", "HELP"]


class DiffScreen(Screen[None]):
    """Live vs history for one run, side by side, differences highlighted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "back"),
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
        viewer: ViewerApp = self.app  # type: ignore[assignment]
        self.items = comparisons(viewer.data, self.run.session_id, self.run.run_id)
        self.findings = [f for f in viewer.data.findings(self.run.session_id, self.run.run_id) if f.code in ("CK201", "CK202")]
        self.render_diff()

    def on_resize(self) -> None:
        self.render_diff()

    def render_diff(self) -> None:
        title = self.query_one("#diff-title", Static)
        cols = self.query_one("#diff-columns", Static)
        lst = self.query_one("#diff-list", Static)
        head = f"[b]live vs history[/b] · session {esc(self.run.session_id)} · run {esc(self.run.run_id)}"
        if not self.items:
            title.update(Content.from_markup(head))
            cols.update(Content.from_markup(
                "[$text-muted]Nothing to compare: this run has no history read after it (record a refresh after the run), "
                "or the trace is not analysed yet.[/]"
            ))
            lst.update("")
            return
        c = self.items[self.index % len(self.items)]
        n = f" · read {self.index % len(self.items) + 1} of {len(self.items)} (n next)" if len(self.items) > 1 else ""
        verdict = "[$text-success]isomorphic: same ids, types and content[/]" if not c.diffs else f"[$text-error b]{len(c.diffs)} difference(s)[/]"
        title.update(Content.from_markup(f"{head} · history read {c.history_exchange}{n} · {verdict}"))
        width = max(40, self.size.width - 2)
        cols.update(side_by_side(c, width))
        lines = []
        for d in c.diffs:
            lines.append(f"[$text-error]✗[/] {esc(describe(d))}")
        if c.renamed:
            lines.append("")
            lines.append("[$text-warning]same content, different ids (CK202):[/] " + esc(", ".join(f"{a} vs {b}" for a, b in c.renamed)))
        for f in self.findings:
            lines.append(f"[$text-error b]{esc(f.code)}[/] {esc(f.message)}")
        if c.error:
            lines.append(f"[$text-error]history read error: {esc(c.error)}[/]")
        lst.update(Content.from_markup("\n".join(lines)))

    def action_cycle(self, delta: int) -> None:
        if self.items:
            self.index = (self.index + delta) % len(self.items)
            self.render_diff()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.app.pop_screen()


HELP = """\
# chatkit-trace view

Find the broken run, then see the frame where it went wrong.

## Runs (first screen)

| key | what |
|---|---|
| `↑ ↓` `j k` `PgUp PgDn` `Home End` | move |
| `Enter` / double-click | open the run |
| `/` | search: ids, finding text, frame text; `status:failed`, `code:CK101` |
| `s` | cycle the status filter (problems, failed, outcome unknown, …) |
| `c` | cycle the finding-code filter |
| `o` | sort: time order / problems first |
| `a` | analyse the trace now (derive facts, runs, findings) |
| `Tab` | next pane (runs, findings); `Enter` on a finding opens its frame |

## A run

| key | what |
|---|---|
| `↑ ↓` `j k` `PgUp PgDn` `Home End` | move along the timeline; the snapshot follows |
| `]` `[` | next / previous problem row (rejected, undecodable, lost) |
| `n` `N` | next / previous finding: jump to its decisive frame |
| `Space` | play / pause at the recorded pace |
| `+` `-` | faster / slower (1×, 2×, 5×, 10×, 50×, max) |
| `x` | raw bytes of the selected frame |
| `d` | live vs history, side by side |
| `e` | export the run as a fixture |
| `F` | follow new frames (live tail) |
| `f` `t` `Tab` | focus findings / timeline / next pane |
| `Esc` | back to the runs |

## Everywhere

| key | what |
|---|---|
| `?` `F1` | this help |
| `Ctrl+T` | light / dark theme |
| `Ctrl+P` | command palette (themes, keys) |
| `q` | quit |

**Status** `outcome unknown`: the stream ended (or broke) without a conclusion
and nothing settled the run (R3.4). **Rows**: `▶` a request (send, stop, history
read), `■` the end of a response stream, `!` something wrong. A fact's result is
`✓` accepted or `✗ reason` (e.g. `terminal-sealed`); `lost` means the reader had
already stopped, so the UI never saw it.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "close", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Markdown(HELP, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class ExportScreen(ModalScreen[None]):
    """What exporting the run as a fixture will do (the fixture format is not there yet)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "close")]

    def __init__(self, run: RunInfo, rows: int, findings: list[FindingInfo]) -> None:
        super().__init__(id="export-screen")
        self.run = run
        self.rows = rows
        self.findings = findings

    def compose(self) -> ComposeResult:
        viewer: ViewerApp = self.app  # type: ignore[assignment]
        from pathlib import Path

        name = Path(viewer.source_path).stem
        target = f"{name}-{self.run.session_id}-{self.run.run_id}.chatkit.json".replace("/", "_").replace(":", "_")
        codes = ", ".join(sorted({f.code for f in self.findings})) or "none"
        exporter = _exporter()
        if exporter is None:
            text = (
                f"[b]Export run {esc(self.run.run_id)} as a fixture[/b]\n\n"
                "[$text-warning]Fixture export is not available in this version yet.[/]\n\n"
                "When it is, this key will write:\n\n"
                f"  [b]{esc(target)}[/b]\n\n"
                f"· the run's exchanges and all {self.rows} timeline rows (requests, frames, stream ends) as recorded,\n"
                f"· the protocol ({esc(viewer.profile or '?')}) and the Core capabilities,\n"
                "· the expected facts, admission results and final snapshot,\n"
                f"· the findings it shows today ({esc(codes)}),\n\n"
                "a versioned JSON file that replays as a pytest regression test, so the bug stays found.\n"
                "Same as [b]chatkit-trace export TRACE --session S --run R[/b] (coming with the fixtures).\n\n"
                "[$text-muted]Esc or Enter to close[/]"
            )
        else:
            try:
                out = exporter(viewer.source_path, self.run.session_id, self.run.run_id, target)
                text = f"[$text-success]exported[/] run {esc(self.run.run_id)} to [b]{esc(out)}[/b]\n\n[$text-muted]Esc to close[/]"
            except Exception as err:  # noqa: BLE001 - shown to the user
                text = f"[$text-error]export failed: {esc(err)}[/]\n\n[$text-muted]Esc to close[/]"
        with Vertical(id="export-box"):
            yield Static(Content.from_markup(text), id="export-text")

    def action_close(self) -> None:
        self.dismiss(None)


def _exporter():  # type: ignore[no-untyped-def]
    """The fixture exporter, once ``chatkit_trace.fixtures`` provides ``export_run``."""
    try:
        from chatkit_trace import fixtures
    except ImportError:
        return None
    return getattr(fixtures, "export_run", None)
