"""Route profiles: validation that names the key, loading and extending, and every
preset against its protocol's real request shapes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from chatkit_trace.core import ChatkitTraceError
from chatkit_trace.route import (
    CORE_CAPABILITIES,
    PRESETS,
    Profile,
    ProfileError,
    available_presets,
    load_profile,
    parse_profile,
)
from chatkit_trace.route.profiles import compile_path

from ..capture._util import REQUESTS, request

# -- loading and validation --------------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_with_a_known_adapter_and_core_capabilities(name):
    p = load_profile(name)
    assert p.name == name and p.protocol == name
    assert set(p.capabilities) <= set(CORE_CAPABILITIES) and "run" in p.capabilities
    assert p.routes
    adapter = p.create_adapter()
    assert adapter.protocol.name == name and adapter.capabilities == frozenset(p.capabilities)


def test_available_presets_are_the_shipped_files():
    assert set(available_presets()) == set(PRESETS)


def write(tmp_path: Path, text: str, name: str = "my.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BAD_SOURCE = """
extends = "adk"
[[routes]]
capability = "run"
path = "/a"
[[routes]]
capability = "run"
path = "/b"
[[routes]]
capability = "run"
method = "POST"
path = "/chat"
run = { from = "bodyy", pointer = "x" }
"""


def test_an_unknown_source_is_reported_with_the_file_and_the_key_path(tmp_path):
    path = write(tmp_path, BAD_SOURCE)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    assert "routes[2].run.from: unknown source 'bodyy'" in msg
    assert isinstance(info.value, ChatkitTraceError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[[routes]]\ncapability = "run"\npath = "/a"\nrun = "bodyy:x"', "routes[0].run.from: unknown source 'bodyy'"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\nrun = ["path:run", "bodyy:x"]', "routes[0].run[1].from: unknown source 'bodyy'"),
        ('[[routes]]\ncapability = "runn"\npath = "/a"', "routes[0].capability: unknown capability 'runn'"),
        ('[[routes]]\ncapability = "run"\npathh = "/a"', "routes[0].pathh: unknown key"),
        ('[[routes]]\ncapability = "run"', "routes[0].path: required key is missing"),
        ('[[routes]]\ncapability = "run"\npath = "/a/{x"', "routes[0].path: "),
        ('[[routes]]\ncapability = "run"\npath = "a"', "routes[0].path: path pattern 'a' must start with '/'"),
        ('[[routes]]\ncapability = "run"\npath = "/s/{sid}/runs"\nsession = "path:session"',
         "routes[0]: session: path parameter 'session' is not in path '/s/{sid}/runs' (it has: sid)"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\nrun = { from = "query" }', "routes[0].run: a 'query' source needs name"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\nmethod = "PO ST"', "routes[0].method: bad HTTP method 'PO ST'"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\nquery = { x = { regex = "(" } }', "routes[0].query: x: regex: bad regular expression"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\nbody = { x = { prsent = true } }', "routes[0].body: x: prsent: unknown key"),
        ('[[routes]]\ncapability = "run"\npath = "/a"\ncursor = "derived"', "routes[0]: cursor: a cursor cannot be derived"),
        ('capabilities = ["run", "stream"]\n[[routes]]\ncapability = "run"\npath = "/a"', "capabilities: unknown capability 'stream'"),
        ('protocol = "nope"\n[[routes]]\ncapability = "run"\npath = "/a"', "protocol: no adapter named 'nope'"),
        ('[redact]\nheaderz = ["x"]', "redact.headerz: unknown key"),
        ('routes = []', "routes: a profile needs at least one route"),
    ],
)
def test_validation_errors_name_the_bad_key(tmp_path, text, expected):
    path = write(tmp_path, 'extends = "myproto"\nreplace_routes = true\n' + text if "routes = []" not in text
                 else 'extends = "myproto"\nreplace_routes = true\n' + text)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert expected in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_a_standalone_file_needs_name_protocol_and_routes(tmp_path):
    path = write(tmp_path, '[[routes]]\ncapability = "run"\npath = "/a"')
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert "name: required key is missing" in str(info.value) and "protocol: required key is missing" in str(info.value)


@pytest.mark.parametrize(
    "text, name, expected",
    [
        ("a = [", "bad.toml", "not valid TOML"),
        ('{"name": ', "bad.json", "not valid JSON"),
        ("[1, 2]", "list.json", "a profile is a table"),
    ],
)
def test_unreadable_files_say_why(tmp_path, text, name, expected):
    path = write(tmp_path, text, name)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert str(info.value).startswith(str(path)) and expected in str(info.value)


def test_unknown_names_missing_files_and_cycles(tmp_path):
    with pytest.raises(ProfileError, match="no profile named 'opneai': presets are a2a, adk, agui, hermes, myproto, openai; adapters are "):
        load_profile("opneai")
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile(str(tmp_path / "missing.toml"))
    a = write(tmp_path, 'extends = "b.toml"', "a.toml")
    write(tmp_path, 'extends = "a.toml"', "b.toml")
    with pytest.raises(ProfileError, match="extends itself"):
        load_profile(str(a))
    c = write(tmp_path, 'extends = "nosuchpreset"', "c.toml")
    with pytest.raises(ProfileError, match=r"c.toml: extends: no profile named 'nosuchpreset'"):
        load_profile(str(c))
    with pytest.raises(ProfileError, match="no profile given"):
        load_profile("  ")


def test_a_user_file_extends_a_preset_user_routes_first(tmp_path):
    path = write(
        tmp_path,
        """
extends = "adk"
capabilities = ["run", "history", "abort"]

[[routes]]
name = "my-stop"
capability = "abort"
method = "POST"
path = "/api/stop/{invocation}"
run = "path:invocation"
session = "header:X-Session"

[redact]
headers = ["X-Tenant"]
""",
        "team-adk.toml",
    )
    p = load_profile(str(path))
    assert p.name == "team-adk" and p.protocol == "adk"
    assert p.capabilities == ["run", "history", "abort"]
    preset = load_profile("adk")
    assert p.routes[0].name == "my-stop" and p.routes[1:] == preset.routes
    assert p.redact.headers == ["X-Tenant"]
    m = p.match("POST", "http://h/api/stop/e-1", [("x-session", "s1")], None)
    assert (m.capability, m.run_id, m.run_id_source, m.session_id, m.route_index) == ("abort", "e-1", "path", "s1", 0)
    # the preset's routes still match
    m = p.match("POST", "/run_sse", [], b'{"sessionId": "s2"}')
    assert m.capability == "run" and m.route_index == 1 + 0


def test_replace_routes_drops_the_base_routes_and_json_files_work(tmp_path):
    path = write(
        tmp_path,
        json.dumps({"extends": "openai", "replace_routes": True, "name": "mine",
                    "routes": [{"capability": "run", "method": "POST", "path": "/chat", "run": "body:id"}]}),
        "mine.json",
    )
    p = load_profile(str(path))
    assert p.name == "mine" and len(p.routes) == 1 and p.protocol == "openai"
    assert p.match("POST", "/v1/chat/completions", [], b"{}") is None
    assert p.match("POST", "/chat", [], b'{"id": 7}').run_id == "7"


def test_extends_a_file_relative_to_the_extending_file(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, 'extends = "myproto"\n[redact]\nfields = ["ssn"]', "sub/base.toml")
    top = write(tmp_path, 'extends = "sub/base.toml"\n[redact]\nfields = ["dob"]', "top.toml")
    p = load_profile(str(top))
    assert p.redact.fields == ["ssn", "dob"] and p.protocol == "myproto" and p.name == "top"


def test_overrides_apply_last_from_inline_toml_or_a_file(tmp_path):
    p = load_profile("myproto", 'capabilities = ["run", "history"]')
    assert p.capabilities == ["run", "history"] and p.name == "myproto"
    f = write(tmp_path, '[[routes]]\ncapability = "history"\nmethod = "GET"\npath = "/hist/{s}"\nsession = "path:s"', "o.toml")
    p = load_profile("myproto", str(f))
    assert p.routes[0].path == "/hist/{s}" and p.match("GET", "/hist/abc", [], None).session_id == "abc"
    with pytest.raises(ProfileError, match="no such profile overrides file"):
        load_profile("myproto", str(tmp_path / "nope.toml"))
    with pytest.raises(ProfileError, match=r"routes\[0\].capability: unknown capability"):
        load_profile("myproto", '[[routes]]\ncapability = "x"\npath = "/"')


def test_capabilities_default_to_the_routes_core_capabilities():
    p = parse_profile({"name": "n", "protocol": "myproto", "routes": [
        {"capability": "status", "path": "/s/{run}", "run": "path:run"},
        {"capability": "history", "path": "/h"},
    ]})
    assert p.capabilities == ["run", "history"]


def test_a_profile_round_trips_through_json():
    p = load_profile("a2a")
    again = Profile.model_validate(p.model_dump(mode="json", by_alias=True))
    assert again == p
    assert again.match("POST", "/", [], b'{"method":"tasks/cancel","params":{"id":"t"}}').capability == "abort"


# -- path patterns and conditions ---------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, path, params",
    [
        ("/**/sessions/{s}/runs", "/sessions/a/runs", {"s": "a"}),
        ("/**/sessions/{s}/runs", "/api/chat/sessions/a/runs/", {"s": "a"}),
        ("/**/sessions/{s}/runs", "/x/sessions/a/runs/r", None),
        ("/**/sessions/{s}/runs", "/sessions/a/b/runs", None),
        ("/**", "/", {}),
        ("/**", "/a2a/app", {}),
        ("/**/run", "/run_sse", None),
        ("/files/{rest:path}", "/files/a/b.txt", {"rest": "a/b.txt"}),
        ("/tasks/{id}:cancel", "/tasks/t-1:cancel", {"id": "t-1"}),
        ("/a/*/c", "/a/b/c", {}),
        ("/a/*/c", "/a/b/x/c", None),
        ("/a/**/c", "/a/c", {}),
        ("/a/**/c", "/a/b/x/c", {}),
        ("/v1/runs/{run}", "/v1/runs/r1/events", None),
    ],
)
def test_path_patterns(pattern, path, params):
    regex, _ = compile_path(pattern)
    m = regex.match(path)
    assert (m.groupdict() if m else None) == params


def test_path_values_are_percent_decoded_and_urls_may_be_full_or_paths():
    p = load_profile("myproto")
    m = p.match("GET", "https://h:8443/api/sessions/a%20b/runs/r%2F1/events?after=e%3A1#frag", [], None)
    assert (m.session_id, m.run_id, m.cursor) == ("a b", "r/1", "e:1")
    assert p.match("get", "/sessions/s/runs", [], None).capability == "history"


def profile(**route) -> Profile:
    return parse_profile({"name": "t", "protocol": "myproto", "routes": [{"capability": "run", "path": "/x", **route}]})


def test_query_header_and_body_conditions():
    p = profile(query={"mode": ["a", "b"], "debug": False}, headers={"Accept": {"regex": "event-stream"}},
                body={"stream": True, "model": {"present": True}, "messages.-1.role": "user"})
    body = json.dumps({"stream": True, "model": "m", "messages": [{"role": "user"}]}).encode()
    hdrs = [("accept", "text/event-stream")]
    assert p.match("POST", "/x?mode=b", hdrs, body) is not None
    assert p.match("POST", "/x?mode=c", hdrs, body) is None
    assert p.match("POST", "/x?mode=a&debug=1", hdrs, body) is None
    assert p.match("POST", "/x?mode=a", [("accept", "application/json")], body) is None
    assert p.match("POST", "/x?mode=a", hdrs, body.replace(b"true", b"false")) is None
    assert p.match("POST", "/x?mode=a", hdrs, b'{"stream": 1, "model": "m", "messages": [{"role": "user"}]}') is None
    assert p.match("POST", "/x?mode=a", hdrs, None) is None  # no body (yet): body conditions fail
    assert p.match("POST", "/x?mode=a", hdrs, b"not json") is None


def test_methods_lists_and_wildcards():
    p = parse_profile({"name": "t", "protocol": "myproto", "routes": [
        {"capability": "history", "method": ["GET", "head"], "path": "/h"},
        {"capability": "run", "path": "/h"},
    ]})
    assert p.match("HEAD", "/h", [], None).capability == "history"
    assert p.match("DELETE", "/h", [], None).capability == "run"


def test_matching_is_microseconds():
    p = load_profile("myproto")
    n = 5000
    t = time.perf_counter()
    for _ in range(n):
        p.match("GET", "http://h/api/chat/sessions/s1/runs/r1/events?after=e3", [("Last-Event-ID", "x")], None)
        p.match("GET", "http://h/static/app.js", [], None)
    per = (time.perf_counter() - t) / (2 * n)
    assert per < 100e-6, f"{per * 1e6:.1f} µs per match"


# -- presets against real request shapes --------------------------------------------------

A2A_EXPECTED = {
    # capture: (capability, session, run, run source)
    "a2a-v03-text.request.txt": ("run", None, None, None),
    "a2a-v10-text.request.txt": ("run", None, None, None),
    "a2a-v03-context.send.request.txt": ("run", None, None, None),
    "a2a-v10-context.send.request.txt": ("run", None, None, None),
    "a2a-v03-context.stream2.request.txt": ("run", "240035ad-1f73-4848-82f4-896ace882670", None, None),
    "a2a-v10-context.stream2.request.txt": ("run", "4cf7957b-26de-406c-82dc-cfd21db8917a", None, None),
    "a2a-v03-input.turn2.request.txt": ("run", "d5113847-b39d-4364-9c5c-a9fd5cb63aa6", "488976ac-3408-4142-8b6e-29e4040650cb", "body"),
    "a2a-v10-input.turn2.request.txt": ("run", "5592bc07-0551-48a4-8a0b-a7cd60a7de98", "e4ec92d0-1e9d-4cee-94eb-036730fdb0e3", "body"),
    "a2a-v03-slow-cancel.resubscribe.request.txt": ("resume", None, "c792e334-d261-40cf-8685-1d30da6bc262", "body"),
    "a2a-v10-slow-cancel.resubscribe.request.txt": ("resume", None, "3b32e182-a430-4214-878f-0e9b60a41b4a", "body"),
    "a2a-v03-slow-cancel.cancel.request.txt": ("abort", None, "c792e334-d261-40cf-8685-1d30da6bc262", "body"),
    "a2a-v10-slow-cancel.cancel.request.txt": ("abort", None, "3b32e182-a430-4214-878f-0e9b60a41b4a", "body"),
    "a2a-v10-context.list.request.txt": ("history", "4cf7957b-26de-406c-82dc-cfd21db8917a", None, None),
    "adk-a2a-bridge-v03-tool.request.txt": ("run", None, None, None),
    "adk-a2a-bridge-v10-tool.request.txt": ("run", None, None, None),
}


@pytest.mark.parametrize("capture", sorted(p.name for p in REQUESTS.glob("a2a-*.request.txt")) + [
    "adk-a2a-bridge-v03-tool.request.txt", "adk-a2a-bridge-v10-tool.request.txt", "adk-a2a-bridge-v03-raise.request.txt"])
def test_a2a_preset_matches_every_captured_request(capture):
    method, url, headers, body = request(capture)
    m = load_profile("a2a").match(method, url, headers, body)
    assert m is not None
    doc = json.loads(body)
    expected = A2A_EXPECTED.get(capture)
    if expected is None:  # every other captured call is a streamed first message
        assert doc["method"] in ("message/stream", "SendStreamingMessage")
        expected = ("run", None, None, None)
    assert (m.capability, m.session_id, m.run_id, m.run_id_source) == expected
    if m.capability == "run" and m.run_id is None:
        assert "run" in m.pending  # the taskId comes from the events / the reply
    if m.capability == "run" and doc["method"] in ("message/send", "SendMessage"):
        assert m.output == "body" and "run" in m.pending_response and m.stream is False
    if m.capability == "run" and doc["method"] in ("message/stream", "SendStreamingMessage"):
        assert m.stream is True and "run" in m.pending_events | ({"run"} if m.run_id else set())


def test_a2a_history_of_one_task_and_unknown_methods():
    p = load_profile("a2a")
    for method in ("tasks/get", "GetTask"):
        m = p.match("POST", "/", [], json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": "t1"}}).encode())
        assert (m.capability, m.run_id, m.pending_response) == ("history", "t1", frozenset({"session"}))
    assert p.match("POST", "/", [], b'{"method": "agent/getAuthenticatedExtendedCard"}') is None
    assert p.match("GET", "/.well-known/agent-card.json", [], None) is None


@pytest.mark.parametrize("capture", sorted(p.name for p in REQUESTS.glob("adk-0*.request.txt")))
def test_adk_preset_matches_run_sse_requests(capture):
    method, url, headers, body = request(capture)
    m = load_profile("adk").match(method, url, headers, body)
    doc = json.loads(body)
    assert (m.capability, m.session_id, m.session_id_source) == ("run", doc["sessionId"], "body")
    assert m.run_id is None and m.pending_events == frozenset({"run"}) and m.stream is True


def test_adk_preset_other_routes():
    p = load_profile("adk")
    m = p.match("POST", "/run", [], b'{"app_name":"a","user_id":"u","session_id":"s9","new_message":{}}')
    assert (m.capability, m.session_id, m.output, m.stream, m.pending_response) == ("run", "s9", "items", False, frozenset({"run"}))
    m = p.match("POST", "/run_sse", [], b'{"sessionId":"s1","invocationId":"e-resume"}')
    assert (m.run_id, m.run_id_source) == ("e-resume", "body")
    m = p.match("GET", "http://127.0.0.1:18801/apps/chatkit_peer/users/u1/sessions/s-text-tool", [], None)
    assert (m.capability, m.session_id) == ("history", "s-text-tool")
    assert p.match("POST", "/apps/chatkit_peer/users/u1/sessions", [], b"{}") is None  # create session: plain exchange
    assert p.match("GET", "/list-apps", [], None) is None


def test_hermes_preset_matches_the_real_endpoints():
    p = load_profile("hermes")
    run = "run_ecc85fb39567434a87f334ab2b479282"
    m = p.match("POST", "http://127.0.0.1:8642/v1/runs", [("Authorization", "Bearer k")], b'{"input": "Say hello. scenario:text"}')
    assert (m.capability, m.run_id, m.output, m.pending_response) == ("run", None, "none", frozenset({"run"}))
    m = p.match("POST", "/v1/runs", [], b'{"input": "x", "session_id": "sess-1"}')
    assert (m.session_id, m.session_id_source) == ("sess-1", "body")
    m = p.match("GET", f"/v1/runs/{run}/events", [], None)
    assert (m.capability, m.run_id, m.run_id_source, m.stream) == ("run", run, "path", True)
    m = p.match("GET", f"/v1/runs/{run}", [], None)
    assert (m.capability, m.run_id) == ("status", run)
    m = p.match("POST", f"/v1/runs/{run}/stop", [], None)
    assert (m.capability, m.run_id) == ("abort", run)
    m = p.match("POST", "/api/sessions/sess-1/chat/stream", [], b'{"message": "hi"}')
    assert (m.capability, m.session_id, m.pending_events) == ("run", "sess-1", frozenset({"run"}))
    m = p.match("GET", "/api/sessions/sess-1/messages", [], None)
    assert (m.capability, m.session_id) == ("history", "sess-1")
    # Hermes' OpenAI-compatible surface is the openai preset's
    assert p.match("POST", "/v1/chat/completions", [], b"{}") is None
    assert p.match("GET", "/v1/capabilities", [], None) is None
    assert p.match("GET", "/health", [], None) is None


def test_openai_preset_matches_chat_completions_responses_and_chatkits_example():
    p = load_profile("openai")
    turn1 = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Plan one task. scenario:tool"}]}
    turn2 = {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "Plan one task. scenario:tool"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "todo", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\": true}"}]}
    m1 = p.match("POST", "http://127.0.0.1:4000/v1/chat/completions", [], json.dumps(turn1).encode())
    m2 = p.match("POST", "http://127.0.0.1:4000/v1/chat/completions", [], json.dumps(turn2).encode())
    assert (m1.capability, m1.run_id, m1.continues) == ("run", None, False)
    assert (m2.capability, m2.continues) == ("run", True)
    assert p.match("POST", "/chat/completions", [], b"{}").capability == "run"
    m = p.match("POST", "/v1/responses", [], json.dumps({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}).encode())
    assert (m.capability, m.continues) == ("run", True)
    assert p.match("POST", "/v1/responses", [], b'{"input": "hi"}').continues is False
    m = p.match("POST", "/api/chat/send", [], b'{"sessionId": "s1", "runId": "r1", "messages": []}')
    assert (m.capability, m.session_id, m.run_id, m.run_id_source) == ("run", "s1", "r1", "body")
    m = p.match("GET", "/api/chat/events?sessionId=s1", [], None)
    assert (m.capability, m.session_id, m.stream) == ("subscribe", "s1", True)
    assert p.match("GET", "/api/chat/events", [], None) is None
    assert p.match("GET", "/api/chat/history?sessionId=s1", [], None).capability == "history"
    assert p.match("GET", "/api/chat/sessions/s1/history", [], None).session_id == "s1"
    m = p.match("POST", "/v1/chat/completions", [("X-Session-Id", "tab-7")], b"{}")
    assert (m.session_id, m.session_id_source) == ("tab-7", "header")


def test_myproto_preset_is_chatkits_example():
    p = load_profile("myproto")
    m = p.match("POST", "/api/chat/sessions/s1/runs", [], b'{"runId": "r1", "text": "hi"}')
    assert (m.capability, m.session_id, m.run_id, m.run_id_source) == ("run", "s1", "r1", "body")
    m = p.match("POST", "/sessions/s1/runs", [], b'{"text": "hi"}')
    assert m.run_id is None and m.pending_events == frozenset({"run"})
    m = p.match("GET", "/sessions/s1/runs/r1/events?after=e7", [], None)
    assert (m.capability, m.run_id, m.cursor) == ("resume", "r1", "e7")
    m = p.match("GET", "/sessions/s1/runs/r1/events", [("Last-Event-ID", "e9")], None)
    assert m.cursor == "e9"
    assert p.match("POST", "/sessions/s1/runs/r1/stop", [], b"{}").capability == "abort"
    assert p.match("GET", "/sessions/s1/runs", [], None).capability == "history"
    assert p.match("POST", "/api/chat/send", [], b'{"sessionId":"s1","runId":"r2"}').run_id == "r2"
    assert p.match("GET", "/api/chat/events?sessionId=s1", [], None).capability == "subscribe"
    assert p.match("GET", "/favicon.ico", [], None) is None


@pytest.mark.parametrize("preset", ["myproto", "openai"])
def test_a_subscription_reconnect_carries_its_cursor_on_every_preset_with_a_subscription(preset):
    p = load_profile(preset)
    plain = p.match("GET", "/api/chat/events?sessionId=s1", [], None)
    assert (plain.capability, plain.cursor) == ("subscribe", None)
    m = p.match("GET", "/api/chat/events?sessionId=s1", [("last-event-id", "3")], None)
    assert (m.capability, m.session_id, m.cursor) == ("subscribe", "s1", "3")
    for query in ("lastEventId=7", "last_event_id=7", "after=7", "cursor=7"):
        m = p.match("GET", f"/api/chat/events?sessionId=s1&{query}", [], None)
        assert (m.capability, m.cursor) == ("subscribe", "7"), query
    # the header wins over a query form (an EventSource's own reconnect)
    assert p.match("GET", "/api/chat/events?sessionId=s1&lastEventId=2", [("Last-Event-ID", "5")], None).cursor == "5"


def test_every_preset_subscription_route_has_a_cursor():
    from chatkit_trace.route.profiles import PRESETS

    for name in PRESETS:
        for r in load_profile(name).routes:
            if r.capability == "subscribe":
                kinds = {(s.from_, (s.name or "").lower()) for s in r.cursor}
                assert ("header", "last-event-id") in kinds and ("query", "lastEventId".lower()) in {(k, n.lower()) for k, n in kinds}, (name, r.name)


@pytest.mark.parametrize("preset", ["myproto", "openai"])
def test_the_send_reply_names_the_run_when_the_backend_mints_it(preset):
    p = load_profile(preset)
    m = p.match("POST", "/api/chat/send", [], b'{"sessionId": "s1", "text": "hi"}')
    assert m.capability == "run" and m.run_id is None and "run" in m.pending_response


def test_the_example_in_docs_profiles_md_loads_and_matches(tmp_path):
    doc = (Path(__file__).parents[2] / "docs" / "profiles.md").read_text()
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    path = write(tmp_path, example, "team-adk.toml")
    p = load_profile(str(path))
    assert (p.name, p.protocol, p.capabilities, len(p.routes)) == ("team-adk", "adk", ["run", "history", "abort"], 6)
    m = p.match("GET", "/agent/invocations/e-1/events?follow=1&after=e5", [("X-Session-Id", "s1")], None)
    assert (m.capability, m.session_id, m.run_id, m.cursor) == ("resume", "s1", "e-1", "e5")
    m = p.match("POST", "/agent/sessions/s1/regenerate", [("content-type", "application/json")],
                b'{"mode": "retry", "newInvocationId": "e-2", "targetInvocationId": "e-1"}')
    assert (m.capability, m.run_id, m.target_run_id) == ("regenerate", "e-2", "e-1")
    assert p.redact.headers == ["X-Tenant-Key"] and p.redact.fields == ["customer_email"]
