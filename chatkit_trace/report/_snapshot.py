"""The snapshot the UI had after every replay event, as small edit operations.

A report of 100k frames cannot hold 100k snapshots.  The Core's snapshots
are immutable and structurally shared (a persistent message vector, text
parts that share one chunk buffer), so the difference between two
consecutive snapshots is found by identity in time proportional to what
changed, and written as a few operations the page applies forward
(``report.js``, ``applyOps``)::

    ["r", [run, ...]]             the run views (RunView.to_json), replaced
    ["s", status, historyLoaded]  the session's status line
    ["m", i, message]             message i set (appended or replaced)
    ["n", length]                 messages cut to ``length``
    ["p", i, j, part]             part j of message i set
    ["q", i, length]              parts of message i cut to ``length``
    ["a", i, j, text]             text appended to text/reasoning part j of message i

A message is ``{"id", "role", "run", "parts"}``; a text or reasoning part
``{"id", "type", "text"}``, any other part ``{"id", "type", "v"}`` with what
the UI shows of it (:func:`chatkit_trace.analyze.identity.visible`, the
content ``check`` compares).
"""

from __future__ import annotations

from typing import Any, cast

from ..analyze.identity import visible
from ..core import ReasoningPart, RuntimeMessage, Snapshot, TextPart, thaw

__all__ = ["SnapshotDiffer", "message_json", "part_json"]

_TEXT = (TextPart, ReasoningPart)


def part_json(part: Any) -> dict[str, Any]:
    pid = getattr(part, "id", None)
    ptype = getattr(part, "type", None)
    if isinstance(part, _TEXT):
        value = part.text
        return {"id": pid, "type": ptype, "text": value if isinstance(value, str) else thaw(value)}
    if hasattr(part, "to_json") or ptype is not None:
        return {"id": pid, "type": ptype, "v": _jsonable(visible(part))}
    return {"id": pid, "type": None, "v": _jsonable(thaw(part))}


def message_json(m: RuntimeMessage) -> dict[str, Any]:
    return {"id": m.id, "role": _jsonable(m.role), "run": m.run_id, "parts": [part_json(p) for p in m.parts]}


def _jsonable(value: Any) -> Any:
    """``visible`` and ``thaw`` may hold ABSENT or other non-JSON values: as text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "to_json"):
        return _jsonable(value.to_json())
    return str(value)


def _appended(old: Any, new: Any) -> str | None:
    """The text ``new`` adds to ``old`` when it only appends (a delta), else None.

    The Core's text parts keep their chunks in one shared buffer: a part made
    by ``append`` shares its predecessor's buffer, so the suffix is read from
    the chunks in O(delta) instead of comparing whole texts (a long answer
    would make that quadratic)."""
    if type(old) is not type(new) or old.id != new.id or old.extra != new.extra:
        return None
    buf = getattr(new, "_buf", None)
    if buf is not None and buf is cast(Any, getattr(old, "_buf", None)):
        n_old, n_new = old._n, new._n  # noqa: SLF001 - the Core's chunk buffer (read only)
        if n_new >= n_old:
            chunks = buf[n_old:n_new]
            if all(isinstance(c, str) for c in chunks):
                return "".join(chunks)
    a, b = old.text, new.text
    if isinstance(a, str) and isinstance(b, str) and len(b) >= len(a) and b.startswith(a):
        return b[len(a) :]
    return None


def _same_head(a: RuntimeMessage, b: RuntimeMessage) -> bool:
    return a.id == b.id and a.role == b.role and a.run_id == b.run_id


class SnapshotDiffer:
    """Operations that turn the previous snapshot into the next one (module docstring)."""

    def __init__(self) -> None:
        self.prev: Snapshot | None = None
        self._runs: list[dict[str, Any]] = []
        self._session: list[Any] = ["unknown", False]

    def ops(self, snap: Snapshot | None) -> list[Any] | None:
        prev = self.prev
        if snap is None or snap is prev:
            return None
        self.prev = snap
        out: list[Any] = []
        if prev is None or snap.runs is not prev.runs:
            runs = [_jsonable(r.to_json()) for r in snap.runs]
            if runs != self._runs:
                self._runs = runs
                out.append(["r", runs])
        session = [snap.session_status, snap.history.loaded]
        if session != self._session:
            self._session = session
            out.append(["s", *session])
        if prev is None:
            for i, m in enumerate(snap.messages):
                out.append(["m", i, message_json(m)])
        elif snap.messages is not prev.messages:
            self._messages(prev.messages, snap.messages, out)
        return out or None

    def _messages(self, old: Any, new: Any, out: list[Any]) -> None:
        n_old, n_new = len(old), len(new)
        ob, nb = getattr(old, "_blocks", None), getattr(new, "_blocks", None)
        if ob is not None and nb is not None:
            # the persistent vector: only blocks that are not shared can differ
            base = 0
            for k, block in enumerate(nb):
                prev = ob[k] if k < len(ob) else ()
                if prev is not block:
                    n_prev = len(prev)
                    for j, m in enumerate(block):
                        if j < n_prev:
                            if prev[j] is not m:
                                self._message(base + j, prev[j], m, out)
                        else:
                            self._message(base + j, None, m, out)
                base += len(block)
        else:
            for i, m in enumerate(new):
                self._message(i, old[i] if i < n_old else None, m, out)
        if n_new < n_old:
            out.append(["n", n_new])

    def _message(self, i: int, old: RuntimeMessage | None, new: RuntimeMessage, out: list[Any]) -> None:
        if old is new:
            return
        if old is None or not _same_head(old, new) or old.metadata != new.metadata:
            out.append(["m", i, message_json(new)])
            return
        op, np_ = old.parts, new.parts
        if op is np_:
            return
        for j, part in enumerate(np_):
            prev = op[j] if j < len(op) else None
            if prev is part:
                continue
            if prev is not None and isinstance(part, _TEXT):
                suffix = _appended(prev, part)
                if suffix is not None:
                    if suffix:
                        out.append(["a", i, j, suffix])
                    continue
            if prev is not None and not isinstance(part, _TEXT) and prev == part:
                continue
            out.append(["p", i, j, part_json(part)])
        if len(np_) < len(op):
            out.append(["q", i, len(np_)])
