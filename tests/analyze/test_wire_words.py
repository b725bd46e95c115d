"""Findings say what the protocol's own wire shows next to chatkit's words
(decisions.md 279); the status word is the one vocabulary (decisions.md 277).
Real captured traffic, cut or edited where the case needs it."""

from __future__ import annotations

from chatkit_trace.adapters import load_protocol
from chatkit_trace.adapters._protocol import wire_name
from chatkit_trace.wire import DONE

from .wire_cases import Call, capture_calls, run


def test_wire_names_read_the_usual_places():
    assert wire_name(DONE) == "data: [DONE]"
    assert wire_name({"object": "chat.completion.chunk", "choices": [{"delta": {}, "finish_reason": "stop"}]}) == (
        'chat.completion.chunk, finish_reason: "stop"'
    )
    assert wire_name({"event": "run.completed", "run_id": "r"}) == "run.completed"
    assert wire_name({"jsonrpc": "2.0", "id": 1, "result": {"kind": "status-update", "status": {"state": "completed"}, "final": True}}) == (
        'status-update, state: "completed", final: true'
    )
    assert load_protocol("adk").wire_name({"content": {"parts": [{"text": "Hi"}]}, "partial": True}) == "event with text, partial: true"
    assert wire_name(42) is None


def test_every_built_in_protocol_names_its_conclusions():
    for name in ("openai", "adk", "a2a", "hermes", "agui", "myproto"):
        terms = load_protocol(name).wire_terms
        assert {"completed", "failed", "interrupted"} <= set(terms), name


def test_ck102_on_hermes_names_the_last_event_and_the_missing_run_completed():
    create, stream, hist = capture_calls("session_text", "hermes")
    raw = stream.raw.split(b"\n\n")
    cut = Call(**{**stream.__dict__, "raw": b"\n\n".join(raw[:4]) + b"\n\n"})  # ends after two deltas, cleanly
    _, findings = run([create, cut], "hermes")
    [f] = [f for f in findings if f.code == "CK102"]
    assert "no completed, failed or interrupted" in f.message
    assert "On the hermes wire: the last event was `assistant.delta`" in f.message
    assert "completed: `event: run.completed`" in f.message


def test_ck105_says_how_the_run_stands_and_what_the_wire_sent():
    """The completion is rejected (active-work): the run is not completed;
    CK105 says it stays running, the word ``runs`` shows, and names the
    wire's completion (the example protocol's ``done``)."""
    from chatkit_trace.analyze import analyze

    from .corpus import CORPUS, load_case

    _, exchanges, adapter = load_case(CORPUS / "CK105.json")
    _, findings = analyze(exchanges, adapter)
    [f] = [f for f in findings if f.code == "CK105"]
    assert "concluded the run as completed while a tool call was still running" in f.message
    assert "so the run is not completed" in f.message and "The run stays running" in f.message
    assert "On the wire the completion was `done`" in f.message
