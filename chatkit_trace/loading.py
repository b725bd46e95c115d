"""Open whatever a user points a command at: a trace database, a HAR or
mitmproxy flow file (imported on the fly), or a conformance fixture.

Also resolves the adapter: ``--profile`` wins; otherwise the profile the
recording was made with (stored in the trace's meta).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .adapters import Adapter, AdapterNotFound, create_adapter, load_protocol
from .core import ChatkitTraceError
from .store import TraceFormatError, TraceStore

__all__ = ["LoadedTrace", "open_trace", "resolve_adapter", "TraceInputError", "kind_of"]

HAR_SUFFIXES = (".har",)
FLOW_SUFFIXES = (".flow", ".flows", ".mitm", ".dump")
FIXTURE_SUFFIXES = (".chatkit.json",)


class TraceInputError(ChatkitTraceError, ValueError):
    """The input cannot be read as a trace; the message says why."""


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

    def exchanges(self, *, with_frames: bool = True):
        return list(self.store.exchanges(with_frames=with_frames))

    def close(self) -> None:
        self.store.close()


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


def resolve_adapter(profile: str | None, meta: dict[str, Any]) -> tuple[Adapter, frozenset[str], str | None]:
    """The adapter and Core capabilities for a trace (``profile`` overrides the meta)."""
    protocol_name = meta.get("protocol")
    caps = meta.get("capabilities")
    name = profile or meta.get("profile")
    recordings = meta.get("recordings")
    if not protocol_name and isinstance(recordings, list) and recordings and isinstance(recordings[-1], dict):
        # A recording made before the top-level keys existed names its profile here.
        last = recordings[-1]
        protocol_name = last.get("protocol")
        name = name or last.get("profile")
    if profile is not None:
        try:
            from .capture import load_profile  # type: ignore[attr-defined]

            prof = load_profile(profile)
            protocol_name, name = prof.protocol, prof.name
            if prof.adapter_spec is None or not caps:
                caps = sorted(prof.capabilities)
            # else: an adapter named alone re-decodes the trace with the
            # capabilities it was recorded with (only the protocol changes)
        except ImportError:
            protocol_name = profile
        except ChatkitTraceError:
            raise  # load_profile knows presets, files and adapters: its message lists them
    if not protocol_name:
        raise TraceInputError(
            "the trace does not say which protocol it was recorded with: pass --profile (openai, adk, a2a, hermes, ...)"
        )
    protocol = load_protocol(protocol_name)
    capabilities = frozenset(caps) if caps else frozenset({"abort", "history", "resume", "subscribe", "regenerate", "edit"})
    adapter = create_adapter(protocol, **{c: True for c in capabilities if c != "run"})
    return adapter, capabilities | {"run"}, name


def open_trace(path: str | Path, *, profile: str | None = None, writable: bool = False) -> LoadedTrace:
    """Open ``path`` for analysis.  HAR and flow files are imported into a
    temporary database with ``profile`` (required for them)."""
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
            from .importer import import_file  # type: ignore[attr-defined]
        except ImportError as err:  # pragma: no cover - the importer ships with the package
            raise TraceInputError(f"cannot import {kind} files: {err}") from None
        tmp = tempfile.NamedTemporaryFile(prefix="chatkit-trace-", suffix=".db", delete=False)
        tmp.close()
        Path(tmp.name).unlink()
        store = TraceStore(tmp.name, create=True)
        import_file(p, profile, store)
        adapter, caps, name = resolve_adapter(profile, store.meta())
        return LoadedTrace(p, store, adapter, caps, name, kind, temporary=True)
    if kind == "fixture":
        try:
            from .fixtures import fixture_to_store  # type: ignore[attr-defined]
        except ImportError:
            raise TraceInputError(f"{p} looks like a fixture, and fixtures are not supported yet") from None
        store, meta = fixture_to_store(p)
        adapter, caps, name = resolve_adapter(profile, meta)
        return LoadedTrace(p, store, adapter, caps, name, kind, temporary=True)
    try:
        store = TraceStore(p, readonly=not writable)
    except TraceFormatError:
        raise
    try:
        adapter, caps, name = resolve_adapter(profile, store.meta())
    except Exception:
        store.close()
        raise
    return LoadedTrace(p, store, adapter, caps, name, "db")


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise TraceInputError(f"{path}: not readable JSON ({err})") from None
