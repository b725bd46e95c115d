"""CK701: a trace recorded, imported or exported with secrets kept says so
(an info on the trace, from its meta), and one that was redacted does not."""

from __future__ import annotations

import json

from chatkit_trace.analyze import CATALOGUE, trace_findings
from chatkit_trace.checkcmd import run_check
from chatkit_trace.derive import Deriver
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.adapters import create_adapter
from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange, frames_from_body


def _store(path, **meta):
    store = TraceStore(path, create=True)
    for k, v in meta.items():
        store.set_meta(k, v)
    body = b'id: e0\ndata: {"type": "started", "run": "r1"}\n\nid: e1\ndata: {"type": "done"}\n\n'
    ex = Exchange(0, "POST", "http://b/sessions/s1/runs", status=200, transport="sse", capability="run",
                  session_id="s1", run_id="r1", run_id_source="body", end="complete")
    ex.frames = frames_from_body(body, 0)
    store.add_exchange(ex)
    store.set_meta("protocol", "myproto")
    store.commit()
    return store


def test_the_code_is_an_info_in_the_catalogue():
    info = CATALOGUE["CK701"]
    assert (info.severity, info.rule) == ("info", "-")


def test_redaction_off_is_reported_once_on_the_trace(tmp_path):
    store = _store(tmp_path / "kept.db", redaction="off", recordings=[{"redaction": "off"}])
    findings = Deriver(store, create_adapter(MyProtocol())).run().findings
    kept = [f for f in findings if f.code == "CK701"]
    assert len(kept) == 1
    f = kept[0]
    assert (f.severity, f.session_id, f.run_id, f.frames) == ("info", None, None, [])
    assert "chatkit_keep_secrets=true" in f.message and "Do not share it" in f.message


def test_one_kept_recording_among_several_counts(tmp_path):
    meta = {"redaction": "on", "recordings": [{"redaction": "on"}, {"redaction": "off"}, {"redaction": "on + x-org"}]}
    [f] = trace_findings(meta)
    assert f.code == "CK701" and f.detail["recordings_kept"] == [1]


def test_a_redacted_trace_and_an_unknown_one_report_nothing():
    assert trace_findings({"redaction": "on", "recordings": [{"redaction": "on + x-team"}]}) == []
    assert trace_findings({}) == []
    assert trace_findings({"recordings": "garbage"}) == []


def test_an_import_with_keep_secrets_is_named_as_such():
    [f] = trace_findings({"redaction": "off", "source": {"kind": "import", "file": "x.har"}})
    assert "imported with --keep-secrets" in f.message


def test_check_reports_it_and_still_passes_by_default(tmp_path):
    path = tmp_path / "kept.db"
    _store(path, redaction="off").close()
    result = run_check(str(path))
    assert [f.code for f in result.findings] == ["CK701"]
    assert not result.fails("error") and result.fails("info")
    stored = TraceStore(path, readonly=True)
    assert list(stored.rows("findings")) == []  # check never writes to its input (issue 14)
    stored.close()
    clean = tmp_path / "clean.db"
    _store(clean, redaction="on").close()
    assert run_check(str(clean)).findings == []


def test_a_fixture_exported_with_secrets_kept_reports_it(tmp_path):
    from chatkit_trace.fixtures import dump_fixture, export_fixture

    path = tmp_path / "kept.db"
    _store(path, redaction="off", profile="myproto").close()
    kept = export_fixture(path, "s1", redact=["keep"]).fixture
    assert kept.meta.redaction.recorded == "off" and "keep secrets" in kept.meta.redaction.export
    dump_fixture(kept, tmp_path / "kept.chatkit.json")
    assert [f.code for f in run_check(str(tmp_path / "kept.chatkit.json")).findings] == ["CK701"]
    redacted = export_fixture(path, "s1").fixture  # export redacts again: nothing kept any more
    dump_fixture(redacted, tmp_path / "redacted.chatkit.json")
    assert run_check(str(tmp_path / "redacted.chatkit.json")).findings == []
    assert json.loads((tmp_path / "kept.chatkit.json").read_text())["meta"]["redaction"]["recorded"] == "off"
