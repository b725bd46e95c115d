"""Widgets: a virtualised list (Line API) and the lists and panels built on it.

:class:`VirtualList` renders only the lines on screen through
``render_line`` (toolong's ``LogLines`` pattern): a row is asked for when it
becomes visible, rendered once into a :class:`~textual.strip.Strip` and kept
in a bounded LRU cache; a list of a million rows costs what its visible rows
cost.  Line 0 is a sticky header.  Cursor moves post :class:`VirtualList.Highlighted`
(coalescing: a flood of moves collapses into the last one) or call ``moved``
at once (the run's timeline: the moved row and the panes that follow it
reach the screen in one update), Enter and
double-click post :class:`VirtualList.Selected`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget
from textual.widgets import Static

from chatkit_trace.views import LRU, FindingInfo, Row, RunInfo, Timeline, TraceData
from chatkit_trace.visible import visible

from .render import SEVERITY_TONE, STATUS_TONE, Cell, facts_cells, frame_cells, severity_letter

__all__ = ["FindingsList", "Panel", "RunsTable", "TimelineView", "VirtualList"]

Column = tuple[
    str, int | None, str
]  # (title, width or None for the flexible one, align "<" or ">")


class VirtualList(ScrollView, can_focus=True):
    """A list of rows rendered on demand; subclasses provide the cells."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "vl--header",
        "vl--cursor",
        "vl--cursor-blur",
        "vl--error",
        "vl--warning",
        "vl--success",
        "vl--accent",
        "vl--primary",
        "vl--muted",
        "vl--lost",
    }
    DEFAULT_CSS = """
    VirtualList { background: $surface; overflow-x: hidden; }
    VirtualList > .vl--header { text-style: bold; color: $text-primary; background: $panel; }
    VirtualList > .vl--cursor { background: $block-cursor-background 60%; text-style: bold; }
    VirtualList > .vl--cursor-blur { background: $block-cursor-background 25%; }
    VirtualList > .vl--error { color: $text-error; }
    VirtualList > .vl--lost { color: $text-error; text-style: italic; }
    VirtualList > .vl--warning { color: $text-warning; }
    VirtualList > .vl--success { color: $text-success; }
    VirtualList > .vl--accent { color: $text-accent; }
    VirtualList > .vl--primary { color: $text-primary; }
    VirtualList > .vl--muted { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "jump(0)", "first", show=False),
        Binding("end", "jump(-1)", "last", show=False),
        Binding("enter", "select", "open", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class Highlighted(Message):
        def __init__(self, sender: VirtualList, index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, VirtualList.Highlighted) and message.list is self.list

        @property
        def control(self) -> VirtualList:
            return self.list

    class Selected(Message):
        def __init__(self, sender: VirtualList, index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

        @property
        def control(self) -> VirtualList:
            return self.list

    columns: Sequence[Column] = ()  # a class's columns; RunsTable sizes its id columns per instance
    #: shown when there is no row
    empty_text = ""
    #: called with the new cursor instead of posting :class:`Highlighted`, when set
    moved: Callable[[int], None] | None = None

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._strips: LRU[tuple[int, int, bool, bool], Strip] = LRU(512)
        self._tones: dict[str, Style] = {}
        self._combos: dict[Any, Style] = {}  # row styles and row style + tone, made once
        self._count = 0

    # -- to implement -----------------------------------------------------------------

    def row_count(self) -> int:
        return 0

    def row_cells(self, index: int) -> list[list[Cell]]:
        """One list of (text, tone) cells per column."""
        return []

    def row_tone(self, index: int) -> str:
        """A tone for the whole row (e.g. a dimmed row), or ''."""
        return ""

    # -- sizes and caches ----------------------------------------------------------------

    def reload(self, *, keep_cursor: bool = True) -> None:
        """The rows changed: recount, clear caches, repaint."""
        self._strips.clear()
        self._count = self.row_count()
        self.virtual_size = Size(self.size.width, self._count + 1)
        if not keep_cursor:
            self.set_reactive(VirtualList.cursor, 0)
        if self._count and self.cursor >= self._count:
            self.set_reactive(VirtualList.cursor, self._count - 1)
        self.refresh()

    def on_mount(self) -> None:
        self.reload()

    def on_resize(self) -> None:
        self._strips.clear()
        self.virtual_size = Size(self.size.width, self._count + 1)

    def notify_style_update(self) -> None:
        self._strips.clear()
        self._tones.clear()
        self._combos.clear()
        super().notify_style_update()

    def on_focus(self) -> None:
        self._strips.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._strips.clear()
        self.refresh()

    def repaint(self) -> None:
        """Render the visible rows again (their data changed)."""
        self._strips.clear()
        self.refresh()

    def refresh_row(self, index: int) -> None:
        for key in [k for k in self._strips if k[0] == index]:
            self._strips.pop(key, None)
        self.refresh_line(index + 1)

    # -- rendering ---------------------------------------------------------------------------

    def _style(self, tone: str) -> Style | None:
        """The colour (and weight) of a tone, resolved against this widget's background
        (``auto`` colours such as ``$text-muted`` need it), without a background of its own
        so the cursor's shows through."""
        if not tone:
            return None
        style = self._tones.get(tone)
        if style is None:
            full = self.get_component_rich_style(f"vl--{tone}", default=Style())
            style = self._tones[tone] = Style(color=full.color, bold=full.bold, italic=full.italic)
        return style

    def _widths(self, width: int) -> list[int]:
        fixed = sum(w for _, w, _ in self.columns if w) + max(0, len(self.columns) - 1)
        return [w if w else max(4, width - fixed) for _, w, _ in self.columns]

    def _row_style(self, tone: str, selected: bool) -> Style:
        """The style of a whole row (the widget's, its tone, the cursor's), made once per kind."""
        key = (tone, selected, self.has_focus)
        style = self._combos.get(key)
        if style is None:
            style = self.rich_style
            if tone:
                style = style + self._style(tone)
            if selected:
                style = style + self.get_component_rich_style("vl--cursor" if self.has_focus else "vl--cursor-blur")
            self._combos[key] = style
        return style

    def _segments(
        self, cells_per_col: list[list[Cell]], width: int, selected: bool = False, row_style: Style | None = None
    ) -> list[Segment]:
        """Cells laid out in their columns (truncated with an ellipsis, padded), as segments.
        On the cursor's row muted text takes the cursor's colour (contrast).  With
        ``row_style`` the segments come styled already (the row's style under each
        cell's tone, each combination made once): what ``Segment.apply_style`` gave."""
        out: list[Segment] = []
        style_of = (
            (lambda tone: None if tone == "muted" else self._style(tone))
            if selected
            else self._style
        )
        if row_style is not None:
            plain = style_of
            combos = self._combos

            def style_of(tone: str) -> Style | None:
                key = (row_style, tone, selected)
                style = combos.get(key)
                if style is None:
                    style = combos[key] = row_style + plain(tone)
                return style
        for n, (cells, w, (_, _, align)) in enumerate(
            zip(cells_per_col, self._widths(width), self.columns, strict=False)
        ):
            col: list[Segment] = []
            used = 0
            for text, tone in cells:
                if used >= w:
                    break
                if "\n" in text or "\t" in text:
                    text = text.replace("\n", " ").replace("\t", " ")
                text = visible(text)  # a recorded control character is shown, never sent to the terminal
                length = cell_len(text)
                if used + length > w:
                    text = set_cell_size(text, max(0, w - used - 1)) + "…"
                    length = w - used
                col.append(Segment(text, style_of(tone)))
                used += length
            pad = Segment(" " * (w - used), row_style) if w > used else None
            if align == ">" and pad is not None:
                out.append(pad)
                out.extend(col)
            else:
                out.extend(col)
                if pad is not None:
                    out.append(pad)
            if n < len(self.columns) - 1:
                out.append(Segment(" ", row_style))
        return out

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        index = self.scroll_offset.y + y - 1
        if y > 0 and index < self._count:
            return self._row_strip(index, width)
        base = self.rich_style
        if y == 0:
            header = [[(title, "")] for title, _, _ in self.columns]
            style = base + self.get_component_rich_style("vl--header")
            strip = Strip(self._segments(header, width)).crop_extend(0, width, style)
            return strip.apply_style(style)
        if self._count == 0 and y == 1 and self.empty_text:
            text = Segment(" " + self.empty_text, self._style("muted"))
            return Strip([text]).crop_extend(0, width, base).apply_style(base)
        return Strip.blank(width, base)

    def _row_strip(self, index: int, width: int) -> Strip:
        """A row's line, from the strip cache or built from pre-styled segments."""
        selected = index == self.cursor
        key = (index, width, selected, self.has_focus)
        strip = self._strips.get(key)
        if strip is None:
            style = self._row_style(self.row_tone(index), selected)
            segments = self._segments(self.row_cells(index), width, selected, style)
            strip = Strip(segments).crop_extend(0, width, style)
            self._strips.put(key, strip)
        return strip

    # -- cursor ---------------------------------------------------------------------------------

    @property
    def page_size(self) -> int:
        return max(1, self.size.height - 2)

    def validate_cursor(self, value: int) -> int:
        if self._count <= 0:
            return 0
        return max(0, min(value, self._count - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh_row(old)
        self.refresh_row(new)
        self.scroll_to_cursor()
        if self.moved is not None:
            self.moved(new)  # at once: the row and what depends on it reach the screen in one update
        else:
            self.post_message(self.Highlighted(self, new))

    def scroll_to_cursor(self, *, center: bool = False) -> None:
        top = self.scroll_offset.y
        visible = max(1, self.size.height - 1)
        c = self.cursor
        if center:
            self.scroll_to(y=max(0, c - visible // 2), animate=False, immediate=True)
        elif c < top:
            self.scroll_to(y=c, animate=False, immediate=True)
        elif c >= top + visible:
            self.scroll_to(y=c - visible + 1, animate=False, immediate=True)

    def move_to(self, index: int, *, center: bool = False) -> None:
        self.cursor = index
        if center:
            self.scroll_to_cursor(center=True)

    def action_move(self, delta: int) -> None:
        self.cursor = self.cursor + delta

    def action_page(self, delta: int) -> None:
        self.cursor = self.cursor + delta * self.page_size

    def action_jump(self, where: int) -> None:
        self.cursor = where if where >= 0 else self._count - 1

    def action_select(self) -> None:
        if self._count:
            self.post_message(self.Selected(self, self.cursor))

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        index = self.scroll_offset.y + offset.y - 1
        if 0 <= index < self._count:
            self.cursor = index
            if event.chain >= 2:
                self.post_message(self.Selected(self, index))


# --------------------------------------------------------------------------- the lists


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.2f}s"
    m, s = divmod(seconds, 60)
    if m < 60:
        return f"{int(m)}m{int(s):02d}s"
    h, m = divmod(m, 60)
    return f"{int(h)}h{int(m):02d}m"


class RunsTable(VirtualList):
    """Sessions and runs, one line each."""

    columns: Sequence[Column] = (
        ("status", 17, "<"),
        ("session", 12, "<"),
        ("run", 18, "<"),
        ("connection", 12, "<"),
        ("settled", 8, "<"),
        ("origin", 6, "<"),
        ("duration", 8, ">"),
        ("frames", 7, ">"),
        ("rej", 4, ">"),
        ("E W I", 9, "<"),
        ("codes", None, "<"),
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.runs: list[RunInfo] = []

    def set_runs(self, runs: list[RunInfo], *, keep: tuple[str, str] | None = None) -> None:
        self.runs = runs
        # the id columns fit the ids (within bounds)
        sw = max([7] + [len(r.session_id) for r in runs[:5000]])
        rw = max([3] + [len(r.run_id) for r in runs[:5000]])
        cols = list(type(self).columns)
        cols[1] = ("session", min(sw, 28), "<")
        cols[2] = ("run", min(rw, 32), "<")
        self.columns = tuple(cols)
        self.reload()
        if keep is not None:
            for i, r in enumerate(runs):
                if r.key == keep:
                    self.set_reactive(VirtualList.cursor, i)
                    break
        self.scroll_to_cursor()

    def row_count(self) -> int:
        return len(self.runs)

    @property
    def current(self) -> RunInfo | None:
        return self.runs[self.cursor] if 0 <= self.cursor < len(self.runs) else None

    def row_cells(self, index: int) -> list[list[Cell]]:
        r = self.runs[index]
        tone = STATUS_TONE.get(r.status, "")
        marker = "● " if r.status in ("failed", "outcome unknown") or r.errors else "  "
        fnd: list[Cell] = []
        for n, sev in ((r.errors, "error"), (r.warnings, "warning"), (r.infos, "info")):
            if n:
                fnd.append((f"{n}{severity_letter(sev)} ", SEVERITY_TONE[sev]))
        return [
            [(marker, "error"), (r.status, tone)],
            [(r.session_id, "")],
            [(r.run_id, "primary")],
            [(r.connection or "-", "error" if r.connection in ("reset", "timeout", "client-gone", "error") else "muted")],
            # what concluded the run: a terminal event (fact) or only a later read (history, status)
            [(r.settled_by or "-", "warning" if r.settled_by in ("history", "status") else "muted")],
            [(r.origin or "-", "muted")],
            [(_fmt_duration(r.duration), "")],
            [(str(r.frames), "")],
            [(str(r.rejected) if r.rejected else "-", "error" if r.rejected else "muted")],
            fnd or [("-", "muted")],
            [(" ".join(r.codes), "muted")],
        ]


class TimelineView(VirtualList):
    """A run's timeline, paged from SQLite a page at a time."""

    columns = (
        ("frame", 9, "<"),
        ("time", 9, ">"),
        ("facts → result", 26, "<"),
        ("frame content", None, "<"),
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.data: TraceData | None = None
        self.timeline: Timeline | None = None
        self.t0 = 0.0
        #: facts for a row the derived tables do not have yet (from the replay), or None
        self.fill: Callable[[Row], Row | None] | None = None
        #: rows painted before the replay reached them (no facts yet)
        self.unfilled: set[int] = set()

    def set_timeline(self, data: TraceData, timeline: Timeline) -> None:
        self.data = data
        self.timeline = timeline
        first = data.row(timeline, 0) if len(timeline) else None
        self.t0 = first.t if first is not None else 0.0
        self.reload()

    def row_count(self) -> int:
        return len(self.timeline) if self.timeline is not None else 0

    def repaint_unfilled(self) -> None:
        """Paint again the rows painted before the replay reached them (the
        others have not changed: a cursor move repaints two rows, not the
        screen)."""
        if not self.unfilled:
            return
        stale, self.unfilled = self.unfilled, set()
        for key in [k for k in self._strips if k[0] in stale]:
            self._strips.pop(key, None)
        top = self.scroll_offset.y
        for index in stale:
            if top <= index < top + self.size.height:
                self.refresh_line(index + 1)

    def get_row(self, index: int) -> Row | None:
        if self.data is None or self.timeline is None:
            return None
        return self.data.row(self.timeline, index)

    def row_cells(self, index: int) -> list[list[Cell]]:
        row = self.get_row(index)
        if row is None:
            return [[("?", "muted")], [], [], []]
        if (
            row.facts is None
            and row.state is None
            and row.kind == "frame"
            and self.fill is not None
        ):
            filled = self.fill(row)
            if filled is None:
                self.unfilled.add(index)  # shown without facts: painted again once replayed
            else:
                row = filled
        problem = row.problem
        ref_tone = {"error": "error", "rejected": "error", "lost": "error"}.get(
            problem or "", "muted"
        )
        if row.idx < 0 or row.kind == "end":
            ref_tone = "primary" if row.kind == "request" else "muted"
        mark = "!" if problem else " "
        dt = row.t - self.t0
        return [
            [(mark, "error"), (row.ref, ref_tone)],
            [(f"+{dt:.3f}", "muted")],
            facts_cells(row),
            frame_cells(row),
        ]


class FindingsList(VirtualList):
    """A run's findings (or the trace's): severity, code, decisive frame, message."""

    empty_text = "none"

    columns = (
        ("", 1, "<"),
        ("code", 6, "<"),
        ("frame", 7, "<"),
        ("finding", None, "<"),
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.findings: list[FindingInfo] = []

    def set_findings(self, findings: list[FindingInfo]) -> None:
        self.findings = findings
        self.reload(keep_cursor=False)

    def row_count(self) -> int:
        return len(self.findings)

    @property
    def current(self) -> FindingInfo | None:
        return self.findings[self.cursor] if 0 <= self.cursor < len(self.findings) else None

    def row_cells(self, index: int) -> list[list[Cell]]:
        f = self.findings[index]
        tone = SEVERITY_TONE.get(f.severity, "")
        return [
            [(severity_letter(f.severity), tone)],
            [(f.code, tone)],
            [(f.decisive or "-", "primary")],
            [(f.message, "")],
        ]


def update_static(widget: Static, content: Any) -> None:
    """``widget.update(content)`` with a layout pass only when its height
    changes: a layout pass re-arranges the whole screen (tens of ms beside
    a long run's timeline), and a cursor move updates five panes."""
    width = widget.content_region.width
    widget.update(content, layout=False)
    parent = widget.parent
    container = parent.size if isinstance(parent, Widget) else widget.size
    if width <= 0 or widget.get_content_height(container, widget.app.size, width) != widget.content_region.height:
        widget.refresh(layout=True)


def _min_lines(visual: Any, width: int) -> int:
    """At least how many lines ``visual`` wraps to at ``width`` (each line's cells
    over the width, rounded up: wrapping at words only adds lines); 0 when unknown."""
    plain = getattr(visual, "plain", None)
    if not isinstance(plain, str) or width <= 0:
        return 0
    return sum(max(1, -(-cell_len(line) // width)) for line in plain.split("\n"))


class _Body:
    """What a :class:`Panel` shows (``render()`` gives it, as ``Static.render`` did)."""

    def __init__(self) -> None:
        self.content: Any = ""
        self.visual: Visual | None = None

    def render(self) -> Any:
        return self.visual if self.visual is not None else self.content


class Panel(ScrollView, can_focus=True):
    """A scrolling panel of text (snapshot, frame detail), drawn through the Line API.

    It shows what a ``Static`` inside a ``VerticalScroll`` showed (the same
    wrapping, padding and scrollbar), but a new text is laid out here, at the
    panel's width, and the panel repaints only itself: no screen layout pass
    when the text's height changes and no reflow when it scrolls (a cursor
    move updates two panels; a layout pass re-arranges the whole screen, tens
    of ms beside a long run's timeline).  The laid-out lines are kept until
    the text or the width changes.
    """

    DEFAULT_CSS = """
    Panel { background: $surface; padding: 0 1; overflow-x: hidden; overflow-y: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.body = _Body()
        self._lines: list[Strip] = []
        self._laid: tuple[int, int] | None = None  # (width, scrollbar width) the lines were laid out for
        self._scroll_end = False

    def show(self, content: Any, *, scroll: str = "keep") -> None:
        body = self.body
        if content is not body.content or body.visual is None:
            body.content = content
            body.visual = visualize(self, content, markup=True)
            self._laid = None
        self._scroll_end = scroll == "end"
        self._lay_out()
        if scroll == "home":
            self.scroll_to(y=0, animate=False, immediate=True)
        elif scroll == "end":
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        self.refresh()

    def _text_width(self, scrollbar: bool) -> int:
        width = self.content_region.width  # inside the padding, scrollbar not counted
        return max(0, width - (self.styles.scrollbar_size_vertical if scrollbar else 0))

    def _lay_out(self) -> None:
        """Wrap the text at the panel's width (narrower by the scrollbar when it overflows)."""
        if self.body.visual is None or not self.size.width:
            return
        height = self.content_region.height
        bar = self.styles.scrollbar_size_vertical
        key = (self._text_width(False), bar)
        if self._laid != key:
            style = self.visual_style
            visual = self.body.visual
            if bar and _min_lines(visual, key[0]) > height:
                # overflows for sure: laid out once, beside the scrollbar
                lines = Visual.to_strips(self, visual, self._text_width(True), None, style)
            else:
                lines = Visual.to_strips(self, visual, key[0], None, style)
                if len(lines) > height and bar:
                    lines = Visual.to_strips(self, visual, self._text_width(True), None, style)
            self._lines, self._laid = lines, key
        size = Size(self._text_width(False), len(self._lines))
        if size != self.virtual_size:
            # the scrollable size without a layout pass (a scrollbar that appears or goes still asks for one)
            self.set_reactive(Widget.virtual_size, size)
            self._scroll_update(size)

    def on_resize(self) -> None:
        self._laid = None
        self._lay_out()
        if self._scroll_end:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    def notify_style_update(self) -> None:
        self._laid = None
        super().notify_style_update()
        self._lay_out()

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        if 0 <= index < len(self._lines):
            return self._lines[index]
        # below the text: the panel's background alone (as below a Static)
        return Strip.blank(self.scrollable_content_region.width, self.visual_style.rich_style.background_style)
