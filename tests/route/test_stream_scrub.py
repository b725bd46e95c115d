"""Secrets that only a decoded stream shows (issue 32): a token split across
events, across the parts of one event, or JSON-escaped (``\\u0073k-…``) is
masked in the frames that hold its pieces, so nothing joined from the stored
frames later (a snapshot, a report, a fixture) holds it.

Property: for every token shape and a learned value, split anywhere into
any number of pieces, spread over events and parts, each character possibly
``\\u``-escaped: after :meth:`Redactor.redact_exchange` the frames keep their
byte lengths and stay JSON, and no field's joined, decoded text holds the
token.  And a stream without a secret comes out byte for byte as it went in.
"""

from __future__ import annotations

import json
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.masking import SHAPES, Scrubber, Secrets, StreamScrub, apply_hits, mask
from chatkit_trace.route import Redactor
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import Frame

from .test_secrets import POSITIVE

LEARNED = "Tok-93jf02kdm3nd82kq-x7"  # no known shape: only learning finds it
#: (text around the token, token) per shape, and the learned value
CASES = [(name, template, token) for name, cases in POSITIVE.items() for template, token in cases] + [
    ("learned", "your token is {t}, keep it", LEARNED)
]


def redactor() -> Redactor:
    red = Redactor()
    red.redact_headers([("X-Api-Key", LEARNED)])  # learned the way a recording learns it
    assert LEARNED in set(red.secrets)
    return red


def escape(text: str, which: set[int]) -> str:
    """``text`` as a JSON string body with the characters at ``which`` written as ``\\uXXXX``."""
    out = []
    for i, c in enumerate(text):
        out.append(f"\\u{ord(c):04x}" if i in which else json.dumps(c)[1:-1])
    return "".join(out)


def sse_frames(events: list[str]) -> list[Frame]:
    frames, at = [], 0
    for i, data in enumerate(events):
        n = len(data.encode())
        frames.append(Frame(exchange_index=0, index=i, transport="sse", direction="in", at=float(i), text=data,
                            start=at + 6, end=at + 6 + n, data_offsets=[at + 6]))
        at += n + 8
    return frames


def exchange(frames: list[Frame]) -> Exchange:
    return Exchange(index=0, method="POST", url="http://backend/sessions/s1/runs", status=200, transport="sse",
                    response_headers=[("content-type", "text/event-stream")], frames=frames)


def joined(frames: list[Frame]) -> dict[str, str]:
    """Each field's decoded text, joined across frames (what an adapter builds)."""
    out: dict[str, str] = {}

    def walk(v, key=""):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str):
            out[key] = out.get(key, "") + v

    for f in frames:
        walk(json.loads(f.text))
    return out


@st.composite
def split_streams(draw):
    name, template, token = draw(st.sampled_from(CASES))
    text = template.format(t=token)
    at = text.index(token)
    # cut points: at least one inside the token, others anywhere
    inside = draw(st.integers(at + 1, at + len(token) - 1))
    others = draw(st.lists(st.integers(1, len(text) - 1), max_size=4))
    cuts = sorted({inside, *others})
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    escaped = draw(st.sets(st.integers(0, len(text) - 1), max_size=6))
    events: list[str] = []
    pos = 0
    for piece in pieces:
        here = {i - pos for i in escaped if pos <= i < pos + len(piece)}
        pos += len(piece)
        body = escape(piece, here)
        if draw(st.booleans()) and len(piece) > 1:  # this piece split again across the parts of one event
            k = draw(st.integers(1, len(piece) - 1))
            a = escape(piece[:k], {i for i in here if i < k})
            b = escape(piece[k:], {i - k for i in here if i >= k})
            events.append(f'{{"type": "text", "parts": [{{"text": "{a}"}}, {{"text": "{b}"}}]}}')
        else:
            events.append(f'{{"type": "text", "text": "{body}"}}')
    return name, token, events


@settings(max_examples=300, deadline=None)
@given(split_streams())
def test_a_token_split_or_escaped_anywhere_is_masked_in_the_frames_holding_its_pieces(case):
    name, token, events = case
    frames = sse_frames(events)
    out = redactor().redact_exchange(exchange(frames))
    for before, after in zip(frames, out.frames, strict=True):
        assert len(after.text.encode()) == len(before.text.encode())  # byte lengths kept: offsets stay true
        json.loads(after.text)  # still JSON
    assert all(token not in text for text in joined(out.frames).values()), (name, events, [f.text for f in out.frames])
    assert not any(token in f.text for f in out.frames)
    assert {s["where"] for s in out.notes["scrubbed"]} <= {f"frame:{f.index}" for f in frames}


def test_every_split_position_of_every_shape_and_the_learned_value():
    """Exhaustive over two events: the token cut at each of its positions."""
    red = redactor()
    for name, template, token in CASES:
        text = template.format(t=token)
        at = text.index(token)
        for k in range(at + 1, at + len(token)):
            events = [json.dumps({"type": "text", "text": text[:k]}), json.dumps({"type": "text", "text": text[k:]})]
            out = red.redact_exchange(exchange(sse_frames(events)))
            whole = joined(out.frames)["text"]
            assert token not in whole, (name, k, whole)
            assert len(whole) == len(text)  # the masks replace the token's characters one for one (no escapes here)


def test_the_joined_text_reads_as_one_mask():
    token = "sk-proj-" + "Zq8xLm2Vb7Nc4Rt6Yw1Pk9Hs3Df5Gj0Au"
    text = f"key {token} ok"
    events = [json.dumps({"choices": [{"delta": {"content": text[i : i + 4]}}]}) for i in range(0, len(text), 4)]
    out = Redactor().redact_exchange(exchange(sse_frames(events)))
    assert joined(out.frames)["content"] == f"key {mask(len(token))} ok"
    notes = [s for s in out.notes["scrubbed"] if s.get("joined")]
    assert notes and {s["kind"] for s in notes} == {"sk-key"}
    assert len(notes) == len({(s["where"], s["at"]) for s in notes})  # a piece masked again is noted once


def test_a_json_body_with_an_escaped_or_split_secret():
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    body = (f'{{"messages": [{{"parts": [{{"text": "{token[:10]}"}}, {{"text": "{token[10:]}"}}]}}, '
            f'{{"text": "{escape(token, {0, 5})}"}}]}}').encode()
    ex = Exchange(index=0, method="GET", url="http://b/history", status=200, response_body=body,
                  response_headers=[("content-type", "application/json")])
    out = Redactor().redact_exchange(ex)
    assert len(out.response_body) == len(body)
    doc = json.loads(out.response_body)
    parts = doc["messages"][0]["parts"]
    assert token not in parts[0]["text"] + parts[1]["text"] and token not in doc["messages"][1]["text"]
    assert "response.body" in out.notes["redacted"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(string.ascii_letters + string.digits + " .,-_\\\"é😀\n", max_size=30), min_size=1, max_size=8),
       st.booleans())
def test_a_stream_without_a_secret_is_left_byte_for_byte(texts, escaped):
    """No false positive from joining: chat text without a token changes nothing."""
    events = [json.dumps({"type": "text", "text": t}, ensure_ascii=escaped) for t in texts]
    frames = sse_frames(events)
    out = redactor().redact_exchange(exchange(frames))
    assert [f.text for f in out.frames] == events
    assert "scrubbed" not in out.notes


def test_the_stream_scrub_names_earlier_frames_and_forgets_them_past_its_tail():
    sc = Scrubber(Secrets(process=False))
    stream = StreamScrub(sc, tail=64)
    token = "sk-" + "abc123" * 5
    hits = stream.feed(0, json.dumps({"text": "x " + token[:10]}))
    assert hits == {}  # a prefix alone is nothing yet
    hits = stream.feed(1, json.dumps({"text": token[10:] + " y"}))
    assert set(hits) == {0, 1}
    first = apply_hits(json.dumps({"text": "x " + token[:10]}), hits[0])
    assert json.loads(first)["text"] == "x " + mask(len(token))[:10]
    for i in range(2, 40):
        stream.feed(i, json.dumps({"text": f"filler text {i} " * 2}))
    assert not stream.holds(0) and stream.holds(39)


def test_shape_table_is_covered():
    assert {n for n, _, _ in CASES} == {s.name for s in SHAPES} | {"learned"}
