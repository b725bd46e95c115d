"""The SQLite trace store (docs/trace-format.md): one file per recording.

Every SQL statement of chatkit-trace lives in this package: :class:`TraceStore`
writes a recording and its derived rows (plain rows, made by
:mod:`chatkit_trace.derive`) and reads them back; :class:`TraceReader` is the
viewer's read-only, paged access from several threads, its rows named
(:mod:`._rows`).
"""

from ._db import (
    ALL,
    FRAME_COLUMNS,
    PackedRows,
    PendingDerivation,
    TraceFormatError,
    TraceStore,
    exchange_from_row,
    frame_from_row,
    frame_id,
    integrity_problem,
    parse_frame_id,
)
from ._read import EXCHANGE_SUMMARY, TraceReader
from ._rows import (
    ExchangeDetail,
    ExchangeSummary,
    FactCell,
    FindingGroup,
    FindingRow,
    FrameDetail,
    FrameFact,
    FrameResult,
    FrameResultDetail,
    FrameSummary,
    FrameTime,
    HistoryRead,
    HistoryReadAt,
    RunRow,
    SettledSnapshot,
)
from ._schema import DERIVED_TABLES, RECORDED_TABLES, SCHEMA_VERSION, SESSION_TABLES

__all__ = [
    "ALL",
    "DERIVED_TABLES",
    "EXCHANGE_SUMMARY",
    "ExchangeDetail",
    "ExchangeSummary",
    "FactCell",
    "FindingGroup",
    "FindingRow",
    "FrameDetail",
    "FrameFact",
    "FrameResult",
    "FrameResultDetail",
    "FrameSummary",
    "FrameTime",
    "HistoryRead",
    "HistoryReadAt",
    "RunRow",
    "SettledSnapshot",
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
    "integrity_problem",
    "parse_frame_id",
]
