"""Verdicts, round three (issue 33): the real servers, recorded THROUGH THE
ADDON, in the scenarios where ``check`` blamed a backend that did nothing
wrong, or missed what a backend did wrong.

False findings, fixed at the root:
  * ADK stopped while a tool runs: history's ``INVOCATION_ABORTED`` settles
    the run and cancels the call (no CK201);
  * Hermes ``/v1/runs`` reasoning: a limit of the route (CK308), no CK201;
  * Hermes ``/v1/runs`` stopped at its tool: the "Operation interrupted."
    notice only history holds is CK117 (info), like A2A's sealed notice;
  * Hermes' session stream: ``run.completed`` carries the tool results (no
    CK306 for that route);
  * Hermes' session stream closed mid-answer, history then holding the whole
    answer: no CK115 ("cannot be confirmed").
Misses, now findings: the stop the backend ignored (CK118), a run that failed
with its tool still running (CK119), model failures reported as answers
(CK120), a transcript carrying earlier turns (CK121), a content filter that
withheld the whole answer (CK122).

    CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers/test_verdicts_round3.py -m realserver
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from chatkit_trace.analyze import CATALOGUE

from .test_live_vs_history import diff, findings, through_addon

pytestmark = pytest.mark.realserver

#: Infos about timing, ids or the recording that any trace may carry.
AMBIENT = {"CK203", "CK401", "CK601", "CK602"}


def judged(found) -> list[tuple[str, str | None]]:
    return sorted((f.code, f.run_id) for f in found if f.code not in AMBIENT)


def explain(found) -> list[tuple[str, str | None, str]]:
    return [(f.code, f.run_id, f.message) for f in found if f.code not in AMBIENT]


def _until(read: Callable[[], object], ok: Callable[[object], bool], timeout: float = 40.0):
    """Call ``read`` until ``ok`` holds (bounded; the last answer either way)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def _read_until(stream, marker: bytes, limit: int = 30) -> None:
    n = 1
    while marker not in bytes(stream.body) and n <= limit and stream.ended_by is None:
        stream.read(max_events=n, timeout=20)
        n += 1
    assert marker in bytes(stream.body), bytes(stream.body)[-500:]


# -- ADK -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adk_trace(adk_peer, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """trip_agent: a run stopped (the client closes /run_sse) while its
    20-second tool runs, then read until history holds INVOCATION_ABORTED;
    a run whose tool raises, then read."""
    db = tmp_path_factory.mktemp("adk-r3") / "adk.db"
    a = adk_peer
    a.app = "trip_agent"
    runs: dict[str, str] = {}
    try:
        with through_addon(a, "adk", db):
            sid = runs["visa"] = f"visa-{uuid.uuid4().hex[:6]}"
            assert a.create_session(sid).status == 200
            with a.open_stream("POST", "/run_sse", a.run_body(sid, "check the visa for Peru please")) as st:
                _read_until(st, b'"functionCall"')
                _read_until(st, b'"partial":false')  # the aggregate: the call is shown, its tool runs
                assert st.close().ended_by == "client"
            h = a._wait_history(sid, lambda evs: any(e.get("errorCode") == "INVOCATION_ABORTED" for e in evs), timeout=30)
            aborted = [e for e in h.json()["events"] if e.get("errorCode") == "INVOCATION_ABORTED"]
            assert aborted and "functionResponse" in aborted[0]["content"]["parts"][0]  # the aborted call's response
            sid = runs["book"] = f"book-{uuid.uuid4().hex[:6]}"
            assert a.create_session(sid).status == 200
            assert a.run_sse(sid, "book a hotel in Lima").status == 200
            assert a.get_session(sid).status == 200
    finally:
        a.app = "chatkit_peer"
    return db, runs


def test_adk_stop_while_a_tool_runs_is_settled_by_the_read(adk_trace, capsys):
    db, runs = adk_trace
    found = findings(db)
    visa = [f for f in found if f.session_id == runs["visa"] and f.code not in AMBIENT]
    assert visa == [], explain(found)  # no CK201 (item 1), no CK115 (the read confirmed the stop), no CK103
    rc, out = diff(db, capsys)
    block = out.split(f"session {runs['visa']}", 1)[1].split(f"session {runs['book']}", 1)[0]
    assert "isomorphic" in block and "history settles 1 tool call(s) the live stream left running" in block, out
    assert "result: null" not in out


def test_adk_the_aborted_call_is_cancelled_after_the_refresh(adk_trace):
    from chatkit_trace.analyze import analyze
    from chatkit_trace.core import ToolCallPart
    from chatkit_trace.loading import open_trace

    db, runs = adk_trace
    loaded = open_trace(db)
    try:
        rep, _ = analyze(loaded.exchanges(), loaded.adapter, capabilities=loaded.capabilities)
    finally:
        loaded.close()
    snap = rep.sessions[runs["visa"]].core.snapshot
    [run] = snap.runs
    assert run.status == "interrupted" and run.abort is not None and run.abort.remote == "confirmed"
    [call] = [p for m in snap.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert call.tool_name == "check_visa" and call.status == "cancelled"
    assert call.error.code == "INVOCATION_ABORTED" and "aborted by client" in call.error.message


def test_adk_tool_that_raises_leaves_its_card_spinning_ck119(adk_trace):
    db, runs = adk_trace
    found = findings(db)
    book = [f for f in found if f.session_id == runs["book"] and f.code not in AMBIENT]
    assert [f.code for f in book] == ["CK119"], explain(found)
    [f] = book
    assert f.severity == "error" == CATALOGUE["CK119"].severity
    assert "book_hotel" in f.message and "booking backend unavailable" in f.message
    assert "still shows it running: a refresh keeps it spinning" in f.message
    assert "tool card still spinning" in f.message


# -- Hermes --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hermes_trace(hermes_peer, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    # long-function: one recording of every Hermes scenario, each step commented
    """/v1/runs in sessions: a reasoning run, a run stopped at tool.started;
    the session chat stream: a tool turn, a turn closed after four deltas
    (read until history holds its answer), an HTTP 400, a content filter and
    an empty reply (each in its own session), a turn after a failed one;
    each followed by a history read."""
    db = tmp_path_factory.mktemp("hermes-r3") / "hermes.db"
    h = hermes_peer
    ids: dict[str, str] = {}

    def rows(sid: str) -> list[dict]:
        return h.session_messages(sid).json()["data"]

    with through_addon(h, "hermes", db):
        # /v1/runs reasoning: the model's reasoning_content never streams, history keeps it
        sid = h.create_session().json()["session"]["id"]
        rid = ids["reasoning"] = h.post_run("Think, then answer. scenario:reason", session_id=sid).json()["run_id"]
        assert h.run_events(rid, timeout=60).status == 200
        assert h.wait_run(rid).json()["status"] == "completed"
        assert any(r.get("reasoning") for r in rows(sid))
        # /v1/runs stopped at its tool (the model's next call waits 5 s before any text): history
        # holds "Operation interrupted."  (The stop is sent once tool.completed is in: a stop
        # acknowledged before an in-flight tool.completed would make that completion output after
        # the stop, CK107, a race this test must not depend on.)
        sid = h.create_session().json()["session"]["id"]
        rid = ids["stop_tool"] = h.post_run("Use a tool, then talk. scenario:slowtool", session_id=sid).json()["run_id"]
        with h.open_run_events(rid) as ev:
            _read_until(ev, b"tool.completed")
            assert h.stop_run(rid).status in (200, 202)
            ev.read_all(20)
        assert h.wait_run(rid).json()["status"] == "cancelled"
        assert any(r["role"] == "assistant" and str(r["content"]).startswith("Operation interrupted") for r in rows(sid))
        # session stream tool turn: run.completed's transcript carries the result
        sid = ids["tool_session"] = h.create_session().json()["session"]["id"]
        assert h.session_chat_stream(sid, "Plan one task with a tool. scenario:tool").status == 200
        assert h.session_messages(sid).status == 200
        # session stream closed after four deltas: Hermes goes on, history ends up with the whole answer
        sid = ids["ignored"] = h.create_session().json()["session"]["id"]
        r = h.session_chat_stream(sid, "Talk slowly. scenario:slow", max_events=6, timeout=30)
        assert r.ended_by == "client"
        done = _until(lambda: rows(sid), lambda got: any(x["role"] == "assistant" for x in got))
        assert any(x["role"] == "assistant" and "tick19" in str(x["content"]) for x in done), done
        # model failures on the session stream, each in its own session (a failed turn spoils the next)
        for name, text in (("http400", "Fail at once. scenario:http400"), ("filter", "Something filtered. scenario:filter"),
                           ("empty", "Say nothing. scenario:empty")):
            sid = ids[name] = h.create_session().json()["session"]["id"]
            assert h.session_chat_stream(sid, text).status == 200
            assert h.session_messages(sid).status == 200
        # turns after a failed one: hermes loses the turn's start, its transcript carries earlier turns' rows
        sid = ids["after_failure"] = h.create_session().json()["session"]["id"]
        for text in ("Say hello. scenario:text", "Fail at once. scenario:http400", "Hello again. scenario:text",
                     "Plan one task with a tool. scenario:tool"):
            assert h.session_chat_stream(sid, text).status == 200
            assert h.session_messages(sid).status == 200
    return db, ids


def _of(found, session: str | None = None, run: str | None = None):
    return [f for f in found if f.code not in AMBIENT and (session is None or f.session_id == session)
            and (run is None or f.run_id == run)]


def test_hermes_reasoning_on_v1_runs_is_a_route_limit_ck308(hermes_trace, capsys):
    db, ids = hermes_trace
    found = findings(db)
    assert not [f for f in found if f.code == "CK201" and f.run_id == ids["reasoning"]], explain(found)
    [f] = [f for f in found if f.code == "CK308"]
    assert f.severity == "info" and f.run_id is None and "GET /v1/runs/{id}/events" in f.message
    assert "reasoning never reaches the UI live" in f.message


def test_hermes_stop_at_a_tool_notice_is_ck117_like_a2a(hermes_trace):
    db, ids = hermes_trace
    found = findings(db)
    assert not [f for f in found if f.run_id == ids["stop_tool"] and f.severity != "info"], explain(found)
    [f] = [f for f in found if f.code == "CK117"]
    assert f.severity == "info" == CATALOGUE["CK117"].severity and f.detail["how"] == ["history"]
    assert "Operation interrupted" in f.message and "the next refresh shows it" in f.message
    assert any(r.endswith("/" + ids["stop_tool"]) for r in f.detail["runs"])
    assert "CK113" not in {x.code for x in found}


def test_hermes_session_stream_tool_results_are_no_route_limit(hermes_trace):
    db, ids = hermes_trace
    found = findings(db)
    routes = [f.detail["route"] for f in found if f.code == "CK306"]
    assert "POST /api/sessions/{id}/chat/stream" not in routes, explain(found)
    assert "GET /v1/runs/{id}/events" in routes  # /v1/runs tool.completed: the real limit stays
    assert not _of(found, session=ids["tool_session"]), explain(found)


def test_hermes_stop_the_backend_ignored_is_ck118_not_ck115(hermes_trace):
    db, ids = hermes_trace
    found = findings(db)
    mine = _of(found, session=ids["ignored"])
    assert [f.code for f in mine] == ["CK118"], explain(found)
    [f] = mine
    assert f.severity == "warning" and "ignored the stop and kept generating" in f.message and "tick19" in f.message
    assert "a refresh shows the whole answer from history" in f.message
    for f in found:
        if f.code == "CK115":
            assert not any(r.startswith(ids["ignored"] + "/") for r in f.detail["runs"]), f.message


@pytest.mark.parametrize("name, shown", [
    ("http400", "HTTP 400: fake bad request"),
    ("filter", "The model declined to respond"),
    ("empty", "No reply"),
])
def test_hermes_model_failures_reported_as_answers_are_ck120(hermes_trace, name, shown):
    db, ids = hermes_trace
    found = findings(db)
    mine = _of(found, session=ids[name])
    assert [f.code for f in mine] == ["CK120"], explain(found)  # no CK201: one cause, one verdict
    [f] = mine
    assert f.severity == "error" and shown in f.message and "no failure card" in f.message
    if name != "empty":  # history keeps only the user's message
        assert "a refresh removes it" in f.message


def test_hermes_a_transcript_with_earlier_turns_is_ck121_and_not_shown(hermes_trace):
    db, ids = hermes_trace
    found = findings(db)
    mine = _of(found, session=ids["after_failure"])
    assert {f.code for f in mine} == {"CK120", "CK121"}, explain(found)  # no CK201: the answers are this turn's own
    assert [f.code for f in mine].count("CK120") == 1
    ck120 = next(f for f in mine if f.code == "CK120")
    assert "HTTP 400" in ck120.message and "Hello from the fake model." not in ck120.message
    for f in mine:
        if f.code == "CK121":
            assert f.severity == "warning" and f.detail["earlier_messages"] >= 1 and f.run_id != ck120.run_id


# -- OpenAI-compatible (litellm) and A2A ------------------------------------------------------


def test_openai_content_filter_with_no_content_is_ck122(openai_peer, tmp_path):
    db = tmp_path / "openai.db"
    with through_addon(openai_peer, "openai", db):
        r = openai_peer.chat("fake-filter", "Something the filter withholds.")
        assert r.status == 200
        assert any(c.get("finish_reason") == "content_filter" for ch in r.sse_json() for c in ch.get("choices") or [])
        assert openai_peer.chat("fake-text", "Say hello.").status == 200
    found = findings(db)
    judged_ = [f for f in found if f.code not in AMBIENT]
    assert [f.code for f in judged_] == ["CK122"], explain(found)
    [f] = judged_
    assert f.severity == "warning" and "content_filter" in f.message
    assert "the user's message and nothing after it" in f.message
