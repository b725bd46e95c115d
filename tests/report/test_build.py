"""The report file without a browser: one self-contained file, the same
findings as check, snapshots that rebuild to the Core's, no write to the
input, scrubbed text, the command line."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.cli import main
from chatkit_trace.cli.check import run_check
from chatkit_trace.derive import _engine as derive_engine
from chatkit_trace.loading import open_trace
from chatkit_trace.pipeline import replay
from chatkit_trace.report import ReportError, rule_text, write_report
from chatkit_trace.report._snapshot import message_json

from ..analyze.corpus import CORPUS
from .conftest import combined_trace, corpus_trace, make_report

ROOT = Path(__file__).resolve().parents[2]
IMPORT = ROOT / "tests" / "data" / "import"
CASES = sorted(p.stem for p in CORPUS.glob("*.json"))


def blobs(page: str) -> dict[str, Any]:
    out = {}
    for name, packed in re.findall(r'<script type="application/x-chatkit-gzip" id="([sd]\d+)">([^<]*)</script>', page):
        out[name] = json.loads(gzip.decompress(base64.b64decode(packed)))
    return out


def index(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="ck-index">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def apply_ops(snap: dict[str, Any], ops: list[Any]) -> None:
    """report.js's applyOps, in Python (the encoding's contract)."""
    for op in ops:
        kind = op[0]
        if kind == "r":
            snap["runs"] = op[1]
        elif kind == "s":
            snap["status"], snap["hist"] = op[1], op[2]
        elif kind == "m":
            msgs = snap["msgs"]
            while len(msgs) <= op[1]:
                msgs.append(None)
            msgs[op[1]] = json.loads(json.dumps(op[2]))
        elif kind == "n":
            del snap["msgs"][op[1]:]
        elif kind == "p":
            parts = snap["msgs"][op[1]]["parts"]
            while len(parts) <= op[2]:
                parts.append(None)
            parts[op[2]] = op[3]
        elif kind == "q":
            del snap["msgs"][op[1]]["parts"][op[2]:]
        elif kind == "a":
            part = snap["msgs"][op[1]]["parts"][op[2]]
            part["text"] = (part.get("text") or "") + op[3]
        else:
            raise AssertionError(f"unknown op {kind}")


def core_snapshots(trace: Path) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """((exchange, frame index or -1/-2), messages and runs) after every event, straight from the Core."""
    loaded = open_trace(trace)
    out: list[tuple[tuple[int, int], dict[str, Any]]] = []
    try:
        exchanges = list(loaded.store.exchanges(with_frames=True))

        def observe(kind: int, ex: Any, frame: Any, rp: Any) -> None:
            rec = rp.out.exchanges.get(ex.index)
            s = rp.out.sessions.get(rec.session_id) if rec is not None and rec.session_id else None
            key = (ex.index, -1 if kind == 0 else -2 if kind == 2 else frame.index)
            if s is None:
                out.append((key, {"msgs": [], "runs": []}))
                return
            snap = s.core.snapshot
            out.append((key, {"msgs": [message_json(m) for m in snap.messages], "runs": [r.to_json() for r in snap.runs]}))

        replay(exchanges, loaded.adapter, capabilities=loaded.capabilities, observe=observe)
    finally:
        loaded.close()
    return out


# ------------------------------------------------------------------------------ the file


def test_one_self_contained_file(tmp_path: Path) -> None:
    page = make_report(corpus_trace(tmp_path, "CK101-direct")).read_text("utf-8")
    # nothing to fetch: no external script, style, image, font or frame; a CSP that forbids it anyway
    assert not re.search(r'\b(?:src|href)\s*=\s*["\']?(?:https?:)?//', page, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", page, re.I)
    assert "@import" not in page and "<link rel=\"stylesheet\"" not in page
    assert "default-src 'none'" in page
    assert page.count("<html") == 1 and page.rstrip().endswith("</html>")
    data = blobs(page)
    assert set(data) == {"s0", "d0"}
    ev = data["s0"]["ev"]
    n = len(ev["E"])
    assert n == 7 and all(len(col) == n for col in ev.values())  # request, 5 frames, end of stream


@pytest.mark.parametrize("name", CASES)
def test_same_findings_as_check(tmp_path: Path, name: str) -> None:
    trace = corpus_trace(tmp_path, name)
    expected = run_check(str(trace), store_results=False).findings
    idx = index(make_report(trace).read_text("utf-8"))
    assert sorted(f["fp"] for f in idx["findings"]) == sorted(f.fingerprint for f in expected)
    assert sorted(f["code"] for f in idx["findings"]) == sorted(f.code for f in expected)
    case = json.loads((CORPUS / f"{name}.json").read_text())
    for code, ref in (case.get("decisive") or {}).items():
        mine = [f for f in idx["findings"] if f["code"] == code]
        assert mine and mine[0]["frames"][0] == ref
        if mine[0]["r"] is not None:
            assert mine[0]["run"] is not None and mine[0]["row"] is not None, f"{code} is not linked to its run's timeline"


@pytest.mark.parametrize("name", ["CK101-direct", "CK201", "CK202-renamed-run", "CK404", "CK105", "CK206", "CK501", "CK301-history"])
def test_snapshot_operations_rebuild_the_cores_snapshots(tmp_path: Path, name: str) -> None:
    """Applying each event's operations in order gives, after every event, the
    snapshot the Core published (messages and runs): the encoding loses nothing."""
    trace = corpus_trace(tmp_path, name)
    data = blobs(make_report(trace).read_text("utf-8"))
    expected = dict(core_snapshots(trace))
    checked = 0
    for key in sorted(k for k in data if k.startswith("s")):
        ev = data[key]["ev"]
        snap: dict[str, Any] = {"runs": [], "msgs": [], "status": "unknown", "hist": False}
        for k in range(len(ev["E"])):
            if ev["O"][k]:
                apply_ops(snap, ev["O"][k])
            want = expected[(ev["E"][k], ev["I"][k])]
            assert snap["msgs"] == want["msgs"], f"messages after event {ev['E'][k]}:{ev['I'][k]}"
            assert snap["runs"] == json.loads(json.dumps(want["runs"])), f"runs after event {ev['E'][k]}:{ev['I'][k]}"
            checked += 1
    assert checked == len(expected)


def test_long_text_is_sent_as_appends(tmp_path: Path) -> None:
    """A delta per frame costs one small operation, not the whole text again."""
    from ..viewer.conftest import long_trace

    trace = long_trace(tmp_path / "long.db", 2000)
    data = blobs(make_report(trace).read_text("utf-8"))
    ops = [op for o in data["s0"]["ev"]["O"] if o for op in o]
    appends = [op for op in ops if op[0] == "a"]
    assert len(appends) >= 1990
    assert max(len(json.dumps(op)) for op in appends) < 60


def test_the_trace_is_not_written(tmp_path: Path) -> None:
    trace = corpus_trace(tmp_path, "CK201")
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    make_report(trace)
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before


def test_runs_and_timelines(tmp_path: Path) -> None:
    trace = combined_trace(tmp_path / "combined.db", ["CK101-direct", "CK102", "CK106", "clean-myproto"])
    page = make_report(trace).read_text("utf-8")
    idx = index(page)
    runs = {(r["s"], r["r"]): r for r in idx["runs"]}
    assert runs[("ck101-direct", "r1")]["codes"] == ["CK101"]
    assert runs[("ck102", "r1")]["st"] == "outcome unknown"
    assert runs[("clean-myproto", "r1")]["codes"] == [] and runs[("clean-myproto", "r1")]["st"] == "completed"
    data = blobs(page)
    for r in idx["runs"]:
        rows = data[f"s{r['b']}"]["runs"][r["k"]]["rows"]
        assert sum(n for _, n in rows) >= r["fr"]  # its frames, plus request and end rows
    # the stop request of CK106 is on its run's timeline (the viewer shows it there too)
    r = runs[("ck106", "r1")]
    s = data[f"s{r['b']}"]
    events = [k for a, n in s["runs"][r["k"]]["rows"] for k in range(a, a + n)]
    caps = {s["x"][str(s["ev"]["E"][k])]["cap"] for k in events}
    assert "abort" in caps


@pytest.mark.parametrize("source", ["myproto.har", "myproto.mitm"])
def test_har_and_flow_files_with_a_profile(tmp_path: Path, source: str) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(IMPORT / source), "--profile", "myproto", "-o", str(out)]) == 0
    assert blobs(out.read_text("utf-8"))
    expected = run_check(str(IMPORT / source), profile="myproto", store_results=False).findings
    assert sorted(f["fp"] for f in index(out.read_text("utf-8"))["findings"]) == sorted(f.fingerprint for f in expected)


def test_a_fixture(tmp_path: Path) -> None:
    fixture = ROOT / "recordings" / "fixtures" / "myproto" / "late-chunk.chatkit.json"
    out = tmp_path / "r.html"
    assert main(["report", str(fixture), "-o", str(out)]) == 0
    assert "CK101" in [f["code"] for f in index(out.read_text("utf-8"))["findings"]]


def test_scrub_text_removes_message_text(tmp_path: Path) -> None:
    trace = combined_trace(tmp_path / "c.db", ["CK101-direct", "CK102", "CK202-renamed-run"])
    plain = make_report(trace, tmp_path / "plain.html").read_text("utf-8")
    scrubbed = make_report(trace, tmp_path / "scrubbed.html", scrub_text=True).read_text("utf-8")

    def everything(page: str) -> str:
        # the page less the documentation it embeds (the codes' rule text from
        # docs/rules.md has worked examples with their own sample text)
        for code in index(page).get("catalogue", index(page).get("cat", {})) or {}:
            doc = rule_text(code)
            if doc:
                page = page.replace(json.dumps(doc, ensure_ascii=False)[1:-1], "")
        return page + json.dumps(blobs(page), ensure_ascii=False)

    words = ["Hello", "world", "(late)"]
    assert all(w in everything(plain) for w in words)
    text = everything(scrubbed)
    assert not any(w in text for w in words), "message text survived --scrub-text"
    assert "Xxxxx" in text  # same shape
    assert sorted(f["fp"] for f in index(scrubbed)["findings"]) == sorted(f["fp"] for f in index(plain)["findings"])
    assert index(scrubbed)["generated"]["scrubbed"] is True


def test_rule_text_names_every_code() -> None:
    from chatkit_trace.analyze import CATALOGUE

    for code, info in CATALOGUE.items():
        text = rule_text(code)
        assert text is not None and code in text and info.title in text
    assert rule_text("CK999") is None


# ------------------------------------------------------------------------------ commands


def test_check_html_writes_the_report_of_its_findings(tmp_path: Path) -> None:
    trace = combined_trace(tmp_path / "combined.db", ["CK101-direct", "CK102", "CK601"])
    out, js = tmp_path / "report.html", tmp_path / "f.json"
    code = main(["check", str(trace), "--ignore", "CK6", "--format", "json", "-o", str(js), "--html", str(out)])
    assert code == 1
    shown = json.loads(js.read_text())["findings"]
    idx = index(out.read_text("utf-8"))
    assert sorted(f["fp"] for f in idx["findings"]) == sorted(f["fingerprint"] for f in shown)
    assert "CK601" not in {f["code"] for f in idx["findings"]} and idx["generated"]["hidden"] == 1


def test_report_command_line(tmp_path: Path) -> None:
    trace = corpus_trace(tmp_path, "CK102")
    out = tmp_path / "r.html"
    p = subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", "report", str(trace), "-o", str(out)], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert "1 finding(s) (0 error, 1 warning, 0 info)" in p.stderr
    assert out.exists() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["{missing}", "-o", "{out}"], "no such file"),
        (["{trace}", "-o", "{trace}"], "never overwrites its input"),
        (["{trace}", "-o", "{dir}"], "is a directory"),
        (["{trace}", "-o", "{nodir}"], "no such directory"),
        (["{har}", "-o", "{out}"], "pass --profile"),
    ],
)
def test_usage_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    trace = corpus_trace(tmp_path, "CK102")
    (tmp_path / "adir").mkdir()
    values = {
        "missing": str(tmp_path / "nope.db"),
        "out": str(tmp_path / "r.html"),
        "trace": str(trace),
        "dir": str(tmp_path / "adir"),
        "nodir": str(tmp_path / "no" / "r.html"),
        "har": str(IMPORT / "myproto.har"),
    }
    before = trace.read_bytes()
    assert main(["report", *[a.format(**values) for a in args]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert trace.read_bytes() == before
    assert not (tmp_path / "r.html").exists()


def test_nothing_to_report_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chatkit_trace.store import TraceStore

    empty = tmp_path / "empty.db"
    with TraceStore(empty, create=True) as store:
        store.set_meta("protocol", "myproto")
    assert main(["report", str(empty), "-o", str(tmp_path / "r.html")]) == 2
    assert "nothing to report" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_a_failure_leaves_no_half_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chatkit_trace.report import _build

    trace = corpus_trace(tmp_path, "CK102")
    out = tmp_path / "r.html"

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(_build._Builder, "index", boom)
    with pytest.raises(RuntimeError):
        write_report(trace, out)
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    assert isinstance(ReportError("x"), ValueError)


def test_sessions_are_written_as_they_are_analysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator streams: each session's data reaches the file before the next session is read."""
    from chatkit_trace.report import _html

    trace = combined_trace(tmp_path / "c.db", ["CK101-direct", "CK102", "CK104"])
    seen: list[str] = []
    sizes: list[int] = []
    original = _html.HtmlWriter.blob

    def blob(self: Any, name: str, payload: Any) -> None:
        original(self, name, payload)
        seen.append(name)
        sizes.append(self.file.tell())

    reads: list[int] = []
    loaded_exchanges = derive_engine.replay

    def counting_replay(exchanges: Any, *a: Any, **k: Any) -> Any:
        reads.append(len(seen))
        return loaded_exchanges(exchanges, *a, **k)

    monkeypatch.setattr(_html.HtmlWriter, "blob", blob)
    monkeypatch.setattr(derive_engine, "replay", counting_replay)
    make_report(trace)
    assert reads == [0, 2, 4]  # session k is replayed after sessions < k were written
    assert sizes == sorted(sizes) and seen == ["s0", "d0", "s1", "d1", "s2", "d2"]


def test_text_colours_keep_their_contrast_in_light_and_dark() -> None:
    """WCAG AA (4.5:1) for every text colour against the page, panel and selection backgrounds."""
    from chatkit_trace.report._html import template

    css = template("report.css")
    light = dict(re.findall(r"--([\w-]+): (#[0-9a-f]{6})", css.split("@media (prefers-color-scheme: dark)")[0]))
    dark = {**light, **dict(re.findall(r"--([\w-]+): (#[0-9a-f]{6})", css.split("@media (prefers-color-scheme: dark)")[1].split("}\n}")[0]))}

    def lum(h: str) -> float:
        def f(c: float) -> float:
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (int(h[i : i + 2], 16) / 255 for i in (1, 3, 5))
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b)

    def ratio(a: str, b: str) -> float:
        hi, lo = sorted((lum(a), lum(b)), reverse=True)
        return (hi + 0.05) / (lo + 0.05)

    for scheme in (light, dark):
        for text in ("fg", "muted", "accent", "err", "warn", "ok", "info"):
            for back in ("bg", "panel", "diff-bg"):
                assert ratio(scheme[text], scheme[back]) >= 4.5, (text, back, scheme[text], scheme[back])
        for text in ("sel-fg", "err", "muted"):
            assert ratio(scheme[text], scheme["sel"]) >= 4.5, (text, "sel")


def test_a_run_the_recorder_lost_part_of_says_recording_incomplete(tmp_path: Path) -> None:
    """CK702 (a gap the recorder marked) and CK703 (an event over its limit):
    the run's status is "recording incomplete", as `chatkit-trace runs` and the
    viewer say, and the gap's finding is on the run."""
    trace = combined_trace(tmp_path / "combined.db", ["CK702", "CK703", "clean-myproto"])
    idx = index(make_report(trace).read_text("utf-8"))
    runs = {(r["s"], r["r"]): r for r in idx["runs"]}
    assert runs[("ck702", "r1")]["st"] == "recording incomplete" and runs[("ck702", "r1")]["codes"] == ["CK702"]
    assert runs[("ck703", "r1")]["st"] == "recording incomplete" and runs[("ck703", "r1")]["codes"] == ["CK703"]
    assert runs[("clean-myproto", "r1")]["st"] == "completed"
    assert "the recorder lost part of it" in runs[("ck702", "r1")]["out"]
