"""The OTLP settings every exporter of chatkit-trace shares, light to import.

The recorder's proxy process validates its ``chatkit_otlp*`` options here at
startup without importing the OpenTelemetry SDK (it only looks whether it is
installed): spans are made and sent in the deriver process.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..errors import ExportError

__all__ = ["PROTOCOLS", "OTLPSettings", "endpoint_url", "require_otel", "resolve_protocol", "settings_from_options"]

PROTOCOLS = ("http/protobuf", "grpc")


def require_otel(protocol: str) -> None:
    """One line when the OpenTelemetry SDK or the exporter is not installed."""
    module = (
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
        if protocol == "grpc"
        else "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    )
    try:
        found = all(importlib.util.find_spec(m) is not None for m in ("opentelemetry.sdk.trace", module))
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ExportError("--otlp needs the OpenTelemetry SDK and OTLP exporters: pip install 'chatkit-trace[otel]'") from None


def resolve_protocol(protocol: str | None) -> str:
    """``--otlp-protocol``, else the standard variables, else HTTP/protobuf."""
    value = protocol or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    value = (value or "http/protobuf").strip().lower()
    if value not in PROTOCOLS:
        raise ExportError(f"OTLP protocol {value!r} is not supported: use one of {', '.join(PROTOCOLS)}")
    return value


def endpoint_url(endpoint: str | None, protocol: str) -> str | None:
    """The exporter's endpoint: None lets it read the variables.  An HTTP URL
    without a path gets ``/v1/traces`` (as ``OTEL_EXPORTER_OTLP_ENDPOINT``
    does); a bare ``host:port`` is plain text (``http://``)."""
    if not endpoint:
        return None
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ExportError(f"--otlp {endpoint}: not an OTLP endpoint (http://host:4318, https://…, or host:4317 with grpc)")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ExportError(f"--otlp {endpoint}: the port is not a number") from None
    if protocol == "grpc":
        return url
    if parts.path in ("", "/"):
        return urlunsplit((parts.scheme, parts.netloc, "/v1/traces", parts.query, ""))
    return url


@dataclass(frozen=True)
class OTLPSettings:
    """The recorder's ``chatkit_otlp*`` options (picklable: sent to the deriver)."""

    endpoint: str  # a URL, host:port, or "env" (the OTEL_EXPORTER_OTLP_* variables decide)
    protocol: str | None = None
    frames: int = 0
    content: bool = False
    queue: int = 4096
    #: seconds the stop waits for the queue to drain
    wait: float = 10.0


def settings_from_options(endpoint: str, protocol: str, frames: int, content: bool, size: int) -> tuple[OTLPSettings | None, list[str]]:
    """The settings of the recorder's options, or the errors (one line each;
    the recorder raises them as mitmproxy's ``OptionsError`` at startup)."""
    endpoint = endpoint.strip()
    if not endpoint:
        return None, []
    errors = []
    try:
        proto = resolve_protocol(protocol.strip() or None)
        require_otel(proto)
        endpoint_url(None if endpoint == "env" else endpoint, proto)
    except Exception as err:  # noqa: BLE001 - ExportError: one line
        errors.append(f"chatkit_otlp: {err}")
        proto = None
    if frames < 0:
        errors.append(f"chatkit_otlp_frames must be 0 or more, not {frames}")
    if size < 1:
        errors.append(f"chatkit_otlp_queue must be at least 1, not {size}")
    if errors:
        return None, errors
    return OTLPSettings(endpoint, proto, frames, content, size), []
