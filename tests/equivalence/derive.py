"""What the equivalence test compares: every recording and fixture under
``recordings/`` re-derived (replay through the adapter and the Core, then
analysis), written as one canonical record per input.

    python tests/equivalence/derive.py [OUT.json]    # default: golden.json beside this file

Each input gets the digests (sha256 of canonical JSON) and counts of

* ``facts``: every fact with its admission result, sequence number,
  exchange/frame and snapshot version (``FactRecord``);
* ``frames``: what became of every frame (``FrameRecord``: state, run,
  error, shadow facts, unknown type, end marker, limits);

and the findings in full (``Finding.to_json``), so a change names what
moved.  Run with the code of a baseline (e.g. the tag ``bench-base-18`` in
its own worktree and environment) to make the golden file a speed-up must
reproduce bit for bit; an analysis change that alters an outcome on purpose
regenerates it (and lists the changed findings, as for the fixtures).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "recordings"
GOLDEN = Path(__file__).resolve().parent / "golden.json"


def inputs() -> list[Path]:
    """Every trace database and fixture under recordings/, in a stable order."""
    traces = sorted((RECORDINGS / "traces").glob("*.db"))
    fixtures = sorted(RECORDINGS.glob("fixtures/**/*.chatkit.json"))
    return traces + fixtures


def _plain(value: Any) -> Any:
    """JSON-able form of what a record holds (errors, tuples, enums)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return _plain(to_json())
    return repr(value)


def _fact(rec: Any) -> list[Any]:
    return [rec.seq, rec.exchange_index, rec.frame_index, rec.snapshot_version, _plain(rec.fact.to_json()),
            _plain(rec.result.to_json())]


def _frame(fr: Any) -> list[Any]:
    ident = fr.identity
    return [
        fr.exchange_index, fr.frame_index, fr.state, fr.session_id, fr.run_id, [f.seq for f in fr.facts],
        [_plain(f.to_json()) for f in fr.shadow], _plain(fr.error) if not isinstance(fr.error, str) else fr.error,
        fr.unknown, fr.event_type, fr.end_marker, list(fr.limits), fr.at,
        None if ident is None else [ident.run_id, ident.session_id, ident.starts_run, ident.ends_response],
    ]


def _digest(rows: list[Any]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def derive(path: Path) -> dict[str, Any]:
    """The canonical record of one input (see the module docstring)."""
    from chatkit_trace.loading import open_trace

    facts: list[Any] = []
    frames: list[Any] = []

    def keep(rep: Any) -> None:
        facts.extend(_fact(r) for r in rep.facts)
        frames.extend(_frame(fr) for fr in rep.frames)

    loaded = open_trace(path)
    try:
        try:
            from chatkit_trace.derive import Deriver
        except ImportError:  # before the derive engine (issue 15a): the analysis runner
            from chatkit_trace.analyze import analyze_store
            from chatkit_trace.analyze._runner import SessionHooks

            findings, _ = analyze_store(
                loaded.store, loaded.adapter, capabilities=loaded.capabilities,
                hooks=SessionHooks(done=lambda sid, rep, exchanges, found: keep(rep)),
            )
        else:
            deriver = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities)
            findings = deriver.run(on_session=lambda d: keep(d.replay)).findings
    finally:
        loaded.close()
    return {
        "facts": {"count": len(facts), "sha256": _digest(facts)},
        "frames": {"count": len(frames), "sha256": _digest(frames)},
        "findings": [_plain(f.to_json()) for f in findings],
    }


def derive_all() -> dict[str, Any]:
    return {str(p.relative_to(ROOT)): derive(p) for p in inputs()}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN
    out.write_text(json.dumps(derive_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
