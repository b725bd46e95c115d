"""The report in a real headless Chromium: findings link to their decisive
frame and the snapshot there, deep links, filters, keys, big traces, no
network request, no console error (every page: see conftest.open_report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.loading import open_trace
from chatkit_trace.pipeline import replay

from ..analyze.corpus import CORPUS
from ..viewer.conftest import long_trace
from .conftest import ARGS, CHROMIUM, Guard, combined_trace, corpus_trace, make_report

pytestmark = pytest.mark.browser

CASES = sorted(p.stem for p in CORPUS.glob("*.json"))


def selected(page: Any) -> str:
    return page.get_attribute("#timeline [aria-selected=true]", "data-ref")


def wait_frame(page: Any, ref: str) -> None:
    page.wait_for_function("ref => document.documentElement.dataset.frame === ref", arg=ref, timeout=10_000)


def snapshot_messages(page: Any) -> list[list[Any]]:
    """The snapshot pane: [message id, [part texts]] in order."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#snap-msgs .msg')].map(m =>
            [m.dataset.id, [...m.querySelectorAll('.part .text')].map(t => t.textContent)])"""
    )


def open_run_of(page: Any, code: str) -> None:
    page.click(f"#findings-table tr[data-code='{code}'] a.frame-link")


# ------------------------------------------------------------------------------ findings -> frames


def test_a_finding_opens_its_decisive_frame_and_the_snapshot_there(corpus_report: Any, open_report: Any) -> None:
    page = open_report(corpus_report("CK101-direct"))
    assert page.is_visible("#runs-view") and not page.is_visible("#run-view")
    page.click("#findings-table tr[data-code='CK101'] td.code")  # the row, not only its link
    wait_frame(page, "0:4")
    assert page.is_visible("#run-view")
    assert selected(page) == "0:4"
    assert page.inner_text("#snap-ref") == "0:4"
    # the late chunk never reached the UI: the answer stays "Hello world"
    assert snapshot_messages(page) == [["user:r1", ["hi"]], ["assistant:r1", ["Hello world"]]]
    assert "never admitted" in page.inner_text("#detail-body")
    assert "lost ×1" in page.inner_text("#timeline [aria-selected=true]")
    # from elsewhere in the run, the run's own finding list jumps back
    page.click("#timeline [data-ref='0:1']")
    wait_frame(page, "0:1")
    assert snapshot_messages(page)[1] == ["assistant:r1", ["Hello"]]
    page.click("#run-findings .finding-item[data-code='CK101']")
    wait_frame(page, "0:4")
    assert selected(page) == "0:4"
    assert "R3.5" in page.inner_text("#run-findings") and "output after the run's terminal" in page.inner_text("#run-findings")


@pytest.mark.parametrize("name", CASES)
def test_every_seeded_finding_shows_its_code_and_decisive_frame(corpus_report: Any, open_report: Any, name: str) -> None:
    case = json.loads((CORPUS / f"{name}.json").read_text())
    page = open_report(corpus_report(name))
    table = page.inner_text("#summary")
    if not case["expect"]:
        assert "No findings" in table
        return
    for code in case["expect"]:
        assert code in table
    for code, ref in (case.get("decisive") or {}).items():
        row = page.locator(f"#findings-table tr[data-code='{code}']").first
        assert ref in row.inner_text()
        link = row.locator("a.frame-link")
        if link.count():
            link.click()
            page.wait_for_selector("#run-view:not([hidden])")
            wait_frame(page, ref)
            assert selected(page) == ref
            assert code in page.inner_text("#run-findings")
            page.keyboard.press("Escape")
            page.wait_for_selector("#runs-view:not([hidden])")


# ------------------------------------------------------------------------------ deep links


def test_deep_link_to_a_frame(corpus_report: Any, open_report: Any) -> None:
    path = corpus_report("CK101-direct")
    page = open_report(path, "#session=s1&run=r1&frame=0:1")
    assert page.is_visible("#run-view")
    assert selected(page) == "0:1"
    assert snapshot_messages(page) == [["user:r1", ["hi"]], ["assistant:r1", ["Hello"]]]
    # moving keeps the address pointing at the frame, so it can be copied
    page.focus("#timeline")
    page.keyboard.press("ArrowDown")
    wait_frame(page, "0:2")
    assert page.evaluate("location.hash") == "#session=s1&run=r1&frame=0:2"
    assert snapshot_messages(page)[1] == ["assistant:r1", ["Hello world"]]
    # a link to another frame of the open run moves there
    page.evaluate("location.hash = '#session=s1&run=r1&frame=0'")
    wait_frame(page, "0")
    assert "POST" in page.inner_text("#detail-body")
    # the run alone names it when its id is unique (the form: #run=…&frame=12:4)
    short = open_report(path, "#run=r1&frame=0:3")
    assert short.get_attribute("html", "data-frame") == "0:3"
    assert short.get_attribute("html", "data-run") == "s1/r1"
    # a run the report does not have: said, not a blank page
    other = open_report(path, "#session=s1&run=nope")
    assert other.is_visible("#runs-view") and "no run nope" in other.inner_text("#route-notice")


# ------------------------------------------------------------------------------ filters


@pytest.fixture
def combined(tmp_path: Path) -> Path:
    return make_report(combined_trace(tmp_path / "combined.db", ["CK101-direct", "CK102", "CK104", "CK601", "clean-myproto"]))


def visible_runs(page: Any) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll('#runs .row')].map(r => r.children[0].textContent + '/' + r.children[1].textContent)")


def visible_findings(page: Any) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll('#findings-table tbody tr')].filter(r => !r.hidden).map(r => r.dataset.code)")


def search(page: Any, text: str) -> None:
    page.fill("#q", text)
    page.wait_for_function(
        "q => { const c = document.getElementById('runs-count'); return c.dataset.q === q && !c.dataset.busy; }", arg=text.lower()
    )


def test_filter_by_code_severity_status_and_search(combined: Path, open_report: Any) -> None:
    page = open_report(combined)
    assert len(visible_runs(page)) == 6  # clean-myproto has two runs
    assert sorted(visible_findings(page)) == ["CK101", "CK102", "CK104", "CK601"]
    page.select_option("#f-code", "CK102")
    assert visible_runs(page) == ["ck102/r1"]
    assert visible_findings(page) == ["CK102"]
    assert "1 of 6 run(s)" in page.inner_text("#runs-count")
    page.select_option("#f-code", "")
    page.select_option("#f-sev", "error")
    assert sorted(visible_runs(page)) == ["ck101-direct/r1", "ck104/r1"]
    assert sorted(visible_findings(page)) == ["CK101", "CK104"]
    page.select_option("#f-sev", "")
    page.select_option("#f-status", "outcome unknown")  # [DONE] or the end of the stream without a conclusion
    assert visible_runs(page) == ["ck102/r1", "ck104/r1"]
    page.select_option("#f-status", "")
    search(page, "ck601")
    assert visible_runs(page) == ["ck601/r1"]
    # frame text: "(late)" is only in the late chunk of CK101's stream
    search(page, "(late)")
    assert visible_runs(page) == ["ck101-direct/r1"]
    page.focus("#q")
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.getElementById('runs-count').dataset.q === ''")
    assert len(visible_runs(page)) == 6


def test_keyboard_only(combined: Path, open_report: Any) -> None:
    page = open_report(combined)
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.focus("#runs")
    page.keyboard.press("End")
    page.keyboard.press("Home")
    page.keyboard.press("Enter")  # the first run: ck101-direct
    page.wait_for_selector("#run-view:not([hidden])")
    page.wait_for_function("() => document.documentElement.dataset.run === 'ck101-direct/r1'")
    page.focus("#timeline")
    page.keyboard.press("End")
    wait_frame(page, "0:end")
    page.keyboard.press("ArrowLeft")  # the scrubber's step back
    wait_frame(page, "0:4")
    assert page.input_value("#scrub") == "5"
    page.keyboard.press("Home")
    page.keyboard.press("]")  # the next problem: the chunk after the terminal
    wait_frame(page, "0:4")
    page.keyboard.press("x")
    page.wait_for_function("() => document.getElementById('raw').textContent.includes('rebuilt')")
    raw = page.inner_text("#raw")
    assert "64 61 74 61 3a" in raw  # "data:" in the hexdump of the SSE event
    page.keyboard.press("Home")
    page.keyboard.press("n")  # the next finding
    wait_frame(page, "0:4")
    # the slider
    page.focus("#scrub")
    page.keyboard.press("ArrowLeft")
    wait_frame(page, "0:3")
    page.keyboard.press("?")
    assert page.is_visible("#help")
    page.keyboard.press("Escape")
    assert not page.is_visible("#help")
    page.focus("#timeline")
    page.keyboard.press("Escape")
    page.wait_for_selector("#runs-view:not([hidden])")


# ------------------------------------------------------------------------------ the snapshot is the Core's


def core_windows(trace: Path) -> dict[tuple[str, str], list[list[Any]]]:
    """For each (run, frame ref): the messages the page shows, computed in Python
    from the Core's snapshot after that event (the run's messages and two
    before them, as the viewer's messages_content)."""
    loaded = open_trace(trace)
    out: dict[tuple[str, str], list[list[Any]]] = {}
    try:
        exchanges = list(loaded.store.exchanges(with_frames=True))
        snaps: list[tuple[str, Any]] = []

        def observe(kind: int, ex: Any, frame: Any, rp: Any) -> None:
            ref = str(ex.index) if kind == 0 else f"{ex.index}:end" if kind == 2 else f"{ex.index}:{frame.index}"
            rec = rp.out.exchanges.get(ex.index)
            s = rp.out.sessions.get(rec.session_id) if rec is not None and rec.session_id else None
            snaps.append((ref, s.core.snapshot if s is not None else None))

        rep = replay(exchanges, loaded.adapter, capabilities=loaded.capabilities, observe=observe)
        run_ids = [v.id for s in rep.sessions.values() for v in s.core.snapshot.runs]
        for ref, snap in snaps:
            msgs = list(snap.messages) if snap is not None else []
            for rid in run_ids:
                mine = [i for i, m in enumerate(msgs) if m.run_id == rid]
                lo, hi = (max(0, mine[0] - 2), mine[-1] + 1) if mine else (max(0, len(msgs) - 2), len(msgs))
                out[(rid, ref)] = [[m.id, [p.text for p in m.parts if hasattr(p, "text") and p.text is not None]] for m in msgs[lo:hi]]
    finally:
        loaded.close()
    return out


@pytest.mark.parametrize("name", ["CK101-direct", "CK404", "CK201", "CK206", "CK105"])
def test_the_snapshot_at_every_frame_is_the_cores(tmp_path: Path, open_report: Any, name: str) -> None:
    trace = corpus_trace(tmp_path, name)
    expected = core_windows(trace)
    page = open_report(make_report(trace))
    runs = page.evaluate("() => JSON.parse(document.getElementById('ck-index').textContent).runs.map(r => [r.s, r.r])")
    checked = 0
    for sid, rid in runs:
        page.evaluate("([s, r]) => { location.hash = '#session=' + encodeURIComponent(s) + '&run=' + encodeURIComponent(r); }", [sid, rid])
        page.wait_for_function("k => document.documentElement.dataset.run === k", arg=f"{sid}/{rid}")
        n = int(page.get_attribute("#scrub", "max")) + 1
        page.focus("#timeline")
        page.keyboard.press("Home")
        for q in range(n):
            if q:
                page.keyboard.press("ArrowDown")
            page.wait_for_function("q => document.getElementById('scrub').value === String(q)", arg=q)
            ref = page.get_attribute("html", "data-frame")
            want = expected.get((rid, ref))
            if want is None:
                continue  # a row of another session (a finding's frame)
            got = [[mid, [t.split("\n", 1)[-1] if t.startswith("… ") else t for t in texts]] for mid, texts in snapshot_messages(page)]
            assert got == want, f"{name} run {rid} after {ref}"
            checked += 1
    assert checked > 3


# ------------------------------------------------------------------------------ live vs history


def test_live_vs_history_marks_the_differences(corpus_report: Any, open_report: Any) -> None:
    page = open_report(corpus_report("CK202-renamed-run"))
    open_run_of(page, "CK201")
    page.wait_for_selector("#run-view:not([hidden])")
    body = page.inner_text("#cmp-body")
    assert "history read 1" in body
    assert page.locator("#cmp-body td.diff").count() >= 1
    # the difference as diff and the viewer word it (issue 13's sentences)
    assert "in history (same run, same place, same content)" in body


# ------------------------------------------------------------------------------ big traces


def test_a_long_run_renders_lazily(tmp_path: Path, open_report: Any) -> None:
    trace = long_trace(tmp_path / "long.db", 20_000)
    page = open_report(make_report(trace), "#session=s1&run=r1")
    assert int(page.get_attribute("#scrub", "max")) == 20_001  # request, 20k frames, end of stream
    assert page.locator("#timeline .row").count() < 200  # only what is on screen
    page.focus("#timeline")
    page.keyboard.press("End")
    wait_frame(page, "0:end")
    page.keyboard.press("ArrowUp")
    wait_frame(page, "0:19999")
    text = snapshot_messages(page)[-1][1][0]
    assert text.endswith(" w19998 ") and "earlier characters" in text  # 0:19999 is the terminal
    page.keyboard.press("Home")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    wait_frame(page, "0:2")
    assert snapshot_messages(page)[-1][1] == ["w1 w2 "]  # back from the end: replayed from the start again
    assert page.locator("#timeline .row").count() < 200


# ------------------------------------------------------------------------------ light, dark, print


def test_dark_scheme_and_print_stylesheet(corpus_report: Any, open_report: Any) -> None:
    path = corpus_report("CK101-direct")
    light = open_report(path)
    dark = open_report(path, dark=True)
    bg = "getComputedStyle(document.body).backgroundColor"
    assert light.evaluate(bg) == "rgb(255, 255, 255)"
    assert dark.evaluate(bg) == "rgb(13, 17, 23)"
    dark.emulate_media(media="print")
    assert not dark.is_visible("#runs-view") and not dark.is_visible("#help-btn")
    assert dark.is_visible("#findings-table") and "CK101" in dark.inner_text("#summary")
    assert dark.evaluate(bg) == "rgb(255, 255, 255)"
    # printing from a run's page still prints the summary
    light.click("#findings-table a.frame-link")
    light.wait_for_selector("#run-view:not([hidden])")
    light.emulate_media(media="print")
    assert light.is_visible("#findings-table") and not light.is_visible("#run-view")


# ------------------------------------------------------------------------------ the guard itself


def test_the_network_guard_catches_a_request(browser: Any, tmp_path: Path) -> None:
    """A page that does fetch something is caught (the guard every report passes can fail)."""
    page_path = tmp_path / "leak.html"
    page_path.write_text('<!doctype html><img src="http://127.0.0.1:9/pixel.png"><script>console.error("boom")</script>')
    url = page_path.as_uri()
    ctx = browser.new_context()
    guard = Guard(url)
    try:
        def route(r: Any) -> None:
            if r.request.url == url:
                r.continue_()
            else:
                guard.blocked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("request", lambda req: guard.requests.append(req.url))
        page.on("console", lambda m: guard.errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        page.wait_for_load_state("load")
        with pytest.raises(AssertionError, match="network requests"):
            guard.check()
        assert "http://127.0.0.1:9/pixel.png" in guard.blocked
    finally:
        ctx.close()


def test_chromium_is_the_systems(browser: Any) -> None:
    assert Path(CHROMIUM).exists() and "--no-sandbox" in ARGS
    assert browser.version.split(".")[0].isdigit()
