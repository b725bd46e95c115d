"""The SQLite trace store (docs/trace-format.md): one file per recording.

Every SQL statement of chatkit-trace lives in this package: :class:`TraceStore`
writes a recording and its derived rows (plain rows, made by
:mod:`chatkit_trace.derive`) and reads them back; :class:`TraceReader` is the
viewer's read-only, paged access from several threads.
"""

from ._db import ALL, FRAME_COLUMNS, PackedRows, PendingDerivation, TraceFormatError, TraceStore, exchange_from_row, frame_from_row, frame_id, parse_frame_id
from ._read import EXCHANGE_SUMMARY, TraceReader
from ._schema import DERIVED_TABLES, RECORDED_TABLES, SCHEMA_VERSION, SESSION_TABLES

__all__ = [
    "ALL",
    "DERIVED_TABLES",
    "EXCHANGE_SUMMARY",
    "FRAME_COLUMNS",
    "PackedRows",
    "PendingDerivation",
    "RECORDED_TABLES",
    "SCHEMA_VERSION",
    "SESSION_TABLES",
    "TraceFormatError",
    "TraceReader",
    "TraceStore",
    "exchange_from_row",
    "frame_from_row",
    "frame_id",
    "parse_frame_id",
]
