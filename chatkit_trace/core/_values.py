"""Immutable JSON values and the ``ABSENT`` sentinel.

chatkit freezes every object handed to the Core (SPEC R13.1).  Python has no
``Object.freeze``, so opaque JSON values that the model carries (tool ``args``
and ``result``, data part ``data``, message ``metadata``, a RunError's
``cause``) are deep-frozen on the way in: dicts become :class:`FrozenDict`
(a ``dict`` subclass that refuses mutation, so ``json.dumps`` and ``==`` with a
plain dict keep working) and lists become tuples.

``ABSENT`` is TypeScript's ``undefined``: a key that is not there.  It is
distinct from ``None`` (JSON ``null``), which SPEC R6.4 needs: a tool call
whose ``result`` is absent is still running, one whose result is ``None`` has
finished with an empty result.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, NoReturn, TypeVar

__all__ = ["ABSENT", "AbsentType", "FrozenDict", "freeze", "thaw", "is_absent", "quick_init"]

_T = TypeVar("_T")


def quick_init(cls: type[_T]) -> type[_T]:
    """Give a frozen slots dataclass a faster ``__init__`` (same signature,
    defaults and ``__post_init__``; still frozen afterwards).

    A frozen dataclass's generated ``__init__`` stores each field with
    ``object.__setattr__(self, name, value)``; this one calls the field's slot
    descriptor directly, which builds the value in about 60% of the time.
    For the values made once per recorded frame (facts, updates, event
    identities, messages; issue 18).
    """
    ns: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    params: list[str] = []
    body: list[str] = []
    keyword_only = False
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        setter = f"_set_{f.name}"
        ns[setter] = getattr(cls, f.name).__set__
        if f.default is not dataclasses.MISSING:
            ns[f"_d_{f.name}"] = f.default
            value = f.name if f.init else f"_d_{f.name}"
            default = f"=_d_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_f_{f.name}"] = f.default_factory
            value = f"_f_{f.name}() if {f.name} is _MISSING else {f.name}" if f.init else f"_f_{f.name}()"
            default = "=_MISSING"
        else:
            value, default = f.name, ""
        if f.init:
            if f.kw_only and not keyword_only:
                params.append("*")
                keyword_only = True
            params.append(f.name + default)
        body.append(f"    {setter}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    exec(f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n", ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    # cls._make(every init field, positionally, in field order): for a hot
    # path where keyword arguments (kw_only fields) would cost as much again.
    names = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    make = [f"def _make({', '.join(names)}):", "    self = _new(_cls)"]
    make += [line for line in body]
    make.append("    return self")
    ns.update(_new=object.__new__, _cls=cls)
    exec("\n".join(make) + "\n", ns)
    ns["_make"].__qualname__ = f"{cls.__qualname__}._make"
    cls._make = staticmethod(ns["_make"])  # type: ignore[attr-defined]
    return cls


class AbsentType:
    """The type of :data:`ABSENT`; there is exactly one instance."""

    __slots__ = ()
    _instance: AbsentType | None = None

    def __new__(cls) -> AbsentType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"

    def __copy__(self) -> AbsentType:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> AbsentType:
        return self


ABSENT: Final = AbsentType()


def is_absent(value: object) -> bool:
    return value is ABSENT


def _readonly(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("FrozenDict is immutable: build a new value instead (SPEC R13.1)")


class FrozenDict(dict):  # type: ignore[type-arg]
    """A read-only ``dict``: equal to, and serialised like, a plain dict."""

    __slots__ = ("_hash",)

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly  # type: ignore[assignment]
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            h = hash(frozenset(self.items()))
            object.__setattr__(self, "_hash", h)
            return h

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> Any:
        return (FrozenDict, (dict(self),))


_SCALARS = (str, int, float, bool, type(None))


def freeze(value: Any) -> Any:
    """Deep-freeze a JSON-like value (dict -> FrozenDict, list -> tuple)."""
    if isinstance(value, _SCALARS) or value is ABSENT:
        return value
    if isinstance(value, FrozenDict):
        # Already frozen at the top; values frozen when it was built by us.
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain dicts and lists, for JSON."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value
