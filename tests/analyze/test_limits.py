"""A finding blames the backend only for what the backend controls
(docs/decisions.md 129): a protocol limit is one info per route, a missing
failure reason is CK302 whatever fallback the adapter shows."""

from __future__ import annotations

from chatkit_trace.analyze import analyze

from .corpus import CORPUS, load_case


def test_a_protocol_limit_is_one_info_per_route_never_a_warning_per_run():
    _, exchanges, adapter = load_case(CORPUS / "CK306-CK307-hermes.json")
    rep, findings = analyze(exchanges, adapter)
    limits = [f for f in findings if f.code == "CK306"]
    assert len(limits) == 1 and limits[0].severity == "info"
    assert (limits[0].session_id, limits[0].run_id) == (None, None)
    assert limits[0].frames == ["1:1", "3:1"]  # both runs' tool.completed, one finding
    assert "GET /v1/runs/{id}/events" in limits[0].message and "hermes protocol" in limits[0].message
    assert not [f for f in findings if f.severity != "info"]
    # modelled consistently: both runs completed, their tool calls completed with an empty result
    for s in rep.sessions.values():
        [run] = s.core.snapshot.runs
        assert run.status == "completed"
        tools = [p for m in s.core.snapshot.messages for p in m.parts if p.type == "tool-call"]
        assert [(p.status, p.result) for p in tools] == [("completed", None)]


def test_an_empty_failure_reason_is_ck302_while_the_ui_shows_a_fallback():
    _, exchanges, adapter = load_case(CORPUS / "CK302-hermes-empty-error.json")
    rep, findings = analyze(exchanges, adapter)
    [f] = [f for f in findings if f.code == "CK302"]
    assert f.severity == "error" and f.frames == ["1:1"]
    assert f.detail["sent"] == "" and f.detail["shown"]["message"] == "agent run failed"
    assert "sent no reason" in f.message and "agent run failed" in f.message
    [s] = rep.sessions.values()
    assert s.core.snapshot.runs[0].error.message == "agent run failed"  # what the UI shows
