"""``export --otlp``: the spans (through the official SDK's in-memory
exporter), their ids, what is opt-in, and the one-line errors.  The same
spans against a real receiver: tests/realservers/test_phoenix_otlp.py."""

from __future__ import annotations

import json
import sys

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from chatkit_trace.cli import main
from chatkit_trace.cli.check import run_check
from chatkit_trace.errors import ExportError
from chatkit_trace.export import ExportOptions, collect
from chatkit_trace.export._collect import sample
from chatkit_trace.export.otlp import OTLPSink
from chatkit_trace.export.settings import endpoint_url as _endpoint
from chatkit_trace.export.settings import resolve_protocol
from chatkit_trace.loading import open_trace

from ._util import SECRET, recorded, with_secret_text


def _spans(path, **options):
    exporter = InMemorySpanExporter()
    sink = OTLPSink(exporter)
    loaded = open_trace(path)
    try:
        export = collect(loaded.store, loaded.adapter, capabilities=loaded.capabilities, name=path.name,
                         options=ExportOptions(**options), sinks=[sink])
    finally:
        loaded.close()
    assert sink.error is None and sink.sent == sink.spans
    return export, exporter.get_finished_spans()


def _runs(spans):
    return {s.attributes["chatkit.run.id"]: s for s in spans if s.kind == SpanKind.CLIENT}


def test_a_run_is_a_span_of_its_session_and_its_findings_are_events():
    path = recorded("adk")
    export, spans = _spans(path)
    check = run_check(str(path))
    sessions = {s.context.span_id: s for s in spans if s.name == "chatkit.session"}
    runs = _runs(spans)
    assert len(runs) == len(export.runs) == 5
    recording = [s for s in spans if s.name == "chatkit.recording"]
    assert len(recording) == 1
    for span in runs.values():
        parent = sessions[span.parent.span_id]
        assert parent.context.trace_id == span.context.trace_id
        assert parent.attributes["gen_ai.conversation.id"] == span.attributes["gen_ai.conversation.id"]
        assert [link.context.span_id for link in parent.links] == [recording[0].context.span_id]
        assert span.start_time <= span.end_time
    # every finding check reports is an event, on its run, its session or the recording
    events = [(e.attributes["chatkit.finding.code"], e.attributes["chatkit.finding.fingerprint"])
              for s in spans for e in s.events if e.name == "chatkit.finding"]
    assert sorted(events) == sorted((f.code, f.fingerprint) for f in check.findings)
    for f in check.findings:
        if f.run_id and f.severity == "error":
            span = runs[f.run_id]
            assert span.status.status_code == StatusCode.ERROR and f.code in span.status.description
    quiet = [s for s in runs.values() if not s.attributes.get("chatkit.findings") and s.attributes["chatkit.run.status"] == "completed"]
    assert quiet and all(s.status.status_code == StatusCode.UNSET for s in quiet)


def test_ids_are_derived_from_the_trace_so_a_re_export_is_the_same():
    _, one = _spans(recorded("hermes"))
    _, two = _spans(recorded("hermes"))
    _, other = _spans(recorded("adk"))
    ids = sorted((s.context.trace_id, s.context.span_id) for s in one)
    assert ids == sorted((s.context.trace_id, s.context.span_id) for s in two)
    assert not set(ids) & {(s.context.trace_id, s.context.span_id) for s in other}
    assert len({s.context.span_id for s in one}) == len(one)


def test_genai_attributes_where_the_protocol_carries_them():
    _, spans = _spans(recorded("openai"))
    runs = _runs(spans)
    a = runs["run-1"].attributes
    assert runs["run-1"].name == "chat fake-text"
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.system"]) == ("chat", "openai", "openai")
    assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "fake-text"
    assert a["gen_ai.response.id"].startswith("chatcmpl-")
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("stop",)
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert 0 < a["gen_ai.response.time_to_first_chunk"] < 5
    assert a["chatkit.route"] == "POST /**/chat/completions"
    failed = runs["run-4"]
    assert failed.attributes["chatkit.run.status"] == "failed" and failed.attributes["error.type"]
    assert failed.status.status_code == StatusCode.ERROR
    # hermes carries usage but no model: no model attribute is made up
    _, spans = _spans(recorded("hermes"))
    h = next(s for s in _runs(spans).values() if "gen_ai.usage.input_tokens" in s.attributes)
    assert h.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert "gen_ai.request.model" not in h.attributes and "gen_ai.response.model" not in h.attributes


def test_content_only_when_asked_and_masked_as_the_trace_is(tmp_path):
    path = with_secret_text(tmp_path)
    _, spans = _spans(path)
    dumped = json.dumps([dict(s.attributes) for s in spans] + [dict(e.attributes) for s in spans for e in s.events], default=str)
    assert "gen_ai.input.messages" not in dumped and "Say" not in dumped
    _, spans = _spans(path, content=True, frames_per_run=100)
    run = _runs(spans)["run-1"]
    inputs = json.loads(run.attributes["gen_ai.input.messages"])
    outputs = json.loads(run.attributes["gen_ai.output.messages"])
    assert inputs[0]["role"] == "user" and inputs[0]["parts"][0]["content"].startswith("Say ")
    assert outputs[0]["parts"][0]["content"].startswith("Hello ")
    texts = [e.attributes.get("chatkit.frame.text", "") for e in run.events]
    everything = json.dumps([dict(s.attributes) for s in spans], default=str) + json.dumps(texts)
    assert SECRET not in everything
    assert SECRET[:6] not in inputs[0]["parts"][0]["content"]


def test_frames_are_opt_in_and_sampled_for_long_runs():
    _, spans = _spans(recorded("openai"))
    assert not [e for s in spans for e in s.events if e.name == "chatkit.frame"]
    _, spans = _spans(recorded("openai"), frames_per_run=3)
    run = _runs(spans)["run-1"]
    frames = [e for e in run.events if e.name == "chatkit.frame"]
    total = run.attributes["chatkit.run.frames"]
    assert total > 3 and len(frames) == 3 and run.attributes["chatkit.frames.sampled"] is True
    ids = [e.attributes["chatkit.frame.id"] for e in frames]
    assert ids[0] == "0:0" and ids[-1] == f"0:{total - 1}"
    assert sample(10, 4) == [0, 3, 6, 9] and sample(3, 10) == [0, 1, 2] and sample(5, 0) == []


def test_endpoints_and_protocols(monkeypatch):
    assert _endpoint("http://h:4318", "http/protobuf") == "http://h:4318/v1/traces"
    assert _endpoint("https://h/api/otel/v1/traces", "http/protobuf") == "https://h/api/otel/v1/traces"
    assert _endpoint("h:4317", "grpc") == "http://h:4317"
    assert _endpoint(None, "grpc") is None
    for bad in ("ftp://h:1", "http://:80", "http://h:port"):
        with pytest.raises(ExportError):
            _endpoint(bad, "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert resolve_protocol(None) == "grpc" and resolve_protocol("http/protobuf") == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ExportError, match="not supported"):
        resolve_protocol(None)


def test_a_receiver_that_is_not_there_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the exporter's own variable
    code = main(["export", str(recorded("adk")), "--otlp", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "took 0 of 11 span(s)" in err and "127.0.0.1:9" in err, err


def test_without_the_extra_it_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    code = main(["export", str(recorded("adk")), "--otlp", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'chatkit-trace[otel]'" in err and err.count("\n") == 1


def test_fixture_options_do_not_mix(capsys):
    assert main(["export", str(recorded("adk")), "--otlp", "http://127.0.0.1:9", "--session", "s"]) == 2
    assert "make a fixture" in capsys.readouterr().err
    assert main(["export", str(recorded("adk")), str(recorded("hermes")), "-s", "x", "-o", "y"]) == 2
    assert "one TRACE" in capsys.readouterr().err
    assert main(["export", str(recorded("adk"))]) == 2
    assert "--session, -o/--output" in capsys.readouterr().err


def test_a_har_file_has_a_stable_uid_too(tmp_path):
    """An input imported on the fly (a new temporary database each time) takes its uid from its first exchange."""
    from chatkit_trace.export import collect as run

    har = recorded("openai").parents[2] / "tests" / "data" / "import" / "myproto.har"
    uids = []
    for _ in range(2):
        loaded = open_trace(har, profile="myproto")
        try:
            uids.append(run(loaded.store, loaded.adapter, capabilities=loaded.capabilities, name=har.name, kind=loaded.kind).info.uid)
        finally:
            loaded.close()
    assert uids[0] == uids[1] and len(uids[0]) == 32


def test_a_secret_the_stream_only_shows_decoded_is_in_no_span(tmp_path):
    """Masking at the spans' attributes (decision 231): the run's content joins
    a key streamed in two halves; no attribute of any span or event holds it."""
    from ._util import with_split_secret

    _, spans = _spans(with_split_secret(tmp_path), content=True, frames_per_run=50)
    texts = []
    for s in spans:
        texts += [str(v) for v in s.attributes.values()]
        texts += [str(v) for e in s.events for v in (e.attributes or {}).values()]
    joined = " ".join(texts)
    assert "[REDACTED]" in joined  # the answer is exported, masked
    assert SECRET not in joined
