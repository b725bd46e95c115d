"""The recorder's live spans (``chatkit_otlp``): a real recorder (writer
process) records with ``chatkit_derive=end``; its deriver (:class:`LiveDeriver`,
as the deriver process runs it) derives and sends spans to a real OTLP/HTTP
receiver; what arrives is what ``export --otlp`` sends of the same trace, and
a span the queue cannot hold is counted and said, never lost silently.
The same through a real mitmdump: tests/export/test_live_mitmdump.py."""

from __future__ import annotations

import logging
from dataclasses import replace

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatkit_trace.capture._messages import Log
from chatkit_trace.capture.deriver import LiveDeriver
from chatkit_trace.export import collect
from chatkit_trace.export.otlp import OTLPSink
from chatkit_trace.export.settings import settings_from_options
from chatkit_trace.loading import open_trace
from chatkit_trace.store import TraceStore

from ..capture.test_recorder import CHUNKS, harness, make_flow  # noqa: F401 - the fixture
from .receiver import Receiver

__all__ = ["harness"]


def _exported(db):
    exporter = InMemorySpanExporter()
    loaded = open_trace(db)
    try:
        collect(loaded.store, loaded.adapter, capabilities=loaded.capabilities, name=db.name, sinks=[OTLPSink(exporter)])
    finally:
        loaded.close()
    return {(s.context.span_id.to_bytes(8, "big").hex(), s.name) for s in exporter.get_finished_spans()}


def _live(h, said: list, url: str, **options) -> LiveDeriver:
    """The recorder's deriver on ``h``'s trace with ``chatkit_otlp=url`` (and
    ``chatkit_otlp_*`` options): the settings as the recorder parses them.
    (The harness's own recorder runs without them: its deriver derives at
    the stop, after the test.)"""
    settings, errors = settings_from_options(url, options.get("protocol", ""), options.get("frames", 0),
                                             options.get("content", False), options.get("queue", 4096))
    assert not errors
    return LiveDeriver(replace(h.rec.writer.config, otlp=settings), emit=said.append)


def _record(h, sessions: int) -> None:
    """``sessions`` sessions of one run each, stored by the writer process."""
    for i in range(sessions):
        body = f'{{"runId": "r{i}", "text": "hi"}}'.encode()
        h.stream(make_flow(url=f"http://backend/sessions/s{i}/runs", body=body), CHUNKS)
    assert h.rec.writer.sync()


def test_runs_leave_as_they_settle_with_the_ids_an_export_gives(harness):
    with Receiver() as rx:
        h = harness(chatkit_derive="end")
        _record(h, 3)
        said: list[Log] = []
        live = _live(h, said, rx.url)
        try:
            assert live.spans is not None
            assert live.step(final=False) == 3
            runs = rx.wait(3)
            assert sorted(s["attributes"]["chatkit.run.id"] for s in runs) == ["r0", "r1", "r2"]
            assert all(s["name"] == "invoke_agent" and s["attributes"]["gen_ai.provider.name"] == "myproto" for s in runs)
            state = live.finish()
            assert state["state"] == "complete"
        finally:
            live.close()
        spans = rx.wait(3 + 3 + 1)
        with TraceStore(h.db, readonly=True) as store:
            counts = store.get_meta("otlp")
        assert (counts["sent"], counts["dropped"], counts["failed"]) == (len(spans), 0, 0) == (7, 0, 0)
        # the live spans are the export's spans: same ids, same names, nothing more
        assert {(s["span_id"], s["name"]) for s in spans} == _exported(h.db)
        assert not [m for m in said if isinstance(m, Log) and m.level >= logging.WARNING]


def test_a_full_queue_drops_counts_and_says_so(harness):
    import threading

    with Receiver(hold=True) as rx:
        h = harness(chatkit_derive="end")
        _record(h, 6)
        said: list[Log] = []
        live = _live(h, said, rx.url, queue=1)
        try:
            assert live.step(final=True) == 6
            assert rx.arrived.wait(30)  # the sender is now inside an export the receiver holds
            threading.Timer(0.5, rx.release.set).start()
            live.finish()  # 6 session spans and the recording's: the queue holds one
        finally:
            live.close()
        with TraceStore(h.db, readonly=True) as store:
            meta = store.get_meta("otlp")
        made = 6 + 6 + 1  # runs, sessions, the recording
        assert meta["sent"] + meta["dropped"] + meta["failed"] == made
        assert meta["dropped"] >= 6 and meta["failed"] == 0
        assert len(rx.wait(meta["sent"], timeout=5)) >= meta["sent"]
        warnings = [m.text for m in said if isinstance(m, Log) and m.level == logging.WARNING and "OpenTelemetry" in m.text]
        assert warnings and f"{meta['dropped']} dropped" in warnings[-1] and "chatkit_otlp_queue=1" in warnings[-1]


def test_a_receiver_that_refuses_is_counted(harness, monkeypatch):
    with Receiver(status=503) as rx:
        h = harness(chatkit_derive="end")
        _record(h, 1)
        said: list[Log] = []
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the exporter retries a 503 until its timeout
        live = _live(h, said, rx.url)
        try:
            live.step(final=True)
            live.finish()
        finally:
            live.close()
        with TraceStore(h.db, readonly=True) as store:
            meta = store.get_meta("otlp")
        assert meta["sent"] == 0 and meta["failed"] + meta["dropped"] == 3 and meta["last_error"]
        assert any("refused" in m.text for m in said if isinstance(m, Log))


def test_bad_options_stop_at_startup(harness):
    import pytest
    from mitmproxy import exceptions

    with pytest.raises(exceptions.OptionsError, match="chatkit_otlp: .*not an OTLP endpoint"):
        harness(chatkit_otlp="ftp://x:1")
    h = harness(chatkit_otlp="http://127.0.0.1:4318", chatkit_otlp_frames=5, chatkit_otlp_content=True, chatkit_derive="off")
    settings = h.rec.writer.config.otlp
    assert (settings.endpoint, settings.protocol, settings.frames, settings.content) == ("http://127.0.0.1:4318", "http/protobuf", 5, True)
    with pytest.raises(exceptions.OptionsError, match="chatkit_otlp_queue must be at least 1"):
        harness(chatkit_otlp="http://127.0.0.1:9", chatkit_otlp_queue=0)
