"""The first screen: every session and run, with status, counts and findings; filter and search."""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from chatkit_trace.views import FindingInfo, RunInfo

from .host import ViewerHost
from .messages import SearchDone
from .render import esc, markup
from .widgets import FindingsList, RunsTable, VirtualList

__all__ = ["STATUS_CYCLE", "RunsScreen", "matches", "parse_query"]

STATUS_CYCLE = ("", "problems", "failed", "outcome unknown", "recording incomplete", "running", "interrupted", "completed")


def parse_query(text: str) -> dict[str, Any]:
    """``status:failed code:CK1 words…`` -> filters (quotes group words)."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    out: dict[str, Any] = {"status": "", "code": "", "words": []}
    for tok in tokens:
        key, sep, value = tok.partition(":")
        if sep and key.lower() in ("status", "is", "code") and value:
            out["code" if key.lower() == "code" else "status"] = (
                value.lower() if key.lower() != "code" else value.upper()
            )
        else:
            out["words"].append(tok)
    return out


def matches(
    run: RunInfo, q: dict[str, Any], findings: list[FindingInfo], text_hits: set[int] | None
) -> bool:
    status = q["status"]
    if status:
        if status in ("problems", "problem", "bad"):
            if not (run.errors or run.rejected or run.status in ("failed", "outcome unknown", "recording incomplete")):
                return False
        elif not run.status.startswith(status.replace("_", " ")):
            return False
    if q["code"] and not any(c.startswith(q["code"]) for c in run.codes):
        return False
    for word in q["words"]:
        w = word.lower()
        if w in run.session_id.lower() or w in run.run_id.lower():
            continue
        if any(w in f.message.lower() or w == f.code.lower() for f in findings):
            continue
        if text_hits is not None and set(run.exchanges) & text_hits:
            continue
        return False
    return True


class RunsScreen(Screen[None]):
    """Sessions and runs."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open run"),
        Binding("slash", "search", "search"),
        Binding("s", "cycle_status", "status filter"),
        Binding("c", "cycle_code", "code filter"),
        Binding("o", "toggle_sort", "sort"),
        Binding("a", "analyse", "analyse"),
        Binding("tab", "app.focus_next", "next pane", show=False),
        Binding("escape", "clear", "clear filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="runs-screen")
        self.all_runs: list[RunInfo] = []
        self.findings: dict[tuple[str | None, str | None], list[FindingInfo]] = {}
        self.trace_findings: list[FindingInfo] = []
        self.problems_first = False
        self.text_hits: dict[str, set[int]] = {}

    @property
    def viewer(self) -> ViewerHost:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("", id="title", classes="title")
        yield Input(
            placeholder="search ids, finding text, frame text · status:failed · code:CK101   (/ to focus)",
            id="query",
        )
        yield RunsTable(id="runs")
        with Vertical(id="runs-findings-box"):
            yield Static("", id="findings-title", classes="subtitle")
            yield FindingsList(id="run-findings")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunsTable).focus()
        self.refresh_runs()

    # -- data ------------------------------------------------------------------------

    def refresh_runs(self) -> None:
        data = self.viewer.data
        try:
            table = self.query_one(RunsTable)
        except NoMatches:  # not composed yet: on_mount will load
            return
        current = table.current
        self.all_runs = data.runs()
        self.findings = {}
        for f in data.findings():
            self.findings.setdefault((f.session_id, f.run_id), []).append(f)
        self.trace_findings = [f for f in self.findings.get((None, None), [])] + [
            f
            for (sid, rid), fs in self.findings.items()
            if sid is not None and rid is None
            for f in fs
        ]
        self.apply_filter(keep=current.key if current else None)
        self.update_title()

    def update_title(self) -> None:
        try:
            title = self.query_one("#title", Static)
        except NoMatches:  # not composed yet
            return
        title.update(self.viewer.title_line(self.all_runs))

    def apply_filter(self, keep: tuple[str, str] | None = None) -> None:
        table = self.query_one(RunsTable)
        q = parse_query(self.query_one("#query", Input).value)
        words = [w for w in q["words"] if len(w) >= 3]
        hits: set[int] | None = None
        if words:
            pending = [w for w in words if w not in self.text_hits]
            for w in pending:
                self.search_text(w)
            known = [self.text_hits[w] for w in words if w in self.text_hits]
            hits = set().union(*known) if known else set()
        runs = [r for r in self.all_runs if matches(r, q, self.findings.get(r.key, []), hits)]
        if not self.all_runs:
            waiting = (
                " yet: new ones appear as the recorder writes them" if self.viewer.live else ""
            )
            table.empty_text = (
                f"no run in this trace{waiting} (no exchange matched a run route of the profile)"
            )
        elif not runs:
            table.empty_text = "no run matches the filter (Esc clears it)"
        if self.problems_first:
            runs.sort(
                key=lambda r: (-(r.errors * 1000 + r.rejected * 10 + r.warnings), r.first_at or 0.0)
            )
        table = self.query_one(RunsTable)
        table.set_runs(runs, keep=keep)
        self.show_findings()

    @work(thread=True, group="search")
    def search_text(self, word: str) -> None:
        hits = self.viewer.data.search_runs(word)
        self.post_message(SearchDone(word, hits))

    def on_search_done(self, message: SearchDone) -> None:
        self.text_hits[message.query] = message.exchanges
        current = self.query_one(RunsTable).current
        self.apply_filter(keep=current.key if current else None)

    def show_findings(self) -> None:
        run = self.query_one(RunsTable).current
        box = self.query_one(FindingsList)
        if run is None:
            findings = list(self.trace_findings)
            title = f"trace-wide findings ({len(findings)})"
        else:
            findings = self.findings.get(run.key, []) + self.trace_findings
            title = f"findings of session {esc(run.session_id)} run {esc(run.run_id)} ({len(self.findings.get(run.key, []))})"
            if self.trace_findings:
                title += f" + trace-wide ({len(self.trace_findings)})"
        if not self.viewer.analysed:
            title += "  [$text-muted]· not analysed yet[/]"
        self.query_one("#findings-title", Static).update(markup(title))
        box.set_findings(findings)

    # -- events -------------------------------------------------------------------------

    @on(VirtualList.Highlighted, "#runs")
    def _run_highlighted(self, event: VirtualList.Highlighted) -> None:
        self.show_findings()

    @on(VirtualList.Selected, "#runs")
    def _run_selected(self, event: VirtualList.Selected) -> None:
        self.action_open()

    @on(VirtualList.Selected, "#run-findings")
    def _finding_selected(self, event: VirtualList.Selected) -> None:
        f = self.query_one(FindingsList).current
        if f is None:
            return
        run = self.query_one(RunsTable).current
        if f.run_id is not None and f.session_id is not None:
            self.viewer.open_run(f.session_id, f.run_id, finding=f)
        elif run is not None:
            self.viewer.open_run(run.session_id, run.run_id, finding=f)

    @on(Input.Changed, "#query")
    def _query_changed(self, event: Input.Changed) -> None:
        current = self.query_one(RunsTable).current
        self.apply_filter(keep=current.key if current else None)

    @on(Input.Submitted, "#query")
    def _query_submitted(self, event: Input.Submitted) -> None:
        self.query_one(RunsTable).focus()

    # -- actions ---------------------------------------------------------------------------

    def action_open(self) -> None:
        run = self.query_one(RunsTable).current
        if run is not None:
            self.viewer.open_run(run.session_id, run.run_id)

    def action_search(self) -> None:
        self.query_one("#query", Input).focus()

    def action_clear(self) -> None:
        box = self.query_one("#query", Input)
        if box.value:
            box.value = ""
        self.query_one(RunsTable).focus()

    def _set_token(self, key: str, value: str) -> None:
        box = self.query_one("#query", Input)
        q = parse_query(box.value)
        q[key] = value
        parts = []
        if q["status"]:
            parts.append(f"status:{q['status'].replace(' ', '_')}")
        if q["code"]:
            parts.append(f"code:{q['code']}")
        parts.extend(shlex.quote(w) for w in q["words"])
        box.value = " ".join(parts)

    def action_cycle_status(self) -> None:
        q = parse_query(self.query_one("#query", Input).value)
        cur = q["status"].replace("_", " ")
        nxt = (
            STATUS_CYCLE[(STATUS_CYCLE.index(cur) + 1) % len(STATUS_CYCLE)]
            if cur in STATUS_CYCLE
            else ""
        )
        self._set_token("status", nxt)
        self.notify(f"status filter: {nxt or 'all'}", timeout=2)

    def action_cycle_code(self) -> None:
        codes = sorted({c for r in self.all_runs for c in r.codes})
        q = parse_query(self.query_one("#query", Input).value)
        cycle = [""] + codes
        nxt = cycle[(cycle.index(q["code"]) + 1) % len(cycle)] if q["code"] in cycle else ""
        self._set_token("code", nxt)
        if not codes:
            self.notify(
                "no finding codes in this trace"
                if self.viewer.analysed
                else "not analysed yet: press a",
                timeout=3,
            )
        else:
            self.notify(f"code filter: {nxt or 'all'}", timeout=2)

    def action_toggle_sort(self) -> None:
        self.problems_first = not self.problems_first
        current = self.query_one(RunsTable).current
        self.apply_filter(keep=current.key if current else None)
        self.notify("problems first" if self.problems_first else "in time order", timeout=2)

    def action_analyse(self) -> None:
        self.viewer.start_analysis(force=True)
