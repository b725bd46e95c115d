"""``export --parquet DIR``: traces as one Parquet dataset (schema: docs/export.md).

Layout (hive partitioning, decision 294)::

    DIR/_chatkit_dataset.json                          format, schema version, tables
    DIR/<table>/date=YYYY-MM-DD/backend=<host%3Aport>/<trace uid>.parquet

``<table>`` is ``traces``, ``exchanges``, ``frames``, ``facts``, ``runs`` or
``findings``.  A row's ``date`` is the UTC day its exchange started (a run's:
its first exchange; a finding's: its decisive frame), its ``backend`` the
exchange's upstream ``host:port`` (or ``--backend NAME``); both are partition
keys, not columns in the files.  Each trace writes one file per table and
partition, named by its uid: exporting a trace again replaces exactly its
files (decision 295), whatever else the dataset holds.  Files are written
under a dot name and renamed into place, then the trace's files the new
export did not write are deleted, so a reader never sees half a file.

pyarrow does the writing (``ParquetWriter``, one per table and partition,
a row group per batch); DuckDB, Spark, Trino and pandas read the dataset as
it is (docs/export.md "Reading the dataset").
"""

from __future__ import annotations

import json
import operator
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import ExportError
from ..masking import mask_derived, mask_derived_json, mask_derived_value
from ._collect import FindingOut, RunOut, TraceExport, TraceInfo, date_of

__all__ = ["SCHEMA_VERSION", "TABLES", "ParquetSink", "schemas", "require_pyarrow"]

#: The dataset's schema version: a column added keeps it (readers union by
#: name); a column renamed, removed or retyped makes it 2 (docs/export.md).
SCHEMA_VERSION = 1
MANIFEST = "_chatkit_dataset.json"
FORMAT = "chatkit-trace parquet dataset"
TABLES = ("traces", "exchanges", "frames", "facts", "runs", "findings")
#: rows buffered per table and partition before a row group is written
BATCH = 65_536


def require_pyarrow() -> Any:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("--parquet needs pyarrow: pip install 'chatkit-trace[parquet]'") from None
    return pq


def schemas() -> dict[str, Any]:
    """Every table's Arrow schema (without the partition keys ``date`` and ``backend``)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    s, i32, i64, f64, b = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()
    common = [("trace_uid", s)]
    return {
        "traces": pa.schema(common + [
            ("trace", s), ("kind", s), ("protocol", s), ("profile", s), ("redaction", s), ("created_at", ts),
            ("exported_at", ts), ("chatkit_trace_version", s), ("started_at", ts), ("ended_at", ts),
            ("exchanges", i32), ("frames", i64), ("facts", i64), ("sessions", i32), ("runs", i32), ("findings", i32),
            ("errors", i32), ("warnings", i32), ("infos", i32),
        ]),
        "exchanges": pa.schema(common + [
            ("exchange_id", i32), ("flow_id", s), ("started_at", ts), ("ended_at", ts), ("method", s), ("host", s),
            ("path", s), ("route", s), ("route_name", s), ("capability", s), ("session_id", s), ("run_id", s),
            ("run_id_source", s), ("status", i32), ("transport", s), ("end", s), ("error", s), ("frames", i32),
            ("bytes", i64), ("ttfe_s", f64), ("duration_s", f64),
        ]),
        "frames": pa.schema(common + [
            ("exchange_id", i32), ("idx", i32), ("arrived_at", ts), ("offset_s", f64), ("direction", s), ("transport", s),
            ("event", s), ("event_id", s), ("size", i32), ("state", s), ("session_id", s), ("run_id", s),
            ("event_type", s), ("end_marker", b), ("unknown", b), ("error", s), ("text", s),
        ]),
        "facts": pa.schema(common + [
            ("seq", i64), ("exchange_id", i32), ("frame_idx", i32), ("session_id", s), ("run_id", s), ("kind", s),
            ("event_id", s), ("accepted", b), ("reason", s), ("detail", s), ("snapshot_version", i64), ("fact", s),
        ]),
        "runs": pa.schema(common + [
            ("session_id", s), ("run_id", s), ("status", s), ("origin", s), ("phase", s), ("connection", s),
            ("settled_by", s), ("error_code", s), ("interrupt_reason", s), ("created_at", ts), ("started_at", ts),
            ("ended_at", ts), ("first_at", ts), ("last_at", ts), ("settled_at", ts), ("duration_s", f64),
            ("ttfe_s", f64), ("gap_p50_s", f64), ("gap_p95_s", f64), ("gap_max_s", f64), ("frames", i32),
            ("facts", i32), ("rejected", i32), ("exchanges", pa.list_(i32)), ("route", s), ("route_name", s),
            ("capability", s), ("operation", s), ("provider", s), ("request_model", s), ("response_model", s),
            ("response_id", s), ("finish_reasons", pa.list_(s)), ("input_tokens", i64), ("output_tokens", i64),
            ("errors", i32), ("warnings", i32), ("infos", i32),
        ]),
        "findings": pa.schema(common + [
            ("code", s), ("severity", s), ("rule", s), ("session_id", s), ("run_id", s), ("frames", pa.list_(s)),
            ("decisive_frame", s), ("decisive_at", ts), ("route", s), ("fingerprint", s), ("message", s), ("detail", s),
        ]),
    }


#: columns that hold a JSON document (masked as JSON, so they stay parseable)
_JSON_COLUMNS = frozenset({"fact", "detail"})


def _mask_row(row: dict[str, Any]) -> None:
    """Every text of ``row`` masked as derived text is before it is written
    (decision 231): a fact's or finding's text joined from a stream can hold a
    secret that no single frame held whole."""
    for k, v in row.items():
        if type(v) is str:
            row[k] = mask_derived_json(v) if k in _JSON_COLUMNS else mask_derived(v)
        elif type(v) is list:
            row[k] = mask_derived_value(v)


class _Table:
    """One table of one trace: a ParquetWriter per partition, written under a dot name."""

    def __init__(self, root: Path, name: str, uid: str, schema: Any) -> None:
        self.dir = root / name
        self.name = name
        self.uid = uid
        self.schema = schema
        self.ts = {f.name for f in schema if str(f.type).startswith("timestamp")}
        self.buffers: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.writers: dict[tuple[str, str], Any] = {}
        self.paths: dict[tuple[str, str], tuple[Path, Path]] = {}

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            _mask_row(row)
            key = (row.pop("date"), row.pop("backend"))
            buf = self.buffers.setdefault(key, [])
            buf.append(row)
            if len(buf) >= BATCH:
                self._flush(key)

    def ensure(self, date: str, backend: str) -> None:
        """A file even without rows (a trace's empty table keeps its schema readable)."""
        if not self.buffers and not self.writers:
            self.buffers[(date, backend)] = []

    def _flush(self, key: tuple[str, str]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        rows = self.buffers.get(key, [])
        cols = {}
        for f in self.schema:
            try:
                values = list(map(operator.itemgetter(f.name), rows))
            except KeyError:
                values = [r.get(f.name) for r in rows]
            if f.name in self.ts:  # float seconds -> microseconds, in Arrow
                micros = pc.round(pc.multiply(pa.array(values, type=pa.float64()), 1_000_000))
                cols[f.name] = micros.cast(pa.int64()).cast(f.type)
            else:
                cols[f.name] = pa.array(values, type=f.type)
        table = pa.table(cols, schema=self.schema)
        writer = self.writers.get(key)
        if writer is None:
            date, backend = key
            folder = self.dir / f"date={date}" / f"backend={quote(backend, safe='')}"
            folder.mkdir(parents=True, exist_ok=True)
            final = folder / f"{self.uid}.parquet"
            tmp = folder / f".{self.uid}.parquet.tmp"
            writer = pq.ParquetWriter(tmp, self.schema, compression="zstd")
            self.writers[key] = writer
            self.paths[key] = (tmp, final)
        writer.write_table(table)
        self.buffers[key] = []

    def close(self) -> list[Path]:
        for key in list(self.buffers):
            if self.buffers[key] or key not in self.writers:
                self._flush(key)
        for w in self.writers.values():
            w.close()
        out = []
        for tmp, final in self.paths.values():
            os.replace(tmp, final)
            out.append(final)
        return out

    def discard(self) -> None:
        for w in self.writers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001, S110 - discarding: a writer that fails to close is removed with its file
                pass
        for tmp, _ in self.paths.values():
            tmp.unlink(missing_ok=True)


class ParquetSink:
    """A :class:`~chatkit_trace.export._collect.Sink` writing one trace into the dataset at ``root``."""

    wants_rows = True

    def __init__(self, root: str | Path) -> None:
        require_pyarrow()
        self.root = Path(root)
        self.written: list[Path] = []
        self.tables: dict[str, _Table] = {}
        self.info: TraceInfo | None = None
        check_dataset(self.root)

    def begin(self, info: TraceInfo) -> None:
        self.info = info
        meta = {b"chatkit_trace.schema_version": str(SCHEMA_VERSION).encode(), b"chatkit_trace.trace_uid": info.uid.encode()}
        self.tables = {
            name: _Table(self.root, name, info.uid, schema.with_metadata(meta)) for name, schema in schemas().items()
        }

    def rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        assert self.info is not None
        uid = self.info.uid
        for r in rows:
            r["trace_uid"] = uid
        self.tables[table].add(rows)

    def finish(self, export: TraceExport) -> None:
        self.rows("runs", [_run_row(r) for r in export.runs])
        self.rows("findings", [_finding_row(f) for f in export.findings])
        self.rows("traces", [_trace_row(export)])
        self.commit(date_of(export.started_at), export.backend)

    def commit(self, date: str, backend: str) -> list[Path]:
        """Put the trace's files in place (every table has one, in the trace's
        own partition ``date``/``backend`` when it has no rows), then delete
        its files an earlier export wrote and this one did not."""
        assert self.info is not None
        for t in self.tables.values():
            t.ensure(date, backend)
        write_manifest(self.root)
        written: list[Path] = []
        for t in self.tables.values():
            written += t.close()
        self.written = written
        _remove_stale(self.root, self.info.uid, set(written))
        return written

    def abort(self) -> None:
        for t in self.tables.values():
            t.discard()


def _counts(findings: list[Any]) -> dict[str, int]:
    out = {"errors": 0, "warnings": 0, "infos": 0}
    for f in findings:
        key = {"error": "errors", "warning": "warnings", "info": "infos"}.get(f.severity)
        if key:
            out[key] += 1
    return out


def _run_row(r: RunOut) -> dict[str, Any]:
    p50, p95, mx = r.gaps
    g = r.genai
    return {
        "session_id": r.session_id, "run_id": r.run_id, "status": r.status, "origin": r.origin, "phase": r.phase,
        "connection": r.connection, "settled_by": r.settled_by, "error_code": r.error_code,
        "interrupt_reason": r.interrupt_reason, "created_at": r.created_at, "started_at": r.started_at,
        "ended_at": r.ended_at, "first_at": r.first_at, "last_at": r.last_at, "settled_at": r.settled_at,
        "duration_s": r.ended_at - r.started_at, "ttfe_s": r.ttfe, "gap_p50_s": p50, "gap_p95_s": p95, "gap_max_s": mx,
        "frames": r.frames, "facts": r.facts, "rejected": r.rejected, "exchanges": r.exchanges, "route": r.route,
        "route_name": r.route_name, "capability": r.capability, "operation": r.operation, "provider": r.provider,
        "request_model": g.request_model, "response_model": g.response_model, "response_id": g.response_id,
        "finish_reasons": g.finish_reasons, "input_tokens": g.input_tokens, "output_tokens": g.output_tokens,
        **_counts(r.findings), "date": r.date, "backend": r.backend,
    }


def _finding_row(fo: FindingOut) -> dict[str, Any]:
    f = fo.finding
    return {
        "code": f.code, "severity": f.severity, "rule": f.rule, "session_id": f.session_id, "run_id": f.run_id,
        "frames": list(f.frames), "decisive_frame": f.frames[0] if f.frames else None, "decisive_at": fo.at, "route": fo.route,
        "fingerprint": f.fingerprint, "message": f.message, "detail": json.dumps(f.detail, default=str),
        "date": fo.date, "backend": fo.backend,
    }


def _trace_row(e: TraceExport) -> dict[str, Any]:
    from .. import __version__

    info = e.info
    return {
        "trace": info.name, "kind": info.kind, "protocol": info.protocol, "profile": info.profile,
        "redaction": info.redaction, "created_at": info.created_at, "exported_at": info.exported_at,
        "chatkit_trace_version": __version__, "started_at": e.started_at, "ended_at": e.ended_at,
        "exchanges": e.counts.get("exchanges", 0), "frames": e.counts.get("frames", 0), "facts": e.counts.get("facts", 0),
        "sessions": len(e.sessions), "runs": len(e.runs), "findings": len(e.findings),
        **_counts([f.finding for f in e.findings]), "date": date_of(e.started_at), "backend": e.backend,
    }


# ---------------------------------------------------------------------------- the dataset


def check_dataset(root: Path) -> None:
    """Refuse a folder that is not a dataset of this schema (one line, exit 2)."""
    if root.exists() and not root.is_dir():
        raise ExportError(f"--parquet {root}: not a directory")
    manifest = root / MANIFEST
    if manifest.exists():
        try:
            data = json.loads(manifest.read_text("utf-8"))
        except (OSError, ValueError) as err:
            raise ExportError(f"--parquet {root}: {MANIFEST} is not readable ({err})") from None
        version = data.get("schema_version") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ExportError(f"--parquet {root}: {MANIFEST} is not a chatkit-trace dataset's")
        if version != SCHEMA_VERSION:
            raise ExportError(
                f"--parquet {root}: the dataset has schema version {version}, this chatkit-trace writes "
                f"{SCHEMA_VERSION}: export into a new folder (docs/export.md, 'Schema versions')"
            )
    elif root.exists() and any(p.name in TABLES for p in root.iterdir()):
        raise ExportError(f"--parquet {root}: holds tables but no {MANIFEST}: not a chatkit-trace dataset")


def write_manifest(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    path = root / MANIFEST
    if path.exists():
        return
    data = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "tables": list(TABLES),
            "partitioning": ["date", "backend"], "docs": "docs/export.md"}
    tmp = root / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    os.replace(tmp, path)


def _remove_stale(root: Path, uid: str, keep: set[Path]) -> None:
    """The trace's files an earlier export wrote and this one did not."""
    for table in TABLES:
        folder = root / table
        if not folder.is_dir():
            continue
        for path in folder.glob(f"date=*/backend=*/{uid}.parquet"):
            if path not in keep:
                path.unlink(missing_ok=True)
