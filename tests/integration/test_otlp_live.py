"""The recorder's live spans through a real mitmdump (issue 34): runs leave
as OpenTelemetry spans while the proxy records, from the deriver process,
to a real OTLP/HTTP receiver; the user's bytes are unchanged, and the spans
are what ``export --otlp`` makes of the trace afterwards (the same ids).
Every wait is on a condition, bounded."""

from __future__ import annotations

import asyncio
import time

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatkit_trace.export import collect
from chatkit_trace.export.otlp import OTLPSink
from chatkit_trace.loading import open_trace

from ..export.receiver import Receiver
from .client import fetch
from .conftest import stopped_store

RUNS = 4
EVENTS = 20


def test_runs_leave_as_spans_while_recording(server, proxy, tmp_path):
    with Receiver() as rx:
        p = proxy(options={"chatkit_otlp": rx.url, "chatkit_otlp_frames": "5"})
        base = f"http://127.0.0.1:{p.port}"

        async def drive():
            return await asyncio.gather(*(fetch("POST", f"{base}/sessions/s{i}/runs?n={EVENTS}", json={"runId": f"r{i}"}, timeout=60)
                                          for i in range(RUNS)))

        got = asyncio.run(drive())
        for i, g in enumerate(got):
            assert g.status == 200 and g.raw == bytes(server.sent[f"r{i}"])  # the stream, byte for byte
        # while the proxy still runs: every run's span arrives (the deriver derives a finished session at once)
        deadline = time.monotonic() + 60
        while len({s["attributes"].get("chatkit.run.id") for s in rx.spans} - {None}) < RUNS and time.monotonic() < deadline:
            time.sleep(0.1)
        live = {s["attributes"]["chatkit.run.id"]: s for s in rx.spans if "chatkit.run.id" in s["attributes"] and s["kind"] == 3}
        assert sorted(live) == [f"r{i}" for i in range(RUNS)]
        assert all(len([e for e in s["events"] if e["name"] == "chatkit.frame"]) == 5 for s in live.values())
        store = stopped_store(p, tmp_path / "trace.db")
        try:
            counts = store.get_meta("otlp")
        finally:
            store.close()
        spans = rx.wait(counts["sent"])
    assert (counts["dropped"], counts["failed"]) == (0, 0) and counts["sent"] == len(spans) == RUNS * 2 + 1
    exporter = InMemorySpanExporter()
    loaded = open_trace(tmp_path / "trace.db")
    try:
        collect(loaded.store, loaded.adapter, capabilities=loaded.capabilities, name="trace.db", sinks=[OTLPSink(exporter)])
    finally:
        loaded.close()
    exported = {(s.context.span_id.to_bytes(8, "big").hex(), s.name) for s in exporter.get_finished_spans()}
    assert {(s["span_id"], s["name"]) for s in spans} == exported
