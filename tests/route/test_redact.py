"""Redaction: headers, URLs, JSON bodies at any depth, form bodies, exchanges; always
on copies; the opt-out and user-listed extras; properties over arbitrary JSON and bytes."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkit_trace.route import REDACTED, RedactConfig, Redactor, is_secret_name, load_profile, redact_exchange
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import Frame

R = Redactor()


# -- headers ------------------------------------------------------------------------------


def test_default_headers_are_redacted_keeping_what_helps_diagnosis():
    pairs = [
        ("Authorization", "Bearer sk-123"),
        ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
        ("Cookie", "sid=abc; theme=dark"),
        ("Set-Cookie", "sid=xyz; Path=/; HttpOnly"),
        ("X-Api-Key", "k1"),
        ("api-key", "k2"),
        ("X-Auth-Token", "t1"),
        ("x-goog-api-key", "AIza"),
        ("X-Custom-Token", "t2"),
        ("Content-Type", "application/json"),
        ("X-RateLimit-Remaining-Tokens", "99"),
        ("Last-Event-ID", "e3"),
        ("Authorization", ""),
    ]
    before = copy.deepcopy(pairs)
    out = R.redact_headers(pairs)
    assert pairs == before  # never mutates the input
    assert out == [
        ("Authorization", f"Bearer {REDACTED}"),
        ("Proxy-Authorization", f"Basic {REDACTED}"),
        ("Cookie", f"sid={REDACTED}; theme={REDACTED}"),
        ("Set-Cookie", f"sid={REDACTED}; Path=/; HttpOnly"),
        ("X-Api-Key", REDACTED),
        ("api-key", REDACTED),
        ("X-Auth-Token", REDACTED),
        ("x-goog-api-key", REDACTED),
        ("X-Custom-Token", REDACTED),
        ("Content-Type", "application/json"),
        ("X-RateLimit-Remaining-Tokens", "99"),
        ("Last-Event-ID", "e3"),
        ("Authorization", ""),
    ]


def test_an_authorization_value_without_a_scheme_is_redacted_whole_and_bytes_stay_bytes():
    assert R.redact_headers([("Authorization", "sk-123")]) == [("Authorization", REDACTED)]
    assert R.redact_headers([(b"cookie", b"a=1")]) == [(b"cookie", f"a={REDACTED}".encode())]
    assert R.redact_headers(None) == []


# -- URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://h/v1/x?api_key=abc&q=2", f"https://h/v1/x?api_key={REDACTED}&q=2"),
        ("https://h/x?key=AIza&alt=sse", f"https://h/x?key={REDACTED}&alt=sse"),
        ("/x?access_token=a&token=b&max_tokens=9&pageToken=p", f"/x?access_token={REDACTED}&token={REDACTED}&max_tokens=9&pageToken=p"),
        ("https://h/blob?sv=1&sig=abc%2Bdef#frag", f"https://h/blob?sv=1&sig={REDACTED}#frag"),
        ("https://ann:pw@h:80/x", "https://ann:%5BREDACTED%5D@h:80/x"),
        ("https://ann@h/x", "https://ann@h/x"),
        ("https://h/x?apiKey=", "https://h/x?apiKey="),
        ("https://h/x", "https://h/x"),
        ("", ""),
    ],
)
def test_redact_url(url, expected):
    assert R.redact_url(url) == expected


def test_an_unchanged_url_is_the_same_string():
    url = "https://h/x?a=1&b=2"
    assert R.redact_url(url) is url


# -- bodies ----------------------------------------------------------------------------------


def test_json_fields_at_any_depth_and_not_counters():
    doc = {
        "model": "m",
        "max_tokens": 100,
        "usage": {"prompt_tokens": 1, "total_tokens": 2},
        "pageToken": "next",
        "auth": {"password": "p", "clientSecret": "cs", "inner": [{"apiKey": 123}, {"token": None}, {"token": ""}]},
        "config": {"api_key": {"nested": "object"}, "access-token": "a"},
        "Authorization": "Bearer x",
    }
    raw = json.dumps(doc).encode()
    kept = bytes(raw)
    out = R.redact_body(raw, "application/json; charset=utf-8")
    assert raw == kept
    got = json.loads(out)
    assert got["auth"]["password"] == REDACTED and got["auth"]["clientSecret"] == REDACTED
    assert got["auth"]["inner"] == [{"apiKey": REDACTED}, {"token": None}, {"token": ""}]
    assert got["config"] == {"api_key": REDACTED, "access-token": REDACTED}
    assert got["Authorization"] == REDACTED
    assert got["max_tokens"] == 100 and got["usage"] == doc["usage"] and got["pageToken"] == "next"


def test_a_body_without_secrets_is_returned_unchanged_byte_for_byte():
    raw = b'{ "model" : "m",\n  "messages": [] }'
    assert R.redact_body(raw, "application/json") is raw
    assert R.redact_body(b"", "application/json") == b""
    assert R.redact_body(None, None) is None


def test_json_is_sniffed_without_a_content_type_and_other_types_are_left_alone():
    assert json.loads(R.redact_body(b'{"password": "x"}', None))["password"] == REDACTED
    assert json.loads(R.redact_body(b'[{"secret": "x"}]', "text/plain"))[0]["secret"] == REDACTED
    sse = b'data: {"password": "x"}\n\n'
    assert R.redact_body(sse, "text/event-stream") is sse
    blob = b'{"password": "x"}'
    assert R.redact_body(blob, "application/octet-stream") is blob
    assert R.redact_body(blob, "multipart/form-data; boundary=x") is blob


def test_form_bodies_pair_by_pair():
    raw = b"user=ann&password=hunter2&remember=1&client_secret=abc&empty_token="
    out = R.redact_body(raw, "application/x-www-form-urlencoded")
    assert out == f"user=ann&password={REDACTED}&remember=1&client_secret={REDACTED}&empty_token=".encode()
    plain = b"user=ann&remember=1"
    assert R.redact_body(plain, "application/x-www-form-urlencoded") is plain


def test_ndjson_line_by_line_and_broken_json_by_pattern():
    raw = b'{"a": 1}\n{"token": "t"}\n'
    out = R.redact_body(raw, "application/x-ndjson")
    assert out.split(b"\n")[0] == b'{"a": 1}' and json.loads(out.split(b"\n")[1]) == {"token": REDACTED}
    cut = b'{"model": "m", "api_key": "sk-abc", "messages": [{"role'
    out = R.redact_body(cut, "application/json")
    assert b"sk-abc" not in out and out.startswith(b'{"model": "m", "api_key": "[REDACTED]"')


# -- configuration ---------------------------------------------------------------------------


def test_keep_secrets_turns_the_defaults_off_but_not_the_users_own_names():
    r = Redactor(RedactConfig(keep_secrets=True, fields=["ssn"]))
    assert r.redact_headers([("Authorization", "Bearer x")]) == [("Authorization", "Bearer x")]
    assert r.redact_url("/x?api_key=1") == "/x?api_key=1"
    out = json.loads(r.redact_body(b'{"password": "p", "ssn": "123"}', "application/json"))
    assert out == {"password": "p", "ssn": REDACTED}


def test_user_listed_extras():
    r = Redactor(RedactConfig(headers=["X-Tenant"], query=["session"], fields=["dateOfBirth"], names=["pin"]))
    assert r.redact_headers([("x-tenant", "acme"), ("PIN", "1"), ("x-other", "o")]) == [
        ("x-tenant", REDACTED), ("PIN", REDACTED), ("x-other", "o")]
    assert r.redact_url("/x?session=s&pin=1&other=2") == f"/x?session={REDACTED}&pin={REDACTED}&other=2"
    out = json.loads(r.redact_body(b'{"date_of_birth": "1990", "a": {"Pin": 1}, "password": "p"}', "application/json"))
    assert out == {"date_of_birth": REDACTED, "a": {"Pin": REDACTED}, "password": REDACTED}


def test_extend_parses_the_addon_option():
    c = RedactConfig().extend("X-Tenant, header:X-Org, query:sig2, field:ssn, keep")
    assert c.names == ["X-Tenant"] and c.headers == ["X-Org"] and c.query == ["sig2"] and c.fields == ["ssn"]
    assert c.keep_secrets
    r = Redactor.from_config(load_profile("myproto").redact, "field:ssn")
    assert json.loads(r.redact_body(b'{"ssn": "1", "token": "t"}', "application/json")) == {"ssn": REDACTED, "token": REDACTED}


def test_secret_names():
    for name in ("api_key", "apiKey", "API-KEY", "x_api_key", "token", "access_token", "refreshToken", "id_token",
                 "password", "secret", "client_secret", "authorization", "private_key", "openai_api_key", "db_password"):
        assert is_secret_name(name), name
    for name in ("max_tokens", "prompt_tokens", "pageToken", "nextPageToken", "tokenizer", "key", "keys", "name",
                 "taskId", "contextId", "input_tokens", "token_count"):
        assert not is_secret_name(name), name


# -- exchanges --------------------------------------------------------------------------------


def exchange() -> Exchange:
    return Exchange(
        0, "POST", "https://h/api/chat/sessions/s/runs?api_key=Q",
        request_headers=[("Authorization", "Bearer sk-1"), ("Content-Type", "application/json")],
        request_body=b'{"runId": "r1", "text": "hi", "password": "p"}',
        status=200,
        response_headers=[("Set-Cookie", "sid=c; Path=/"), ("Content-Type", "application/json")],
        response_body=b'{"ok": true, "token": "t"}',
        frames=[
            Frame(0, 0, "ws", "out", '{"type": "auth", "token": "WS"}'),
            Frame(0, 1, "ws", "in", '{"type": "text", "token": "kept: a server event"}'),
            Frame(0, 2, "body", "in", '{"ok": true, "token": "t"}', start=0, end=26),
        ],
        notes={"x": 1},
    )


def test_redact_exchange_works_on_a_copy_and_says_what_it_redacted():
    ex = exchange()
    before = copy.deepcopy(ex)
    out = redact_exchange(ex)
    assert ex == before  # the input is untouched
    assert out is not ex
    assert out.url.endswith(f"api_key={REDACTED}")
    assert out.request_headers[0] == ("Authorization", f"Bearer {REDACTED}")
    assert json.loads(out.request_body)["password"] == REDACTED and json.loads(out.request_body)["runId"] == "r1"
    assert out.response_headers[0] == ("Set-Cookie", f"sid={REDACTED}; Path=/")
    assert json.loads(out.response_body)["token"] == REDACTED
    # a client message keeps the bytes sent, the secret's masked in place (issue 32)
    assert out.frames[0].text == '{"type": "auth", "token": "**"}' and len(out.frames[0].text) == len(ex.frames[0].text)
    assert out.frames[1] == ex.frames[1]  # streamed server events are the source of truth
    assert json.loads(out.frames[2].text)["token"] == REDACTED and out.frames[2].end == len(out.frames[2].text)
    assert out.notes["x"] == 1 and out.notes["redacted"] == [
        "url", "request.header:authorization", "response.header:set-cookie", "request.body", "response.body",
        "frame:0", "frame:2"]
    assert "redacted" not in ex.notes


def test_redact_exchange_without_secrets_returns_an_equal_copy():
    ex = Exchange(0, "GET", "/x", request_headers=[("Accept", "*/*")], frames=[Frame(0, 0, "sse", "in", "{}")])
    out = redact_exchange(ex)
    assert out == ex and out is not ex and out.frames is not ex.frames and "redacted" not in out.notes


def test_keep_secrets_exchange():
    ex = exchange()
    out = redact_exchange(ex, RedactConfig(keep_secrets=True))
    assert out.request_headers == ex.request_headers and out.request_body == ex.request_body


# -- properties ------------------------------------------------------------------------------

SECRET_KEYS = ["password", "api_key", "apiKey", "token", "access_token", "refresh_token", "secret", "client_secret",
               "Authorization", "x-api-key", "PASSWORD", "my_api_key"]
keys = st.one_of(st.sampled_from(SECRET_KEYS), st.text(max_size=8))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=10))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
                           max_leaves=25)


def unredacted(doc, redactor: Redactor) -> list:
    bad = []
    stack = [doc]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                if redactor.field_is_secret(k):
                    if v not in (REDACTED, None, ""):
                        bad.append((k, v))
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(cur, list):
            stack.extend(v for v in cur if isinstance(v, dict | list))
    return bad


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.one_of(st.dictionaries(keys, json_values, max_size=6), st.lists(json_values, max_size=4)),
       ctype=st.sampled_from(["application/json", "application/json; charset=utf-8", None, "text/plain"]))
def test_property_no_secret_named_field_is_left_unredacted(doc, ctype):
    raw = json.dumps(doc).encode()
    kept = bytes(raw)
    out = R.redact_body(raw, ctype)
    assert raw == kept
    assert unredacted(json.loads(out), R) == []
    if not unredacted(doc, R):
        assert out is raw  # nothing to do: the very same bytes


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300),
       ctype=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "application/x-ndjson",
                              None, "text/plain", "text/event-stream", "", "application/JSON"]))
def test_property_garbage_bytes_never_raise(data, ctype):
    out = R.redact_body(data, ctype)
    assert isinstance(out, bytes)


@settings(max_examples=200, deadline=None)
@given(url=st.text(max_size=80), pairs=st.lists(st.tuples(st.text(max_size=10), st.text(max_size=10)), max_size=5))
def test_property_urls_and_headers_never_raise(url, pairs):
    assert isinstance(R.redact_url(url), str)
    assert len(R.redact_headers(pairs)) == len(pairs)
