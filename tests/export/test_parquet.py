"""``export --parquet``: the dataset's layout and schema, what each table
holds against ``check`` and ``runs``, many traces in one dataset, and a
re-export that replaces exactly its trace's files."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

from chatkit_trace.cli import main
from chatkit_trace.cli.check import run_check
from chatkit_trace.cli.runs import collect as runs_of
from chatkit_trace.export.parquet import MANIFEST, SCHEMA_VERSION, TABLES, schemas
from chatkit_trace.store import TraceStore

from ._util import SECRET, read_table, recorded, with_secret_text

NAMES = ("a2a", "adk", "hermes", "openai")


def _export(capsys, root, *traces, extra=()):
    code = main(["export", *map(str, traces), "--parquet", str(root), *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    return err


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds") / "dataset"
    assert main(["export", *(str(recorded(n)) for n in NAMES), "--parquet", str(root)]) == 0
    return root


def test_layout_schema_and_manifest(dataset):
    manifest = json.loads((dataset / MANIFEST).read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION and manifest["tables"] == list(TABLES)
    want = schemas()
    for table in TABLES:
        files = sorted((dataset / table).glob("date=*/backend=*/*.parquet"))
        assert len(files) == len(NAMES), table  # one file per trace (each trace has one backend and day here)
        for f in files:
            schema = pq.read_schema(f)
            assert schema.remove_metadata().equals(want[table]), (table, schema)
            assert schema.metadata[b"chatkit_trace.schema_version"] == str(SCHEMA_VERSION).encode()
            assert f.parent.name.startswith("backend=127.0.0.1%3A")
    assert not list(dataset.rglob(".*"))  # no temporary file left


def test_each_table_says_what_check_and_runs_say(dataset):
    findings = read_table(dataset, "findings")
    runs = read_table(dataset, "runs")
    frames = read_table(dataset, "frames")
    traces = {t["trace"]: t for t in read_table(dataset, "traces")}
    exchanges = read_table(dataset, "exchanges")
    for name in NAMES:
        path = recorded(name)
        uid = traces[f"{name}.db"]["trace_uid"]
        check = run_check(str(path))
        mine = [f for f in findings if f["trace_uid"] == uid]
        assert sorted((f["code"], f["fingerprint"], f["decisive_frame"]) for f in mine) == sorted(
            (f.code, f.fingerprint, f.frames[0] if f.frames else None) for f in check.findings)
        assert sum(1 for f in frames if f["trace_uid"] == uid) == check.frames
        listed = runs_of(str(path))
        assert sorted((r["session_id"], r["run_id"]) for r in runs if r["trace_uid"] == uid) == sorted(
            (r["session"], r["run"]) for r in listed)
        assert Counter(r["status"] for r in runs if r["trace_uid"] == uid) == Counter(
            "running" if r["status"] == "outcome unknown" else r["status"] for r in listed)
        with TraceStore(path, readonly=True) as store:
            assert sum(1 for e in exchanges if e["trace_uid"] == uid) == store.exchange_count()
        t = traces[f"{name}.db"]
        assert (t["findings"], t["errors"]) == (len(check.findings), sum(f.severity == "error" for f in check.findings))
        assert t["protocol"] == name
    # a run's findings are counted on its row; frames are typed; text only with --content
    adk = next(r for r in runs if r["run_id"].startswith("e-ee2fbb26"))
    assert adk["errors"] == 1 and adk["operation"] == "invoke_agent" and adk["response_model"] == "scripted-offline-1"
    assert all(f["text"] is None for f in frames)
    assert {f["state"] for f in frames} >= {"admitted"}


def test_a_re_export_replaces_exactly_its_files(dataset, capsys, tmp_path):
    import shutil

    root = tmp_path / "ds"
    shutil.copytree(dataset, root)
    before = sorted(p.relative_to(root) for p in root.rglob("*.parquet"))
    rows = {t: len(read_table(root, t)) for t in TABLES}
    _export(capsys, root, recorded("adk"))
    assert sorted(p.relative_to(root) for p in root.rglob("*.parquet")) == before
    assert {t: len(read_table(root, t)) for t in TABLES} == rows
    # named otherwise, the trace moves partition: its old files go, the others stay
    _export(capsys, root, recorded("adk"), extra=["--backend", "staging-adk"])
    after = sorted(p.relative_to(root) for p in root.rglob("*.parquet"))
    assert len(after) == len(before)
    assert {t: len(read_table(root, t)) for t in TABLES} == rows
    runs = read_table(root, "runs")
    assert Counter(r["backend"] for r in runs)["staging-adk"] == 5
    assert sum(1 for p in after if "backend=staging-adk" in str(p)) == len(TABLES)


def test_content_goes_into_frames_text_only_when_asked(capsys, tmp_path):
    path = with_secret_text(tmp_path)
    _export(capsys, tmp_path / "plain", path)
    assert all(f["text"] is None for f in read_table(tmp_path / "plain", "frames"))
    _export(capsys, tmp_path / "text", path, extra=["--content"])
    frames = read_table(tmp_path / "text", "frames")
    texts = [f["text"] for f in frames if f["text"]]
    assert texts and any("Hello" in t for t in texts)
    assert not any(SECRET in t for t in texts)
    raw = b"".join(p.read_bytes() for p in (tmp_path / "text").rglob("*.parquet"))
    assert SECRET.encode() not in raw


def test_a_dataset_of_another_version_or_a_foreign_folder_is_refused(capsys, tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    (root / MANIFEST).write_text(json.dumps({"format": "chatkit-trace parquet dataset", "schema_version": 99}))
    assert main(["export", str(recorded("adk")), "--parquet", str(root)]) == 2
    err = capsys.readouterr().err
    assert "schema version 99" in err and err.count("\n") == 1
    other = tmp_path / "other"
    (other / "runs").mkdir(parents=True)
    assert main(["export", str(recorded("adk")), "--parquet", str(other)]) == 2
    assert "not a chatkit-trace dataset" in capsys.readouterr().err
    assert list((other / "runs").iterdir()) == []


def test_nothing_to_judge_writes_nothing(capsys, tmp_path):
    empty = tmp_path / "empty.db"
    TraceStore(empty, create=True).close()
    root = tmp_path / "ds"
    assert main(["export", str(empty), "--parquet", str(root)]) == 2
    assert "nothing to judge" in capsys.readouterr().err
    assert not root.exists() or not list(root.rglob("*.parquet"))


def test_without_pyarrow_it_says_what_to_install(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["export", str(recorded("adk")), "--parquet", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'chatkit-trace[parquet]'" in err and err.count("\n") == 1
    assert not (tmp_path / "ds").exists()


def test_a_secret_the_stream_only_shows_decoded_is_in_no_file_of_the_dataset(tmp_path, capsys):
    """Masking at the dataset's sink (decision 231): a key streamed in two
    halves is in no file of the dataset, whole (each frame keeps its half, as
    the trace does); a finding quoting the joined answer would be masked."""
    from ._util import with_split_secret

    trace = with_split_secret(tmp_path)
    root = tmp_path / "dataset"
    _export(capsys, root, trace, extra=("--content",))
    cut = len(SECRET) // 2
    for f in root.rglob("*.parquet"):
        text = " ".join(str(v) for row in pq.read_table(f).to_pylist() for v in row.values())
        assert SECRET not in text, f
        assert SECRET[:cut] + SECRET[cut:] not in text
