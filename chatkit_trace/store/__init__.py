"""The SQLite trace store (docs/trace-format.md): one file per recording.

:class:`TraceStore` writes a recording and its derived rows (plain rows, made
by :mod:`chatkit_trace.derive`) and reads them back.
"""

from ._db import ALL, FRAME_COLUMNS, TraceFormatError, TraceStore, exchange_from_row, frame_from_row, frame_id, parse_frame_id
from ._schema import DERIVED_TABLES, RECORDED_TABLES, SCHEMA_VERSION, SESSION_TABLES

__all__ = [
    "ALL",
    "DERIVED_TABLES",
    "FRAME_COLUMNS",
    "RECORDED_TABLES",
    "SCHEMA_VERSION",
    "SESSION_TABLES",
    "TraceFormatError",
    "TraceStore",
    "exchange_from_row",
    "frame_from_row",
    "frame_id",
    "parse_frame_id",
]
