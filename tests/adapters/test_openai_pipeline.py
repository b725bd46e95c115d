"""Recorded litellm traffic replayed through the pipeline with the ``openai`` adapter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chatkit_trace.adapters import create_adapter
from chatkit_trace.adapters.openai import OpenAIProtocol
from chatkit_trace.pipeline import replay
from chatkit_trace.trace import Exchange, frames_from_body

CAPTURES = Path(__file__).resolve().parents[2] / "recordings" / "captures" / "openai"
ADAPTER = create_adapter(OpenAIProtocol())


def _exchange(index: int, name: str, body_file: str, *, step: int = 0, run: str = "r1") -> Exchange:
    recorded = json.loads((CAPTURES / f"{name}.exchange.json").read_text())["steps"][step]
    body = (CAPTURES / body_file).read_bytes()
    t = float(index)
    return Exchange(
        index,
        "POST",
        "http://127.0.0.1/v1/chat/completions",
        started_at=t,
        ended_at=t + 0.5,
        request_body=json.dumps(recorded["request"]["body"]).encode(),
        status=recorded["response"]["status"],
        transport="sse",
        frames=frames_from_body(body, index, at=t + 0.01, spacing=0.001),
        end="complete",
        capability="run",
        session_id="s1",
        run_id=run,
    )


def _snapshot(r: Any) -> Any:
    return r.sessions["s1"].core.snapshot


def test_a_recorded_answer_replays_clean():
    r = replay([_exchange(0, "text", "text.stream.sse")], ADAPTER)
    assert not r.violations
    snap = _snapshot(r)
    assert [m.id for m in snap.messages] == ["user:r1", "assistant:r1"]
    assert snap.message("user:r1").text == "Say hello."  # decode_input + project_input (R4.5)
    assert snap.run("r1").status == "completed"
    assert r.exchanges[0].frames[-1].end_marker  # [DONE]


def test_a_recorded_midstream_error_fails_the_run():
    r = replay([_exchange(0, "midstream", "midstream.stream.sse")], ADAPTER)
    view = _snapshot(r).run("r1")
    assert view.status == "failed" and view.error.code == "500"


def test_a_recorded_tool_loop_replays_as_one_clean_run():
    r = replay(
        [_exchange(0, "tool", "tool.turn1.sse"), _exchange(1, "tool", "tool.turn2.sse", step=1)],
        ADAPTER,
    )
    assert r.exchanges[1].dispatch == "continued"
    assert not r.violations
    assert _snapshot(r).run("r1").status == "completed"
