"""Open whatever a user points a command at: a trace database, a HAR or
mitmproxy flow file (imported on the fly), or a conformance fixture.

Also resolves the adapter: ``--profile`` wins; otherwise the profile the
recording was made with (stored in the trace's meta).

A ``--profile`` that is a route profile (a preset or a profile file) also
*re-classifies* a trace database: every stored exchange is matched against
the profile given now, exactly as the recorder would have matched it
(:func:`reclassify`), so a recording made with the wrong profile, or with
none, is fully recoverable.  The input is never written: the new
classification lives in a temporary copy (``redecode`` is the command that
writes it back).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tempfiles
from .adapters import Adapter
from .core import ChatkitTraceError
from .errors import TraceInputError
from .route.profiles import resolve_adapter
from .store import TraceStore
from .trace import Exchange

__all__ = ["LoadedTrace", "open_trace", "reclassify", "resolve_adapter", "TraceInputError", "kind_of"]

HAR_SUFFIXES = (".har",)
FLOW_SUFFIXES = (".flow", ".flows", ".mitm", ".dump")
FIXTURE_SUFFIXES = (".chatkit.json",)


@dataclass
class LoadedTrace:
    path: Path
    store: TraceStore
    adapter: Adapter
    capabilities: frozenset[str]
    profile: str | None
    kind: str  # db | har | flow | fixture
    temporary: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: the exchanges were re-classified with ``--profile`` (into a temporary copy)
    reclassified: bool = False

    def exchanges(self, *, with_frames: bool = True) -> list[Exchange]:
        return list(self.store.exchanges(with_frames=with_frames))

    def close(self, *, keep: bool = False) -> None:
        """Close the store; a temporary database is deleted unless ``keep``
        (the viewer reads it after the command that opened it)."""
        self.store.close()
        if self.temporary and not keep and self.store.path != ":memory:":
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    Path(self.store.path + suffix).unlink()
                except OSError:
                    pass


def kind_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(FIXTURE_SUFFIXES):
        return "fixture"
    if name.endswith(HAR_SUFFIXES):
        return "har"
    if name.endswith(FLOW_SUFFIXES):
        return "flow"
    if name.endswith(".json"):
        try:
            with path.open("rb") as f:
                head = f.read(4096).lstrip()
            if b'"log"' in head:
                return "har"
            if b'"chatkitFixture"' in head or b'"fixture_version"' in head or b'"fixtureVersion"' in head:
                return "fixture"
        except OSError:
            pass
    return "db"


def _route_profile(profile: str | None) -> Any:
    """``profile`` as a route profile (preset or file), or None when it names
    only an adapter (``pkg.mod:Class``) or nothing."""
    if profile is None:
        return None
    try:
        from .route import load_profile
    except ImportError:  # pragma: no cover
        return None
    try:
        return load_profile(profile)
    except ChatkitTraceError:
        return None


def _temp_db() -> str:
    """A new private file for a temporary trace (removed when the process ends: :mod:`.tempfiles`)."""
    return str(tempfiles.new_file("trace-", ".db"))


def _copy(store: TraceStore) -> TraceStore:
    """A temporary copy of ``store`` (consistent even while the recorder writes)."""
    return store.copy(_temp_db())


def reclassify(store: TraceStore, profile: Any) -> dict[str, int]:
    """Match every exchange of ``store`` against ``profile`` again (in place).

    The recorder's steps, in request order (:class:`chatkit_trace.route.Router`):
    the route, ids from the request, the response and the events, then the
    identity tracker.  What a profile decides is rewritten (capability,
    session, run, cursor, target, ``notes.identity``, the ``body`` frames a
    JSON response becomes); recorded bytes never change.  The meta names the
    profile.  Returns ``{"exchanges": n, "matched": m}``.
    """
    from .route import Router

    router = Router(profile)
    rows = sorted(store.exchanges(), key=lambda e: e.index)
    matched = 0
    with store.transaction():
        for ex in rows:
            had_body_frames = ex.transport == "body" and ex.response_body is not None
            ex.capability = ex.session_id = ex.run_id = ex.run_id_source = None
            ex.cursor = ex.target_run_id = None
            ex.notes = {k: v for k, v in (ex.notes or {}).items() if k != "identity"}
            if had_body_frames:
                ex.transport, ex.frames = None, []  # re-made from the body by the new route
            else:
                ex.frames = store.frames(ex.index)
            router.route(ex)
            if had_body_frames or ex.transport == "body":
                store.delete_frames(ex.index)
                if ex.transport == "body":
                    store.add_frames(ex.frames)
            store.add_exchange(ex, with_frames=False)
            matched += ex.capability is not None
        store.set_meta("profile", profile.name)
        store.set_meta("protocol", profile.protocol)
        store.set_meta("capabilities", list(profile.capabilities))
        store.set_meta("profile_spec", profile.model_dump(mode="json", by_alias=True))
    return {"exchanges": len(rows), "matched": matched}


def _needs_reclassify(profile: Any, store: TraceStore) -> bool:
    """Whether ``profile`` would classify the trace differently from how it is.

    Not when the trace was classified with exactly this profile (its stored
    spec, or its name for a trace written before specs were stored), nor when
    its exchanges were classified by something that names no profile at all (a
    fixture, a test's hand-made trace): that classification is kept and
    ``profile`` only picks the adapter.  A recording made without a profile
    has no classified exchange, so it is re-classified."""
    meta = store.meta()
    classified = store.has_classified()
    if getattr(profile, "adapter_spec", None) is not None:
        # an adapter named alone (``pkg.mod:Class``, an entry point): its
        # catch-all route only classifies a trace nothing classified yet;
        # otherwise the adapter re-decodes the stored classification
        return not classified
    spec = meta.get("profile_spec")
    if isinstance(spec, dict):
        return bool(spec != profile.model_dump(mode="json", by_alias=True))
    recordings = meta.get("recordings")
    last = recordings[-1] if isinstance(recordings, list) and recordings and isinstance(recordings[-1], dict) else {}
    name = meta.get("profile") or last.get("profile")
    if name:
        return bool(name != profile.name)
    return not classified


def open_trace(path: str | Path, *, profile: str | None = None, writable: bool = False) -> LoadedTrace:
    """Open ``path`` for analysis.  HAR and flow files are imported into a
    temporary database with ``profile`` (required for them); a trace
    database given a route profile is re-classified with it, in a temporary
    copy unless ``writable`` (then in place: ``redecode``)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file")
    if p.is_dir():
        raise TraceInputError(f"{p} is a directory, not a trace")
    if not p.is_file():
        raise TraceInputError(f"{p} is not a regular file: give a trace database, a HAR or flow file, or a fixture")
    if p.stat().st_size == 0:
        raise TraceInputError(f"{p} is empty: nothing to check (a trace database, a HAR or flow file, or a fixture)")
    kind = kind_of(p)
    if kind in ("har", "flow"):
        if profile is None:
            raise TraceInputError(f"{p} is a {kind.upper()} file: pass --profile to say which protocol it speaks")
        try:
            from .capture.importer import import_file
        except ImportError as err:  # pragma: no cover - the importer ships with the package
            raise TraceInputError(f"cannot import {kind} files: {err}") from None
        store = TraceStore(_temp_db(), create=True)
        try:
            import_file(p, profile, store)
            adapter, caps, name = resolve_adapter(profile, store.meta())
        except BaseException:
            LoadedTrace(p, store, None, frozenset(), None, kind, temporary=True).close()  # type: ignore[arg-type]
            raise
        return LoadedTrace(p, store, adapter, caps, name, kind, temporary=True)
    if kind == "fixture":
        try:
            from .fixtures.replay import fixture_to_store
        except ImportError:
            raise TraceInputError(f"{p} looks like a fixture, and fixtures are not supported yet") from None
        store, meta = fixture_to_store(p)
        adapter, caps, name = resolve_adapter(profile, meta)
        return LoadedTrace(p, store, adapter, caps, name, kind, temporary=True)
    store = TraceStore(p, readonly=not writable)
    temporary = reclassified = False
    try:
        route_profile = _route_profile(profile)
        if route_profile is not None and _needs_reclassify(route_profile, store):
            if not writable:
                copy = _copy(store)
                store.close()
                store, temporary = copy, True
            reclassify(store, route_profile)
            reclassified = True
        adapter, caps, name = resolve_adapter(profile, store.meta(), loaded=route_profile)
    except BaseException:
        LoadedTrace(p, store, None, frozenset(), None, "db", temporary=temporary).close()  # type: ignore[arg-type]
        raise
    return LoadedTrace(p, store, adapter, caps, name, "db", temporary=temporary, reclassified=reclassified)


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise TraceInputError(f"{path}: not readable JSON ({err})") from None
