"""The SQLite trace store (docs/trace-format.md): one file per recording."""

from ._db import TraceFormatError, TraceStore, frame_id, parse_frame_id
from ._derived import write_replay
from ._schema import DERIVED_TABLES, RECORDED_TABLES, SCHEMA_VERSION

__all__ = [
    "DERIVED_TABLES",
    "RECORDED_TABLES",
    "SCHEMA_VERSION",
    "TraceFormatError",
    "TraceStore",
    "frame_id",
    "parse_frame_id",
    "write_replay",
]
