"""A wrong profile can never pass ``check`` (issue 14), on real traffic: the
recordings of the real servers (recordings/traces/*.db, made through the
addon), HAR files made from them, and the seeded HAR and flow files.  With
the right profile they are judged; with any other preset ``check`` exits 2
with one sentence naming the right one, and the input is untouched."""

from __future__ import annotations

import base64
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chatkit_trace.cli import main
from chatkit_trace.route import PRESETS
from chatkit_trace.store import TraceStore

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "recordings" / "traces").glob("*.db"))
SEEDED = [ROOT / "tests" / "data" / "import" / n for n in ("myproto.har", "chrome-ws.har", "myproto.mitm")]
#: the seeded files' profile (chatkit's example routes)
SEEDED_PROFILE = "myproto"


def _check(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _assert_names(err: str, right: str, wrong: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "nothing to judge" in err and f"profile {wrong!r}" in err, err
    assert f"it looks like {right}: use --profile {right}" in err, err


def test_every_real_server_is_recorded():
    assert {p.stem for p in TRACES} == {"adk", "a2a", "hermes", "openai"}


@pytest.mark.parametrize("trace", TRACES, ids=[p.stem for p in TRACES])
def test_a_real_recording_with_a_wrong_profile_exits_2_and_names_the_right_one(trace, tmp_path, capsys):
    right = trace.stem
    copy = tmp_path / trace.name
    shutil.copy(trace, copy)
    before = copy.read_bytes()
    rc, out, err = _check(capsys, str(copy), "--profile", right, "--format", "json")
    assert rc in (0, 1) and json.loads(out)["summary"]["facts"] > 0, err
    for wrong in PRESETS:
        if wrong == right:
            continue
        rc, out, err = _check(capsys, str(copy), "--profile", wrong)
        assert rc == 2 and out == "", (wrong, out)
        _assert_names(err, right, wrong)
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [trace.name]


def _har_from_trace(trace: Path) -> dict:
    """A HAR file of a trace's exchanges, as a browser would save it (SSE bodies as text)."""
    entries = []
    with TraceStore(trace, readonly=True) as store:
        for ex in store.exchanges(with_frames=True):
            if ex.transport in ("sse", "ndjson"):
                lines = []
                for f in ex.frames:
                    if f.text is None:
                        continue
                    block = (f"event: {f.event}\n" if f.event else "") + (f"id: {f.event_id}\n" if f.event_id else "")
                    block += "".join(f"data: {line}\n" for line in f.text.split("\n"))
                    lines.append(block + "\n" if ex.transport == "sse" else f.text + "\n")
                text = "".join(lines)
            else:
                text = (ex.response_body or b"").decode("utf-8", "replace")
            started = datetime.fromtimestamp(ex.started_at, UTC).isoformat().replace("+00:00", "Z")
            request = {
                "method": ex.method,
                "url": ex.url,
                "headers": [{"name": k, "value": v} for k, v in ex.request_headers],
            }
            if ex.request_body:
                request["postData"] = {"mimeType": "application/json", "text": ex.request_body.decode("utf-8", "replace")}
            entries.append(
                {
                    "startedDateTime": started,
                    "time": max(0.0, ((ex.ended_at or ex.started_at) - ex.started_at) * 1000),
                    "request": request,
                    "response": {
                        "status": ex.status or 0,
                        "headers": [{"name": k, "value": v} for k, v in ex.response_headers
                                    if k.lower() != "content-encoding"],
                        "content": {"text": base64.b64encode(text.encode()).decode(), "encoding": "base64"},
                    },
                    "timings": {"wait": 1},
                }
            )
    return {"log": {"version": "1.2", "entries": entries}}


@pytest.mark.parametrize("trace", TRACES, ids=[p.stem for p in TRACES])
def test_a_har_of_a_real_server_imported_with_a_wrong_profile_is_recovered(trace, tmp_path, capsys):
    right = trace.stem
    har = tmp_path / f"{right}.har"
    har.write_text(json.dumps(_har_from_trace(trace)))
    rc, out, err = _check(capsys, str(har), "--profile", right, "--format", "json")
    assert rc in (0, 1) and json.loads(out)["summary"]["facts"] > 0, err
    wrong = next(p for p in PRESETS if p != right)
    rc, _, err = _check(capsys, str(har), "--profile", wrong)
    assert rc == 2
    _assert_names(err, right, wrong)
    # imported with the wrong profile: the import says so, check cannot pass,
    # --profile and redecode recover it without importing again
    db = tmp_path / f"{right}.db"
    assert main(["import", str(har), "--profile", wrong, "-o", str(db)]) == 0
    imported = capsys.readouterr()
    assert f"it looks like {right}: use --profile {right}" in imported.err
    rc, _, err = _check(capsys, str(db))
    assert rc == 2
    _assert_names(err, right, wrong)
    rc, out, _ = _check(capsys, str(db), "--profile", right, "--format", "json")
    judged = json.loads(out)["summary"]
    assert rc in (0, 1) and judged["facts"] > 0
    assert main(["redecode", str(db), "--profile", right]) == 0
    capsys.readouterr()
    rc, out, _ = _check(capsys, str(db), "--format", "json")
    assert json.loads(out)["summary"] == {**judged, "trace": str(db)}


@pytest.mark.parametrize("seeded", SEEDED, ids=[p.name for p in SEEDED])
@pytest.mark.parametrize("wrong", [p for p in PRESETS if p != SEEDED_PROFILE])
def test_a_seeded_file_with_a_wrong_profile_exits_2_and_names_the_right_one(seeded, wrong, tmp_path, capsys):
    rc, out, err = _check(capsys, str(seeded), "--profile", wrong)
    assert rc == 2 and out == ""
    _assert_names(err, SEEDED_PROFILE, wrong)
    db = tmp_path / "t.db"
    assert main(["import", str(seeded), "--profile", wrong, "-o", str(db)]) == 0
    capsys.readouterr()
    rc, _, err = _check(capsys, str(db))
    assert rc == 2
    _assert_names(err, SEEDED_PROFILE, wrong)
    rc, out, err = _check(capsys, str(db), "--profile", SEEDED_PROFILE, "--format", "json")
    assert rc in (0, 1) and json.loads(out)["summary"]["facts"] > 0, err
