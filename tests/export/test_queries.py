"""The documented DuckDB queries (docs/export.md) on a dataset of 1,000 traces.

Four recorded traces are exported for real (derived as ``check`` derives
them); 1,000 traces are then made from their rows (each with its own uid,
one of five backends, one of the last 14 days, its times shifted and its
time to first event scaled, some without their warnings) and written through
the same dataset writer, one trace at a time, as many exports would.  Every
``-- query:`` block of docs/export.md runs on it through DuckDB, and the
answers are checked against the rows that were written.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta

import duckdb
import pytest

from chatkit_trace.cli import main
from chatkit_trace.export import TraceInfo
from chatkit_trace.export.parquet import TABLES, ParquetSink, schemas

from ._util import ROOT, read_table, recorded

pytestmark = pytest.mark.slow

TRACES = 1000
BACKENDS = ("adk.staging:8000", "a2a.staging:8001", "hermes.staging:8642", "litellm.staging:4000", "edge.staging:443")
DOCS = ROOT / "docs" / "export.md"


def documented_queries() -> dict[str, str]:
    text = DOCS.read_text("utf-8")
    out = {}
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- query: (\w+)\n", block)
        if m:
            out[m.group(1)] = block[m.end():]
    return out


def _seconds(v):
    return v.timestamp() if isinstance(v, datetime) else v


def _vary(rows_by_table, i, today):
    """Trace ``i``: its rows, made from a recorded trace's."""
    uid = f"{i:032x}"
    backend = BACKENDS[i % len(BACKENDS)]
    first = min(_seconds(r["started_at"]) for r in rows_by_table["exchanges"])
    target = datetime.combine(today - timedelta(days=i % 14), datetime.min.time(), UTC).timestamp() + 3600 + i
    shift = target - first
    scale = 1 + (i % len(BACKENDS)) / 2 + (i % 7) / 10
    ts = {t: {f.name for f in schemas()[t] if str(f.type).startswith("timestamp")} for t in TABLES}
    out = {}
    for table, rows in rows_by_table.items():
        new = []
        for r in rows:
            if table == "findings" and i % 3 == 0 and r["severity"] != "error":
                continue
            r = dict(r, trace_uid=uid, backend=backend)
            for col in ts[table]:
                if r.get(col) is not None:
                    r[col] = _seconds(r[col]) + shift
            if table == "runs" and r["ttfe_s"] is not None:
                r["ttfe_s"] = r["ttfe_s"] * scale
            if table == "traces":
                r["trace"] = f"trace-{i:04d}.db"
                r["findings"] = sum(1 for f in rows_by_table["findings"] if i % 3 != 0 or f["severity"] == "error")
            anchor = r.get("decisive_at") or r.get("arrived_at") or r.get("started_at") or target
            r["date"] = datetime.fromtimestamp(anchor, UTC).strftime("%Y-%m-%d")
            new.append(r)
        out[table] = new
    return uid, backend, out


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("queries")
    base = tmp / "base"
    assert main(["export", *(str(recorded(n)) for n in ("a2a", "adk", "hermes", "openai")), "--parquet", str(base)]) == 0
    rows = {t: read_table(base, t) for t in TABLES}
    sources = []
    for uid in sorted({t["trace_uid"] for t in rows["traces"]}):
        sources.append({t: [r for r in rows[t] if r["trace_uid"] == uid] for t in TABLES})
    root = tmp / "dataset"
    today = date.today()
    written: dict[str, list[dict]] = defaultdict(list)
    for i in range(TRACES):
        uid, backend, made = _vary(sources[i % len(sources)], i, today)
        sink = ParquetSink(root)
        sink.begin(TraceInfo(uid, f"trace-{i:04d}.db", "db", None, None, None, None))
        for table in TABLES:
            sink.rows(table, [dict(r) for r in made[table]])
            written[table] += made[table]
        sink.commit(made["traces"][0]["date"], backend)
    return root, written, today


def _q(con, sql):
    return con.execute(sql).fetchall()


def _quantile(values, q):
    values = sorted(values)
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def test_every_documented_query_answers_over_1000_traces(big):
    root, written, today = big
    queries = documented_queries()
    assert {"setup", "findings_by_code_and_backend", "ttfe_p95_by_route", "ck201_this_week"} <= set(queries)
    con = duckdb.connect()
    con.execute(queries.pop("setup").replace("DATASET", str(root)))
    answers = {name: _q(con, sql) for name, sql in queries.items()}
    assert all(answers.values()), [n for n, a in answers.items() if not a]
    assert _q(con, "SELECT count(*) FROM traces") == [(TRACES,)]

    findings = written["findings"]
    got = {(c, s, b): (n, t) for c, s, b, n, t in answers["findings_by_code_and_backend"]}
    want = Counter((f["code"], f["severity"], f["backend"]) for f in findings)
    traces = defaultdict(set)
    for f in findings:
        traces[(f["code"], f["severity"], f["backend"])].add(f["trace_uid"])
    assert got == {k: (n, len(traces[k])) for k, n in want.items()}
    assert answers["findings_by_code_and_backend"][0][3] == max(want.values())

    week = str(today - timedelta(days=7))
    ck201 = Counter(f["backend"] for f in findings if f["code"] == "CK201" and f["date"] >= week)
    assert ck201 and {b: n for b, n, *_ in answers["ck201_this_week"]} == dict(ck201)

    by_route = defaultdict(list)
    for r in written["runs"]:
        if r["ttfe_s"] is not None:
            by_route[r["route"]].append(r["ttfe_s"])
    got = {route: (n, p95, p50) for route, n, p95, p50 in answers["ttfe_p95_by_route"]}
    assert set(got) == set(by_route)
    for route, values in by_route.items():
        n, p95, p50 = got[route]
        assert n == len(values)
        assert p95 == pytest.approx(_quantile(values, 0.95), rel=1e-9)
        assert p50 == pytest.approx(_quantile(values, 0.5), rel=1e-9)

    assert {(b, s): n for b, s, n in answers["run_outcomes_by_backend"]} == Counter(
        (r["backend"], r["status"]) for r in written["runs"])
    erring = [t for t in written["traces"] if t["errors"] > 0]
    assert len(answers["traces_with_errors"]) == len(erring) and 0 < len(erring) < TRACES
    per_day = Counter((f["date"], f["backend"]) for f in findings)
    assert {(str(d), b): n for d, b, _, n in answers["findings_per_day"]} == dict(per_day)
    assert len({d for d, *_ in answers["findings_per_day"]}) == 14
    tokens = defaultdict(list)
    for r in written["runs"]:
        if r["input_tokens"] is not None:
            tokens[r["response_model"] or r["request_model"]].append(r["input_tokens"])
    assert {m: i for m, _, _, i, _ in answers["tokens_by_model"] if i is not None} == {m: sum(v) for m, v in tokens.items()}
    stalls = sorted((r["gap_max_s"] for r in written["runs"] if r["gap_max_s"] is not None), reverse=True)[:10]
    assert [row[-1] for row in answers["longest_stalls"]] == pytest.approx(stalls)
    assert {(b, s): n for b, s, n in answers["frames_by_state"]} == Counter(
        (f["backend"], f["state"]) for f in written["frames"])
    rejected = Counter((f["reason"], f["kind"]) for f in written["facts"] if not f["accepted"])
    assert {(r, k): n for r, k, n in answers["rejected_facts"]} == dict(rejected)
