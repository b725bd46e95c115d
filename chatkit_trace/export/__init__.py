"""Traces past one machine: OpenTelemetry spans and a Parquet dataset.

* :func:`collect` derives a trace as ``check`` does and hands its exchanges,
  frames, facts, runs, sessions and findings to sinks;
* :class:`~chatkit_trace.export.parquet.ParquetSink` writes them into a
  Parquet dataset many traces share (``export --parquet DIR``);
* :class:`~chatkit_trace.export.otlp.OTLPSink` sends them as spans after the
  OpenTelemetry GenAI conventions (``export --otlp``);
* :mod:`chatkit_trace.export.live` streams a recording's runs as they settle
  (the recorder's ``chatkit_otlp`` option).

The OpenTelemetry SDK and pyarrow are optional (the ``otel`` and ``parquet``
extras): importing this package needs neither; using a sink without its
library is one line saying what to install.  Layering: above the derive
engine, below the recorder (capture), which calls the live exporter from its
deriver process.  docs/export.md is the reference.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._collect import (
        ExportOptions,
        FindingOut,
        FrameEvent,
        RunOut,
        SessionOut,
        Sink,
        TraceExport,
        TraceInfo,
        collect,
        date_of,
        make_context,
        session_export,
        trace_uid,
    )
    from .genai import GenAI, GenAIReader, operation_of

#: name -> submodule; imported when first used (the recorder's proxy imports
#: only :mod:`chatkit_trace.export.settings` to check its options)
_LAZY = {
    **dict.fromkeys(
        ("ExportOptions", "FindingOut", "FrameEvent", "RunOut", "SessionOut", "Sink", "TraceExport", "TraceInfo", "collect",
         "date_of", "make_context", "session_export", "trace_uid"),
        "._collect",
    ),
    **dict.fromkeys(("GenAI", "GenAIReader", "operation_of"), ".genai"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ExportOptions",
    "FindingOut",
    "FrameEvent",
    "GenAI",
    "GenAIReader",
    "RunOut",
    "SessionOut",
    "Sink",
    "TraceExport",
    "TraceInfo",
    "collect",
    "date_of",
    "make_context",
    "operation_of",
    "session_export",
    "trace_uid",
]
