"""Secrets follow their value (route/secrets.py, issue 16): the token-shape
table (one test per shape, and none of them on the recorded fixtures' text),
learned values with their partial and echoed forms, same-length masks and
the spans that say where, and the redactor that learns and scrubs."""

from __future__ import annotations

import json
import random
import sqlite3
import string
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chatkit_trace.masking import MIN_LEARNED, SHAPES, Scrubber, Secrets, _word_class, mask
from chatkit_trace.route import RedactConfig, Redactor
from chatkit_trace.trace import Exchange, frames_from_body
from chatkit_trace.wire import DecodeError, Frame

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = REPO / "recordings"

_rng = random.Random(16)


def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# -- the shape table: one case per shape ------------------------------------------------------

#: shape -> (text with the token, the part that must be masked)
POSITIVE = {
    "sk-key": [
        ("Incorrect API key provided: {t}. You can find yours at …", "sk-proj-" + rand(40) + "9"),
        ('{{"x_api_key": "{t}"}}', "sk-ant-api03-" + rand(60, string.ascii_letters + string.digits + "_-") + "1AA"),
        ("key={t}&q=1", "sk-" + rand(47) + "7"),
    ],
    "jwt": [("Authorization: JWT {t}", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + rand(43, string.ascii_letters + "_-"))],
    "aws-access-key": [("aws_access_key_id = {t}\n", "AKIA" + rand(16, string.ascii_uppercase + string.digits)),
                       ('"AccessKeyId":"{t}"', "ASIA" + rand(16, string.ascii_uppercase + string.digits))],
    "aws-secret-key": [("aws_secret_access_key = {t}\n", rand(40, string.ascii_letters + string.digits + "/+")),
                       ('"SecretAccessKey": "{t}"', rand(40, string.ascii_letters + string.digits + "/+"))],
    "github-token": [("token {t} expired", "ghp_" + rand(36)), ("x {t}", "github_pat_" + rand(22) + "_" + rand(59))],
    "google-api-key": [("?key={t}&alt=sse", "AIza" + rand(35, string.ascii_letters + string.digits + "_-")),
                       ('"access_token": "{t}"', "ya29." + rand(60, string.ascii_letters + string.digits + "_-"))],
    "slack-token": [("SLACK_BOT_TOKEN={t}", "xoxb-" + "12345678901-" + rand(24)),
                    ("https://hooks.slack.com/services/{t}", "T0" + rand(8) + "/B0" + rand(8) + "/" + rand(24))],
    "stripe-key": [("stripe.api_key = '{t}'", "sk_live_" + rand(24)), ("{t}", "rk_test_" + rand(24)),
                   ("secret: {t}", "whsec_" + rand(32))],
    "bearer": [("curl -H 'Authorization: Bearer {t}'", rand(20) + "1"), ("bearer {t}", "abc.DEF-123_xyz~+/="),
               ("'Authorization': 'Basic {t}'", "dXNlcjpwYXNzd29yZA==")],
}

#: shape -> near misses that must stay as they are
NEGATIVE = {
    "sk-key": ["task-management-is-hard-to-do-well", "risk-assessment-2024-framework-v2", "sk-too-short-1",
               "sk-only-letters-and-dashes-here-ok"],
    "jwt": ["eyJhbGciOi", "the eyJ prefix alone.eyJ.x"],
    "aws-access-key": ["AKIAshortlower12345678", "XAKIAABCDEFGHIJKLMNOP", "AKIA1234"],
    "aws-secret-key": ["secret access key rotation is a best practice"],
    "github-token": ["ghp_short", "the ghp_ prefix"],
    "google-api-key": ["AIza is a prefix", "ya29.short"],
    "slack-token": ["xoxb-letters-only-here", "hooks.slack.com/services/short"],
    "stripe-key": ["sk_live_short", "test_live_mode"],
    "bearer": ["The bearer of bad news", "Bearer instruments are negotiable.", "bearer token", "Bearer [REDACTED]"],
}


def test_every_shape_has_positive_and_negative_cases():
    assert set(POSITIVE) == set(NEGATIVE) == {s.name for s in SHAPES}


@pytest.mark.parametrize("name, template, token", [(n, t, tok) for n, cases in POSITIVE.items() for t, tok in cases])
def test_each_shape_is_masked_in_place(name, template, token):
    text = template.format(t=token)
    out, spans = Scrubber().text(text)
    assert token not in out
    assert len(out.encode()) == len(text.encode())  # same length: offsets stay true
    assert [s.kind for s in spans] == [name]
    [s] = spans
    assert text.encode()[s.at : s.at + s.length].decode() == token  # exactly the token (Bearer stays readable)
    assert out.encode()[s.at : s.at + s.length].decode() == mask(len(token))
    data, bspans = Scrubber().data(text.encode())
    assert data == out.encode() and bspans == spans


@pytest.mark.parametrize("name, text", [(n, t) for n, cases in NEGATIVE.items() for t in cases])
def test_near_misses_stay(name, text):
    assert Scrubber().text(text) == (text, [])


def _recorded_text() -> list[tuple[str, bytes]]:
    """What the recordings carry besides credentials: fixtures whole (their headers
    are already redacted), the traces' frames and bodies, and every capture's
    bodies (their request headers hold the local peers' real test keys)."""
    out: list[tuple[str, bytes]] = []
    for p in sorted((RECORDINGS / "fixtures").rglob("*.chatkit.json")):
        out.append((str(p.relative_to(REPO)), p.read_bytes()))
    for p in sorted((RECORDINGS / "traces").glob("*.db")):
        conn = sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)
        try:
            for i, (text,) in enumerate(conn.execute("SELECT text FROM frames WHERE text IS NOT NULL")):
                out.append((f"{p.name} frame {i}", text.encode()))
            for i, row in enumerate(conn.execute("SELECT url, request_body, response_body, error FROM exchanges")):
                out += [(f"{p.name} exchange {i}", v if isinstance(v, bytes) else v.encode()) for v in row if v]
        finally:
            conn.close()
    for p in sorted((RECORDINGS / "captures").rglob("*")):
        if not p.is_file() or p.suffix == ".py" or p.name.endswith(".md"):
            continue
        data = p.read_bytes()
        if p.name.endswith(".exchange.json"):
            doc = json.loads(data)
            for step in doc if isinstance(doc, list) else doc.get("steps", [doc]):
                if isinstance(step, dict) and isinstance(step.get("request"), dict):
                    step["request"].pop("headers", None)
            data = json.dumps(doc).encode()
        out.append((str(p.relative_to(REPO)), data))
    return out


def test_no_shape_matches_the_recorded_fixtures_text():
    texts = _recorded_text()
    assert len(texts) > 500 and sum(len(t) for _, t in texts) > 1_000_000  # the whole corpus, not a sample
    sc = Scrubber()
    hits = [(where, data[s.at : s.at + s.length][:40], s.kind) for where, data in texts for s in sc.data(data)[1]]
    assert hits == []


def test_a_real_credential_in_a_capture_is_found():
    """The same scan finds the local peers' real test key where it is a credential."""
    data = (RECORDINGS / "captures" / "hermes" / "chat_text.exchange.json").read_bytes()
    assert {s.kind for s in Scrubber().data(data)[1]} == {"bearer"}


# -- learned values --------------------------------------------------------------------------


def test_partial_forms_of_headers_are_learned():
    s = Secrets()
    s.learn_header("Authorization", "Bearer tok-" + "A1b2C3d4e5")
    s.learn_header("Cookie", "session=sess-9f8e7d6c5b; theme=dark; csrf=csrf-0a1b2c3d4e5f")
    s.learn_header("Set-Cookie", "refresh=ref-11223344556; Path=/; HttpOnly")
    s.learn_header("Proxy-Authorization", "Basic " + "dXNlcjpodW50ZXIyaHVudGVyMg==")  # user:hunter2hunter2
    s.learn_header("X-Api-Key", "  key-1234567890abcdef  ")
    assert set(s) == {"tok-A1b2C3d4e5", "sess-9f8e7d6c5b", "csrf-0a1b2c3d4e5f", "ref-11223344556",
                      "dXNlcjpodW50ZXIyaHVudGVyMg==", "user:hunter2hunter2", "hunter2hunter2", "key-1234567890abcdef"}
    text = "echo: Authorization=Bearer tok-A1b2C3d4e5, cookie session=sess-9f8e7d6c5b, pw hunter2hunter2"
    out, spans = Scrubber(s, shapes=False).text(text)
    assert "tok-A1b2C3d4e5" not in out and "sess-9f8e7d6c5b" not in out and "hunter2hunter2" not in out
    assert "Bearer [REDACTED]" in out and "session=[REDACTED]" in out and "theme" not in out
    assert {sp.kind for sp in spans} == {"learned"}


def test_too_short_common_or_placeholder_values_are_not_learned():
    s = Secrets()
    for v in ["dark", "1234567", "20240101", "null", "undefined", "********", "[REDACTED]", "Bearer [REDACTED]",
              "aaaaaaaaaaaa", "", None, 12345678901234567890, "x" * 9000]:
        s.learn(v)
    assert len(s) == 0
    assert s.learn("1234567890123456")  # a long number may be a card or an account key
    assert s.learn("Bearer abcdefgh1") and "abcdefgh1" in set(s)  # the token, never the scheme
    assert len("abcdefgh") == MIN_LEARNED and s.learn("abcdefgh")


@pytest.mark.parametrize("form", [
    lambda v: v,
    lambda v: json.dumps(v)[1:-1],
    lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
    lambda v: quote(v, safe=""),
    lambda v: quote_plus(v, safe=""),
])
def test_a_learned_value_is_found_in_the_forms_echoes_give_it(form):
    secret = 'p@ss w/"quote"\\é-1234'
    s = Secrets()
    s.learn(secret)
    text = f'{{"echo": "{form(secret)}"}}'
    out, spans = Scrubber(s, shapes=False).text(text)
    assert form(secret) not in out and len(spans) == 1
    assert len(out.encode()) == len(text.encode())


def test_masks_keep_byte_offsets_for_non_ascii_text():
    s = Secrets()
    s.learn("clé-secrète-42")
    text = "avant ✓ clé-secrète-42 après ✓ clé-secrète-42"
    out, spans = Scrubber(s, shapes=False).text(text)
    raw = text.encode()
    assert len(out.encode()) == len(raw)
    for sp in spans:
        assert raw[sp.at : sp.at + sp.length] == "clé-secrète-42".encode()
    assert Scrubber(s, shapes=False).data(raw) == (out.encode(), spans)


def test_the_longest_learned_value_wins_and_overlaps_are_masked_once():
    s = Secrets()
    s.learn("abcdefgh12")
    s.learn("abcdefgh12345678")
    out, spans = Scrubber(s, shapes=False).text("x abcdefgh12345678 y abcdefgh12 z")
    assert [(sp.at, sp.length) for sp in spans] == [(2, 16), (21, 10)]
    assert out == f"x {mask(16)} y {mask(10)} z"


def test_many_learned_values_compile_to_one_pattern():
    s = Secrets()
    values = [f"tok-{i:05d}-{rand(12)}" for i in range(2000)]
    for v in values:
        s.learn(v)
    sc = Scrubber(s, shapes=False)
    text = " ".join(values[::97])
    out, spans = sc.text(text)
    assert len(spans) == len(values[::97]) and not any(v in out for v in values)


def test_an_excerpt_cut_through_a_secret_is_masked_at_either_edge():
    s = Secrets()
    s.learn("secret-value-0123456789")
    sc = Scrubber(s, shapes=False)
    assert sc.excerpt('{"a": "x", "k": "secret-value-01') == '{"a": "x", "k": "' + "*" * 15
    assert sc.excerpt('lue-0123456789", "b": 1}') == "*" * 14 + '", "b": 1}'
    assert sc.excerpt("nothing to hide here") == "nothing to hide here"


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=40), after=st.text(max_size=40),
    secret=st.text(alphabet=string.ascii_letters + string.digits + "-_.~+/=:@%", min_size=MIN_LEARNED, max_size=40),
    form=st.sampled_from(["raw", "json", "quote", "quote_plus"]),
)
def test_property_a_learned_value_never_survives_in_any_form(before, after, secret, form):
    s = Secrets()
    if not s.learn(secret):
        return
    spelled = {"raw": secret, "json": json.dumps(secret)[1:-1], "quote": quote(secret, safe=""),
               "quote_plus": quote_plus(secret, safe="")}[form]
    cls = _word_class(spelled)
    if cls is not None:  # a one-word value is a word only between non-letters of its case (tested above)
        same = str.islower if cls == "a-z" else str.isupper
        assume(not (before[-1:].isascii() and before[-1:].isalpha() and same(before[-1:])))
        assume(not (after[:1].isascii() and after[:1].isalpha() and same(after[:1])))
    text = before + spelled + after
    out, _ = Scrubber(s).text(text)
    assert spelled not in out
    assert len(out.encode("utf-8", "surrogatepass")) == len(text.encode("utf-8", "surrogatepass"))
    data, _ = Scrubber(s).data(text.encode("utf-8", "surrogatepass"))
    assert spelled.encode() not in data and len(data) == len(text.encode("utf-8", "surrogatepass"))


# -- the redactor learns by name and scrubs by value -------------------------------------------

TOKEN = "tok-" + "Q2w3E4r5T6y7U8"
COOKIE = "sess-" + "Z9x8C7v6B5n4"


def echo_exchange() -> Exchange:
    body = "".join(
        f"id: e{i}\ndata: {json.dumps(ev)}\n\n"
        for i, ev in enumerate([
            {"type": "started", "run": "r1"},
            {"type": "text", "text": f"auth was Bearer {TOKEN}"},
            {"type": "debug", "cookie": f"session={COOKIE}", "x_api_key": "KEY-" + "abcdef123456"},
            {"type": "done"},
        ])
    ).encode()
    ex = Exchange(
        0, "POST", "https://h/sessions/s1/runs?api_key=QUERY-1234567890",
        request_headers=[("Authorization", f"Bearer {TOKEN}"), ("Cookie", f"session={COOKIE}"),
                         ("X-Api-Key", "KEY-abcdef123456"), ("X-Debug-Echo", f"session={COOKIE}")],
        request_body=json.dumps({"runId": "r1", "password": "BODY-pw-123456"}).encode(),
        status=200, transport="sse", response_headers=[("Content-Type", "text/event-stream")],
        error=f"upstream said: bad key QUERY-1234567890 for {TOKEN}",
        notes={"close_reason": f"token {TOKEN} revoked"},
    )
    ex.frames = frames_from_body(body, 0)
    ex.frames[3] = Frame(0, 3, "sse", "in", None, f'data: {{"k": "{TOKEN}"'.encode(), start=ex.frames[3].start,
                         end=ex.frames[3].end, error=DecodeError("truncated-event", f"cut in {TOKEN}", 1, 2, f'"k": "{TOKEN[:9]}'))
    return ex


def test_redact_exchange_follows_every_value_into_server_frames_and_says_where():
    ex = echo_exchange()
    out = Redactor().redact_exchange(ex)
    dumped = json.dumps([out.url, out.request_headers, out.error, out.notes, [f.text for f in out.frames]], default=str)
    dumped += repr([f.raw for f in out.frames]) + repr([f.error for f in out.frames]) + repr(out.request_body)
    for secret in (TOKEN, COOKIE, "KEY-abcdef123456", "QUERY-1234567890", "BODY-pw-123456"):
        assert secret not in dumped, secret
    assert json.loads(out.frames[1].text)["text"] == f"auth was Bearer {mask(len(TOKEN))}"
    assert json.loads(out.frames[2].text)["cookie"] == f"session={mask(len(COOKIE))}"
    assert out.header("X-Debug-Echo") == f"session={mask(len(COOKIE))}"  # not a secret name: masked by value
    # lengths and offsets are the original ones; the spans map back onto the original stream
    for old, new in zip(ex.frames, out.frames, strict=True):
        assert (new.start, new.end, new.data_offsets) == (old.start, old.end, old.data_offsets)
        assert len((new.text or "").encode()) == len((old.text or "").encode()) and len(new.raw or b"") == len(old.raw or b"")
    spans = [s for s in out.notes["scrubbed"] if s["where"] == "frame:1"]
    at = ex.frames[1].text.index(TOKEN)
    assert spans == [{"where": "frame:1", "field": "text", "at": at, "len": len(TOKEN), "kind": "learned",
                      "stream": ex.frames[1].data_offsets[0] + at}]
    assert {"url", "request.header:authorization", "request.body", "frame:1", "frame:2", "frame:3", "error", "notes",
            "request.header:x-debug-echo"} <= set(out.notes["redacted"])
    assert "close_reason" in out.notes and TOKEN not in out.notes["close_reason"]
    assert TOKEN in ex.frames[1].text and ex.notes == {"close_reason": f"token {TOKEN} revoked"}


def test_redact_exchanges_learns_the_whole_recording_first():
    early = Exchange(0, "GET", "https://h/x", status=200, response_body=f'{{"note": "later key {TOKEN}"}}'.encode(),
                     response_headers=[("Content-Type", "application/json")])
    later = Exchange(1, "GET", "https://h/y", request_headers=[("Authorization", f"Bearer {TOKEN}")])
    red = Redactor()
    assert TOKEN.encode() in red.redact_exchange(early).response_body  # alone: not known yet
    out = Redactor().redact_exchanges([early, later])
    assert TOKEN.encode() not in out[0].response_body and out[0].notes["redacted"] == ["response.body"]


def test_every_by_name_path_teaches_the_value():
    red = Redactor(RedactConfig(fields=["ssn"]))
    red.redact_url("https://ann:pw-0123456789@h/x?access_token=at-0123456789&q=1")
    red.redact_body(b"client_secret=cs-0123456789&x=1", "application/x-www-form-urlencoded")
    red.redact_body(json.dumps({"a": {"api_key": {"inner": "nested-0123456789"}}, "ssn": "123-45-6789"}).encode(),
                    "application/json")
    red.redact_body(b'{"model": "m", "password": "cut-0123456789", "x": [', "application/json")
    red.redact_headers([("Set-Cookie", "sid=sc-0123456789; Path=/"), ("X-Auth-Token", "xa-0123456789")])
    assert set(red.secrets) == {"pw-0123456789", "at-0123456789", "cs-0123456789", "nested-0123456789",
                                "123-45-6789", "cut-0123456789", "sc-0123456789", "xa-0123456789"}
    assert "Secrets: 8 value(s)" in repr(red.secrets) and "0123456789" not in repr(red.secrets)


def test_keep_secrets_masks_no_shape_but_still_follows_the_users_own_names():
    red = Redactor(RedactConfig(keep_secrets=True, fields=["ssn"]))
    ex = Exchange(0, "POST", "/x", request_body=b'{"ssn": "123-45-6789", "password": "pw-0123456789"}',
                  request_headers=[("Content-Type", "application/json")])
    ex.frames = [Frame(0, 0, "sse", "in", "ssn 123-45-6789 pw-0123456789 sk-proj-" + "a1" * 15, start=0, end=50)]
    out = red.redact_exchange(ex)
    assert out.frames[0].text.startswith(f"ssn {mask(11)} pw-0123456789 sk-proj-")


def test_a_new_redactor_of_the_same_recording_adopts_what_was_learned():
    a, b = Redactor(), Redactor()
    a.redact_headers([("Authorization", f"Bearer {TOKEN}")])
    b.adopt(a)
    assert b.scrub_text(f"x {TOKEN}") == f"x {mask(len(TOKEN))}"


def test_a_one_word_value_never_masks_part_of_a_longer_word():
    """A cookie such as ``onboarding=complete`` must not turn A2A's ``completed``
    into ``********d`` (a broken status, a wrong verdict)."""
    s = Secrets()
    s.learn("complete")
    s.learn("SECRETVALUE")
    sc = Scrubber(s, shapes=False)
    assert sc.text('{"state": "completed"}') == ('{"state": "completed"}', [])
    assert sc.text('{"state": "complete"}')[0] == '{"state": "********"}'
    assert sc.text("Bearer%20SECRETVALUE")[0] == f"Bearer%20{mask(11)}"  # digits and other cases are no word
    assert sc.text("ASECRETVALUE")[0] == "ASECRETVALUE"
    mixed = Secrets()
    mixed.learn("mixed-Value-99")
    assert Scrubber(mixed, shapes=False).text("xmixed-Value-99y")[0] == f"x{mask(14)}y"  # not a word: anywhere
