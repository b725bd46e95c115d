"""An OTLP/HTTP receiver for tests: a real HTTP server on 127.0.0.1 that
decodes what the official exporters send (``ExportTraceServiceRequest``,
protobuf, from opentelemetry-proto) and keeps the spans.  ``hold``: every
answer waits until ``release`` is set (a receiver that is slow for as long
as the test wants; ``arrived`` is set when a request came in); ``status``
answers with it (a receiver that refuses).  The tests that need a receiver with its own store
and API use Arize Phoenix (tests/realservers)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, *, hold: bool = False, status: int = 200) -> None:
        self.hold = hold
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.status = status
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.arrived.set()
                if receiver.hold:
                    receiver.release.wait(30)
                if receiver.status == 200 and self.path == "/v1/traces":
                    req = ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    with receiver.lock:
                        receiver.requests += 1
                        receiver.spans += [_span(s) for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
                self.send_response(receiver.status if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def wait(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.spans) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.spans)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _span(s: Any) -> dict[str, Any]:
    return {
        "name": s.name,
        "trace_id": s.trace_id.hex(),
        "span_id": s.span_id.hex(),
        "parent_id": s.parent_span_id.hex() or None,
        "kind": s.kind,
        "status": s.status.code,
        "status_message": s.status.message,
        "attributes": {a.key: _value(a.value) for a in s.attributes},
        "events": [{"name": e.name, "attributes": {a.key: _value(a.value) for a in e.attributes}} for e in s.events],
    }
