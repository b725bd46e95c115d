"""The SQLite trace store (docs/trace-format.md): one file per recording."""

from ._db import FRAME_COLUMNS, TraceFormatError, TraceStore, exchange_from_row, frame_from_row, frame_id, parse_frame_id
from ._derived import write_replay
from ._schema import DERIVED_TABLES, RECORDED_TABLES, SCHEMA_VERSION

__all__ = [
    "DERIVED_TABLES",
    "FRAME_COLUMNS",
    "RECORDED_TABLES",
    "SCHEMA_VERSION",
    "TraceFormatError",
    "TraceStore",
    "exchange_from_row",
    "frame_from_row",
    "frame_id",
    "parse_frame_id",
    "write_replay",
]
