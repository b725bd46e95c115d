"""The viewer shows exactly what ``check`` says: its analysis (into a side
database) runs the derive engine ``check`` and ``redecode`` run, so its
findings are ``check``'s, and its derived tables are the ones ``redecode``
stores, row for row, on every recorded trace and every corpus case."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chatkit_trace.cli.check import run_check
from chatkit_trace.derive import finding_rows
from chatkit_trace.store import DERIVED_TABLES, TraceStore
from chatkit_trace.views import TraceData
from chatkit_trace.views.analysis import analyse

from ..analyze.corpus import CORPUS
from .conftest import corpus_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "recordings" / "traces").glob("*.db"))
CASES = sorted(p.stem for p in CORPUS.glob("*.json"))


def _rows(path: Path, table: str) -> list[tuple]:
    with TraceStore(path, readonly=True) as store:
        return [tuple(r.values()) for r in store.rows(table)]


def _same_as_check(path: Path, tmp_path: Path) -> None:
    result = analyse(path, side_dir=tmp_path)
    assert result is not None and result.derived_path is not None
    check = run_check(str(path))
    assert result.findings == len(check.findings) and (result.frames, result.facts) == (check.frames, check.facts)
    expected = finding_rows(check.findings)
    with TraceStore(result.derived_path, readonly=True) as side:
        stored = [{k: r[k] for k in expected[0]} for r in side.rows("findings")] if expected else list(side.rows("findings"))
    assert stored == expected
    data = TraceData(path, result.derived_path)
    try:
        shown = sorted((f.code, f.session_id, f.run_id, f.fingerprint) for f in data.findings())
    finally:
        data.close()
    assert shown == sorted((f.code, f.session_id, f.run_id, f.fingerprint) for f in check.findings)
    # redecode stores the same derived tables, row for row
    copy = tmp_path / "redecoded.db"
    shutil.copy(path, copy)
    run_check(str(copy), store_results=True)
    for table in DERIVED_TABLES:
        assert _rows(result.derived_path, table) == _rows(copy, table), table


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_the_viewer_shows_what_check_says_on_every_recorded_trace(path, tmp_path):
    _same_as_check(path, tmp_path)


@pytest.mark.parametrize("name", CASES)
def test_the_viewer_shows_what_check_says_on_every_corpus_case(name, tmp_path):
    _same_as_check(corpus_trace(tmp_path, name), tmp_path)


def test_there_is_something_to_compare():
    assert len(TRACES) >= 4 and len(CASES) >= 40
