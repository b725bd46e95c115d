"""Fast checks of the committed raw captures in recordings/captures/ (no server).

They are data for the adapters' unit tests, made by
recordings/captures/make_captures.py from the real servers.  This only checks
that the set is complete, small and readable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import (
    A2A_SCENARIOS,
    ADK_SCENARIOS,
    HERMES_SCENARIOS,
    OPENAI_SCENARIOS,
    REPO_ROOT,
    parse_sse,
)

CAPTURES = REPO_ROOT / "recordings" / "captures"
EXPECTED = {
    "adk": list(ADK_SCENARIOS),
    "a2a": ["agent-card", "version-mismatch"]
    + [f"{v}-{s}" for v in ("v10", "v03") for s in A2A_SCENARIOS],
    "hermes": list(HERMES_SCENARIOS),
    "openai": list(OPENAI_SCENARIOS),
}


def _all_exchanges() -> list[Path]:
    return sorted(CAPTURES.glob("*/*.exchange.json"))


@pytest.mark.parametrize("protocol", sorted(EXPECTED))
def test_every_scenario_captured(protocol):
    files = (CAPTURES / protocol).glob("*.exchange.json")
    have = {p.name.removesuffix(".exchange.json") for p in files}
    assert set(EXPECTED[protocol]) <= have


def test_files_are_small():
    big = [p for p in CAPTURES.rglob("*") if p.is_file() and p.stat().st_size >= 20 * 1024]
    assert big == []


@pytest.mark.parametrize("exchange", _all_exchanges(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_exchange_files_readable(exchange):
    meta = json.loads(exchange.read_text())
    assert meta["steps"]
    for step in meta["steps"]:
        resp = step["response"]
        body = (exchange.parent / resp["body_file"]).read_bytes()
        assert len(body) == resp["body_bytes"]
        ctype = {k.lower(): v for k, v in resp["headers"]}.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            events, _ = parse_sse(body)
            assert events, resp["body_file"]
        elif "json" in ctype:
            json.loads(body)
