"""Building the report from ``check``'s own pass over the trace.

The report runs the derive engine ``check`` runs
(:class:`chatkit_trace.derive.Deriver`), session by session, with three
hooks: ``observe`` reads the Core's snapshot after every replay event (as
edit operations, :mod:`._snapshot`), ``done`` (the engine's
``on_session``) turns the session's replay into
the page's data (runs, their timelines, facts with admission results,
live-vs-history comparisons) and writes it to the output file straight
away, ``prepare`` scrubs message text (``--scrub-text``, as ``export``
does).  One session is in memory at a time, as in ``check``; what stays
for the whole trace is one line per run and the findings.

What the page shows is computed by the view model the viewer reads
(:mod:`chatkit_trace.views`): the run list's status (``display_status``), a
run's timeline (``build_timeline``, answered from the session's replay,
:class:`~chatkit_trace.views.ReplaySource`, instead of SQLite), the
comparisons behind CK201 (``analyze.identity``) and a message's cells
(``views.diff.message_cells``).
"""

from __future__ import annotations

import base64
import gc
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analyze import CATALOGUE, Finding, Options, severity_rank
from ..analyze._context import Context
from ..derive import Deriver, SessionDerivation, fact_summary, run_summaries
from ..errors import ReportError
from ..pipeline import DEFAULT_SESSION, Replay, Replayer
from ..trace import Exchange
from ..views import END, START, ReplaySource, build_timeline, parse_ref, runs
from ..wire import Frame, replace_frame
from ._html import HtmlWriter
from ._rules import rule_text
from ._snapshot import SnapshotDiffer

__all__ = ["ReportError", "ReportResult", "write_report"]

@dataclass
class ReportResult:
    path: Path
    findings: list[Finding]
    runs: int
    sessions: int
    frames: int
    facts: int
    size: int
    warnings: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- values


def _error_json(err: Any) -> dict[str, Any] | None:
    if err is None:
        return None
    if hasattr(err, "to_json"):
        data: dict[str, Any] = err.to_json()
        return data
    return {"kind": "decode", "message": str(err)}


def _body(value: bytes | None, scrubbed: bool) -> dict[str, Any] | None:
    """A body for the page: text when it is UTF-8, else base64."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        if scrubbed:
            return {"omitted": "binary body not shown with --scrub-text", "size": len(value)}
        return {"b": base64.b64encode(value).decode("ascii")}
    if scrubbed and text.strip() and text.lstrip()[:1] not in ("{", "["):
        # export scrubs JSON values only; text that is not JSON cannot be
        # scrubbed safely, so a scrubbed report leaves it out.
        return {"omitted": "a body that is not JSON is not shown with --scrub-text", "size": len(value)}
    return {"t": text}


def _fact(fact: Any) -> dict[str, Any]:
    """A fact for the page: what the trace stores of it (message content
    summarised), its event id, and a preview of a message's text."""
    data = fact_summary(fact)
    data.pop("at", None)  # the frame's time is the row's
    if getattr(fact, "event_id", None) is not None:
        data["eventId"] = fact.event_id
    message = getattr(fact, "message", None)
    text = getattr(message, "text", None)
    if isinstance(text, str) and text:
        data["preview"] = text if len(text) <= 48 else "…" + text[-47:]
    return data


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# ----------------------------------------------------------------------------- a session


@dataclass
class _Event:
    ex: int
    idx: int  # START, END or a frame index
    t: float
    frame: Frame | None
    record: Any  # FrameRecord
    ops: list[Any] | None
    version: int


def _parse_ref(ref: str) -> tuple[int, int] | None:
    try:
        return parse_ref(ref)
    except ValueError:
        return None


def _segments(indices: Iterable[int]) -> list[list[int]]:
    """``[start, length]`` runs of consecutive event indices."""
    out: list[list[int]] = []
    for i in indices:
        if out and out[-1][0] + out[-1][1] == i:
            out[-1][1] += 1
        else:
            out.append([i, 1])
    return out


def _outcome(run: Any, view: Any) -> str:
    status = run.status
    parts = [status]
    err = getattr(view, "error", None) if view is not None else None
    if err is not None:
        parts.append(f"{err.code}: {err.message}")
    reason = getattr(view, "interrupt_reason", None) if view is not None else None
    if reason:
        parts.append(str(reason))
    if status == "recording incomplete":
        parts.append("the recorder lost part of it (CK702, CK703): it cannot be judged")
    elif status == "outcome unknown":
        parts.append("the stream ended without a conclusion")
    elif status == "not started":
        parts.append("the Core never started it")
    elif status == "running":
        parts.append("still running when the trace ends")
    if run.settled_by and run.settled_by != "fact":
        parts.append(f"settled by a {run.settled_by} read")
    return " · ".join(parts)


class _Builder:
    def __init__(self, writer: HtmlWriter, *, scrub: bool, adapter: Any = None) -> None:
        self.writer = writer
        self.scrub = scrub
        #: the trace's adapter: the comparisons are check's (a resume's skip, a protocol limit)
        self.adapter = adapter
        self.events: list[_Event] = []
        self.differ = SnapshotDiffer()
        self.main_session: str | None = None
        self.last_at: dict[int, float] = {}
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        self.blobs: list[dict[str, Any]] = []
        #: (session, run, ref) -> timeline row, for the refs findings name
        self.ref_rows: dict[tuple[str, str, str], int] = {}
        #: ref -> (session, run, row): the first run whose timeline holds it (trace-wide findings)
        self.ref_owner: dict[str, tuple[str, str, int]] = {}
        self.t_min: float | None = None

    def deriver(self, loaded: Any, options: Options | None) -> Deriver:
        """The engine ``check`` runs, with this builder's hooks."""
        return Deriver(
            loaded.store,
            loaded.adapter,
            capabilities=loaded.capabilities,
            options=options,
            prepare=self.prepare if self.scrub else None,
            observe=self.observe,
        )

    def session_done(self, derived: SessionDerivation) -> None:
        self.done(derived.session_id, derived.replay, derived.exchanges, derived.findings)

    # -- hooks ------------------------------------------------------------------------

    def prepare(self, exchanges: list[Exchange]) -> list[Exchange]:
        from ..fixtures.export import scrub_exchanges

        out = scrub_exchanges(exchanges)
        for old, new in zip(exchanges, out, strict=False):
            for k, (a, b) in enumerate(zip(old.frames, new.frames, strict=False)):
                if b.raw is not None and a.text != b.text:
                    new.frames[k] = replace_frame(b, raw=None)  # the bytes still hold the text: rebuilt from fields
        return out

    def observe(self, kind: int, ex: Exchange, frame: Frame | None, rp: Replayer) -> None:
        rec = rp.out.exchanges.get(ex.index)
        started = ex.started_at or 0.0
        record = None
        if kind == 0:
            t, idx = started, START
        elif kind == 1 and frame is not None:
            t = max(frame.at, started) if frame.at else started
            idx = frame.index
            self.last_at[ex.index] = max(self.last_at.get(ex.index, started), t)
            record = rec.frames[-1] if rec is not None and rec.frames else None
        else:
            last = self.last_at.get(ex.index, started)
            t, idx = max(ex.ended_at or last, last), END
        ops, version = None, 0
        sid = rec.session_id if rec is not None else None
        if sid is not None:
            if self.main_session is None:
                self.main_session = sid
            if sid == self.main_session:
                s = rp.out.sessions.get(sid)
                if s is not None:
                    snap = s.core.snapshot
                    ops, version = self.differ.ops(snap), snap.version
        if ops is None and self.events:
            version = self.events[-1].version
        self.events.append(_Event(ex.index, idx, t, frame, record, ops, version))

    def done(self, sid: str | None, rep: Replay, exchanges: Sequence[Exchange], found: list[Finding]) -> None:
        events, self.events = self.events, []
        self.differ, self.main_session, self.last_at = SnapshotDiffer(), None, {}
        if not events and not exchanges:
            return
        session_id = sid or DEFAULT_SESSION
        blob = len(self.blobs)
        t0 = events[0].t if events else min(e.started_at for e in exchanges)
        self.t_min = t0 if self.t_min is None else min(self.t_min, t0)
        data = ReplaySource(exchanges, rep)
        position = {(e.ex, e.idx): k for k, e in enumerate(events)}
        runs = self._runs(session_id, rep, exchanges, found)
        by_run: dict[tuple[str | None, str | None], list[Finding]] = defaultdict(list)
        for f in found:
            by_run[(f.session_id, f.run_id)].append(f)
        run_blobs = []
        timelines = []
        for k, (info, row) in enumerate(runs):
            refs = [r for f in by_run.get((info.session_id, info.run_id), []) for r in f.frames]
            tl = build_timeline(data, info, refs)
            rows = []
            for _, ex, first, count in tl.pieces(0, len(tl)):
                if first in (START, END):
                    p = position.get((ex, first))
                    if p is not None:
                        rows.append(p)
                    continue
                for i in range(first, first + count):
                    p = position.get((ex, i))
                    if p is not None:
                        rows.append(p)
            run_blobs.append({"id": info.run_id, "s": info.session_id, "rows": _segments(rows)})
            timelines.append((info, tl, rows))
            row.update(b=blob, k=k)
            self.runs[(info.session_id, info.run_id)] = row
        self._link_refs(found, timelines, position)
        payload = {
            "v": 1,
            "sid": session_id,
            "t0": t0,
            "ev": self._columns(events, t0),
            "x": {str(e.index): self._exchange(e, rep.exchanges.get(e.index), t0) for e in exchanges},
            "runs": run_blobs,
            "cmp": self._comparisons(rep, exchanges, t0),
        }
        details = {
            "x": {str(e.index): self._exchange_detail(e) for e in exchanges},
            "raw": {
                f"{e.index}:{f.index}": _body(f.raw, False)
                for e in exchanges
                for f in e.frames
                if f.raw is not None
            },
        }
        self.writer.blob(f"s{blob}", payload)
        self.writer.blob(f"d{blob}", details)
        self.blobs.append({"sid": session_id, "n": len(events)})

    # -- runs ---------------------------------------------------------------------------

    def _runs(self, session_id: str, rep: Replay, exchanges: Sequence[Exchange], found: list[Finding]) -> list[tuple[Any, dict[str, Any]]]:
        """The session's runs, each line as ``runs`` and the viewer make it
        (:mod:`chatkit_trace.views.runs`), with the page's row."""
        tallies = runs.tally(found)
        out = []
        known = set()
        for summary in run_summaries(rep):
            info = runs.from_summary(summary, tallies.get((summary.session_id, summary.run_id)))
            out.append((info, self._run_row(info, summary.view)))
            known.add(info.key)
        # runs a finding names that the Core never started (the send failed, CK110 ...)
        by_index = {e.index: e for e in exchanges}
        for finding in found:
            sid, rid = finding.session_id, finding.run_id
            if sid is None or rid is None or (sid, rid) in known or (sid, rid) in self.runs:
                continue
            known.add((sid, rid))
            named = [e.index for e in exchanges if e.session_id == sid and e.run_id == rid]
            c = tallies[(sid, rid)]
            info = runs.not_started(sid, rid, named, by_index.get, c, refs=c.refs, replay_session=session_id)
            out.append((info, self._run_row(info, None)))
        return out

    def _run_row(self, info: Any, view: Any) -> dict[str, Any]:
        return {
            "s": info.session_id,
            "r": info.run_id,
            "st": info.status,
            "out": _outcome(info, view),
            "o": info.origin,
            "ph": info.phase,
            "cn": info.connection,
            "fr": info.frames,
            "fa": info.facts,
            "rj": info.rejected,
            "d": None if info.duration is None else round(info.duration, 3),
            "x": list(info.exchanges),
            "t": info.first_at,
            "e": 0,
            "w": 0,
            "i": 0,
            "codes": [],
        }

    def _link_refs(self, found: list[Finding], timelines: list[tuple[Any, Any, list[int]]], position: dict[tuple[int, int], int]) -> None:
        by_key = {(info.session_id, info.run_id): (info, tl) for info, tl, _ in timelines}
        for f in found:
            own = by_key.get((f.session_id, f.run_id))
            for ref in f.frames:
                p = _parse_ref(ref)
                if p is None:
                    continue
                if own is not None:
                    row = own[1].nearest(*p)
                    if row is not None:
                        self.ref_rows[(own[0].session_id, own[0].run_id, ref)] = row
                if ref in self.ref_owner:
                    continue
                for info, tl, _ in timelines:  # the first run that shows it
                    row = tl.find(*p)
                    if row is not None:
                        self.ref_owner[ref] = (info.session_id, info.run_id, row)
                        break

    # -- events ---------------------------------------------------------------------------

    def _columns(self, events: list[_Event], t0: float) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {k: [] for k in "EITSVXMFHRUKO"}
        for e in events:
            cols["E"].append(e.ex)
            cols["I"].append(-1 if e.idx == START else -2 if e.idx == END else e.idx)
            cols["T"].append(round((e.t - t0) * 1000.0, 3))
            cols["V"].append(e.version)
            cols["O"].append(e.ops)
            fr, frame = e.record, e.frame
            if frame is None:
                for k in "SXMFHRUK":
                    cols[k].append(None)
                continue
            cols["S"].append(fr.state if fr is not None else None)
            cols["X"].append(frame.text)
            cols["M"].append([frame.transport, frame.direction, frame.event, frame.event_id, frame.start, frame.end, int(frame.raw is not None)])
            facts = None
            if fr is not None and fr.facts:
                facts = [
                    [rec.fact.kind, int(rec.result.accepted), None if rec.result.reason is None else rec.result.reason.value,
                     rec.result.detail, _fact(rec.fact)]
                    for rec in fr.facts
                ]
            cols["F"].append(facts)
            cols["H"].append([_fact(f) for f in fr.shadow] if fr is not None and fr.shadow else None)
            if fr is not None and fr.error is not None:
                cols["R"].append(_error_json(fr.error))
            elif frame.error is not None:
                # a frame's own decode note the replay did not act on (an unmatched exchange ...)
                cols["R"].append({**(_error_json(frame.error) or {}), "frameOnly": True})
            else:
                cols["R"].append(None)
            cols["U"].append((fr.event_type or "?") if fr is not None and fr.unknown else None)
            cols["K"].append(1 if fr is not None and fr.end_marker else None)
        return cols

    def _exchange(self, e: Exchange, rec: Any, t0: float) -> dict[str, Any]:
        out: dict[str, Any] = {
            "m": e.method,
            "u": e.url,
            "p": e.path,
            "st": e.status,
            "cap": e.capability,
            "sid": e.session_id,
            "run": (rec.run_id if rec is not None else None) or e.run_id,
            "src": e.run_id_source,
            "tr": e.transport,
            "end": e.end,
            "err": e.error,
            "cur": e.resume_cursor,
            "tgt": e.target_run_id,
            "t": round(((e.started_at or t0) - t0) * 1000.0, 3),
            "n": len(e.frames),
        }
        if e.ended_at is not None:
            out["te"] = round((e.ended_at - t0) * 1000.0, 3)
        if rec is not None:
            out["disp"] = rec.dispatch
            out["proj"] = rec.projected
            if rec.reader_stop is not None:
                out["stop"] = list(rec.reader_stop)
            h = rec.history
            if h is not None:
                out["hist"] = {
                    "ok": bool(h.command and h.command.ok),
                    "error": h.error or (h.command.error if h.command and not h.command.ok else None),
                    "rule": h.command.rule if h.command else None,
                    "n": len(h.result.messages) if h.result is not None else 0,
                }
        fault = (e.notes or {}).get("fault")
        if isinstance(fault, dict) and fault.get("applied"):
            out["fault"] = _jsonable(fault.get("applied"))
        return out

    def _exchange_detail(self, e: Exchange) -> dict[str, Any]:
        return {
            "rqh": [list(h) for h in e.request_headers],
            "rqb": _body(e.request_body, self.scrub),
            "rsh": [list(h) for h in e.response_headers],
            "rsb": _body(e.response_body, self.scrub),
            "notes": _jsonable(e.notes or {}),
        }

    # -- live vs history ------------------------------------------------------------------

    def _comparisons(self, rep: Replay, exchanges: Sequence[Exchange], t0: float) -> list[dict[str, Any]]:
        """Every run against every later read that covers it: ``diff``'s and
        the viewer's comparison (``analyze.identity.comparisons``), their
        cells and sentences."""
        from ..analyze.identity import cause_sentence, comparisons, describe, limit_sentence
        from ..views.diff import message_cells

        ctx = Context(rep, {e.index: e for e in exchanges}, self.adapter)
        out = []
        for c in comparisons(ctx):
            out.append(
                {
                    "run": c.run_id,
                    "hx": c.history.exchange_index,
                    "at": round((c.history.at - t0) * 1000.0, 3),
                    "label": c.baseline,
                    "title": c.title,
                    "rows": [
                        [message_cells(p.live, p.history, "(missing)", c), message_cells(p.history, p.live, "(missing)", c, live=False)]
                        for p in c.pairs
                    ],
                    "diffs": [describe(d) for d in c.diffs],
                    "explained": [f"{describe(d)} {cause_sentence(d['cause'])}" for d in c.explained],
                    "limited": [limit_sentence(d) for d in c.limited],
                    "verdict": c.verdict,
                    "error": c.history.error,
                }
            )
        return out

    # -- the index --------------------------------------------------------------------------

    def index(self, findings: list[Finding]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The run list (ordered as the viewer orders it) and the findings, linked."""
        order = sorted(self.runs.values(), key=lambda r: (r["t"] if r["t"] is not None else float("inf"), r["s"], r["r"]))
        pos = {(r["s"], r["r"]): i for i, r in enumerate(order)}
        codes: dict[int, set[str]] = defaultdict(set)
        items = []
        for f in findings:
            run = pos.get((f.session_id, f.run_id)) if f.session_id is not None and f.run_id is not None else None
            decisive = f.frames[0] if f.frames else None
            row = None
            if run is not None and decisive is not None:
                row = self.ref_rows.get((f.session_id, f.run_id, decisive))  # type: ignore[arg-type]
            elif decisive is not None and decisive in self.ref_owner:
                sid, rid, row = self.ref_owner[decisive]
                run = pos.get((sid, rid))
            if f.session_id is not None and f.run_id is not None and run is not None:
                r = order[run]
                r[f.severity[0]] += 1
                codes[run].add(f.code)
            items.append(
                {
                    "code": f.code,
                    "sev": f.severity,
                    "rule": f.rule,
                    "s": f.session_id,
                    "r": f.run_id,
                    "frames": list(f.frames),
                    "msg": f.message,
                    "fp": f.fingerprint,
                    "detail": _jsonable(f.detail),
                    "run": run,
                    "row": row,
                }
            )
        for i, c in codes.items():
            order[i]["codes"] = sorted(c)
        return order, items


# ----------------------------------------------------------------------------- entry point


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.exists() and a.samefile(b))
    except OSError:
        return False


def write_report(
    trace: str | Path,
    output: str | Path,
    *,
    profile: str | None = None,
    options: Options | None = None,
    scrub_text: bool = False,
    keep: Callable[[Finding], bool] | None = None,
    title: str | None = None,
    on_session: Callable[[SessionDerivation], None] | None = None,
) -> ReportResult:
    # long-function: the report's sections in page order
    """Analyse ``trace`` as ``check`` does and write the self-contained HTML report to ``output``.

    ``keep`` selects the findings the report shows (``check --html`` passes
    its ``--select``/``--ignore``/``--baseline`` choice); runs and frames are
    all shown.  The trace is opened read-only; the report is written to a
    temporary file next to ``output`` and renamed, so a failed run leaves no
    half report.
    """
    from .. import __version__
    from ..loading import open_trace

    out = Path(output)
    src = Path(trace)
    if out.is_dir():
        raise ReportError(f"{out} is a directory: give the report's file name")
    if not out.parent.exists():
        raise ReportError(f"{out.parent}: no such directory for the report")
    if _same_file(src, out):
        raise ReportError(f"{out} is the trace itself: a report never overwrites its input")
    loaded = open_trace(src, profile=profile)
    # What is alive now (modules, the CLI) lives on: the collector need not
    # walk it again for every generation-2 pass of the long replay.
    gc.freeze()
    tmp = out.with_name(f".{out.name}.tmp")
    title = title or f"chatkit-trace report: {src.name}"
    try:
        warnings: list[str] = []
        plain: list[Finding] | None = None
        if scrub_text:
            plain = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities, options=options).run().findings
        writer = HtmlWriter(tmp, title=title, generator=f"chatkit-trace {__version__}")
        try:
            builder = _Builder(writer, scrub=scrub_text, adapter=loaded.adapter)
            def session_done(derived: SessionDerivation) -> None:
                builder.session_done(derived)
                if on_session is not None:
                    on_session(derived)

            result = builder.deriver(loaded, options).run(on_session=session_done)
            findings, counts = result.findings, result.counts
            if not counts["sessions"]:
                raise ReportError(
                    f"nothing to report: no exchange of {src.name} matched a route of the profile "
                    f"({loaded.profile or 'the recorded one'}; is --profile right?)"
                )
            if plain is not None:
                warnings.extend(_scrub_changes(plain, findings))
            shown = [f for f in findings if keep is None or keep(f)]
            shown.sort(key=lambda f: (severity_rank(f.severity), f.code, f.session_id or "", f.run_id or "", f.frames[:1]))
            runs, items = builder.index(shown)
            meta = loaded.store.meta()
            by_sev = {s: sum(1 for f in shown if f.severity == s) for s in ("error", "warning", "info")}
            index = {
                "v": 1,
                "title": title,
                "trace": {
                    "name": src.name,
                    "kind": loaded.kind,
                    "profile": loaded.profile,
                    "protocol": meta.get("protocol"),
                    "frames": counts["frames"],
                    "facts": counts["facts"],
                    "sessions": counts["sessions"],
                },
                "generated": {
                    "by": f"chatkit-trace {__version__}",
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_generated_at())),
                    "scrubbed": scrub_text,
                    "hidden": len(findings) - len(shown),
                },
                "summary": {"total": len(shown), **by_sev, "by_code": _by_code(shown)},
                "catalogue": {
                    code: {"sev": info.severity, "rule": info.rule, "when": info.title, "text": rule_text(code)}
                    for code, info in CATALOGUE.items()
                },
                "runs": runs,
                "findings": items,
                "blobs": builder.blobs,
                "warnings": warnings,
            }
            writer.finish(index)
        except BaseException:
            writer.abort()
            raise
        tmp.replace(out)
    finally:
        gc.unfreeze()
        loaded.close()
        if tmp.exists():
            tmp.unlink()
    return ReportResult(out, shown, len(runs), counts["sessions"], counts["frames"], counts["facts"], out.stat().st_size, warnings)


def _generated_at() -> float:
    """Now, or ``SOURCE_DATE_EPOCH`` (reproducible output, e.g. the documentation's screenshots)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return float(epoch) if epoch.isdigit() else time.time()


def _by_code(findings: Iterable[Finding]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for f in findings:
        out[f.code] += 1
    return dict(sorted(out.items()))


def _scrub_changes(plain: list[Finding], scrubbed: list[Finding]) -> list[str]:
    """What --scrub-text changed in the findings (texts that differed only in letters became equal)."""
    a = {f.fingerprint: f for f in plain}
    b = {f.fingerprint: f for f in scrubbed}
    out = []
    for fp in sorted(set(a) - set(b)):
        out.append(f"--scrub-text lost finding {a[fp].code} of run {a[fp].run_id or '-'} ({fp}): it depended on the text")
    for fp in sorted(set(b) - set(a)):
        out.append(f"--scrub-text added finding {b[fp].code} of run {b[fp].run_id or '-'} ({fp}): texts became equal")
    return out

