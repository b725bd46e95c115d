"""Live vs history on every protocol: a read's scope (from the profile
route), id-first pairing, then by run and position, and one cause one
finding (issue 13).  Traffic is each protocol's real wire format; the ADK,
A2A and Hermes cases start from the committed real-server captures
(recordings/captures), edited where a seeded bug is wanted."""

from __future__ import annotations

import copy
import json

import pytest

from chatkit_trace.analyze import Context
from chatkit_trace.analyze.identity import comparisons
from chatkit_trace.route import load_profile
from chatkit_trace.trace import frames_from_body

from .wire_cases import CAPTURES, Call, build, capture_calls, codes, run


def comps(calls, protocol):
    exchanges, adapter = build(calls, protocol)
    from chatkit_trace.pipeline import replay

    rep = replay(exchanges, adapter)
    return comparisons(Context(rep, {e.index: e for e in exchanges}, adapter))


# -- profile routes declare what a read covers ------------------------------------------


@pytest.mark.parametrize(
    "protocol, route, scope",
    [
        ("adk", "session", "session"),
        ("a2a", "get-task", "run"),
        ("a2a", "list-tasks", "session"),
        ("hermes", "run-status", "run"),
        ("hermes", "session-messages", "session"),
        ("openai", "history", "session"),
        ("myproto", "history", "session"),
    ],
)
def test_presets_declare_the_scope_of_their_history_routes(protocol, route, scope):
    r = next(r for r in load_profile(protocol).routes if r.name == route)
    assert r.read_scope == scope


def test_scope_defaults_and_validation():
    from chatkit_trace.route import parse_profile

    prof = parse_profile(
        {"name": "p", "protocol": "openai", "routes": [
            {"capability": "history", "path": "/h/{s}", "session": "path:s", "cursor": "query:after"},
            {"capability": "history", "path": "/r/{r}", "run": "path:r"},
            {"capability": "history", "path": "/s/{s}", "session": "path:s"},
        ]}
    )
    assert [r.read_scope for r in prof.routes] == ["page", "run", "session"]
    m = prof.match("GET", "/r/x1")
    assert m.scope == "run"
    with pytest.raises(Exception, match="only a history or status route"):
        parse_profile({"name": "p", "protocol": "openai", "routes": [{"capability": "run", "path": "/x", "scope": "run"}]})


# -- ADK: runs settled by the history read are compared ----------------------------------


def adk_calls(edit=None):
    calls = capture_calls("text_tool", "adk")
    if edit is not None:
        hist = copy.deepcopy(calls[-1].json)
        edit(hist)
        calls[-1] = Call(**{**calls[-1].__dict__, "json": hist})
    return calls


def test_adk_run_settled_by_the_read_is_compared_and_isomorphic():
    [c] = comps(adk_calls(), "adk")
    assert (c.scope, c.settled, c.diffs, c.renamed) == ("session", "read", [], [])
    assert [m.id for m in c.seen] == [m.id for m in c.live] and len(c.live) >= 3
    assert c.live_at is not None and c.live_at[0] == 1  # the stream's last frame before the read


def test_adk_history_that_re_mints_ids_is_ck201_and_ck202():
    def remint(h):
        for i, e in enumerate(h["events"]):
            e["id"] = f"reminted-{i}"

    _, findings = run(adk_calls(remint), "adk")
    # CK112 (info, once per route): stock ADK has no end-of-run event, only the read settles the run
    assert codes(findings) == ["CK112", "CK201", "CK202"]
    ck202 = next(f for f in findings if f.code == "CK202")
    assert all(p["history"].startswith("reminted-") for p in ck202.detail["pairs"])


def test_adk_history_that_lost_the_last_model_event_is_ck201_only():
    def drop(h):
        last = max(i for i, e in enumerate(h["events"]) if (e.get("content") or {}).get("role") == "model")
        del h["events"][last]

    _, findings = run(adk_calls(drop), "adk")
    got = codes(findings)
    assert "CK201" in got and "CK202" not in got
    ck201 = next(f for f in findings if f.code == "CK201")
    assert [d["what"] for d in ck201.detail["differences"]] == ["missing in history"]
    assert "It is sunny in Paris" in ck201.message


# -- A2A: per-task reads pair with their task only; the cancel notice is one warning -----


def a2a_two_tasks(version: str, *, cancel_before_terminal: bool = True) -> list[Call]:
    """v{version} text task, then a slow task in the SAME context cancelled
    mid-stream, then tasks/get for each (real captured bytes; the second
    task's context id rewritten to the first's)."""
    text = capture_calls(f"{version}-text", "a2a")
    slow = capture_calls(f"{version}-slow_cancel", "a2a", t=10.0)
    ida = json.loads((CAPTURES / "a2a" / f"{version}-text.exchange.json").read_text())["ids"]
    idb = json.loads((CAPTURES / "a2a" / f"{version}-slow_cancel.exchange.json").read_text())["ids"]
    old, new = idb["context_id"], ida["context_id"]

    def swap(c: Call) -> Call:
        d = dict(c.__dict__)
        d["body"] = json.loads(json.dumps(c.body).replace(old, new))
        if c.raw is not None:
            d["raw"] = c.raw.replace(old.encode(), new.encode())
        if c.json is not None:
            d["json"] = json.loads(json.dumps(c.json).replace(old, new))
        return Call(**d)

    stream, resub, cancel, hist = (swap(c) for c in slow)
    n = len(frames_from_body(stream.raw, 0))
    stream.times = [10.0 + 0.2 * k for k in range(n)]
    # the cancel reply arrives a few ms before the canceled status update (as recorded: 5-9 ms)
    cancel.t = stream.times[-1] - (0.006 if cancel_before_terminal else -0.05)
    resub.t, resub.spacing = 10.3, 0.2
    hist.t = stream.times[-1] + 0.1
    return [text[0], stream, resub, cancel, hist, Call(**{**text[1].__dict__, "t": 12.0})]


@pytest.mark.parametrize("version", ["v03", "v10"])
def test_a2a_task_reads_pair_with_their_own_task(version):
    cs = comps(a2a_two_tasks(version), "a2a")
    assert {c.scope for c in cs} == {"run"}
    assert len(cs) == 2 and len({c.run_id for c in cs}) == 2
    for c in cs:
        assert c.read in (4, 5) and c.diffs == [] and c.renamed == []
        # a read of one task never holds the other task's messages
        assert {m.run_id for m in c.seen} <= {c.run_id}


@pytest.mark.parametrize("version", ["v03", "v10"])
def test_a2a_cancel_notice_is_one_info_on_the_route(version):
    # the backend did nothing wrong: CK117 (info, once per route) replaced CK113 (warning), issue 33
    _, findings = run(a2a_two_tasks(version), "a2a")
    assert codes(findings) == ["CK117"]
    [f] = [f for f in findings if f.code == "CK117"]
    assert f.severity == "info" and f.run_id is None and "cancelled by request" in f.message
    assert "History read 4 holds it: the next refresh shows it" in f.message
    assert f.detail["how"] == ["sealed"] and f.detail["reads"] == [4] and len(f.detail["runs"]) == 1


@pytest.mark.parametrize("version", ["v03", "v10"])
def test_a2a_cancel_acknowledged_after_the_terminal_is_clean(version):
    _, findings = run(a2a_two_tasks(version, cancel_before_terminal=False), "a2a")
    assert codes(findings) == []


# -- Hermes: run + stop + status read -----------------------------------------------------


def test_hermes_run_stop_status_read_has_no_false_difference():
    rep, findings = run(capture_calls("runs_stop", "hermes"), "hermes")
    assert not {"CK201", "CK202", "CK107", "CK113", "CK117"} & set(codes(findings))
    s = next(iter(rep.sessions.values()))
    assert s.history == []  # a status read is not a history read: nothing to compare


# -- openai: ids in the body; session-scoped HistoryResult -------------------------------


def chunks(text: str) -> list:
    return [
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        "[DONE]",
    ]


def test_openai_reads_session_and_run_ids_from_the_body():
    calls = [
        Call(
            "POST",
            "/v1/chat/completions",
            {"sessionId": "s-body", "runId": "turn-1", "messages": [{"role": "user", "content": "hi"}], "stream": True},
            sse=chunks("Hello"),
        ),
    ]
    exchanges, _ = build(calls, "openai")
    assert (exchanges[0].session_id, exchanges[0].run_id, exchanges[0].run_id_source) == ("s-body", "turn-1", "body")


def test_openai_same_text_in_two_runs_is_not_one_message():
    live = []
    for t in (0.0, 1.0):
        live.append(Call("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "q"}], "stream": True},
                         sse=chunks("OK"), t=t, headers={"X-Session-Id": "s1"}))
    exchanges, adapter = build(live, "openai")
    from chatkit_trace.pipeline import replay

    rep = replay(exchanges, adapter)
    snap = rep.sessions["s1"].core.snapshot
    msgs = [m.to_json() for m in snap.messages]
    history = {"messages": msgs, "hasMore": False}
    # history gives run-2's answer run-1's id and vice versa: each run pairs with its own message by position
    a1, a2 = [m for m in history["messages"] if m["role"] == "assistant"]
    a1["id"], a2["id"] = "srv-a", "srv-b"
    calls = live + [Call("GET", "/v1/history?sessionId=s1", json=history, t=5.0)]
    _, findings = run(calls, "openai")
    ck202 = [f for f in findings if f.code == "CK202"]
    assert {f.run_id for f in ck202} == {"run-1", "run-2"}
    pairs = {f.run_id: f.detail["pairs"] for f in ck202}
    assert pairs["run-1"][0]["history"] == "srv-a" and pairs["run-2"][0]["history"] == "srv-b"


# -- myproto: terminal-sealed / lost output that history holds ---------------------------


def test_myproto_lost_output_after_terminal_is_one_finding():
    sse = [
        {"type": "started", "run": "r1"},
        {"type": "text", "text": "Hello"},
        {"type": "done"},
        {"type": "text", "text": " world"},
    ]
    calls = [
        Call("POST", "/api/sessions/s1/runs", {"runId": "r1", "text": "hi"}, sse=sse),
        Call("GET", "/api/sessions/s1/runs", json={"runs": [{"id": "r1", "status": "completed", "input": "hi", "created_at": 1,
              "frames": [{"id": f"e{k}", "event": e} for k, e in enumerate(sse)]}]}, t=5.0),
    ]
    _, findings = run(calls, "myproto")
    assert codes(findings) == ["CK101"]
    [f] = [f for f in findings if f.code == "CK101"]
    assert "History read 1 holds what the UI dropped" in f.message


# -- protocol limits and stops on the real wire (issue f1) ----------------------------------


def corpus_comps(name: str):
    from chatkit_trace.pipeline import replay

    from .corpus import CORPUS, load_case

    _, exchanges, adapter = load_case(CORPUS / f"{name}.json")
    rep = replay(exchanges, adapter)
    return comparisons(Context(rep, {e.index: e for e in exchanges}, adapter))


def test_hermes_turns_pair_with_their_runs_by_position_without_id_differences():
    cs = corpus_comps("CK207-hermes")
    # each run once: the second read does not compare run 1 again (the UI shows read 1's copy by then)
    assert [(c.run_id, c.read) for c in cs] == [("run_aaaa1111", 1), ("run_bbbb2222", 3)]
    for c in cs:
        assert c.ids_limited and c.diffs == [] and c.renamed == [] and c.limited == []
        assert [p.how for p in c.pairs] == ["position", "position"]
        assert c.verdict.startswith("isomorphic: same types and content (history cannot carry the live ids: CK207)")
    # the session's earlier turn (rows 1, 2) belongs to no recorded run
    assert [m.id for m in cs[0].seen] == ["user:3", "assistant:4"]
    assert [m.id for m in cs[1].seen] == ["user:5", "assistant:6"]


def test_hermes_content_differences_stay_ck201_per_run():
    cs = corpus_comps("CK201-hermes-content")
    by_run = {c.run_id: [d["what"] for d in c.diffs] for c in cs}
    assert by_run == {"run_aaaa1111": ["content"], "run_bbbb2222": ["missing in history"]}
    assert all(c.renamed == [] for c in cs)


def hermes_runs_tool_calls() -> list[Call]:
    sid, rid = "api_1796026523_1ca95617", "run_0123456789abcdef0123456789abcdef"
    ev = lambda name, **kw: {"event": name, "run_id": rid, "timestamp": 1796026523.5, **kw}  # noqa: E731
    result = '{"todos": [{"id": "1", "content": "check", "status": "pending"}]}'
    rows = [
        {"id": 1, "role": "user", "content": "Plan. scenario:tool"},
        {"id": 2, "role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "todo", "arguments": '{"todos": []}'}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}]},
        {"id": 3, "role": "tool", "content": result, "tool_call_id": "call_1", "tool_name": "todo"},
        {"id": 4, "role": "tool", "content": '{"content": "", "error": "File not found: x"}', "tool_call_id": "call_2", "tool_name": "read_file"},
        {"id": 5, "role": "assistant", "content": "Done."},
    ]
    return [
        Call("POST", "/v1/runs", {"input": "Plan. scenario:tool", "session_id": sid}, json={"run_id": rid, "status": "started"}, status=202),
        Call("GET", f"/v1/runs/{rid}/events", sse=[
            ev("tool.started", tool="todo", preview="planning"), ev("tool.started", tool="read_file", preview="x"),
            ev("tool.completed", tool="todo", duration=0.0, error=False),
            ev("tool.completed", tool="read_file", duration=0.0, error=True),
            ev("message.delta", delta="\n\nDone."), ev("run.completed", output="Done."),
        ], t=0.1),
        Call("GET", f"/api/sessions/{sid}/messages", json={"object": "list", "session_id": sid, "data": rows}, t=1.0),
    ]


def test_hermes_tool_fields_the_live_stream_cannot_carry_are_limits_not_differences():
    [c] = comps(hermes_runs_tool_calls(), "hermes")
    assert c.diffs == [] and c.renamed == []
    got = {(d["part"], tuple(d["fields"]), tuple(x["code"] for x in d["limit"])) for d in c.limited}
    assert got == {("tool:0", ("args", "result"), ("CK307", "CK306")), ("tool:1", ("args", "result"), ("CK307", "CK306"))}
    # the failed call is failed on both sides (history by Hermes' own failure rule)
    [answer] = [m for m in c.seen if m.role == "assistant"]
    assert [p.status for p in answer.parts if p.type == "tool-call"] == ["completed", "failed"]
    _, findings = run(hermes_runs_tool_calls(), "hermes")
    assert codes(findings) == ["CK207", "CK306", "CK307"]


def test_hermes_history_that_changed_a_tool_status_is_still_ck201():
    calls = hermes_runs_tool_calls()
    calls[-1].json["data"][3]["content"] = '{"content": "ok"}'  # history says the read succeeded
    [c] = comps(calls, "hermes")
    [d] = c.diffs
    assert d["what"] == "content" and d["fields"] == ["error", "status"] and d["part"] == "tool:1"


def test_adk_stop_by_closing_the_stream_is_no_broken_connection():
    """stock ADK: the client closes /run_sse (the UI's stop); history confirms it
    (INVOCATION_ABORTED) and lacks the partial answer the UI showed."""
    rep, findings = run(capture_calls("slow", "adk"), "adk")
    assert codes(findings) == ["CK201"]
    [f] = findings_of(findings, "CK201")
    assert "is missing in history: a refresh removes it" in f.message
    [s] = rep.sessions.values()
    [view] = s.core.snapshot.runs
    assert view.status == "interrupted" and view.abort is not None and view.abort.remote == "confirmed"
    [ex] = [e for e in rep.exchanges.values() if e.exchange.capability == "run"]
    assert ex.stopped_by_close


def test_openai_stop_by_closing_the_stream_is_one_info_for_the_route():
    rep, findings = run(capture_calls("slow_stop", "openai"), "openai")
    assert codes(findings) == ["CK115"]
    [f] = findings_of(findings, "CK115")
    assert f.severity == "info" and (f.session_id, f.run_id) == (None, None)
    assert "POST /v1/chat/completions" in f.message and "a limit of the protocol" in f.message
    [s] = rep.sessions.values()
    [view] = s.core.snapshot.runs
    assert view.status == "running" and view.abort.remote == "accepted" and view.abort.output_sealed


def test_a_client_leaving_a_stream_with_a_stop_endpoint_is_still_ck103():
    """Hermes /v1/runs has POST …/stop: leaving its events stream is no stop."""
    post, events = capture_calls("runs_stop", "hermes")[:2]  # no stop request, no status read
    assert events.path.endswith("/events")
    events.end = "client-gone"
    events.raw = b"".join(block + b"\n\n" for block in events.raw.split(b"\n\n")[:3])
    calls = [post, events]
    _, findings = run(calls, "hermes")
    assert "CK103" in codes(findings) and "CK115" not in codes(findings)


@pytest.mark.parametrize("name", ["responses_tool"])
def test_a_response_that_asks_the_client_for_tool_results_is_no_missing_conclusion(name):
    rep, findings = run(capture_calls(name, "openai"), "openai")
    assert codes(findings) == ["CK114"]
    [s] = rep.sessions.values()
    [view] = s.core.snapshot.runs
    assert view.status == "running" and view.phase == "awaiting-input"


def test_the_tool_loop_continued_is_clean():
    _, findings = run(capture_calls("tool", "openai"), "openai")
    assert codes(findings) == []


def findings_of(findings, code):
    return [f for f in findings if f.code == code]


def test_diff_viewer_and_report_mark_only_what_the_comparison_counts():
    """ids history cannot carry (CK207) and tool fields the live stream could
    not carry (CK306/CK307) are not marked as differences; a real one is."""
    from chatkit_trace.cli.diff import _rows
    from chatkit_trace.views.diff import message_cells

    def marked(c):
        cells = [t for p in c.pairs for t in (message_cells(p.live, p.history, "-", c) + message_cells(p.history, p.live, "-", c, live=False))]
        return any(d for _, _, d in _rows(c, None)), any(tone == "error" for _, tone in cells)

    for c in corpus_comps("CK207-hermes") + comps(hermes_runs_tool_calls(), "hermes"):
        assert marked(c) == (False, False), c.run_id
    calls = hermes_runs_tool_calls()
    calls[-1].json["data"][-1]["content"] = "Not done."
    [c] = comps(calls, "hermes")
    assert marked(c) == (True, True)
