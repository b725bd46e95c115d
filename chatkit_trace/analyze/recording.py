"""CK7xx: the recording itself: what a trace may contain, and what it lacks.

These codes are about the file, never the backend:

* CK701 (info): recorded with secrets kept (from the trace's meta, once per
  trace, :func:`trace_findings`).
* CK702 (warning): the recorder lost part of what passed (:data:`GAP_KINDS`:
  its writer process died, the disk was full, its hand-off queue dropped
  chunks, it failed on a message).  Marked by the recorder on each exchange
  it affected (``notes.gaps``; the older ``notes.dropped_chunks``) and, for
  what no stored exchange can carry (exchanges that passed unrecorded, a
  disk that stayed full), in meta ``gaps``.  One finding per affected run
  (:func:`gap_findings`) and one per trace-wide gap (:func:`trace_findings`).
* CK703 (info): an event over the recorder's limit (``chatkit_max_event_mb``)
  was kept as its head, its length and its SHA-256 and not decoded (frame
  state ``over-limit``); a whole body over the recorder's 8 MiB that was a run's
  output was cut.  The UI decodes what the recorder did not keep: the limit
  is the recorder's, so it is never blamed on the backend.

A run whose recording is incomplete cannot be judged: its other findings
may follow from what is missing (a lost terminal looks like CK102, lost
content like CK201), so they are withheld (:data:`POSITIVE` aside: what the
frames that are there prove) and listed in the CK702 (or CK703) that names
the cause: one cause, one verdict.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..pipeline import FrameState
from ..trace import Exchange
from ._context import Context, frame_ref
from ._finding import Finding, make_finding

__all__ = ["GAP_KINDS", "POSITIVE", "exchange_gaps", "gap_findings", "secrets_kept", "trace_findings"]

#: What the recorder lost, by the kind its marks carry (``notes.gaps[].kind``, meta ``gaps[].kind``).
GAP_KINDS = {
    "queue": "the recorder's hand-off queue was full (its writer fell behind): it dropped its copy of chunks",
    "store": "the recorder could not write to the trace (the disk was full, or an I/O error): frames were not stored",
    "writer": "the recorder's writer process died: nothing after that moment was stored",
    "error": "the recorder failed on part of this exchange",
}
#: Findings a recording gap cannot cause: what the frames that are there prove.
POSITIVE = frozenset({"CK101", "CK107", "CK205", "CK302", "CK305"})
_SHA = re.compile(r"sha256:([0-9a-f]{64})")


def exchange_gaps(ex: Exchange) -> list[dict[str, Any]]:
    """The recorder's marks of loss on one exchange (``notes.gaps``; a queue
    drop of a trace recorded before they existed is read from
    ``notes.dropped_chunks``)."""
    notes = ex.notes or {}
    gaps = [dict(g) for g in notes.get("gaps") or () if isinstance(g, dict) and g.get("kind")]
    if notes.get("dropped_chunks") and not any(g["kind"] == "queue" for g in gaps):
        gaps.append({"kind": "queue", "chunks": notes["dropped_chunks"], "bytes": notes.get("dropped_bytes", 0)})
    return gaps


def _when(t: Any) -> str:
    try:
        return time.strftime("%H:%M:%S", time.localtime(float(t)))
    except (TypeError, ValueError, OverflowError):
        return "?"


def _gap_sentence(index: int, gap: Mapping[str, Any]) -> str:
    kind = gap.get("kind")
    if kind == "queue":
        return (f"the recorder dropped its copy of {gap.get('chunks', '?')} chunk(s) ({gap.get('bytes', '?')} bytes) of "
                f"exchange {index}: its writer process fell behind (chatkit_queue)")
    if kind == "store":
        return (f"{gap.get('frames', 0)} frame(s) of exchange {index} were not stored: "
                f"{gap.get('reason') or 'the trace could not be written'} (at {_when(gap.get('at'))})")
    if kind == "writer":
        return (f"the recorder's writer process {gap.get('reason') or 'died'} at {_when(gap.get('at'))} while exchange "
                f"{index} was open: nothing of it after that was stored")
    return f"the recorder failed on part of exchange {index} ({gap.get('reason') or 'an internal error'})"


def _run_keys(rec: Any) -> list[tuple[str | None, str | None]]:
    """The runs an exchange carried: a subscription's every run, else its own
    (None: an exchange of the session that names no run)."""
    if rec.socket_runs:
        return list(rec.socket_runs)
    return [(rec.session_id, rec.run_id)]


def _limit_note(rec: Any, fr: Any) -> dict[str, Any]:
    err = fr.error
    sha = _SHA.search(getattr(err, "message", "") or "")
    size = (err.end - err.offset) if getattr(err, "end", None) is not None and getattr(err, "offset", None) is not None else None
    return {"frame": frame_ref(fr.exchange_index, fr.frame_index), "bytes": size, "sha256": sha.group(1) if sha else None}


def gap_findings(ctx: Context, findings: list[Finding]) -> list[Finding]:
    # long-function: the marks of one session collected per run, then one finding per run and what it withholds
    """``findings`` of one session with the recording's own (CK702, CK703)
    added, and the findings of runs whose recording is incomplete withheld
    into them (module docstring)."""
    gaps: dict[tuple[str | None, str | None], list[tuple[int, dict[str, Any]]]] = {}
    limits: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    affected: dict[int, tuple[str | None, str | None]] = {}  # exchange -> the first run it names
    for rec in ctx.exchange_records():
        ex = rec.exchange
        keys = _run_keys(rec)
        for gap in exchange_gaps(ex):
            for key in keys:
                gaps.setdefault(key, []).append((ex.index, gap))
            affected.setdefault(ex.index, keys[0])
        for fr in rec.frames:
            if fr.state == FrameState.OVER_LIMIT:
                key = (fr.session_id, fr.run_id) if fr.run_id is not None else keys[0]
                limits.setdefault(key, []).append(_limit_note(rec, fr))
                affected.setdefault(ex.index, key)
        cut = (ex.notes or {}).get("response_body_truncated")
        if cut and ex.transport == "body":
            for key in keys:
                limits.setdefault(key, []).append({"frame": frame_ref(ex.index, None), "bytes": cut, "body": True})
            affected.setdefault(ex.index, keys[0])
    if not gaps and not limits:
        return findings
    kept: list[Finding] = []
    withheld: dict[tuple[str | None, str | None], list[Finding]] = {}
    for f in findings:
        key = (f.session_id, f.run_id)
        first = _exchange_of(f)
        if f.code.startswith("CK7") or f.code in POSITIVE:
            kept.append(f)
        elif f.run_id is not None and (key in gaps or key in limits):
            withheld.setdefault(key, []).append(f)
        elif first is not None and first in affected:
            withheld.setdefault(affected[first], []).append(f)
        else:
            kept.append(f)
    for key, marks in gaps.items():
        kept.append(_ck702(key, marks, withheld.pop(key, [])))
    for key, notes in limits.items():
        kept.append(_ck703(key, notes, withheld.pop(key, [])))
    for rest in withheld.values():  # none left: every key withheld under is a key marked above
        kept.extend(rest)
    return kept


def _exchange_of(f: Finding) -> int | None:
    if not f.frames:
        return None
    try:
        return int(f.frames[0].split(":", 1)[0])
    except ValueError:
        return None


def _withheld(found: list[Finding]) -> tuple[str, list[dict[str, Any]]]:
    if not found:
        return "", []
    codes = sorted({f.code for f in found})
    return (
        f" {len(found)} finding(s) of this run are not reported, since they may follow from what is missing: "
        f"{', '.join(codes)}.",
        [{"code": f.code, "severity": f.severity, "frames": f.frames[:3], "message": f.message} for f in found],
    )


def _whose(key: tuple[str | None, str | None]) -> str:
    sid, rid = key
    return f"run {rid} of session {sid}" if rid is not None else f"session {sid}"


def _ck702(key: tuple[str | None, str | None], marks: list[tuple[int, dict[str, Any]]], found: list[Finding]) -> Finding:
    sentences = [_gap_sentence(i, g) for i, g in marks]
    more, held = _withheld(found)
    kinds = sorted({str(g.get("kind")) for _, g in marks})
    exchanges = sorted({i for i, _ in marks})
    return make_finding(
        "CK702",
        session_id=key[0],
        run_id=key[1],
        frames=[frame_ref(i, None) for i in exchanges],
        message=(
            f"The recording of {_whose(key)} is incomplete: {'; '.join(sentences[:3])}"
            + (f" (and {len(sentences) - 3} more)" if len(sentences) > 3 else "")
            + ". This is the recorder's loss, not the backend's: the client got every byte." + more
            + " Record it again to judge it."
        ),
        detail={"gaps": [{"exchange": i, **g} for i, g in marks[:20]], "kinds": kinds, "withheld": held},
        keys=[*kinds, *exchanges],
    )


def _ck703(key: tuple[str | None, str | None], notes: list[dict[str, Any]], found: list[Finding]) -> Finding:
    first = notes[0]
    more, held = _withheld(found)
    if first.get("body"):
        what = (f"the response body of exchange {first['frame']} ({first['bytes']} bytes) is over the recorder's 8 MiB "
                "for whole bodies and was cut: its end is not decoded")
    else:
        what = (f"event {first['frame']} ({first['bytes']} bytes) is over the recorder's limit (chatkit_max_event_mb): "
                "it was kept as its first bytes, its length and its SHA-256, not decoded")
    return make_finding(
        "CK703",
        session_id=key[0],
        run_id=key[1],
        frames=[n["frame"] for n in notes],
        message=(
            f"The recording of {_whose(key)} lacks content: {what}"
            + (f" ({len(notes) - 1} more such)" if len(notes) > 1 else "")
            + ". The UI decodes it; the limit is the recorder's, not chatkit's or the backend's." + more
            + " Record with a higher chatkit_max_event_mb to judge it."
        ),
        detail={"over_limit": notes[:20], "withheld": held},
        keys=[n["frame"] for n in notes[:1]],
    )


def secrets_kept(meta: Mapping[str, Any]) -> Finding | None:
    """CK701 (info): the trace was recorded (or imported) with redaction off
    (``chatkit_keep_secrets=true``, ``--keep-secrets``), so it may hold
    credentials as they were sent: say so before it is shared.  A file
    several recordings wrote into counts when any of them kept secrets."""
    recordings = meta.get("recordings")
    kept = [
        i for i, r in enumerate(recordings if isinstance(recordings, list) else [])
        if isinstance(r, dict) and r.get("redaction") == "off"
    ]
    if meta.get("redaction") != "off" and not kept:
        return None
    src = meta.get("source")
    source = src if isinstance(src, dict) else {}
    how = {"import": "imported with --keep-secrets", "fixture": "exported with secrets kept"}.get(
        str(source.get("kind")), "recorded with chatkit_keep_secrets=true"
    )
    return make_finding(
        "CK701",
        session_id=None,
        run_id=None,
        message=(
            f"This trace was {how}: Authorization, cookies, API keys and any secret the backend echoed are stored as "
            "they were sent. Do not share it as it is: export a fixture (redaction runs again) or record again with "
            "redaction on."
        ),
        detail={"redaction": meta.get("redaction"), "recordings_kept": kept, "source": source.get("kind")},
    )


def trace_gaps(meta: Mapping[str, Any]) -> Iterable[Finding]:
    """CK702 (warning) for each loss the recorder marked in meta ``gaps``
    that no stored exchange carries: exchanges that passed through the proxy
    unrecorded (the writer process had died), a disk that was still full
    when the recording stopped."""
    gaps = meta.get("gaps")
    for gap in gaps if isinstance(gaps, list) else ():
        if not isinstance(gap, dict) or not (gap.get("unrecorded") or gap.get("until") is None):
            continue
        kind = str(gap.get("kind"))
        at = _when(gap.get("at"))
        unrecorded = int(gap.get("unrecorded") or 0)
        if kind == "writer":
            what = f"the recorder's writer process {gap.get('reason') or 'died'} at {at}"
        else:
            what = f"{gap.get('reason') or 'the trace could not be written'} from {at}"
        after = (f"; {unrecorded} exchange(s) passed through the proxy after that and are not in this trace"
                 if unrecorded else "; anything after that moment may be missing from this trace")
        yield make_finding(
            "CK702",
            session_id=None,
            run_id=None,
            message=(f"The recording is incomplete: {what}{after}. This is the recorder's loss, not the backend's: "
                     "the clients got every byte. Record again to judge what is missing."),
            detail={"gap": dict(gap), "kind": kind},
            keys=[kind, gap.get("at")],
        )


def trace_findings(meta: Mapping[str, Any]) -> list[Finding]:
    """The trace-level findings of a trace's meta (CK7xx)."""
    found = secrets_kept(meta)
    return ([found] if found is not None else []) + list(trace_gaps(meta))
