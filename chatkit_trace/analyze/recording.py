"""CK7xx: the recording itself: what a trace may contain, whatever the backend did.

These codes come from the trace's meta (how it was recorded or imported),
not from its traffic, so they are computed once per trace by
:func:`trace_findings` (through the derive engine's
:func:`~chatkit_trace.derive.merge_findings`: ``check``, the viewer, the
report), never per session; they carry no session, run or frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._finding import Finding, make_finding

__all__ = ["secrets_kept", "trace_findings"]


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


def trace_findings(meta: Mapping[str, Any]) -> list[Finding]:
    """The trace-level findings of a trace's meta (CK7xx)."""
    found = secrets_kept(meta)
    return [found] if found is not None else []
