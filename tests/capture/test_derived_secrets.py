"""A token split across events is in no file the product writes (issue 32).

The real recorder (writer and deriver processes, a real SQLite file): a
backend streams a key shape and a value learned from the request's
Authorization header, each cut across two text events at several places,
one of them JSON-escaped.  While it records (the file, its ``-wal`` and
``-shm``) and after, and in every file the commands write from it (``check``
JSON and JUnit, the HTML report with its payload decompressed, an exported
fixture, the viewer's side database, in a private ``TMPDIR``), neither is
found, in any form an echo gives it."""

from __future__ import annotations

import base64
import gzip
import json
import re
import tempfile
import time
from pathlib import Path

from chatkit_trace import tempfiles
from chatkit_trace.cli import main
from chatkit_trace.store import TraceStore

from .test_recorder import harness, make_flow, sse_event  # noqa: F401 - the fixture

KEY = "sk-proj-" + "Zq8xLm2Vb7Nc4Rt6Yw1Pk9Hs3Df5Gj0Au"  # a shape: found without learning
LEARNED = "Tok-93jf02kdm3nd82kq-x7"  # no shape: only the Authorization header teaches it
SECRETS = (KEY, LEARNED)


def forms(secret: str) -> list[bytes]:
    return [secret.encode(), json.dumps(secret)[1:-1].encode()]


def holders(paths: list[Path]) -> list[str]:
    found = []
    for p in paths:
        data = p.read_bytes()
        blobs = [data]
        if p.suffix == ".html":  # the report's payload: gzip-compressed JSON in base64
            for m in re.finditer(rb'type="application/x-chatkit-gzip" id="[^"]*">([^<]*)<', data):
                blobs.append(gzip.decompress(base64.b64decode(m.group(1))))
        for s in SECRETS:
            if any(f in b for f in forms(s) for b in blobs):
                found.append(f"{s[:6]}… in {p.name}")
    return found


def chunks(run: str, secret: str, cut: int, escaped: bool) -> list[bytes]:
    text = f"here it is: {secret} (keep it)"
    cut += len("here it is: ")
    second = json.dumps({"type": "text", "text": text[cut:]})
    if escaped:  # the first character after the cut as \\u....
        second = second.replace(text[cut:][:1], f"\\u{ord(text[cut]):04x}", 1)
    return [
        sse_event(0, {"type": "started", "run": run}),
        sse_event(1, {"type": "text", "text": text[:cut]}),
        f"id: e2\ndata: {second}\n\n".encode(),
        sse_event(3, {"type": "done"}),
    ]


def test_a_split_secret_is_in_no_file_recorded_or_written_from_the_recording(harness, tmp_path, monkeypatch):
    h = harness(chatkit_derive="live")
    n = 0
    for secret in SECRETS:
        for cut in (1, 5, len(secret) // 2, len(secret) - 1):
            for escaped in (False, True):
                run = f"r{n}"
                f = make_flow(url=f"http://backend/sessions/s{n}/runs", body=json.dumps({"runId": run}).encode(),
                              headers={"authorization": f"Bearer {LEARNED}"})
                h.stream(f, chunks(run, secret, cut, escaped))
                n += 1
    assert h.rec.writer is not None and h.rec.writer.sync()
    deadline = time.monotonic() + 60
    with TraceStore(h.db, readonly=True) as store:
        while store.derivation_backlog() != (0, 0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert store.derivation_backlog() == (0, 0)
        assert len(list(store.rows("runs"))) == n  # derived while recording
    live = sorted(h.db.parent.glob(h.db.name + "*"))
    assert Path(f"{h.db}-wal") in live
    assert holders(live) == []  # the file, its WAL and -shm while recording
    store = h.store(done=True)
    runs = list(store.rows("runs"))
    assert {r["status"] for r in runs} == {"completed"}  # masks keep the events JSON: every run decodes
    snapshots = " ".join(r["snapshot"] for r in store.rows("sessions"))
    assert "here it is: [REDACTED]" in snapshots  # the joined text reads as one mask
    store.close()

    out = tmp_path / "out"
    out.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    tempfiles.cleanup()  # this process's folder is made again, in the private TMPDIR
    trace = str(h.db)
    assert main(["check", trace, "--format", "json", "-o", str(out / "c.json")]) in (0, 1)
    assert main(["check", trace, "--format", "junit", "-o", str(out / "c.xml")]) in (0, 1)
    assert main(["check", trace, "--html", str(out / "r.html"), "-o", str(out / "c.txt")]) in (0, 1)
    assert main(["export", trace, "-s", "s0", "-o", str(out / "s0.chatkit.json")]) == 0
    from chatkit_trace.views.analysis import analyse

    result = analyse(trace)
    assert result is not None and result.derived_path is not None
    written = sorted(p for p in [*out.rglob("*"), *tmp.rglob("*")] if p.is_file())
    assert result.derived_path in written and (out / "r.html") in written
    assert holders(written + sorted(h.db.parent.glob(h.db.name + "*"))) == []
