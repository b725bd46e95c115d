"""One run: its timeline, the snapshot at the cursor, its findings, the selected frame."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from chatkit_trace.pipeline import PROBLEM_STATES, FrameState
from chatkit_trace.views import END, START, FactCell, FindingInfo, Row, RunInfo, Timeline, build_timeline, parse_ref, row_key
from chatkit_trace.views.ahead import MIN_EVENTS
from chatkit_trace.views.data import problem_frames
from chatkit_trace.views.replay import Moment, SessionReplayer
from chatkit_trace.visible import visible

from .host import ViewerHost
from .messages import MomentReady
from .render import (
    esc,
    fact_line,
    hexdump,
    markup,
    messages_content,
    pretty,
    snapshot_content,
    snapshot_header,
    sse_block,
)
from .widgets import FindingsList, Panel, TimelineView, VirtualList, update_static

__all__ = ["SPEEDS", "RunScreen", "fact_brief"]

#: A snapshot at most this many events from a replay cursor is computed at once
#: (about 2 ms; further away the worker computes it and the screen says "computing…").
SYNC_EVENTS = 128

#: Playback speeds (a multiple of the recorded pace; 0 = as fast as the screen follows).
SPEEDS = (1.0, 2.0, 5.0, 10.0, 50.0, 0.0)


def fact_brief(fact: dict[str, Any]) -> str:
    """A fact in one line (from its JSON)."""
    kind = fact.get("kind", "?")
    if kind == "message":
        m = fact.get("message") or {}
        parts = m.get("parts") or []
        texts: list[str] = [
            p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        preview = "".join(texts)
        preview = preview if len(preview) <= 60 else "…" + preview[-59:]
        others = [
            f"{p.get('type')} {p.get('id')}"
            for p in parts
            if isinstance(p, dict) and p.get("type") not in ("text",)
        ]
        extra = f" +{', '.join(others)}" if others else ""
        return f"message {m.get('id')} ({m.get('role')}) {preview!r}{extra}"
    if kind == "delta":
        return f"delta {fact.get('messageId')}/{fact.get('partId')} {fact.get('delta')!r}"
    if kind == "phase":
        return f"phase {fact.get('phase')}"
    if kind == "work-item":
        w = fact.get("workItem") or {}
        return f"work-item {w.get('id')} {w.get('status')}"
    if kind == "failed":
        e = fact.get("error") or {}
        return (
            f"failed {e.get('code')}: {e.get('message')}" if isinstance(e, dict) else f"failed {e}"
        )
    if kind == "interrupted":
        return f"interrupted {fact.get('reason') or ''}".rstrip()
    return str(kind)


def _fact_json(f: Any) -> dict[str, Any]:
    try:
        data: dict[str, Any] = f.to_json()
        return data
    except Exception:  # noqa: BLE001 - an adapter's fact that cannot say itself as JSON is shown by its kind
        return {"kind": getattr(f, "kind", "?")}


class RunScreen(Screen[None]):
    """A run, frame by frame."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "runs"),
        Binding("space", "play", "play/pause"),
        Binding("plus,equals_sign", "speed(1)", "faster", key_display="+"),
        Binding("minus", "speed(-1)", "slower", key_display="-", show=False),
        Binding("right_square_bracket", "problem(1)", "next problem", key_display="]"),
        Binding("left_square_bracket", "problem(-1)", "prev problem", key_display="[", show=False),
        Binding("n", "finding(1)", "next finding"),
        Binding("N", "finding(-1)", "prev finding", show=False),
        Binding("x", "raw", "raw bytes"),
        Binding("d", "diff", "live vs history"),
        Binding("e", "export", "export"),
        Binding("F", "follow", "follow", show=False),
        Binding("f", "focus('run-findings')", "findings", show=False),
        Binding("t", "focus('timeline')", "timeline", show=False),
        Binding("tab", "app.focus_next", "next pane", show=False),
    ]

    def __init__(self, run: RunInfo, finding: FindingInfo | None = None) -> None:
        super().__init__(id="run-screen")
        self.run = run
        self.initial_finding = finding
        self.timeline: Timeline | None = None
        self.replayer: SessionReplayer | None = None
        self.findings: list[FindingInfo] = []
        self.problems: list[int] = []
        self.moment: Moment | None = None
        self.moment_row: int | None = None
        self.pending_row: int | None = None
        self.raw = False
        self.playing = False
        self.speed_index = 0
        self.follow = False
        self._play_timer: Any = None
        self.replay_error: str | None = None
        self._signature: tuple[Any, ...] | None = None

    @property
    def viewer(self) -> ViewerHost:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("", id="run-title", classes="title")
        with Horizontal(id="run-main"):
            with Vertical(id="run-left"):
                yield TimelineView(id="timeline")
                yield Static("", id="run-findings-title", classes="subtitle")
                yield FindingsList(id="run-findings")
                yield Static("", id="detail-title", classes="subtitle")
                yield Panel(id="detail")
            with Vertical(id="run-right"):
                yield Static("", id="snap-title", classes="subtitle")
                yield Static("", id="snap-run")
                yield Panel(id="snapshot")
        yield Footer()

    def on_mount(self) -> None:
        self._signature = self.viewer.data.session_signature(self.run.session_for_replay)
        self.query_one(TimelineView).fill = self._fill_from_replay
        self.query_one(TimelineView).moved = self.on_cursor
        self.load()
        if self.initial_finding is not None:
            self.jump_to_finding(self.initial_finding)
        self.query_one(TimelineView).focus()

    # -- loading ---------------------------------------------------------------------

    def load(self, *, keep_row: bool = False) -> None:
        data = self.viewer.data
        self.findings = data.findings(self.run.session_id, self.run.run_id)
        refs = [r for f in self.findings for r in f.frames]
        if self.initial_finding is not None:
            refs += (
                self.initial_finding.frames
            )  # e.g. a trace-wide finding opened from the runs screen
        self.timeline = build_timeline(data, self.run, refs)
        view = self.query_one(TimelineView)
        old = view.cursor
        view.set_timeline(data, self.timeline)
        self.problems = problem_frames(data, self.timeline)
        fl = self.query_one(FindingsList)
        fl.set_findings(self.findings)
        update_static(self.query_one("#run-findings-title", Static), self.findings_title())
        self.start_replayer()
        if keep_row:
            target = len(self.timeline) - 1 if self.follow else min(old, len(self.timeline) - 1)
            view.move_to(max(0, target))
        self.update_title()
        self.on_cursor(view.cursor)

    def findings_title(self) -> str:
        if not self.findings:
            note = "" if self.viewer.analysed else " · not analysed yet"
            return f"findings: none{note}"
        return f"findings ({len(self.findings)}) · enter jumps to the decisive frame · n next"

    def start_replayer(self) -> None:
        if self.replayer is not None:
            self.replayer.wake()
        self.workers.cancel_group(self, "replay")
        tl = self.timeline
        rp = SessionReplayer(
            self.viewer.data,
            self.run.session_for_replay,
            self.viewer.adapter,
            self.viewer.capabilities,
        )
        if tl is not None and len(tl):
            last = self.viewer.data.row(tl, len(tl) - 1)
            if last is not None:
                rp.horizon = row_key(last)
        if self.replayer is not None:
            self.replayer.stop_ahead()
        if not self.viewer.live and tl is not None and len(tl) >= MIN_EVENTS:
            # a long run: a child process replays it ahead (a jump far away restores its state)
            try:
                rp.start_ahead(self.viewer.source.path, self.viewer.source.open_profile)
            except OSError:
                pass  # no child: the worker replays alone, as for a short run
        self.replayer = rp
        self.replay_loop(rp)

    @work(thread=True, exclusive=True, group="replay")
    def replay_loop(self, rp: SessionReplayer) -> None:
        """Serve snapshot requests; when the user has been idle for a second, replay ahead
        (checkpoints) in small slices so the UI thread keeps the GIL while the user is busy."""
        worker = get_current_worker()
        rp.interruptible = True
        while not worker.is_cancelled:
            idle = time.monotonic() - rp.last_request > 1.0
            fill = rp.wants_fill()
            req = rp.take(0.0 if fill or (idle and not rp.done) else 0.25)
            if worker.is_cancelled:
                break
            if req is not None:
                tag, key = req
                try:
                    m = rp.moment(key)
                except Exception as err:  # noqa: BLE001 - shown in the panel, the app carries on
                    self.post_message(MomentReady(tag, key, None, f"{type(err).__name__}: {err}"))
                    continue
                if m is not None or rp._request is None:
                    self.post_message(MomentReady(tag, key, m))
                continue
            if fill:
                try:
                    rp.fill_behind()  # the moments behind a jump, before the user steps back
                except Exception:  # noqa: BLE001 - a step back restores as before
                    rp.edge = None
                continue
            if idle and not rp.done:
                try:
                    rp.extend(32)
                except Exception:  # noqa: BLE001 - the frontier stops; requests still work from checkpoints
                    rp.horizon = rp.frontier.key
                time.sleep(0.002)

    # -- titles ------------------------------------------------------------------------

    def update_title(self) -> None:
        try:
            title = self.query_one("#run-title", Static)
        except NoMatches:  # not composed yet
            return
        r = self.run
        tl = self.timeline
        from .render import STATUS_TONE, TONE_VAR

        tone = TONE_VAR.get(STATUS_TONE.get(r.status, ""), "")
        parts = [
            f"[b]session {esc(r.session_id)} · run {esc(r.run_id)}[/b]",
            f"[{tone} b]{esc(r.status)}[/]" if tone else esc(r.status),
            f"{len(tl) if tl else 0} rows",
        ]
        if r.rejected:
            parts.append(f"[$text-error]{r.rejected} rejected[/]")
        if self.problems:
            parts.append(
                f"[$text-error]{len(self.problems)} problem row(s)[/] [$text-muted](] next)[/]"
            )
        if self.playing:
            speed = SPEEDS[self.speed_index]
            parts.append(f"[$text-accent b]▶ playing {'max' if speed == 0 else f'{speed:g}×'}[/]")
        elif self.speed_index:
            speed = SPEEDS[self.speed_index]
            parts.append(f"[$text-muted]speed {'max' if speed == 0 else f'{speed:g}×'}[/]")
        if self.follow:
            parts.append("[$text-accent]following new frames[/]")
        if self.viewer.live:
            parts.append("[$text-warning b]● live[/]")
        title.update(markup("  ".join(parts)))

    # -- the cursor ---------------------------------------------------------------------

    def on_cursor(self, index: int) -> None:
        self.viewer.collector.touch()  # a step (key or not): a full collection waits
        view = self.query_one(TimelineView)
        row = view.get_row(index)
        if row is None:
            update_static(self.query_one("#snap-title", Static), "snapshot")
            self.query_one("#snapshot", Panel).show(
                markup("[$text-muted](no rows)[/]")
            )
            self.query_one("#detail", Panel).show("")
            return
        key = row_key(row)
        m = self.replayer.try_moment(key, SYNC_EVENTS) if self.replayer is not None else None
        if m is not None:
            self.pending_row = None
            self.show_moment(index, row, m)
        else:
            self.pending_row = index
            if self.replayer is not None:
                self.replayer.request(index, key)
            # usually the worker answers within milliseconds: say "computing" only if it does not
            self.set_timer(0.08, lambda: self._still_computing(index, row))

    def _still_computing(self, index: int, row: Row) -> None:
        if self.pending_row != index:
            return
        update_static(self.query_one("#snap-title", Static),
            markup(f"snapshot after {esc(row.ref)} [$text-muted](computing…)[/]")
        )
        self.show_detail(row, None)

    def on_moment_ready(self, message: MomentReady) -> None:
        if message.tag != self.pending_row:
            # an older request: ask again for the row we are on
            if self.pending_row is not None:
                self.on_cursor(self.pending_row)
            return
        view = self.query_one(TimelineView)
        row = view.get_row(message.tag)
        if row is None:
            return
        self.pending_row = None
        if message.moment is None:
            self.replay_error = message.error
            self.query_one("#snapshot", Panel).show(
                markup(
                    f"[$text-error]cannot replay this session: {esc(message.error or 'unknown error')}[/]"
                )
            )
            return
        self.show_moment(message.tag, row, message.moment)

    def show_moment(self, index: int, row: Row, m: Moment) -> None:
        with self.app.batch_update():  # one repaint for the five panes, not one each
            self._show_moment(index, row, m)

    def _show_moment(self, index: int, row: Row, m: Moment) -> None:
        self.moment, self.moment_row = m, index
        if not self.viewer.analysed:
            self.query_one(TimelineView).repaint_unfilled()  # rows replayed since show their facts
        view = self.query_one(TimelineView)
        dt = row.t - view.t0
        update_static(self.query_one("#snap-title", Static),
            markup(
                f"snapshot after [b]{esc(row.ref)}[/b] [$text-muted]+{dt:.3f}s · what the UI showed[/]"
            )
        )
        update_static(self.query_one("#snap-run", Static), snapshot_header(m.snapshot, self.run.run_id))
        self.query_one("#snapshot", Panel).show(
            messages_content(m.snapshot, self.run.run_id), scroll="end"
        )
        self.show_detail(row, m)

    def _fill_from_replay(self, row: Row) -> Row | None:
        """A row's facts and results from the replay, while the trace has no derived tables."""
        m = self.replayer.cached(row_key(row)) if self.replayer is not None else None
        if m is None or m.frame is None:
            return None
        fr = m.frame
        facts = [
            FactCell(
                rec.fact.kind,
                rec.result.accepted,
                None if rec.result.reason is None else rec.result.reason.value,
                rec.result.detail,
            )
            for rec in fr.facts
        ]
        err = fr.error
        error = (
            None
            if err is None
            else (
                err.to_json()
                if hasattr(err, "to_json")
                else {"kind": "decode", "message": str(err)}
            )
        )
        return dataclasses.replace(
            row, state=fr.state, facts=facts, shadow=len(fr.shadow), result_error=error
        )

    @property
    def settled(self) -> bool:
        """The snapshot shown is the one at the cursor (for tests and playback)."""
        if self.timeline is None:
            return False
        try:
            cursor = self.query_one(TimelineView).cursor
        except NoMatches:
            return False
        return self.pending_row is None and self.moment_row == cursor

    # -- the detail panel ----------------------------------------------------------------------

    def show_detail(self, row: Row, m: Moment | None) -> None:
        title, body = self.detail(row, m)
        update_static(self.query_one("#detail-title", Static),
            markup(f"{esc(title)} [$text-muted]· x raw bytes · enter full view[/]")
        )
        self.query_one("#detail", Panel).show(body, scroll="home")

    def detail(self, row: Row, m: Moment | None) -> tuple[str, Content]:
        # long-function: the detail pane: one branch per row kind
        """The selected row in full: (title, body)."""
        data = self.viewer.data
        ex = row.exchange
        lines: list[str] = []
        title = f"{row.kind} {row.ref}"
        if row.idx == START:
            d = data.exchange_detail(ex.index) or {}
            lines.append(
                f"[b]{esc(ex.method)} {esc(d.get('url') or ex.path)}[/b] → "
                + (
                    f"[$text-error]{ex.status}[/]"
                    if ex.status is None or ex.status >= 400
                    else f"{ex.status}"
                )
            )
            lines.append(
                f"[$text-muted]capability[/] {esc(ex.capability)}  [$text-muted]session[/] {esc(ex.session_id or '-')}"
                f"  [$text-muted]run[/] {esc(ex.run_id or '-')}"
                + (f"  [$text-muted]cursor[/] {esc(ex.cursor)}" if ex.cursor else "")
            )
            if m is not None and m.dispatch:
                lines.append(
                    f"[$text-muted]dispatch[/] {esc(m.dispatch)}"
                    + (f", projected {m.projected} user message(s)" if m.projected else "")
                )
            if ex.capability == "abort":
                lines.append(
                    "[$text-warning]the stop request (R9): between the frames before and after it[/]"
                )
            h = d.get("history")
            if h is not None:
                ok = (
                    "[$text-success]applied[/]"
                    if h["ok"]
                    else f"[$text-error]rejected: {esc(h['error'])}[/]"
                )
                lines.append(
                    f"history read: {h['messages']} message(s), {ok} · [b]d[/b] live vs history"
                )
            if d.get("error"):
                lines.append(f"[$text-error]{esc(d['error'])}[/]")
            body = d.get("request_body")
            if body:
                lines.append("[$text-muted]request body[/]")
                lines.append(
                    esc(
                        pretty(
                            body.decode("utf-8", "replace")
                            if isinstance(body, bytes)
                            else str(body),
                            30,
                        )
                    )
                )
            if self.raw and d.get("response_body"):
                rb = d["response_body"]
                lines.append("[$text-muted]response body (raw)[/]")
                lines.append(esc(hexdump(rb if isinstance(rb, bytes) else str(rb).encode())))
        elif row.idx == END:
            lines.append(
                f"end of the response stream: [b]{esc(ex.end or 'complete')}[/b]"
                + (f" ({esc(ex.error)})" if ex.error else "")
            )
            if m is not None:
                view = m.snapshot.run(self.run.run_id)
                if (
                    view is not None
                    and view.status == "running"
                    and view.connection == "disconnected"
                ):
                    lines.append(
                        "[$text-error]no conclusion arrived: the run is left running, connection lost (outcome unknown, R3.4)[/]"
                    )
                if m.reader_stop is not None:
                    lines.append(
                        f"[$text-muted]the reader had stopped at frame {ex.index}:{m.reader_stop[1]} ({esc(m.reader_stop[0])})[/]"
                    )
        else:
            lines.extend(self.frame_lines(row, m))
        return title, markup("\n".join(lines))

    @on(VirtualList.Selected, "#timeline")
    def _row_selected(self, event: VirtualList.Selected) -> None:
        from .dialogs import DetailScreen

        self.app.push_screen(DetailScreen(self))

    def frame_lines(self, row: Row, m: Moment | None) -> list[str]:
        # long-function: a frame's lines: one branch per frame and fact kind, in display order
        data = self.viewer.data
        ex = row.exchange
        d = data.frame_detail(ex.index, row.idx) or {}
        view = self.query_one(TimelineView)
        head = [
            f"[b]{esc(row.ref)}[/b] +{row.t - view.t0:.3f}s",
            f"{esc(d.get('transport'))} {esc(d.get('direction'))}",
        ]
        if d.get("event_id") is not None:
            head.append(f"id {esc(d['event_id'])}")
        if d.get("event"):
            head.append(f"event {esc(d['event'])}")
        fr = m.frame if m is not None else None
        state = fr.state if fr is not None else d.get("state")
        if state:
            tone = "$text-error" if state in PROBLEM_STATES else "$text-muted"
            head.append(f"[{tone}]{esc(state)}[/]")
        if d.get("start") is not None:
            head.append(f"[$text-muted]bytes {d['start']}–{d.get('end')}[/]")
        lines = ["  ".join(head)]
        err = d.get("error") or d.get("result_error")
        if fr is not None and fr.error is not None:
            err = (
                fr.error.to_json()
                if hasattr(fr.error, "to_json")
                else {"kind": "decode", "message": str(fr.error)}
            )
        if err:
            where = (
                f" at byte {err['offset']}"
                if isinstance(err, dict) and err.get("offset") is not None
                else ""
            )
            lines.append(
                f"[$text-error]✗ {esc(err.get('kind', 'error'))}{where}: {esc(err.get('message', ''))}[/]"
            )
            if isinstance(err, dict) and err.get("excerpt"):
                lines.append(f"  [$text-muted]{esc(err['excerpt'])}[/]")
        if self.raw:
            raw = d.get("raw")
            if raw:
                lines.append("[$text-muted]raw bytes[/]")
                lines.append(esc(hexdump(raw)))
            else:
                block = (
                    sse_block(d.get("event"), d.get("event_id"), d.get("text"))
                    if d.get("transport") == "sse"
                    else (d.get("text") or "")
                )
                lines.append(
                    "[$text-muted]bytes (the SSE event rebuilt from its stored fields, UTF-8)[/]"
                )
                lines.append(esc(hexdump(block.encode("utf-8"))))
        else:
            text = d.get("text")
            if text is not None:
                lines.append(esc(pretty(text, 40)))
        # facts and results: the replay's own record when we have it, else the derived tables
        if fr is not None:
            if fr.facts:
                lines.append("[$text-muted]facts → admission[/]")
                for rec in fr.facts:
                    fj = _fact_json(rec.fact)
                    lines.append(
                        "  "
                        + fact_line(
                            fj.get("kind", "?"),
                            rec.result.accepted,
                            None if rec.result.reason is None else rec.result.reason.value,
                            rec.result.detail,
                        )
                    )
                    lines.append(f"    [$text-muted]{esc(fact_brief(fj))}[/]")
            if fr.shadow:
                stop = m.reader_stop if m is not None else None
                where = f" at {ex.index}:{stop[1]}" if stop else ""
                lines.append(
                    f"[$text-error]never admitted: the reader had stopped{where} ({esc((stop or ('?',))[0])}), this output is lost to the UI[/]"
                )
                for f in fr.shadow:
                    lines.append(f"    [$text-error]{esc(fact_brief(_fact_json(f)))}[/]")
            if fr.unknown:
                lines.append(
                    f"[$text-muted]unknown event type {esc(fr.event_type)}: ignored (R2.4)[/]"
                )
            if (
                not fr.facts
                and not fr.shadow
                and not err
                and fr.state == FrameState.ADMITTED
                and not fr.unknown
            ):
                lines.append("[$text-muted]decoded to no facts[/]")
        elif d.get("facts") or d.get("shadow"):
            lines.append("[$text-muted]facts → admission[/]")
            for f in d.get("facts", []):
                lines.append("  " + fact_line(f["kind"], f["accepted"], f["reason"], f["detail"]))
                lines.append(f"    [$text-muted]{esc(fact_brief(f.get('fact') or {}))}[/]")
            for f in d.get("shadow", []):
                lines.append(
                    f"  [$text-error]never admitted (reader stopped): {esc(fact_brief(f))}[/]"
                )
        mine = [finding for finding in self.findings if row.ref in finding.frames]
        for finding in mine:
            lines.append(f"[$text-error b]{esc(finding.code)}[/] {esc(finding.message)}")
        return lines

    # -- findings -------------------------------------------------------------------------------

    @on(VirtualList.Selected, "#run-findings")
    def _finding_selected(self, event: VirtualList.Selected) -> None:
        f = self.query_one(FindingsList).current
        if f is not None:
            self.jump_to_finding(f)
            self.query_one(TimelineView).focus()

    def jump_to_finding(self, f: FindingInfo) -> bool:
        if self.timeline is None or not f.decisive:
            return False
        try:
            e, i = parse_ref(f.decisive)
        except ValueError:
            return False
        row = self.timeline.nearest(e, i)
        if row is None:
            self.notify(visible(f"frame {f.decisive} is not in this run's timeline"), severity="warning", markup=False)
            return False
        fl = self.query_one(FindingsList)
        if f in fl.findings:
            fl.set_reactive(VirtualList.cursor, fl.findings.index(f))
            fl.refresh()
        self.query_one(TimelineView).move_to(row, center=True)
        return True

    def action_finding(self, delta: int) -> None:
        if not self.findings:
            self.notify("this run has no findings", timeout=2)
            return
        fl = self.query_one(FindingsList)
        fl.cursor = (fl.cursor + delta) % len(self.findings)
        f = fl.current
        if f is not None:
            self.jump_to_finding(f)

    def action_problem(self, delta: int) -> None:
        if not self.problems:
            self.notify("no rejected, undecodable or lost frames in this run", timeout=2)
            return
        cur = self.query_one(TimelineView).cursor
        if delta > 0:
            nxt = next((r for r in self.problems if r > cur), self.problems[0])
        else:
            nxt = next((r for r in reversed(self.problems) if r < cur), self.problems[-1])
        self.query_one(TimelineView).move_to(nxt, center=True)

    # -- playback ------------------------------------------------------------------------------

    def action_play(self) -> None:
        self.playing = not self.playing
        if self.playing:
            view = self.query_one(TimelineView)
            if view.cursor >= view.row_count() - 1:
                view.move_to(0)
            self._schedule()
        elif self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        self.update_title()

    def action_speed(self, delta: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + delta))
        speed = SPEEDS[self.speed_index]
        self.notify(f"playback speed {'max' if speed == 0 else f'{speed:g}× recorded'}", timeout=2)
        self.update_title()

    def _schedule(self) -> None:
        view = self.query_one(TimelineView)
        cur, nxt = view.get_row(view.cursor), view.get_row(view.cursor + 1)
        if nxt is None or cur is None:
            self.playing = False
            self.update_title()
            return
        speed = SPEEDS[self.speed_index]
        gap = max(0.0, nxt.t - cur.t)
        delay = 0.02 if speed == 0 else min(2.0, max(0.02, gap / speed))
        self._play_timer = self.set_timer(delay, self._play_step)

    def _play_step(self) -> None:
        if not self.playing:
            return
        if not self.settled:
            self._play_timer = self.set_timer(
                0.02, self._play_step
            )  # wait for the snapshot to catch up
            return
        view = self.query_one(TimelineView)
        view.cursor = view.cursor + 1
        self._schedule()

    # -- other actions --------------------------------------------------------------------------

    def action_back(self) -> None:
        self.playing = False
        self.app.pop_screen()

    async def action_focus(self, widget_id: str) -> None:  # Screen's own is a coroutine
        self.query_one(f"#{widget_id}").focus()

    def action_raw(self) -> None:
        self.raw = not self.raw
        view = self.query_one(TimelineView)
        row = view.get_row(view.cursor)
        if row is not None:
            self.show_detail(row, self.moment if self.moment_row == view.cursor else None)

    def action_diff(self) -> None:
        from .dialogs import DiffScreen

        self.app.push_screen(DiffScreen(self.run))

    def action_export(self) -> None:
        from .dialogs import ExportScreen

        self.app.push_screen(
            ExportScreen(self.run, len(self.timeline or []), self.findings, self.viewer.export_dir)
        )

    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            view = self.query_one(TimelineView)
            view.move_to(view.row_count() - 1)
        self.update_title()

    def on_resize(self) -> None:
        self.set_class(self.size.width < 110, "-narrow")

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "replay")
        if self.replayer is not None:
            self.replayer.wake()
            self.replayer.stop_ahead()

    def trace_changed(self, *, derived: bool = False) -> None:
        """The trace grew (live tail) or was analysed (``derived``): reload rows, keep the
        cursor (or follow the end).  Nothing to do when this run's session did not change."""
        try:
            view = self.query_one(TimelineView)
        except NoMatches:
            return
        signature = self.viewer.data.session_signature(self.run.session_for_replay)
        if not derived and signature == self._signature:
            self.update_title()
            return
        self._signature = signature
        at_end = view.cursor >= view.row_count() - 1
        if at_end and self.viewer.live:
            self.follow = True
        for r in self.viewer.data.runs():
            if r.key == self.run.key:
                self.run = r
                break
        self.load(keep_row=True)

    def describe_moment(self) -> str:
        """The snapshot panel's plain text (tests)."""
        if self.moment is None:
            return ""
        return snapshot_content(self.moment.snapshot, self.run.run_id).plain
