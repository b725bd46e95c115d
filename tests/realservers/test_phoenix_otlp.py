"""``export --otlp`` against a real OTLP receiver: Arize Phoenix (issue 34).

Phoenix runs from its own environment (``.ci/peers.sh phoenix``), stores
what it receives and answers a REST API; the tests send recorded traces'
runs and findings over OTLP HTTP/protobuf and gRPC with the CLI and read the
spans back from Phoenix: names, parents, GenAI attributes, finding events,
error status, and that exporting again changes nothing (the ids are derived
from the trace).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatkit_trace.cli import main
from chatkit_trace.cli.check import run_check

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

TRACES = Path(__file__).resolve().parents[2] / "recordings" / "traces"


def _by_run(spans: list[dict]) -> dict[str, dict]:
    return {s["attributes"]["chatkit.run.id"]: s for s in spans if "chatkit.run.id" in s["attributes"] and s["name"] != "chatkit.session"}


def _project_spans(peer, uid: str, count: int = 0) -> list[dict]:
    """The trace's spans in Phoenix (once there are ``count``)."""
    return peer.wait_spans(count, where=lambda s: s["attributes"].get("chatkit.trace.uid") == uid)


def _uid(trace: Path) -> str:
    from chatkit_trace.export import trace_uid
    from chatkit_trace.store import TraceStore

    with TraceStore(trace, readonly=True) as store:
        return trace_uid(store.meta(), None)


def _send(capsys, trace: Path, *args: str) -> str:
    code = main(["export", str(trace), *args])
    err = capsys.readouterr().err
    assert code == 0, err
    return err


def test_runs_and_findings_reach_phoenix_over_http(phoenix_peer, capsys):
    trace = TRACES / "adk.db"
    uid = _uid(trace)
    err = _send(capsys, trace, "--otlp", phoenix_peer.otlp_http, "--frames", "3")
    sent = int(err.split(" span(s) to ")[0].rsplit("-> ", 1)[1])
    spans = _project_spans(phoenix_peer, uid, sent)
    assert len(spans) == sent
    runs = _by_run(spans)
    check = run_check(str(trace))
    expected_runs = {f.run_id for f in check.findings if f.run_id}
    assert expected_runs <= set(runs)
    # every run finding check reports is an event on its run's span; errors make the span ERROR
    for f in check.findings:
        if not f.run_id:
            continue
        span = runs[f.run_id]
        codes = [e["attributes"].get("chatkit.finding.code") for e in span["events"] if e["name"] == "chatkit.finding"]
        assert f.code in codes, (f.code, span["events"])
        event = next(e for e in span["events"] if e["attributes"].get("chatkit.finding.code") == f.code)
        assert event["attributes"]["chatkit.finding.severity"] == f.severity
        assert event["attributes"]["chatkit.finding.rule"] == f.rule
        assert event["attributes"]["chatkit.finding.frame"] == f.frames[0]
        if f.severity == "error":
            assert span["status_code"] == "ERROR" and f.code in span["status_message"]
    # the GenAI conventions: operation, provider, conversation, model, usage
    sessions = {s["context"]["span_id"]: s for s in spans if s["name"] == "chatkit.session"}
    for run in runs.values():
        a = run["attributes"]
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.provider.name"] == "adk"
        assert a["gen_ai.agent.name"] == "chatkit_peer"
        assert a["gen_ai.response.model"] == "scripted-offline-1"
        assert run["name"] == "invoke_agent chatkit_peer"
        parent = sessions[run["parent_id"]]
        assert parent["context"]["trace_id"] == run["context"]["trace_id"]
        assert parent["attributes"]["gen_ai.conversation.id"] == a["gen_ai.conversation.id"]
        assert "gen_ai.input.messages" not in a  # content only when asked
        frames = [e for e in run["events"] if e["name"] == "chatkit.frame"]
        assert 0 < len(frames) <= 3 and "chatkit.frame.text" not in frames[0]["attributes"]
    completed = [r for r in runs.values() if r["attributes"]["chatkit.run.status"] == "completed"]
    assert completed and all(r["attributes"]["gen_ai.usage.input_tokens"] == 10 for r in completed)
    recording = [s for s in spans if s["name"] == "chatkit.recording"]
    assert len(recording) == 1
    trace_codes = {f.code for f in check.findings if f.session_id is None}
    assert {e["attributes"]["chatkit.finding.code"] for e in recording[0]["events"]} == trace_codes

    # exported again: the same ids, nothing new in the receiver (another
    # trace sent after it and seen stored says the receiver has processed it)
    _send(capsys, trace, "--otlp", phoenix_peer.otlp_http, "--frames", "3")
    marker = TRACES / "hermes.db"
    err = _send(capsys, marker, "--otlp", phoenix_peer.otlp_http)
    assert len(_project_spans(phoenix_peer, _uid(marker), int(err.split(" span(s) to ")[0].rsplit("-> ", 1)[1]))) > 0
    again = _project_spans(phoenix_peer, uid)
    assert sorted(s["context"]["span_id"] for s in again) == sorted(s["context"]["span_id"] for s in spans)


def test_grpc_and_opt_in_content(phoenix_peer, capsys):
    trace = TRACES / "openai.db"
    uid = _uid(trace)
    err = _send(capsys, trace, "--otlp", phoenix_peer.otlp_grpc, "--otlp-protocol", "grpc", "--content")
    sent = int(err.split(" span(s) to ")[0].rsplit("-> ", 1)[1])
    runs = _by_run(_project_spans(phoenix_peer, uid, sent))
    assert set(runs) == {"run-1", "run-2", "run-3", "run-4", "run-5", "run-6"}
    one = runs["run-1"]["attributes"]
    assert runs["run-1"]["name"] == "chat fake-text"
    assert one["gen_ai.operation.name"] == "chat" and one["gen_ai.provider.name"] == "openai"
    assert one["gen_ai.request.model"] == "fake-text" and one["gen_ai.response.finish_reasons"] == ["stop"]
    assert one["gen_ai.usage.input_tokens"] > 0 and one["gen_ai.usage.output_tokens"] > 0
    assert one["gen_ai.response.time_to_first_chunk"] > 0
    assert json.loads(one["gen_ai.input.messages"]) == [{"role": "user", "parts": [{"type": "text", "content": "Say hello."}]}]
    out = json.loads(one["gen_ai.output.messages"])
    assert out[0]["role"] == "assistant" and out[0]["parts"][0]["content"] == "Hello from the fake model."
    failed = runs["run-4"]
    assert failed["attributes"]["chatkit.run.status"] == "failed"
    assert failed["status_code"] == "ERROR" and failed["attributes"]["error.type"]
