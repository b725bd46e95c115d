"""The rule syntax (docs/faults.md): what parses, what it means, and the errors."""

from __future__ import annotations

import pytest

from chatkit_trace.addons.fault_rules import (
    FaultRuleError,
    Target,
    parse_duration,
    parse_rule,
    parse_rules,
)
from chatkit_trace.route.identity import Match


def test_the_issue_example():
    r = parse_rule("cut:after=5,mode=reset,capability=run,nth=1")
    assert (r.kind, r.after_events, r.mode) == ("cut", 5, "reset")
    assert r.target == Target(capability="run", nth=1)
    assert r.target.needs_profile and r.acts_on_stream


@pytest.mark.parametrize(
    "text, fields",
    [
        ("cut:after=0", {"after_events": 0, "mode": "reset"}),
        ("cut:after=1.5s,mode=close", {"after_events": None, "seconds": 1.5, "mode": "close"}),
        ("cut:after=250ms", {"seconds": 0.25}),
        ("delay:by=200ms", {"seconds": 0.2, "jitter": 0.0, "start": 1}),
        ("delay:by=0ms,jitter=1s,from=3", {"seconds": 0.0, "jitter": 1.0, "start": 3}),
        ("stall:for=2s", {"seconds": 2.0, "start": 0}),
        ("stall:for=2s,after=3", {"seconds": 2.0, "start": 3}),
        ("dup:at=3", {"at": 3}),
        ("drop:at=1", {"at": 1}),
        ("swap:at=2", {"at": 2}),
        ("corrupt:at=2", {"at": 2, "how": "json"}),
        ("corrupt:at=2,how=UTF8", {"how": "utf8"}),
        ("http", {"status": 503, "retry_after": 1}),
        ("http:status=429", {"status": 429, "retry_after": 1}),
        ("http:status=429,retry-after=7", {"status": 429, "retry_after": 7}),
        ("http:status=500", {"status": 500, "retry_after": None}),
        ("HTTP:status=503,retry_after=0", {"kind": "http", "retry_after": 0}),
    ],
)
def test_kinds_and_parameters(text, fields):
    r = parse_rule(text)
    for k, v in fields.items():
        assert getattr(r, k) == v, (k, r)
    assert r.text == text


def test_targets():
    r = parse_rule(
        " drop:at=2, path=/sessions/*/runs , method=post, session=s1*, run=r-?, route=run, p=0.5 "
    )
    assert (
        r.text
        == "drop:at=2, path=/sessions/*/runs , method=post, session=s1*, run=r-?, route=run, p=0.5"
    )
    assert r.target == Target(
        route="run", path="/sessions/*/runs", method="POST", session="s1*", run="r-?", p=0.5
    )
    m = Match(capability="run", session_id="s1+x", run_id="r-1", route="run")
    assert r.target.matches("POST", "/sessions/s1+x/runs", m)
    assert not r.target.matches("GET", "/sessions/s1+x/runs", m)
    assert not r.target.matches("POST", "/other", m)
    assert not r.target.matches(
        "POST",
        "/sessions/s1/runs",
        Match(capability="run", session_id="s2", run_id="r-1", route="run"),
    )
    assert not r.target.matches("POST", "/sessions/s1/runs", None)  # profile keys need a match
    # path globs cross slashes; no target matches everything
    assert parse_rule("dup:at=1,path=/api/*").target.matches("GET", "/api/a/b", None)
    assert parse_rule("dup:at=1").target.matches("DELETE", "/", None)


def test_several_rules_per_value_and_per_option():
    rules = parse_rules(["cut:after=5; delay:by=1s", "dup:at=2\nswap:at=3", "  "])
    assert [r.kind for r in rules] == ["cut", "delay", "dup", "swap"]
    assert parse_rules("http:status=500")[0].status == 500
    assert parse_rules([]) == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("boom", "unknown kind 'boom'"),
        ("cut", "cut needs after="),
        ("cut:after=5,after=6", "after given twice"),
        ("cut:after=-1", "after=-1"),
        ("cut:after=5,mode=soft", "mode='soft': use reset or close"),
        ("cut:after=5x", "not a duration"),
        ("delay:by=200", "give a unit"),
        ("stall:for=2", "give a unit"),
        ("stall:for=1s,at=3", "unknown key 'at' for stall"),
        ("dup:at=0", "0 is below 1"),
        ("dup:at=x", "not a whole number"),
        ("drop:at=1,nth=0", "nth=0"),
        ("corrupt:at=1,how=zip", "use json or utf8"),
        ("http:status=200", "below 400"),
        ("http:status=700", "400-599"),
        ("drop:at=1,p=2", "not between 0 and 1"),
        ("drop:at=1,p=x", "not a probability"),
        ("drop:at=1,method=G T", "not an HTTP method"),
        ("drop:at=1,session=", "session= is empty"),
        ("drop:at", "'at' is not KEY=VALUE"),
    ],
)
def test_errors_name_the_rule_and_the_key(text, message):
    with pytest.raises(FaultRuleError) as err:
        parse_rule(text)
    assert message in str(err.value)
    if text.strip():
        assert repr(text.strip()) in str(err.value)


def test_durations():
    assert parse_duration("250ms") == 0.25
    assert parse_duration(" 2S ") == 2.0
    with pytest.raises(ValueError):
        parse_duration("2")


def test_describe():
    assert parse_rule("cut:after=5").describe() == "cut (reset) after 5 events"
    assert parse_rule("cut:after=2s,mode=close").describe() == "cut (close) after 2s"
    assert (
        parse_rule("delay:by=200ms,jitter=50ms").describe()
        == "delay events from #1 by 200ms + up to 50ms"
    )
    assert (
        parse_rule("http:status=429,retry_after=3").describe() == "answer HTTP 429 (Retry-After: 3)"
    )
    assert parse_rule("swap:at=4").describe() == "swap event #4"
