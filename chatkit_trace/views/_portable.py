"""Pickling a replayer's state for another process running the same code
(the replay-ahead child, :mod:`.ahead`): what must not be copied is named,
local functions travel as code."""

from __future__ import annotations

import io
import marshal
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["PortablePickler", "PortableUnpickler"]


def _rebuild_function(
    code: bytes, module: str, name: str, defaults: Any, kwdefaults: Any, cells: tuple[Any, ...]
) -> types.FunctionType:
    mod = sys.modules.get(module)
    globs = mod.__dict__ if mod is not None else {"__builtins__": __builtins__}
    closure = tuple(types.CellType(c) for c in cells) or None
    fn = types.FunctionType(marshal.loads(code), globs, name, defaults, closure)
    fn.__kwdefaults__ = kwdefaults
    return fn


class PortablePickler(pickle.Pickler):
    """Pickles a replayer's state so that another process (same code) can load it:
    ``named`` objects (the adapter, its protocol, the trace) by name, a session's
    frames by exchange, local functions and lambdas by their code."""

    def __init__(self, file: io.BytesIO, named: dict[str, Any], frames_type: type[Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = {id(obj): name for name, obj in named.items()}
        self.frames_type = frames_type

    def persistent_id(self, obj: Any) -> Any:
        name = self.names.get(id(obj))
        if name is not None:
            return name
        if type(obj) is self.frames_type:
            return ("frames", obj.index)
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and "<" in obj.__qualname__:  # a lambda or a local function
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _rebuild_function, (
                marshal.dumps(obj.__code__),
                obj.__module__,
                obj.__name__,
                obj.__defaults__,
                obj.__kwdefaults__,
                cells,
            )
        return NotImplemented


class PortableUnpickler(pickle.Unpickler):
    """Loads what :class:`PortablePickler` wrote, with this process's named objects."""

    def __init__(self, file: io.BytesIO, named: dict[str, Any], frames: Callable[[int], Any]) -> None:
        super().__init__(file)
        self.named = named
        self.frames = frames

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and pid[0] == "frames":
            return self.frames(pid[1])
        return self.named[pid]
