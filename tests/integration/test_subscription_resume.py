"""Issue 22: a subscription reconnect with ``Last-Event-ID`` is a resume, judged as one.

Each test records a session of a real aiohttp backend of the ``myproto``
preset's shape (``POST …/send`` + ``GET …/events?sessionId=``, SSE ``id:`` on
every event, ``retry:``, ``Last-Event-ID`` honoured) through a real
``mitmdump`` with the addon, driven by a real headless Chromium page whose
``EventSource`` reconnects by itself when the server ends the stream.  The
backend's bug modes per session: ``correct``, ``replay`` (from the start,
ignoring the cursor) and ``skip`` (the first event after the cursor is
lost).  ``chatkit-trace check`` then judges the recording.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import chromium
from .proxy import Proc
from .subscription import check, record_session, subscriptions
from .subscription_backend import SubscriptionBackend, subscription_backend

pytestmark = [pytest.mark.mitmdump, pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for this module (its tests are all synchronous)."""
    with chromium() as b:
        yield b


@pytest.fixture
def backend() -> Iterator[SubscriptionBackend]:
    with subscription_backend() as b:
        yield b


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.kill()


def _ids(got: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in got]


def _resumed(db: Path) -> Any:
    """The one subscription that carried a cursor."""
    subs = subscriptions(db)
    resumed = [e for e in subs if e.resume_cursor]
    assert len(subs) == 2 and len(resumed) == 1, [(e.index, e.resume_cursor) for e in subs]
    return resumed[0]


# -- a correct resume --------------------------------------------------------------------


@pytest.mark.parametrize(("runs", "close_after", "history"), [(("r1",), (3,), False), (("r1", "r2"), (7,), True)],
                         ids=["one-run", "two-runs-history"])
def test_a_correct_resume_is_no_finding(browser, backend, procs, tmp_path, runs, close_after, history):
    rec = record_session(browser, backend, procs, tmp_path / "t.db", "s-ok", runs=runs, close_after=close_after,
                         history=history)
    n = 5 * len(runs)
    assert rec.opens == 2 and _ids(rec.got) == [str(i) for i in range(1, n + 1)]  # the page saw each event once
    r = _resumed(rec.db)
    assert r.header("Last-Event-ID") == str(close_after[0]) and r.cursor == str(close_after[0])
    rc, findings = check(rec.db, "--fail-on", "info")
    assert (rc, findings) == (0, [])


# -- replay from the start and skip: CK404 at the first wrong event ---------------------------


CASES = [
    # mode, runs, cursor, history, the first wrong event's id, the run it names
    ("replay", ("r1",), 3, False, "1", "r1"),
    ("replay", ("r1",), 3, True, "1", "r1"),
    ("replay", ("r1", "r2"), 7, False, "1", "r1"),
    ("replay", ("r1", "r2"), 7, True, "1", "r1"),
    ("skip", ("r1",), 3, False, "5", "r1"),
    ("skip", ("r1",), 3, True, "5", "r1"),
    ("skip", ("r1", "r2"), 7, False, "9", "r2"),
    ("skip", ("r1", "r2"), 7, True, "9", "r2"),
]


@pytest.mark.parametrize(("mode", "runs", "cursor", "history", "first", "run"), CASES,
                         ids=[f"{m}-{len(r)}run-{'history' if h else 'live'}" for m, r, _, h, _, _ in CASES])
def test_a_broken_resume_is_one_ck404_at_the_first_wrong_event(browser, backend, procs, tmp_path, mode, runs, cursor,
                                                                history, first, run):
    rec = record_session(browser, backend, procs, tmp_path / "t.db", f"s-{mode}", runs=runs, close_after=(cursor,),
                         mode=mode, history=history)
    n = 5 * len(runs)
    assert rec.opens == 2
    if mode == "replay":  # the page really got the session again from its start
        assert _ids(rec.got) == [str(i) for i in range(1, cursor + 1)] + [str(i) for i in range(1, n + 1)]
    else:  # and here it really never got the event after the cursor
        assert _ids(rec.got) == [str(i) for i in range(1, n + 1) if i != cursor + 1]
    r = _resumed(rec.db)
    rc, findings = check(rec.db)
    assert rc == 1
    # one cause, one verdict: no CK403 for the repeats, no CK101 for an ended
    # run's repeats, no CK201 for what history holds of a skip
    assert [f["code"] for f in findings] == ["CK404"], [(f["code"], f["message"]) for f in findings]
    [f] = findings
    assert f["frames"][0] == f"{r.index}:0"  # the decisive frame: the resumed stream's first event
    assert f["run_id"] == run
    d = f["detail"]
    assert d["cursor"] == str(cursor) and d["cursor_from"] == "Last-Event-ID header"
    assert d["first_wrong"]["event_id"] == first and d["first_wrong"]["kind"] == ("repeat" if mode == "replay" else "skip")
    assert f"resumed after '{cursor}'" in f["message"]
    if mode == "replay":
        assert d["repeated"] == [str(i) for i in range(1, cursor + 1)]
        if len(runs) == 2:  # r1 had ended: its repeats were rejected terminal-sealed; r2's dropped as duplicates
            assert d["ui"] == {"rejected terminal-sealed (their run had ended)": 4, "dropped as duplicates": 2,
                               "decoded to nothing": 1}
        else:
            assert d["ui"] == {"dropped as duplicates": 3}
    else:
        assert d["skipped"] == [str(cursor + 1)]
        evidence = " ".join(d["evidence"])
        assert ("history read" in evidence) == history
        if history:
            assert "the next refresh will show it" in f["message"]


def test_a_recording_made_before_subscriptions_had_cursors_is_judged_the_same(browser, backend, procs, tmp_path):
    """A trace recorded with a profile whose subscription route has no cursor
    (the preset before issue 22) re-decodes as a resume: from the stored
    classification (the ``Last-Event-ID`` header) and re-classified with the preset."""
    preset = Path(__file__).resolve().parents[2] / "chatkit_trace" / "route" / "presets" / "myproto.toml"
    old = "\n".join(line for line in preset.read_text().splitlines() if not line.startswith("cursor = [\"header:Last-Event-ID\""))
    profile = tmp_path / "old-myproto.toml"
    profile.write_text(old.replace('name = "myproto"', 'name = "myproto-old"', 1))
    rec = record_session(browser, backend, procs, tmp_path / "t.db", "s-old", runs=("r1", "r2"), close_after=(7,),
                         mode="replay", profile=str(profile))
    r = _resumed(rec.db)
    assert r.cursor is None and r.resume_cursor == "7"  # the old route stored no cursor
    for extra in ((), ("--profile", "myproto")):
        rc, findings = check(rec.db, *extra)
        assert rc == 1 and [f["code"] for f in findings] == ["CK404"], (extra, findings)
        assert findings[0]["frames"][0] == f"{r.index}:0"


def test_a_run_another_client_started_is_no_error(browser, backend, procs, tmp_path):
    """myproto's ``started`` has no field for the input: the passive run's
    user message is missing live by the protocol's design (CK505, info), not
    a CK201 of the run."""
    rec = record_session(browser, backend, procs, tmp_path / "t.db", "s-passive", runs=("r1",), close_after=(),
                         passive="other-1", history=True)
    assert rec.opens == 1 and any(e["data"]["run"] == "other-1" for e in rec.got)
    rc, findings = check(rec.db)
    assert rc == 0
    assert [(f["code"], f["severity"]) for f in findings] == [("CK505", "info")], findings
    assert findings[0]["detail"]["runs"] == ["s-passive/other-1"]


def test_a_protocol_that_carries_the_input_on_its_start_event_needs_no_info(browser, backend, procs, tmp_path):
    """How a protocol carries another client's input (docs/profiles.md): the
    start event holds it and the adapter decodes it into the run's user
    message; then live and history agree and there is no limit to report."""
    backend.configure("s-input", input_on_start=True)
    rec = record_session(browser, backend, procs, tmp_path / "t.db", "s-input", runs=("r1",), close_after=(),
                         passive="other-2", history=True)
    assert any(e["data"].get("input") == {"text": "from elsewhere"} for e in rec.got)
    assert [f["code"] for f in check(rec.db)[1]] == ["CK505"]  # myproto cannot read it
    profile = tmp_path / "with-input.toml"
    profile.write_text('extends = "myproto"\nname = "myproto-input"\nprotocol = "tests.integration.subscription:InputOnStart"\n')
    assert check(rec.db, "--profile", str(profile), "--fail-on", "info") == (0, [])


def test_a_run_id_the_backend_mints_comes_from_the_send_reply(browser, backend, procs, tmp_path):
    rec = record_session(browser, backend, procs, tmp_path / "t.db", "s-mint", runs=(None,), close_after=(3,))
    assert rec.runs == ["srv-1"]
    from chatkit_trace.store import TraceStore

    with TraceStore(rec.db, readonly=True) as store:
        [send] = [e for e in store.exchanges() if e.capability == "run"]
    assert (send.run_id, send.run_id_source, send.status) == ("srv-1", "response", 202)
    assert check(rec.db, "--fail-on", "info") == (0, [])  # no passive twin (CK504), one run
