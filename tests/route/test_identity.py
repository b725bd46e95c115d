"""Identity: ids from path, query, header, body, response and events; derived ids
that are deterministic; inherited sessions; A2A turns."""

from __future__ import annotations

import json

import pytest

from chatkit_trace.route import (
    IdentityTracker,
    Match,
    apply_match,
    body_is_output,
    load_profile,
    parse_profile,
    resolve_from_event,
    resolve_from_frames,
    resolve_from_response,
)
from chatkit_trace.route.identity import compile_pointer, lookup, scalar_id
from chatkit_trace.trace import Exchange, frames_from_body

from ..capture._util import request, response_body


def profile(*routes):
    return parse_profile({"name": "t", "protocol": "myproto", "routes": list(routes)})


# -- pointers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, doc, value",
    [
        ("a.b", {"a": {"b": "x"}}, "x"),
        ("/a/b", {"a": {"b": "x"}}, "x"),
        ("/a~1b/c~0d", {"a/b": {"c~d": 1}}, 1),
        ("items.-1.id", {"items": [{"id": 1}, {"id": 2}]}, 2),
        ("items.0.id", {"items": []}, None),
        ("items.x", {"items": [1]}, None),
        ("a.b", {"a": "str"}, None),
        ("", {"a": 1}, {"a": 1}),
        ("/0/invocationId", [{"invocationId": "e-1"}], "e-1"),
    ],
)
def test_pointers_and_dotted_paths(spec, doc, value):
    assert lookup(doc, compile_pointer(spec)) == value


@pytest.mark.parametrize("value, out", [("a", "a"), ("", None), (7, "7"), (7.0, "7"), (7.5, None), (True, None),
                                         (None, None), ({"a": 1}, None), ([1], None)])
def test_only_strings_and_integers_are_ids(value, out):
    assert scalar_id(value) == out


# -- request-side sources -----------------------------------------------------------------


def test_ids_from_path_query_header_body_and_constant():
    p = profile({
        "capability": "regenerate", "method": "POST", "path": "/s/{session}/regen",
        "run": ["header:X-Run", "body:newRun"], "target": "query:target", "cursor": {"from": "constant", "value": "start"},
        "session": "path:session",
    })
    m = p.match("POST", "/s/abc/regen?target=r1", [("x-run", "r2")], b'{"newRun": "ignored"}')
    assert (m.session_id, m.session_id_source, m.run_id, m.run_id_source, m.target_run_id, m.cursor) == (
        "abc", "path", "r2", "header", "r1", "start")
    m = p.match("POST", "/s/abc/regen?target=r1", [], b'{"newRun": "r3"}')
    assert (m.run_id, m.run_id_source) == ("r3", "body")
    m = p.match("POST", "/s/abc/regen", [], b"{}")
    assert (m.run_id, m.target_run_id, m.pending) == (None, None, frozenset())


def test_first_source_that_yields_wins_and_empty_values_do_not_count():
    p = profile({"capability": "resume", "path": "/e", "run": "query:run", "cursor": ["query:after", "header:Last-Event-ID"]})
    assert p.match("GET", "/e?run=r&after=", [("Last-Event-ID", "h1")], None).cursor == "h1"
    assert p.match("GET", "/e?run=r&after=q1", [("Last-Event-ID", "h1")], None).cursor == "q1"
    assert p.match("GET", "/e?run=r", [], None).cursor is None


# -- response and events -------------------------------------------------------------------


def test_run_id_from_a_json_response_hermes_202():
    p = load_profile("hermes")
    m = p.match("POST", "/v1/runs", [], b'{"input": "hi"}')
    assert m.run_id is None and m.pending_response == frozenset({"run"})
    same = resolve_from_response(m, 202, [("Content-Type", "text/plain")], b'{"run_id": "run_1"}')
    assert same.run_id is None and not same.pending  # not JSON: nothing, and nothing pending any more
    m = resolve_from_response(m, 202, [("Content-Type", "application/json")], b'{"run_id": "run_1", "status": "started"}')
    assert (m.run_id, m.run_id_source, m.pending) == ("run_1", "response", frozenset())
    assert resolve_from_response(m, 200, [], b"{}") is m  # nothing pending: the same object


def test_ids_from_a_response_header_and_from_a_response_without_content_type():
    p = profile({"capability": "run", "path": "/chat", "session": {"from": "response", "name": "X-Session-Id"},
                 "run": "response:/data/id"})
    m = p.match("POST", "/chat", [], b"{}")
    m = resolve_from_response(m, 200, {"x-session-id": "s-9"}, b'{"data": {"id": 5}}')
    assert (m.session_id, m.session_id_source, m.run_id, m.run_id_source) == ("s-9", "response", "5", "response")


def test_adk_invocation_id_from_the_first_event():
    p = load_profile("adk")
    method, url, headers, body = request("adk-01-text-tool.request.txt")
    m = p.match(method, url, headers, body)
    _, sse = response_body("adk-01-text-tool.sse")
    frames = frames_from_body(sse, 0)
    m = resolve_from_frames(m, frames)
    assert (m.run_id, m.run_id_source, m.pending) == ("e-2e97c261-c806-4db9-a7b0-648d261fb426", "events", frozenset())


@pytest.mark.parametrize("version, context, task", [
    ("v03", "d5113847-b39d-4364-9c5c-a9fd5cb63aa6", "488976ac-3408-4142-8b6e-29e4040650cb"),
    ("v10", "5592bc07-0551-48a4-8a0b-a7cd60a7de98", "e4ec92d0-1e9d-4cee-94eb-036730fdb0e3"),
])
def test_a2a_context_and_task_from_the_events_of_a_first_message(version, context, task):
    p = load_profile("a2a")
    method, url, headers, body = request(f"a2a-{version}-input.request.txt")
    m = p.match(method, url, headers, body)
    assert m.session_id is None and m.run_id is None and m.pending_events == frozenset({"session", "run"})
    _, sse = response_body(f"a2a-{version}-input.sse")
    m = resolve_from_frames(m, frames_from_body(sse, 3))
    assert (m.session_id, m.session_id_source, m.run_id, m.run_id_source) == (context, "events", task, "events")


def test_a2a_blocking_send_ids_from_the_reply_and_cancel_session_from_the_reply():
    p = load_profile("a2a")
    method, url, headers, body = request("a2a-v10-context.send.request.txt")
    m = p.match(method, url, headers, body)
    reply = {"jsonrpc": "2.0", "id": "req-ctx-1", "result": {"task": {"id": "t-1", "contextId": "c-1", "status": {}}}}
    m = resolve_from_response(m, 200, [("content-type", "application/json")], json.dumps(reply).encode())
    assert (m.session_id, m.run_id) == ("c-1", "t-1")
    method, url, headers, body = request("a2a-v10-slow-cancel.cancel.request.txt")
    m = p.match(method, url, headers, body)
    _, reply = response_body("a2a-v10-slow-cancel.cancel.json")
    m = resolve_from_response(m, 200, [("content-type", "application/json")], reply)
    assert m.session_id == json.loads(reply)["result"]["contextId"] and m.run_id == "3b32e182-a430-4214-878f-0e9b60a41b4a"


def test_resolve_from_event_ignores_events_without_the_ids():
    m = load_profile("adk").match("POST", "/run_sse", [], b'{"sessionId": "s"}')
    assert resolve_from_event(m, {"error": "x"}) is m
    assert resolve_from_event(m, "DONE") is m
    assert resolve_from_event(m, {"invocationId": ""}) is m
    assert resolve_from_event(m, {"invocationId": "e-1"}).run_id == "e-1"


# -- the tracker ------------------------------------------------------------------------------


def openai_calls():
    p = load_profile("openai")
    user = {"messages": [{"role": "user", "content": "hi"}]}
    tool = {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c", "content": "1"}]}
    bodies = [user, tool, user, {"messages": [{"role": "user", "content": "x"}]}]
    hdrs = [[], [], [], [("X-Session-Id", "other")]]
    return [p.match("POST", "/v1/chat/completions", h, json.dumps(b).encode()) for b, h in zip(bodies, hdrs, strict=True)]


def test_derived_runs_count_per_session_and_the_tool_loop_continues_the_run():
    t = IdentityTracker()
    ids = [t.assign(m, i) for i, m in enumerate(openai_calls())]
    assert [(m.session_id, m.run_id, m.run_id_source) for m in ids] == [
        (None, "run-1", "derived"), (None, "run-1", "derived"), (None, "run-2", "derived"), ("other", "run-1", "derived")]


def test_derived_ids_are_deterministic():
    runs = []
    for _ in range(2):
        t = IdentityTracker()
        runs.append([t.assign(m, i) for i, m in enumerate(openai_calls())])
    assert runs[0] == runs[1]
    # a continuation with no run before it starts one
    m = IdentityTracker().assign(openai_calls()[1], 0)
    assert m.run_id == "run-1"


def test_a_run_route_without_any_id_gets_a_derived_run_and_other_capabilities_do_not():
    p = profile({"capability": "run", "path": "/run"}, {"capability": "abort", "path": "/stop"})
    t = IdentityTracker()
    assert t.assign(p.match("POST", "/run", [], None), 0).run_id == "run-1"
    stop = t.assign(p.match("POST", "/stop", [], None), 1)
    assert stop.run_id is None and stop.run_id_source is None


def test_hermes_runs_inherit_the_session_they_started_in_or_are_their_own_session():
    p = load_profile("hermes")
    t = IdentityTracker()
    post = p.match("POST", "/v1/runs", [], b'{"input": "hi", "session_id": "sess-1"}')
    post = t.assign(resolve_from_response(post, 202, [("content-type", "application/json")], b'{"run_id": "run_a"}'), 0)
    assert (post.session_id, post.run_id) == ("sess-1", "run_a")
    events = t.assign(p.match("GET", "/v1/runs/run_a/events", [], None), 1)
    assert (events.session_id, events.session_id_source, events.run_id) == ("sess-1", "inherited", "run_a")
    stop = t.assign(p.match("POST", "/v1/runs/run_a/stop", [], None), 2)
    assert (stop.session_id, stop.run_id) == ("sess-1", "run_a")
    # no session_id: the run is its own session, and so are its other exchanges
    post = p.match("POST", "/v1/runs", [], b'{"input": "hi"}')
    post = t.assign(resolve_from_response(post, 202, [("content-type", "application/json")], b'{"run_id": "run_b"}'), 3)
    assert (post.session_id, post.session_id_source) == ("run_b", "derived")
    events = t.assign(p.match("GET", "/v1/runs/run_b/events", [], None), 4)
    assert events.session_id == "run_b"
    # a stream seen without its POST (recording started late): its own session too
    events = t.assign(p.match("GET", "/v1/runs/run_c/events", [], None), 5)
    assert (events.session_id, events.session_id_source) == ("run_c", "derived")
    status = p.match("GET", "/v1/runs/run_d", [], None)
    status = t.assign(resolve_from_response(status, 200, [], b'{"run_id": "run_d", "session_id": "sess-9"}'), 6)
    assert (status.session_id, status.session_id_source) == ("sess-9", "response")


@pytest.mark.parametrize("version", ["v03", "v10"])
def test_a2a_follow_up_on_a_task_is_a_new_turn_and_task_calls_mean_the_latest_turn(version):
    p = load_profile("a2a")
    t = IdentityTracker()
    method, url, headers, body = request(f"a2a-{version}-input.request.txt")
    _, sse = response_body(f"a2a-{version}-input.sse")
    first = t.assign(resolve_from_frames(p.match(method, url, headers, body), frames_from_body(sse, 0)), 0)
    task, context = first.run_id, first.session_id
    method, url, headers, body = request(f"a2a-{version}-input.turn2.request.txt")
    second = t.assign(p.match(method, url, headers, body), 1)
    assert (second.session_id, second.run_id, second.run_id_source) == (context, f"{task}:turn2", "body")
    cancel = {"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel" if version == "v03" else "CancelTask", "params": {"id": task}}
    m = t.assign(p.match("POST", "/", [], json.dumps(cancel).encode()), 2)
    assert (m.capability, m.run_id, m.session_id, m.session_id_source) == ("abort", f"{task}:turn2", context, "inherited")
    third = t.assign(p.match(method, url, headers, body), 3)
    assert third.run_id == f"{task}:turn3"


def test_a2a_first_message_whose_call_failed_gets_a_session_of_its_own():
    p = load_profile("a2a")
    t = IdentityTracker()
    method, url, headers, body = request("a2a-v10-text.request.txt")
    m = t.assign(p.match(method, url, headers, body), 4)  # no events: the call failed before any
    assert (m.session_id, m.session_id_source, m.run_id, m.run_id_source) == ("x4", "derived", "run-1", "derived")


def test_apply_match_writes_the_identity_onto_the_exchange():
    ex = Exchange(3, "GET", "/sessions/s/runs/r/events?after=e1")
    m = IdentityTracker().assign(load_profile("myproto").match(ex.method, ex.url, [], None), ex.index)
    apply_match(ex, m)
    assert (ex.capability, ex.session_id, ex.run_id, ex.run_id_source, ex.cursor) == ("resume", "s", "r", "path", "e1")
    assert ex.notes["identity"] == {"route": 1, "route_name": "resume", "session_source": "path"}
    apply_match(ex, None)
    assert ex.capability is None


def test_unresolved_ids_are_noted():
    ex = Exchange(0, "POST", "/run_sse")
    m = load_profile("adk").match(ex.method, ex.url, [], b'{"sessionId": "s"}')
    apply_match(ex, m)  # before assign: the events never came
    assert ex.notes["identity"]["unresolved"] == ["run"]


def test_body_is_output():
    adk, a2a, hermes = load_profile("adk"), load_profile("a2a"), load_profile("hermes")
    run = adk.match("POST", "/run", [], b'{"sessionId": "s"}')
    assert body_is_output(run, 200, [{"id": "e"}]) and not body_is_output(run, 500, {"detail": "x"})
    ack = hermes.match("POST", "/v1/runs", [], b"{}")
    assert not body_is_output(ack, 202, {"run_id": "r"})
    stream = a2a.match("POST", "/", [], b'{"method": "SubscribeToTask", "params": {"id": "t"}}')
    assert body_is_output(stream, 200, {"error": {"code": -32004}}) and not body_is_output(stream, 200, {"result": {}})
    hist = adk.match("GET", "/apps/a/users/u/sessions/s", [], None)
    assert not body_is_output(hist, 200, {"events": []}) and not body_is_output(None, 200, {"error": 1})


def test_match_is_frozen_and_serialisable():
    m = load_profile("myproto").match("GET", "/sessions/s/runs", [], None)
    with pytest.raises(AttributeError):
        m.run_id = "x"  # type: ignore[misc]
    assert m.to_json()["capability"] == "history"
    assert isinstance(m, Match) and m.get("session") == "s"


def test_output_frames_one_per_item_with_exact_bytes_or_one_for_the_body():
    from chatkit_trace.route import output_frames

    adk = load_profile("adk")
    run = adk.match("POST", "/run", [], b'{"sessionId": "s"}')
    body = '[ {"id": "a", "text": "caf\u00e9"} ,\n {"id": "b", "n": [1, 2]}]'.encode()
    frames = output_frames(run, 200, body, 7, 1.5)
    assert [(f.exchange_index, f.index, f.transport, f.at) for f in frames] == [(7, 0, "body", 1.5), (7, 1, "body", 1.5)]
    assert [body[f.start:f.end] for f in frames] == [b'{"id": "a", "text": "caf\xc3\xa9"}', b'{"id": "b", "n": [1, 2]}']
    assert [json.loads(f.text)["id"] for f in frames] == ["a", "b"]
    assert output_frames(run, 200, b"[]", 0, 0.0) == []
    assert len(output_frames(run, 200, b'{"not": "a list"}', 0, 0.0)) == 1
    assert output_frames(run, 500, body, 0, 0.0) == [] and output_frames(run, 200, b"[1,", 0, 0.0) == []
    send = load_profile("a2a").match("POST", "/", [], b'{"method": "SendMessage", "params": {"message": {}}}')
    (one,) = output_frames(send, 200, b'{"result": {"task": {}}}', 0, 0.0, first_index=3)
    assert one.index == 3 and one.text == '{"result": {"task": {}}}'
    assert output_frames(load_profile("hermes").match("POST", "/v1/runs", [], b"{}"), 202, b'{"run_id": "r"}', 0, 0.0) == []


def test_a_derived_run_on_a_stop_route_is_the_sessions_latest_run():
    p = profile({"capability": "run", "path": "/s/{s}/chat", "session": "path:s"},
                {"capability": "abort", "path": "/s/{s}/stop", "session": "path:s", "run": "derived"})
    t = IdentityTracker()
    assert t.assign(p.match("POST", "/s/a/stop", [], None), 0).run_id is None  # nothing to stop yet
    assert t.assign(p.match("POST", "/s/a/chat", [], None), 1).run_id == "run-1"
    assert t.assign(p.match("POST", "/s/a/chat", [], None), 2).run_id == "run-2"
    stop = t.assign(p.match("POST", "/s/a/stop", [], None), 3)
    assert (stop.run_id, stop.run_id_source) == ("run-2", "derived")
    assert t.assign(p.match("POST", "/s/b/stop", [], None), 4).run_id is None
