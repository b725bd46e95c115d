"""Adapters by name: built-ins, entry points and ``module:attribute`` paths.

Built-in protocols register under their names (``openai``, ``adk``, ``a2a``,
``hermes``, ``agui``).  Third-party packages register through the entry-point group
``chatkit_trace.adapters`` (the value is a ``module:attribute`` that is an
:class:`AdapterProtocol` subclass or a zero-argument factory returning an
instance).  A user can also name any importable ``package.module:attribute``
directly, e.g. ``--profile my_backend.protocol:MyProtocol``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from ..errors import AdapterNotFound
from ._protocol import AdapterProtocol

__all__ = ["AdapterNotFound", "register_protocol", "load_protocol", "available_protocols"]

_BUILTINS: dict[str, str] = {
    "openai": "chatkit_trace.adapters.openai:OpenAIProtocol",
    "adk": "chatkit_trace.adapters.adk:ADKProtocol",
    "a2a": "chatkit_trace.adapters.a2a:A2AProtocol",
    "hermes": "chatkit_trace.adapters.hermes:HermesProtocol",
    "agui": "chatkit_trace.adapters.agui:AGUIProtocol",
    "myproto": "chatkit_trace.examples.my_protocol:MyProtocol",
}
_REGISTERED: dict[str, Callable[[], AdapterProtocol]] = {}
#: the entry-point group third-party adapters register under: this package's name,
#: ``chatkit_trace.adapters``
ENTRY_POINT_GROUP = __name__.rpartition(".")[0]


def register_protocol(name: str, factory: Callable[[], AdapterProtocol]) -> None:
    """Register a protocol factory (a class or a zero-argument callable) under ``name``."""
    _REGISTERED[name] = factory


def _entry_points() -> dict[str, Any]:
    try:
        return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # noqa: BLE001 - third-party packages' metadata: a broken one hides no built-in adapter
        return {}


def available_protocols() -> list[str]:
    return sorted(set(_BUILTINS) | set(_REGISTERED) | set(_entry_points()))


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _instantiate(obj: Any, name: str) -> AdapterProtocol:
    if isinstance(obj, AdapterProtocol):
        return obj
    if callable(obj):
        made = obj()
        if isinstance(made, AdapterProtocol):
            return made
    raise AdapterNotFound(f"{name!r} is not an AdapterProtocol subclass, instance or factory")


def load_protocol(name: str) -> AdapterProtocol:
    """An :class:`AdapterProtocol` instance by registry name or ``module:attribute``."""
    if name in _REGISTERED:
        return _instantiate(_REGISTERED[name], name)
    if name in _BUILTINS:
        return _instantiate(_import(_BUILTINS[name]), name)
    eps = _entry_points()
    if name in eps:
        return _instantiate(eps[name].load(), name)
    if ":" in name:
        try:
            obj = _import(name)
        except (ImportError, AttributeError) as err:
            raise AdapterNotFound(f"cannot import adapter {name!r}: {err}") from None
        return _instantiate(obj, name)
    raise AdapterNotFound(
        f"no adapter named {name!r}; installed: {', '.join(available_protocols())}"
        " (or give a module path like my_pkg.protocol:MyProtocol)"
    )
