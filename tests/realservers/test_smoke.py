"""Smoke tests of the real-server harness: every scenario of every peer
produces the real stream with the shape the protocol notes describe.

These check the harness and the servers, not chatkit-trace's adapters (those
are tested on top of the same helpers).  Run with:

    .ci/peers.sh && CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers -m realserver
"""

from __future__ import annotations

import json

import pytest

from .harness import A2A_VERSIONS, Exchange, RawResponse

pytestmark = pytest.mark.realserver


def _sse(resp: RawResponse) -> list[dict]:
    assert resp.status == 200, resp.summary() + "\n" + resp.body[:500].decode("utf-8", "replace")
    assert resp.is_sse, resp.summary()
    return resp.sse_json()


def _data_lines(resp: RawResponse) -> list[str]:
    return [ev.data for ev in resp.sse()]


# ---------------------------------------------------------------------------
# Google ADK
# ---------------------------------------------------------------------------
def _adk_parts(frames: list[dict], key: str) -> list[dict]:
    return [p[key] for f in frames for p in (f.get("content") or {}).get("parts") or [] if key in p]


def test_adk_text_tool(adk_peer):
    ex = adk_peer.scenario("text_tool")
    assert ex["create"].status == 200
    frames = _sse(ex["stream"])
    assert ex["stream"].ended_by == "server"
    # no event:/id: lines, plain data frames
    assert all(ev.event is None and ev.id is None for ev in ex["stream"].sse())
    assert any(f.get("partial") is True for f in frames)
    calls = _adk_parts(frames, "functionCall")
    assert calls and calls[0]["name"] == "get_weather"
    responses = _adk_parts(frames, "functionResponse")
    assert responses and responses[0]["id"] == calls[0]["id"]
    parts = [p for f in frames for p in (f.get("content") or {}).get("parts") or []]
    assert any(p.get("thought") for p in parts)
    final = frames[-1]
    assert final["partial"] is False
    assert final["content"]["parts"][0]["text"] == "It is sunny in Paris, 22 degrees C."
    assert len({f["invocationId"] for f in frames}) == 1
    # partials share the id of their aggregate
    agg_ids = {f["id"] for f in frames if f.get("partial") is False}
    assert {f["id"] for f in frames if f.get("partial") is True} <= agg_ids
    # history: user event first, then exactly the non-partial frames
    hist = ex["history"].json()
    events = hist["events"]
    assert events[0]["author"] == "user"
    complete = [f["id"] for f in frames if f.get("partial") is not True]
    assert [e["id"] for e in events[1:]] == complete


def test_adk_nostream(adk_peer):
    ex = adk_peer.scenario("nostream")
    frames = _sse(ex["stream"])
    assert all("partial" not in f for f in frames)
    assert _adk_parts(frames, "functionCall")
    assert frames[-1]["content"]["parts"][0]["text"] == "It is sunny in Paris, 22 degrees C."


def test_adk_error_code(adk_peer):
    ex = adk_peer.scenario("error")
    frames = _sse(ex["stream"])
    final = frames[-1]
    assert final["partial"] is False
    assert final["errorCode"] == "SAFETY"
    assert final["errorMessage"]
    assert ex["history"].json()["events"][-1]["errorCode"] == "SAFETY"


def test_adk_fail(adk_peer):
    ex = adk_peer.scenario("fail")
    frames = _sse(ex["stream"])
    assert [f["content"]["parts"][0]["text"] for f in frames if f.get("partial")] == [
        "Starting to ", "answer..."]
    err_events = [f for f in frames if f.get("errorCode")]
    assert err_events and err_events[0]["errorCode"] == "UNAVAILABLE"
    last = frames[-1]
    assert "error" in last and "id" not in last and "invocationId" not in last
    assert last["error_details"]["error_type"] == "ServerError"
    hist = ex["history"].json()["events"]
    assert [e.get("errorCode") for e in hist] == [None, "UNAVAILABLE"]


def test_adk_slow_cancelled_by_client(adk_peer):
    ex = adk_peer.scenario("slow")
    stream = ex["stream"]
    assert stream.ended_by == "client"
    frames = _sse(stream)
    assert len(frames) >= adk_peer.slow_events
    assert all(f.get("partial") is True for f in frames)
    events = ex["history"].json()["events"]
    assert events[-1]["errorCode"] == "INVOCATION_ABORTED"
    assert events[-1]["invocationId"] == ex.ids["invocation_id"]


@pytest.mark.parametrize("version", A2A_VERSIONS)
def test_adk_a2a_bridge(adk_bridge_peer, version):
    resp = adk_bridge_peer.a2a_bridge_stream("What is the weather in Paris?", version=version)
    results = [f["result"] for f in _sse(resp)]
    kinds = [_unwrap(r, version)[0] for r in results]
    assert kinds[0] == "task"
    statuses = [o for k, o in (_unwrap(r, version) for r in results) if k == "status-update"]
    assert _state(statuses[-1]) == "completed"
    # ADK metadata on the events; function calls as data parts marked adk_type
    assert "adk_invocation_id" in resp.body.decode()
    assert '"adk_type"' in resp.body.decode() and "function_call" in resp.body.decode()
    task_id = _unwrap(results[0], version)[1]["id"]
    hist = adk_bridge_peer.a2a_bridge_get_task(task_id, version=version).json()["result"]
    assert _state(hist) == "completed"


# ---------------------------------------------------------------------------
# A2A
# ---------------------------------------------------------------------------
def _a2a_results(resp: RawResponse) -> list[dict]:
    return [f["result"] for f in _sse(resp) if "result" in f]


def _unwrap(result: dict, version: str) -> tuple[str, dict]:
    """(kind, object) for one stream result in either version."""
    if version == "1.0":
        assert "kind" not in result
        (kind, obj), = result.items()
        return {"task": "task", "statusUpdate": "status-update",
                "artifactUpdate": "artifact-update", "message": "message"}[kind], obj
    return result["kind"], result


def _state(obj: dict) -> str:
    s = obj["status"]["state"]
    return s.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _statuses(resp: RawResponse, version: str) -> list[dict]:
    return [o for k, o in (_unwrap(r, version) for r in _a2a_results(resp)) if k == "status-update"]


def _task_result(resp: RawResponse) -> dict:
    body = resp.json()
    assert "error" not in body, body
    return body["result"]


@pytest.fixture(params=A2A_VERSIONS, ids=lambda v: "v" + v.replace(".", ""))
def a2a_version(request) -> str:
    return request.param


def test_a2a_agent_card(a2a_peer):
    card = a2a_peer.agent_card().json()
    versions = {i["protocolVersion"] for i in card["supportedInterfaces"]}
    assert versions == {"1.0", "0.3"}
    assert card["capabilities"]["streaming"] is True


def test_a2a_text(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("text", version=a2a_version)
    results = _a2a_results(ex["stream"])
    kinds = [_unwrap(r, a2a_version)[0] for r in results]
    assert kinds[0] == "task"
    assert kinds.count("artifact-update") == 3
    statuses = _statuses(ex["stream"], a2a_version)
    assert _state(statuses[-1]) == "completed"
    raw = ex["stream"].body.decode()
    if a2a_version == "1.0":
        assert '"final"' not in raw
        assert ex["stream"].request_headers.get("A2A-Version") == "1.0"
    else:
        assert statuses[-1]["final"] is True
        assert all(s["final"] is False for s in statuses[:-1])
        assert "A2A-Version" not in ex["stream"].request_headers
    hist = _task_result(ex["history"])
    assert _state(hist) == "completed"
    assert len(hist["artifacts"][0]["parts"]) == 3


def test_a2a_tool(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("tool", version=a2a_version)
    statuses = _statuses(ex["stream"], a2a_version)
    data_parts = [p for s in statuses for p in (s["status"].get("message") or {}).get("parts", [])
                  if "data" in p]
    assert data_parts and data_parts[0]["data"]["toolCall"]["name"] == "get_weather"
    arts = [o for k, o in (_unwrap(r, a2a_version) for r in _a2a_results(ex["stream"]))
            if k == "artifact-update"]
    assert arts[0]["artifact"]["artifactId"] == "tool-result-1"
    # numbers pass through protobuf Struct: 22 -> 22.0
    assert arts[0]["artifact"]["parts"][0]["data"]["temperature_c"] == 22.0
    assert _state(statuses[-1]) == "completed"


def test_a2a_fail(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("fail", version=a2a_version)
    last = _statuses(ex["stream"], a2a_version)[-1]
    assert _state(last) == "failed"
    assert "scripted failure" in last["status"]["message"]["parts"][0]["text"]
    assert _state(_task_result(ex["history"])) == "failed"


def test_a2a_crash(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("crash", version=a2a_version)
    events = ex["stream"].sse()
    last = json.loads(events[-1].data)
    assert last["error"]["code"] == -32603
    assert events[-1].event == ("error" if a2a_version == "1.0" else None)
    # the live stream never shows 'failed', the stored task does
    assert all(_state(s) != "failed" for s in _statuses(ex["stream"], a2a_version))
    assert _state(_task_result(ex["history"])) == "failed"


def test_a2a_input_required(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("input", version=a2a_version)
    last = _statuses(ex["stream"], a2a_version)[-1]
    assert _state(last) == "input-required"
    if a2a_version == "0.3":
        assert last["final"] is False
    assert _state(_task_result(ex["history_turn1"])) == "input-required"
    kinds2 = [_unwrap(r, a2a_version)[0] for r in _a2a_results(ex["stream_turn2"])]
    assert "task" not in kinds2  # follow-up: no Task frame
    assert _state(_statuses(ex["stream_turn2"], a2a_version)[-1]) == "completed"
    assert _state(_task_result(ex["history"])) == "completed"


def test_a2a_slow_cancel_resubscribe(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("slow_cancel", version=a2a_version)
    main = ex["stream"]
    assert main.ended_by == "server"
    assert _state(_statuses(main, a2a_version)[-1]) == "canceled"
    resub = _a2a_results(ex["resubscribe"])
    kind, snap = _unwrap(resub[0], a2a_version)
    assert kind == "task" and snap["id"] == ex.ids["task_id"]  # snapshot first
    assert _state(_statuses(ex["resubscribe"], a2a_version)[-1]) == "canceled"
    assert _state(_task_result(ex["cancel"])) == "canceled"
    assert _state(_task_result(ex["history"])) == "canceled"


def test_a2a_same_context(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("context", version=a2a_version)
    cid = ex.ids["context_id"]
    first = _unwrap(_a2a_results(ex["stream2"])[0], a2a_version)[1]
    assert first["contextId"] == cid and first["id"] != ex.ids["task_id"]
    if a2a_version == "1.0":
        tasks = _task_result(ex["list"])["tasks"]
        assert {t["contextId"] for t in tasks} == {cid} and len(tasks) == 2
    else:
        assert "list" not in ex


def test_a2a_errors(a2a_peer, a2a_version):
    ex = a2a_peer.scenario("errors", version=a2a_version)
    assert ex["get_unknown"].json()["error"]["code"] == -32001
    assert ex["cancel_terminal"].json()["error"]["code"] == -32002
    assert ex["unknown_method"].json()["error"]["code"] == -32601
    resub = ex["resubscribe_terminal"]
    if a2a_version == "1.0":
        assert resub.content_type == "application/json"
        assert resub.json()["error"]["code"] == -32004
    else:
        assert resub.is_sse
        assert resub.sse_json()[0]["error"]["code"] == -32004


def test_a2a_version_mismatch(a2a_peer):
    # v1.0 method without the header, v0.3 method with it
    r1 = a2a_peer.rpc("GetTask", {"id": "x"}, version="0.3")
    r2 = a2a_peer.rpc("tasks/get", {"id": "x"}, version="1.0")
    assert r1.json()["error"]["code"] == -32009
    assert r2.json()["error"]["code"] == -32603


# ---------------------------------------------------------------------------
# hermes-agent
# ---------------------------------------------------------------------------
def _hermes_events(resp: RawResponse) -> list[dict]:
    frames = _sse(resp)
    assert all(ev.event is None and ev.id is None for ev in resp.sse())
    return frames


def _names(frames: list[dict]) -> list[str]:
    return [f["event"] for f in frames]


def _assert_runs_basics(ex: Exchange) -> list[dict]:
    assert ex["post"].status == 202
    assert ex["post"].json()["run_id"].startswith("run_")
    frames = _hermes_events(ex["events"])
    assert all(f["run_id"] == ex.ids["run_id"] for f in frames)
    assert "run.started" not in _names(frames) and "done" not in _names(frames)
    assert "stream closed" in ex["events"].sse_comments()
    assert ex["events"].ended_by == "server"
    return frames


def test_hermes_runs_text(hermes_peer):
    ex = hermes_peer.scenario("runs_text")
    frames = _assert_runs_basics(ex)
    names = _names(frames)
    assert "message.delta" in names
    assert names[-1] == "run.completed"
    text = "".join(f["delta"] for f in frames if f["event"] == "message.delta")
    assert text == frames[-1]["output"] == "Hello from the fake model."
    status = ex["status"].json()
    assert status["status"] == "completed" and status["output"] == text


def test_hermes_runs_tool(hermes_peer):
    ex = hermes_peer.scenario("runs_tool")
    frames = _assert_runs_basics(ex)
    names = _names(frames)
    started, completed = names.index("tool.started"), names.index("tool.completed")
    assert started < completed < names.index("message.delta")
    assert frames[names.index("tool.started")]["tool"] == "todo"
    first_delta = frames[names.index("message.delta")]["delta"]
    assert first_delta.startswith("\n\n")
    assert names[-1] == "run.completed"
    assert not frames[-1]["output"].startswith("\n")


def test_hermes_runs_reasoning_dropped(hermes_peer):
    ex = hermes_peer.scenario("runs_reasoning")
    frames = _assert_runs_basics(ex)
    text = "".join(f["delta"] for f in frames if f["event"] == "message.delta")
    assert text == "Here is a short answer."  # the model's reasoning_content is dropped
    assert "The user" not in ex["events"].body.decode()


def test_hermes_runs_fail(hermes_peer):
    ex = hermes_peer.scenario("runs_fail")
    frames = _assert_runs_basics(ex)
    assert _names(frames)[-1] == "run.failed"
    assert "HTTP 400" in frames[-1]["error"]
    assert ex["status"].json()["status"] == "failed"


def test_hermes_runs_midstream_reported_completed(hermes_peer):
    ex = hermes_peer.scenario("runs_midstream")
    frames = _assert_runs_basics(ex)
    assert _names(frames)[-1] == "run.completed"
    assert frames[-1]["usage"]["total_tokens"] == 0
    assert _names(frames).count("message.delta") > 2


def test_hermes_runs_stop(hermes_peer):
    ex = hermes_peer.scenario("runs_stop")
    frames = _assert_runs_basics(ex)
    assert _names(frames)[-1] == "run.cancelled"
    assert "message.delta" in _names(frames)
    assert ex["stop"].json()["status"] == "stopping"
    assert ex["status"].json()["status"] == "cancelled"


def test_hermes_runs_two_subscribers_split_events(hermes_peer):
    ex = hermes_peer.scenario("runs_two_subscribers")
    a, b = ex["events_a"].sse_json(), ex["events_b"].sse_json()
    deltas_a = [f["delta"] for f in a if f["event"] == "message.delta"]
    deltas_b = [f["delta"] for f in b if f["event"] == "message.delta"]
    assert deltas_a and deltas_b  # both got some events ...
    assert not set(deltas_a) & set(deltas_b)  # ... and none twice: a queue, not a broadcast
    terminal = [f for f in a + b if f["event"].startswith("run.")]
    assert [f["event"] for f in terminal] == ["run.cancelled"]  # only one subscriber sees it
    assert ex["status"].json()["status"] == "cancelled"


def test_hermes_runs_with_session_history(hermes_peer):
    ex = hermes_peer.scenario("runs_session")
    frames = _assert_runs_basics(ex)
    assert _names(frames)[-1] == "run.completed"
    assert ex["status"].json()["session_id"] == ex.ids["session_id"]
    rows = ex["history"].json()["data"]
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"] == frames[-1]["output"]


def test_hermes_session_stream_text(hermes_peer):
    ex = hermes_peer.scenario("session_text")
    events = ex["stream"].sse()
    names = [e.event for e in events]
    assert names[0] == "run.started" and names[-1] == "done"
    assert "assistant.delta" in names and "run.completed" in names
    seqs = [json.loads(e.data).get("seq") for e in events]
    assert seqs == list(range(1, len(events) + 1))
    rows = ex["history"].json()["data"]
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert isinstance(rows[0]["id"], int)


def test_hermes_session_stream_tool(hermes_peer):
    ex = hermes_peer.scenario("session_tool")
    names = [e.event for e in ex["stream"].sse()]
    assert "tool.started" in names and "tool.completed" in names and names[-1] == "done"
    roles = [r["role"] for r in ex["history"].json()["data"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_hermes_session_stream_fail_looks_completed(hermes_peer):
    ex = hermes_peer.scenario("session_fail")
    events = ex["stream"].sse()
    names = [e.event for e in events]
    assert names[-2:] == ["run.completed", "done"]
    done = [json.loads(e.data) for e in events if e.event == "assistant.completed"]
    assert done and done[0]["completed"] is True
    assert [r["role"] for r in ex["history"].json()["data"]] == ["user"]


def test_hermes_chat_completions_tool_progress(hermes_peer):
    ex = hermes_peer.scenario("chat_tool")
    events = ex["stream"].sse()
    progress = [json.loads(e.data) for e in events if e.event == "hermes.tool.progress"]
    assert [p["status"] for p in progress] == ["running", "completed"]
    chunks = [json.loads(e.data) for e in events if e.event is None and e.data != "[DONE]"]
    assert all("tool_calls" not in c["choices"][0]["delta"] for c in chunks if c.get("choices"))
    assert len({c["id"] for c in chunks}) == 1
    assert events[-1].data == "[DONE]"
    assert ex["stream"].header("X-Hermes-Session-Id")


def test_hermes_chat_completions_text(hermes_peer):
    ex = hermes_peer.scenario("chat_text")
    chunks = [c for c in _sse(ex["stream"]) if isinstance(c, dict)]
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c.get("choices"))
    assert text == "Hello from the fake model."
    assert _data_lines(ex["stream"])[-1] == "[DONE]"


def test_hermes_chat_completions_fail(hermes_peer):
    ex = hermes_peer.scenario("chat_fail")
    chunks = [c for c in _sse(ex["stream"]) if isinstance(c, dict)]
    failed = [c for c in chunks if any(ch.get("finish_reason") == "error"
                                       for ch in c.get("choices") or [])]
    assert failed and "error" in failed[0] and failed[0]["hermes"]["failed"] is True
    assert _data_lines(ex["stream"])[-1] == "[DONE]"


def test_hermes_responses_fail_looks_completed(hermes_peer):
    ex = hermes_peer.scenario("responses_fail")
    types = [json.loads(e.data)["type"] for e in ex["stream"].sse()]
    assert "response.output_text.delta" in types
    assert types[-1] == "response.completed" and "response.failed" not in types


def test_hermes_responses_tool(hermes_peer):
    ex = hermes_peer.scenario("responses_tool")
    events = ex["stream"].sse()
    assert all(e.event for e in events)
    payloads = [json.loads(e.data) for e in events]
    assert all(e.event == p["type"] for e, p in zip(events, payloads, strict=False))
    assert all("sequence_number" in p for p in payloads)
    assert payloads[-1]["type"] == "response.completed"
    item_types = {p["item"]["type"] for p in payloads if p["type"] == "response.output_item.added"}
    assert {"function_call", "function_call_output", "message"} <= item_types


# ---------------------------------------------------------------------------
# OpenAI-compatible (litellm proxy)
# ---------------------------------------------------------------------------
def _chunks(resp: RawResponse) -> list[dict]:
    return [c for c in _sse(resp) if isinstance(c, dict)]


def _content(chunks: list[dict], key: str = "content") -> str:
    return "".join(ch["delta"].get(key) or "" for c in chunks for ch in c.get("choices") or [])


def _finish(chunks: list[dict]) -> list[str]:
    return [ch["finish_reason"] for c in chunks for ch in c.get("choices") or []
            if ch.get("finish_reason")]


def test_openai_chat_text(openai_peer):
    resp = openai_peer.scenario("text")["stream"]
    chunks = _chunks(resp)
    assert _data_lines(resp)[-1] == "[DONE]"
    assert len({c["id"] for c in chunks}) == 1
    assert _content(chunks) == "Hello from the fake model."
    assert _finish(chunks) == ["stop"]
    assert "usage" in chunks[-1]  # usage chunk after the finish chunk
    assert resp.header("x-litellm-version")


def test_openai_chat_mock_text(openai_peer):
    chunks = _chunks(openai_peer.scenario("mock_text")["stream"])
    assert _content(chunks) == "Hello from the litellm mock."


def test_openai_chat_reasoning(openai_peer):
    chunks = _chunks(openai_peer.scenario("reasoning")["stream"])
    assert _content(chunks, "reasoning_content") == "The user wants a short answer."
    assert _content(chunks) == "Here is a short answer."


def test_openai_chat_length(openai_peer):
    assert _finish(_chunks(openai_peer.scenario("length")["stream"])) == ["length"]


def test_openai_chat_midstream_error(openai_peer):
    resp = openai_peer.scenario("midstream")["stream"]
    chunks = _chunks(resp)
    assert "error" in chunks[-1] and "choices" not in chunks[-1]
    assert "[DONE]" not in _data_lines(resp)
    assert _content(chunks[:-1]) == "Partial answer "
    assert resp.ended_by == "server"


def test_openai_chat_ratelimit(openai_peer):
    resp = openai_peer.scenario("ratelimit")["stream"]
    assert resp.status == 429 and resp.content_type == "application/json"
    assert resp.json()["error"]["code"] == "429"


def test_openai_chat_error_before_stream(openai_peer):
    resp = openai_peer.scenario("error_before_stream")["stream"]
    assert resp.status >= 400 and not resp.is_sse
    assert "error" in resp.json()


def test_openai_chat_slow_client_stop(openai_peer):
    resp = openai_peer.scenario("slow_stop")["stream"]
    assert resp.ended_by == "client"
    chunks = _chunks(resp)
    assert len(chunks) >= openai_peer.slow_events
    assert not _finish(chunks) and "[DONE]" not in _data_lines(resp)


def test_openai_chat_tool_loop(openai_peer):
    ex = openai_peer.scenario("tool")
    t1 = _chunks(ex["turn1"])
    calls = [tc for c in t1 for ch in c.get("choices") or []
             for tc in ch["delta"].get("tool_calls") or []]
    assert calls[0]["id"] == ex.ids["tool_call_id"] and calls[0]["function"]["name"] == "todo"
    assert all("id" not in tc for tc in calls[1:])
    args = "".join(tc["function"].get("arguments") or "" for tc in calls)
    assert json.loads(args)["todos"][0]["status"] == "pending"
    assert _finish(t1) == ["tool_calls"]
    t2 = _chunks(ex["turn2"])
    assert _finish(t2) == ["stop"]
    assert _content(t2).startswith("The tool said:")
    assert t1[0]["id"] != t2[0]["id"]  # a new chatcmpl id per request


def _responses_events(resp: RawResponse) -> list[dict]:
    return [p for p in _sse(resp) if isinstance(p, dict)]


def test_openai_responses_text(openai_peer):
    resp = openai_peer.scenario("responses_text")["stream"]
    events = _responses_events(resp)
    types = [e["type"] for e in events]
    assert types[0] == "response.created" and "response.completed" in types
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Hello from the fake model."


def test_openai_responses_tool(openai_peer):
    events = _responses_events(openai_peer.scenario("responses_tool")["stream"])
    items = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert any(i["type"] == "function_call" and i.get("name") == "todo" for i in items)
    assert any(e["type"] == "response.function_call_arguments.delta" for e in events)


def test_openai_responses_reasoning(openai_peer):
    events = _responses_events(openai_peer.scenario("responses_reasoning")["stream"])
    items = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert "reasoning" in items


def test_openai_responses_bridge_quirks(openai_peer):
    # litellm's bridge: no event: lines, sequence_number on only a few events, [DONE] last
    resp = openai_peer.scenario("responses_text")["stream"]
    events = resp.sse()
    assert all(e.event is None for e in events)
    assert events[-1].data == "[DONE]"
    payloads = [json.loads(e.data) for e in events[:-1]]
    assert any("sequence_number" not in p for p in payloads)


def test_openai_responses_midstream(openai_peer):
    resp = openai_peer.scenario("responses_midstream")["stream"]
    events = resp.sse()
    assert events[-1].data == "[DONE]"  # [DONE] even after the failure
    failed = [e for e in events if e.event == "response.failed"
              or (e.data.startswith("{") and json.loads(e.data).get("type") == "response.failed")]
    assert failed
    assert "response.completed" not in resp.body.decode()
