"""``parse_json`` (msgspec first, the standard library for what it refuses)
returns exactly what ``json.JSONDecoder`` returns, and raises what it raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.wire import parse_json
from chatkit_trace.wire.frames import _DECODER

_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)


def _same(a, b) -> bool:
    """Equal values of the same types all the way down (1 is not 1.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return repr(a) == repr(b)


@settings(max_examples=300, deadline=None)
@given(_json, st.booleans())
def test_same_values_as_the_standard_library(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert _same(parse_json(text), _DECODER.decode(text))


@pytest.mark.parametrize(
    "text",
    ["1e400", "-1e999", "123456789012345678901234567890", '"\\ud800"', '{"a": 1, "a": 2}', "[1.5e-320]", '"\\ud83d\\ude00"',
     " [1] \n", "0.30000000000000004", "-0", "[" * 100 + "]" * 100],
    ids=lambda t: repr(t[:12]),
)
def test_edges_decided_like_the_standard_library(text):
    assert _same(parse_json(text), _DECODER.decode(text))


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[1,]", "01", "", "  ", '"a\tb"', "\ufeff[1]", "[" * 5000 + "]" * 5000], ids=lambda t: repr(t[:12]))
def test_errors_are_the_standard_library_s(text):
    with pytest.raises((ValueError, RecursionError)) as want:
        _DECODER.decode(text)
    with pytest.raises(type(want.value)) as got:
        parse_json(text)
    assert str(got.value) == str(want.value)
