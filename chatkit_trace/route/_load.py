"""Loading a profile: a preset, a file that ``extends`` one, or an adapter
(the profile it ships, else one route that records every streamed response),
with overrides; and the adapter a trace is decoded with."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from ..errors import ChatkitTraceError, ProfileError, TraceInputError
from ._profile import ALL_STREAMS_ROUTE, PRESET_DIR, PRESETS, Profile

if TYPE_CHECKING:
    from ..adapters import Adapter

__all__ = ["ResolvedProfile", "available_presets", "load_profile", "parse_profile", "resolve_adapter"]

def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such profile file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: cannot read it ({err})") from None
    return _parse_text(text, str(path), json_first=path.suffix.lower() == ".json")


def _parse_text(text: str, where: str, *, json_first: bool) -> dict[str, Any]:
    if json_first or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ProfileError(f"{where}: not valid JSON ({err})") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ProfileError(f"{where}: not valid TOML ({err})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: a profile is a table (TOML) or an object (JSON), not {type(data).__name__}")
    return data


def _loc(loc: Sequence[int | str], raw: Any) -> str:
    """``('routes', 2, 'run', 0, 'from')`` -> ``routes[2].run.from`` (the [0] only if the file had a list)."""
    out = ""
    cur = raw
    for part in loc:
        if isinstance(part, int):
            if isinstance(cur, list):
                out += f"[{part}]"
                cur = cur[part] if part < len(cur) else None
            # else: a single table the validator wrapped in a list
            continue
        if part in ("function-after", "function-before", "function-wrap") or "[" in str(part):
            continue  # union / validator branches pydantic names in locations
        key = "from" if part == "from_" else str(part)
        out += ("." if out else "") + key
        cur = cur.get(key) if isinstance(cur, dict) else None
    return out


def _format_errors(err: ValidationError, raw: dict[str, Any], where: str) -> str:
    parts = []
    seen = set()
    for e in err.errors(include_url=False):
        loc = _loc(e["loc"], raw)
        msg = e["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing"
        line = f"{loc}: {msg}" if loc else msg
        if line not in seen:
            seen.add(line)
            parts.append(line)
    shown = parts[:3] + ([f"… and {len(parts) - 3} more"] if len(parts) > 3 else [])
    return f"{where}: " + "; ".join(shown)


def _merge(base: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """A user file on top of the profile it extends (user routes first)."""
    out = dict(base)
    replace_routes = bool(user.get("replace_routes", False))
    for k, v in user.items():
        if k in ("extends", "replace_routes"):
            continue
        if k == "routes":
            if not isinstance(v, list):
                out["routes"] = v  # validation reports it
            else:
                out["routes"] = list(v) + ([] if replace_routes else list(base.get("routes") or []))
        elif k == "redact" and isinstance(v, dict) and isinstance(base.get("redact"), dict):
            merged = dict(base["redact"])
            for rk, rv in v.items():
                if isinstance(rv, list) and isinstance(merged.get(rk), list):
                    merged[rk] = list(merged[rk]) + list(rv)
                else:
                    merged[rk] = rv
            out["redact"] = merged
        else:
            out[k] = v
    return out


def _resolve(name_or_path: str, *, relative_to: Path | None, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The raw (merged) profile data and where it came from."""
    if name_or_path in PRESETS or (
        "/" not in name_or_path and "." not in name_or_path and (PRESET_DIR / f"{name_or_path}.toml").is_file()
    ):
        where = f"preset {name_or_path!r}"
        data = _parse_text((PRESET_DIR / f"{name_or_path}.toml").read_text(encoding="utf-8"), where, json_first=False)
    else:
        path = Path(name_or_path).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        if not path.is_file() and _names_adapter(name_or_path):
            return _adapter_profile(name_or_path, seen)
        if not path.exists() and "/" not in name_or_path and not path.suffix:
            from ..adapters import available_protocols

            raise ProfileError(
                f"no profile named {name_or_path!r}: presets are {', '.join(available_presets())}; "
                f"adapters are {', '.join(available_protocols())}; or give a .toml/.json file or an adapter "
                "as module:Class (e.g. my_pkg.protocol:MyProtocol)"
            )
        where = str(path)
        data = _read(path)
    key = where
    if key in seen:
        raise ProfileError(f"{where}: extends itself ({' -> '.join((*seen, key))})")
    ext = data.get("extends")
    if ext is not None:
        if not isinstance(ext, str) or not ext:
            raise ProfileError(f"{where}: extends: must be a preset name or a file path")
        rel = None if where.startswith("preset ") else Path(where).parent
        try:
            base, _ = _resolve(ext, relative_to=rel, seen=(*seen, key))
        except ProfileError as err:
            raise ProfileError(f"{where}: extends: {err}") from None
        own_name = "name" in data
        data = _merge(base, data)
        if not own_name:
            data["name"] = Path(where).stem if not where.startswith("preset ") else base.get("name")
    elif "replace_routes" in data:
        raise ProfileError(f"{where}: replace_routes: only means something with extends")
    return data, where


def _names_adapter(spec: str) -> bool:
    """``module:attribute``, or a registered / entry-point adapter name."""
    if ":" in spec and "/" not in spec and not spec.startswith(":"):
        return True
    if "/" in spec or spec.endswith((".toml", ".json")):
        return False
    from ..adapters import available_protocols

    return spec in available_protocols()


def _adapter_profile(spec: str, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The profile of an adapter named by ``spec``: the profile file the
    adapter ships (``AdapterProtocol.profile``, relative to its module), or
    one route that takes every streamed response of the upstream as a run of
    its own (session and run ids from a JSON body's usual names when it has
    them)."""
    from ..adapters import AdapterNotFound, load_protocol

    where = f"adapter {spec!r}"
    try:
        protocol = load_protocol(spec)
    except AdapterNotFound as err:
        raise ProfileError(
            f"{err} (chatkit-trace imports adapters in its own environment, {sys.executable}: "
            "install the adapter there, e.g. pip install -e ./my_adapter)"
        ) from None
    except Exception as err:  # noqa: BLE001 - an adapter module that fails to import
        raise ProfileError(f"{where}: importing it failed: {type(err).__name__}: {err}") from None
    own = getattr(protocol, "profile", None)
    if own:
        import inspect

        module_file = inspect.getsourcefile(type(protocol)) or ""
        path = Path(own) if Path(own).is_absolute() else Path(module_file).parent / own
        data, file_where = _resolve(str(path), relative_to=None, seen=(*seen, where))
        data = dict(data)
        data.setdefault("protocol", spec)
        return data, f"{where} ({file_where})"
    name = protocol.name if protocol.name and protocol.name != "custom" else spec
    return {
        "name": name,
        "protocol": spec,
        "description": f"adapter {spec} without routes: every streamed response of the upstream is a run",
        "capabilities": ["run"],
        "routes": [
            {
                "name": ALL_STREAMS_ROUTE,
                "capability": "run",
                "method": "*",
                "path": "/**",
                "session": [
                    "body:threadId", "body:thread_id", "body:sessionId", "body:session_id",
                    "header:X-Session-Id", "derived:exchange",
                ],
                "run": ["body:runId", "body:run_id", "derived"],
                "streams_only": True,
            }
        ],
    }, where


def parse_profile(data: Mapping[str, Any], where: str = "profile") -> Profile:
    """A :class:`Profile` from already-parsed data (no ``extends``); errors as :class:`ProfileError`."""
    raw = dict(data)
    try:
        return Profile.model_validate(raw)
    except ValidationError as err:
        raise ProfileError(_format_errors(err, raw, where)) from None


def load_profile(name_or_path: str, overrides: str | None = None) -> Profile:
    """A preset by name (``openai``, ``adk``, ``a2a``, ``hermes``, ``agui``,
    ``myproto``), a file, or an adapter: a registered or entry-point adapter
    name, or ``module:Class`` (the profile the adapter ships, else one route
    that records every streamed response of the upstream as a run).

    A file (``.toml`` or ``.json``) may say ``extends = "adk"`` (a preset or
    another file, relative to it): its ``routes`` come first, then the
    base's (``replace_routes = true`` drops the base's); ``redact`` lists
    are added; anything else replaces the base's.

    ``overrides`` is applied last, the same way: a file path, or inline TOML
    / JSON text (``'routes = [{capability = "run", method = "POST", path =
    "/chat"}]'``).  Errors are :class:`ProfileError` naming the file and the
    key: ``my.toml: routes[2].run.from: unknown source 'bodyy' …``.
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ProfileError("no profile given: name a preset (" + ", ".join(available_presets()) + ") or a file")
    data, where = _resolve(name_or_path.strip(), relative_to=None, seen=())
    adapter_spec = name_or_path.strip() if where.startswith("adapter ") else None
    if overrides:
        opath = Path(overrides).expanduser()
        if "\n" not in overrides and "=" not in overrides and not overrides.lstrip().startswith("{"):
            if not opath.is_file():
                raise ProfileError(f"{overrides}: no such profile overrides file")
            odata, owhere = _read(opath), str(opath)
        else:
            owhere = "profile overrides"
            odata = _parse_text(overrides, owhere, json_first=overrides.lstrip().startswith("{"))
        if "extends" in odata:
            raise ProfileError(f"{owhere}: extends: overrides always apply to the loaded profile")
        name = data.get("name")
        data = _merge(data, odata)
        if "name" not in odata:
            data["name"] = name
        where = f"{where} + {owhere}"
    profile = parse_profile(data, where)
    profile._adapter_spec = adapter_spec
    return profile


# -- a trace's adapter -------------------------------------------------------------------

class ResolvedProfile(NamedTuple):
    """What a trace is decoded with, resolved once at the edge from ``--profile``
    and the trace's meta (:func:`resolve_adapter`); a tuple, so the callers
    that unpack it positionally read the same three values."""

    adapter: Adapter
    #: the Core's capabilities, ``run`` included
    capabilities: frozenset[str]
    #: the profile's name (or the adapter's spec), None when the trace names none
    name: str | None


def resolve_adapter(profile: str | None, meta: dict[str, Any], *, loaded: Profile | None = None) -> ResolvedProfile:
    """The adapter and Core capabilities for a trace (``profile`` overrides the meta).

    ``loaded`` is ``profile`` already loaded (:func:`load_profile`) by a
    caller that needed it too: it is not loaded twice.
    ``chatkit_trace.loading.resolve_adapter`` is this function (its old home)."""
    from ..adapters import create_adapter, load_protocol

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
            prof = loaded if loaded is not None else load_profile(profile)
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
    wanted: dict[str, Any] = {c: True for c in capabilities if c != "run"}
    adapter = create_adapter(protocol, **wanted)
    return ResolvedProfile(adapter, capabilities | {"run"}, name)
