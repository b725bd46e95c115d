"""``chatkit-trace admit``: the Core's behaviour as data (docs/core-scripts.md).

A *Core script* is a JSON Lines file of commands and facts.  ``admit`` feeds
it into a fresh :class:`~chatkit_trace.core.ChatCore` and reports what the
Core did with every line::

    {"op": "open", "session": "s1", "capabilities": {"abort": true}}
    {"op": "send", "run": "r1", "input": {"text": "hi"}, "expect": {"result": "done"}}
    {"op": "emit_message", "run": "r1", "event": "e1", "message": {...}}
    {"op": "emit_completed", "run": "r1", "event": "e1", "expect": {"result": "rejected", "reason": "duplicate-event"}}

Input (the pinned format):

* one JSON object per line; empty lines and lines starting with ``#`` are
  skipped; line numbers are 1-based physical lines of the file;
* the first line is ``open`` (``session``, optional ``capabilities``, an
  object of booleans);
* fact lines carry ``run``, optional ``session``, ``event`` (the event id;
  leave it out to send a fact without one), ``sequence`` (source_sequence)
  and ``position``, plus the camelCase payload of their op (:data:`OPS`);
* any line may carry ``"expect": {"result": ..., "reason": ...}``; a
  history batch may add ``"rule"``.

chatkit-trace's extensions: the op ``load_more`` (``result``: a
HistoryResult) is ``history.loadMore()``, an older page that goes before what
is shown (the pinned ``history`` op is the refresh); ``"expect":
{"snapshot": {...}}`` is a *partial
deep match* against the snapshot JSON after that line: every key given must
be present with a matching value (objects match recursively, lists must have
the same length and match element by element, anything else must be equal);
keys not given are not compared.

How the script's adapter behaves: it accepts every dispatch (``run``,
``regenerate``, ``edit`` resolve ``true``) and acknowledges every stop (the
abort call returns 2xx), so after each line the Core's queued requests are
drained and answered that way.  Time in a script is its line number: the
Core's clock reads the number of the line being admitted (in milliseconds),
so ``requestedAt``/``acceptedAt`` of an abort are deterministic.

Content the Core validates itself (``message``, ``workItem``, ``error``,
``delta``, ``input``, ``project``, a history ``result``) is passed through
untouched, so a script can show how the Core treats malformed content.  Names
the driver needs (``run``, ``session``, ``event``, ``messageId`` …) are type
checked, and a mistake in the script is a :class:`~chatkit_trace.cli.UsageError`
``SCRIPT:LINE: what is wrong`` (exit code 2), never a traceback.  A Python
exception the Core raises on misuse (``annotate_run`` with a nested
attribute raises ``TypeError``) becomes result ``error`` with its message.

Python API: :func:`run_script_text`, :func:`run_script`, :func:`render_json`,
:func:`render_text`.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = [
    "OPS",
    "RESULTS",
    "ScriptLine",
    "LineResult",
    "ExpectationFailure",
    "Outcome",
    "parse_script",
    "run_script_text",
    "run_script",
    "render_json",
    "render_text",
    "render_failures",
    "add_parser",
    "run",
]

#: The four results a line can have.
RESULTS = ("accepted", "rejected", "done", "error")

# The types a line's keys are checked against.
_ANY = "any JSON value"
_STR = "a string"
_NUM = "a number"
_OBJ = "an object"
_LIST = "a list"
_STR_OR_NULL = "a string or null"

# Keys every fact emitter takes (besides ``op`` and ``expect``).
_FACT_KEYS: dict[str, str] = {
    "run": _STR,
    "session": _STR,
    "event": _STR_OR_NULL,
    "sequence": _NUM,
    "position": _ANY,
}


@dataclass(frozen=True)
class _Op:
    required: dict[str, str]
    optional: dict[str, str] = field(default_factory=dict)
    doc: str = ""


def _fact(doc: str, required: dict[str, str] | None = None, optional: dict[str, str] | None = None) -> _Op:
    req = {"run": _STR, **(required or {})}
    opt = {k: v for k, v in _FACT_KEYS.items() if k != "run"}
    opt.update(optional or {})
    return _Op(req, opt, doc)


#: op -> (required keys, optional keys) with their types; ``expect`` is
#: allowed on every line.
OPS: dict[str, _Op] = {
    "open": _Op({"session": _STR}, {"capabilities": _OBJ}, "start a runtime for that session"),
    "send": _Op({"run": _STR, "input": _ANY}, {"project": _LIST}, "the UI sends (R4.5, R13.4)"),
    "abort": _Op({"run": _STR}, {}, "the UI asks to stop (R9)"),
    "regenerate": _Op({"run": _STR}, {"target": _STR_OR_NULL}, "R10.2"),
    "edit": _Op({"run": _STR, "target": _STR, "input": _ANY}, {}, "R10.2"),
    "history": _Op({"result": _ANY}, {}, "a history refresh (R8)"),
    "load_more": _Op({"result": _ANY}, {}, "an older history page (R8; chatkit-trace's extension)"),
    "resume_active_run": _Op({}, {}, "R8.3"),
    "dispose": _Op({}, {}, "dispose the runtime"),
    "emit_message": _fact("R3.1", {"message": _ANY}),
    "emit_delta": _fact("R3.1", {"messageId": _STR, "partId": _STR, "delta": _ANY}),
    "emit_phase": _fact("R3.1", {"phase": _STR}),
    "emit_work_item": _fact("R3.1", {"workItem": _ANY}),
    "emit_completed": _fact("R3.1"),
    "emit_failed": _fact("R3.1", {"error": _ANY}),
    "emit_interrupted": _fact("R3.1", optional={"reason": _STR_OR_NULL}),
    "annotate_run": _Op({"run": _STR, "attributes": _OBJ}, {"session": _STR}, "R3.3"),
    "calibrate_run": _Op({"run": _STR, "status": _STR}, {"error": _ANY, "session": _STR}, "R3.1, R9.4"),
    "register_run": _Op({"run": _STR}, {"session": _STR}, "a passive run (R2.6)"),
    "update_content": _Op({"message": _ANY}, {"session": _STR}, "display-only update"),
    "observe_connection": _Op({"run": _STR, "state": _STR}, {"session": _STR}, "R3.4"),
}

_EXPECT_KEYS = ("result", "reason", "rule", "snapshot")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class ExpectationFailure:
    """One expectation that did not hold: what the line expected, what it got."""

    line: int
    op: str
    expected: str
    got: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.op}: expected {self.expected}, got {self.got}"


@dataclass(frozen=True)
class LineResult:
    """What the Core did with one script line.

    ``result``/``reason``/``rule``/``error`` are the pinned JSON fields;
    ``detail`` is the Core's explanation (``FactResult.detail``, a refused
    history batch's sentence, a command's note) shown by the text format only.
    """

    line: int
    op: str
    result: str
    reason: str | None = None
    rule: str | None = None
    error: str | None = None
    detail: str | None = None
    run: str | None = None
    expect: Mapping[str, Any] | None = None
    failures: tuple[ExpectationFailure, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The pinned per-line object of docs/core-scripts.md."""
        out: dict[str, Any] = {"line": self.line, "op": self.op, "result": self.result}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.rule is not None:
            out["rule"] = self.rule
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class Outcome:
    """A whole script's run: per-line results, the final snapshot, the failures."""

    name: str
    session_id: str
    lines: tuple[LineResult, ...]
    snapshot: Any  # chatkit_trace.core.Snapshot
    failures: tuple[ExpectationFailure, ...]

    @property
    def ok(self) -> bool:
        """No expectation failed."""
        return not self.failures

    @property
    def expectations(self) -> int:
        """How many lines carry an expectation."""
        return sum(1 for r in self.lines if r.expect is not None)

    def snapshot_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.snapshot.to_json()
        return doc


@dataclass(frozen=True)
class ScriptLine:
    """One checked script line: its physical line ``number``, ``op``, the
    payload keys in ``data`` and its ``expect`` object, if any."""

    number: int
    op: str
    data: dict[str, Any]
    expect: dict[str, Any] | None


# --------------------------------------------------------------------------- parsing


def _usage(name: str, number: int | None, what: str) -> Exception:

    where = f"{name}:{number}" if number is not None else name
    return UsageError(f"{where}: {what}")


def _type_ok(value: Any, kind: str) -> bool:
    if kind is _ANY:
        return True
    if kind is _STR:
        return isinstance(value, str)
    if kind is _STR_OR_NULL:
        return value is None or isinstance(value, str)
    if kind is _NUM:
        return value is None or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind is _OBJ:
        return isinstance(value, dict)
    if kind is _LIST:
        return isinstance(value, list)
    raise AssertionError(kind)


def _check_expect(name: str, number: int, expect: Any) -> dict[str, Any]:
    if not isinstance(expect, dict):
        raise _usage(name, number, "expect must be an object")
    unknown = [k for k in expect if k not in _EXPECT_KEYS]
    if unknown:
        raise _usage(
            name, number, f"unknown expect key {unknown[0]!r} (allowed: {', '.join(_EXPECT_KEYS)})"
        )
    if not expect:
        raise _usage(name, number, "expect is empty")
    if "result" in expect and expect["result"] not in RESULTS:
        raise _usage(
            name, number, f"expect.result must be one of {', '.join(RESULTS)}, not {expect['result']!r}"
        )
    for key in ("reason", "rule"):
        if key in expect and not isinstance(expect[key], str):
            raise _usage(name, number, f"expect.{key} must be a string")
    if "reason" in expect:
        from ..core import FactRejectReason

        reasons = {r.value for r in FactRejectReason}
        if expect["reason"] not in reasons:
            raise _usage(name, number, f"expect.reason {expect['reason']!r} is not one of the 13 reject reasons")
    if "snapshot" in expect and not isinstance(expect["snapshot"], dict):
        raise _usage(name, number, "expect.snapshot must be an object")
    return expect


def _check_line(name: str, number: int, obj: Any, first: bool) -> ScriptLine:
    if not isinstance(obj, dict):
        raise _usage(name, number, f"a line must be a JSON object, not {type(obj).__name__}")
    if "op" not in obj:
        raise _usage(name, number, "missing \"op\"")
    op = obj["op"]
    if not isinstance(op, str) or op not in OPS:
        raise _usage(name, number, f"unknown op {op!r} (ops: {', '.join(OPS)})")
    if first and op != "open":
        raise _usage(name, number, f"the first line must be an \"open\" (got {op!r})")
    if not first and op == "open":
        raise _usage(name, number, "\"open\" may appear only once, on the first line")
    spec = OPS[op]
    data: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("op", "expect"):
            continue
        kind = spec.required.get(key, spec.optional.get(key))
        if kind is None:
            allowed = ", ".join([*spec.required, *spec.optional, "expect"])
            raise _usage(name, number, f"{op}: unknown key {key!r} (allowed: {allowed})")
        if not _type_ok(value, kind):
            raise _usage(name, number, f"{op}: {key} must be {kind}, not {json.dumps(value)}")
        data[key] = value
    for key in spec.required:
        if key not in obj:
            raise _usage(name, number, f"{op}: missing {key!r}")
    if op == "open" and "capabilities" in data:
        from ..core import CAPABILITY_NAMES

        for cap, on in data["capabilities"].items():
            if cap not in CAPABILITY_NAMES:
                raise _usage(
                    name, number, f"open: unknown capability {cap!r} (known: {', '.join(CAPABILITY_NAMES)})"
                )
            if not isinstance(on, bool):
                raise _usage(name, number, f"open: capability {cap!r} must be true or false")
    if op == "annotate_run":
        for key in data["attributes"]:
            if not isinstance(key, str):  # pragma: no cover - JSON keys are strings
                raise _usage(name, number, "annotate_run: attribute names must be strings")
    expect = _check_expect(name, number, obj["expect"]) if "expect" in obj else None
    return ScriptLine(number, op, data, expect)


def parse_script(text: str, name: str = "<script>") -> list[ScriptLine]:
    """Read and check a whole script before anything runs (UsageError on a mistake)."""
    lines: list[ScriptLine] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise _usage(name, number, f"invalid JSON: {err.msg} (column {err.colno})") from None
        except RecursionError:
            raise _usage(name, number, "invalid JSON: nested too deeply") from None
        lines.append(_check_line(name, number, obj, first=not lines))
    if not lines:
        raise _usage(name, None, "the script is empty: its first line must be an \"open\"")
    return lines


# --------------------------------------------------------------------------- matching


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _match(expected: Any, got: Any, path: str) -> str | None:
    """The first difference of a partial deep match, or ``None``."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object, got {_short(got)}"
        for key, value in expected.items():
            sub = f"{path}.{key}" if path else key
            if key not in got:
                return f"{sub}: expected {_short(value)}, got nothing"
            diff = _match(value, got[key], sub)
            if diff is not None:
                return diff
        return None
    if isinstance(expected, list):
        if not isinstance(got, list):
            return f"{path}: expected a list, got {_short(got)}"
        if len(expected) != len(got):
            return f"{path}: expected {len(expected)} items, got {len(got)}: {_short(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=False)):
            diff = _match(e, g, f"{path}[{i}]")
            if diff is not None:
                return diff
        return None
    # JSON equality: 1 == 1.0, but true is not 1.
    if isinstance(expected, bool) or isinstance(got, bool):
        same = type(expected) is type(got) and expected == got
    else:
        same = expected == got
    if not same:
        return f"{path or 'snapshot'}: expected {_short(expected)}, got {_short(got)}"
    return None


def _compare(line: ScriptLine, res: LineResult, snapshot: Callable[[], dict[str, Any]]) -> tuple[ExpectationFailure, ...]:
    expect = line.expect
    if expect is None:
        return ()
    failures: list[ExpectationFailure] = []
    wanted = {k: expect[k] for k in ("result", "reason", "rule") if k in expect}
    got_all = {"result": res.result, "reason": res.reason, "rule": res.rule}
    got = {k: got_all[k] for k in wanted}
    if wanted != got:
        shown = {k: v for k, v in got_all.items() if v is not None}
        if res.error is not None:
            shown["error"] = res.error
        failures.append(ExpectationFailure(line.number, line.op, _short(wanted), _short(shown)))
    if "snapshot" in expect:
        diff = _match(expect["snapshot"], snapshot(), "")
        if diff is not None:
            failures.append(
                ExpectationFailure(line.number, line.op, f"snapshot {_short(expect['snapshot'])}", diff)
            )
    return tuple(failures)


# --------------------------------------------------------------------------- running


class _Driver:
    """Applies script lines to one ChatCore, playing a scripted adapter."""

    def __init__(self, session: str, capabilities: Mapping[str, bool]) -> None:
        from ..core import ChatCore

        self.number = 0
        self.core = ChatCore(
            session,
            capabilities={name for name, on in capabilities.items() if on},
            clock=lambda: self.number,
        )

    def drain(self) -> None:
        """Answer the Core's requests as the scripted adapter: accept every
        dispatch, acknowledge every stop; a resume needs no answer."""
        from ..core import AbortRequest, DispatchRequest

        core = self.core
        for _ in range(10_000):
            requests = core.take_requests()
            if not requests:
                return
            for req in requests:
                if isinstance(req, DispatchRequest):
                    core.dispatch_settled(req.run_id, True)
                elif isinstance(req, AbortRequest):
                    core.abort_settled(req.run_id, True, at=self.number)

    def apply(self, line: ScriptLine) -> LineResult:
        self.number = line.number
        d = line.data
        try:
            out = self._call(line.op, d)
        except Exception as err:  # noqa: BLE001 - a misuse the Core raises on: never a traceback
            text = str(err)
            out = ("error", None, None, f"{type(err).__name__}: {text}" if text else type(err).__name__, None)
        try:
            self.drain()
        except Exception as err:  # noqa: BLE001 - the Core refused its own request  # pragma: no cover
            out = ("error", None, None, f"{type(err).__name__}: {err}", None)
        result, reason, rule, error, detail = out
        return LineResult(line.number, line.op, result, reason, rule, error, detail, d.get("run"), line.expect)

    def _call(self, op: str, d: dict[str, Any]) -> tuple[str, str | None, str | None, str | None, str | None]:
        core = self.core
        if op.startswith("emit_"):
            common = {
                "run_id": d["run"],
                "event_id": d.get("event"),
                "session_id": d.get("session"),
                "source_sequence": d.get("sequence"),
                "position": d.get("position"),
            }
            if op == "emit_message":
                fr = core.emit_message(message=d["message"], **common)
            elif op == "emit_delta":
                fr = core.emit_delta(message_id=d["messageId"], part_id=d["partId"], delta=d["delta"], **common)
            elif op == "emit_phase":
                fr = core.emit_phase(phase=d["phase"], **common)
            elif op == "emit_work_item":
                fr = core.emit_work_item(work_item=d["workItem"], **common)
            elif op == "emit_completed":
                fr = core.emit_completed(**common)
            elif op == "emit_failed":
                fr = core.emit_failed(error=d["error"], **common)
            else:
                fr = core.emit_interrupted(reason=d.get("reason"), **common)
            return self._fact(fr)
        sid = {"session_id": d["session"]} if "session" in d else {}
        if op == "annotate_run":
            return self._fact(core.annotate_run(run_id=d["run"], attributes=d["attributes"], **sid))
        if op == "calibrate_run":
            return self._fact(
                core.calibrate_run(run_id=d["run"], status=d["status"], error=d.get("error"), **sid)
            )
        if op == "register_run":
            return self._fact(core.register_run(run_id=d["run"], **sid))
        if op == "update_content":
            return self._fact(core.update_content(message=d["message"], **sid))
        if op == "observe_connection":
            return self._fact(core.observe_connection(run_id=d["run"], state=d["state"], **sid))
        if op == "send":
            return self._command(core.send(d["run"], d["input"], project=d.get("project")))
        if op == "abort":
            return self._command(core.abort(d["run"]))
        if op == "regenerate":
            return self._command(core.regenerate(d["run"], target=d.get("target")))
        if op == "edit":
            return self._command(core.edit(d["run"], target=d["target"], input=d["input"]))
        if op == "history":
            return self._command(core.apply_history(d["result"]))
        if op == "load_more":
            return self._command(core.load_more(d["result"]))
        if op == "resume_active_run":
            return self._command(core.resume_active_run())
        if op == "dispose":
            return self._command(core.dispose())
        raise AssertionError(op)  # pragma: no cover - parse_script checked the op

    @staticmethod
    def _fact(fr: Any) -> tuple[str, str | None, str | None, str | None, str | None]:
        if fr.accepted:
            return ("accepted", None, None, None, fr.detail)
        return ("rejected", str(fr.reason), None, None, fr.detail)

    @staticmethod
    def _command(cr: Any) -> tuple[str, str | None, str | None, str | None, str | None]:
        if cr.ok:
            return ("done", None, None, None, cr.error)  # an ok result may carry a note
        if cr.reason == "invalid-message":
            return ("rejected", "invalid-message", cr.rule, None, cr.error)
        return ("error", None, None, cr.error or "the command was not accepted", None)


def run_script_text(text: str, name: str = "<script>") -> Outcome:
    """Run a Core script given as text; ``name`` is used in error messages.

    Raises :class:`~chatkit_trace.cli.UsageError` (``NAME:LINE: what``) when
    the script itself is malformed; expectation failures are in the outcome.
    """
    lines = parse_script(text, name)
    head = lines[0]
    driver = _Driver(head.data["session"], head.data.get("capabilities", {}))
    results: list[LineResult] = []
    failures: list[ExpectationFailure] = []
    open_result = LineResult(head.number, "open", "done", expect=head.expect)
    fails = _compare(head, open_result, lambda: driver.core.snapshot.to_json())
    results.append(_with_failures(open_result, fails))
    failures.extend(fails)
    for line in lines[1:]:
        res = driver.apply(line)
        fails = _compare(line, res, lambda: driver.core.snapshot.to_json())
        results.append(_with_failures(res, fails))
        failures.extend(fails)
    return Outcome(name, head.data["session"], tuple(results), driver.core.snapshot, tuple(failures))


def _with_failures(res: LineResult, fails: tuple[ExpectationFailure, ...]) -> LineResult:
    if not fails:
        return res
    return LineResult(
        res.line, res.op, res.result, res.reason, res.rule, res.error, res.detail, res.run, res.expect, fails
    )


def _read(path: str | Path) -> tuple[str, str]:
    if str(path) == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        name = "<stdin>"
    else:
        p = Path(path)
        data = p.read_bytes()
        name = str(path)
    try:
        return data.decode("utf-8-sig"), name
    except UnicodeDecodeError as err:

        line = data[: err.start].count(b"\n") + 1
        raise UsageError(f"{name}:{line}: not UTF-8 text") from None


def run_script(path: str | Path) -> Outcome:
    """Run the Core script at ``path`` (``-`` reads standard input)."""
    text, name = _read(path)
    return run_script_text(text, name=name)


# --------------------------------------------------------------------------- rendering


def render_json(outcome: Outcome) -> str:
    """The pinned JSON Lines output: one object per admitted line, then
    ``{"snapshot": ...}`` (ends with a newline)."""
    out = [json.dumps(r.to_json(), ensure_ascii=False) for r in outcome.lines]
    out.append(json.dumps({"snapshot": outcome.snapshot.to_json()}, ensure_ascii=False))
    return "\n".join(out) + "\n"


def render_failures(outcome: Outcome) -> str:
    """``NAME:LINE: op: expected …, got …`` for each failed expectation."""
    return "".join(f"{outcome.name}:{f.line}: {f.op}: expected {f.expected}, got {f.got}\n" for f in outcome.failures)


def _clip(text: str, limit: int = 48) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _part_summary(part: Mapping[str, Any]) -> str:
    ptype = part.get("type")
    pid = part.get("id")
    if ptype in ("text", "reasoning"):
        text = part.get("text")
        shown = json.dumps(_clip(text), ensure_ascii=False) if isinstance(text, str) else _short(text, 40)
        return f"{pid} {ptype} {shown}"
    if ptype == "tool-call":
        status = part.get("status") or ("completed" if "result" in part else "running")
        return f"{pid} tool-call {part.get('toolName')}#{part.get('toolCallId')} {status}"
    if ptype == "data":
        return f"{pid} data {part.get('kind')}"
    if ptype == "media":
        return f"{pid} media {part.get('mimeType')}"
    return f"{pid} {ptype}"


def render_text(outcome: Outcome, width: int | None = None) -> str:
    # long-function: one table of rows, then the snapshot: the column layout is one piece
    """A readable report: one row per line, then the final snapshot.

    Plain text (no colour, ASCII frames, no trailing newline) so it can go
    to a file, a pipe or a terminal alike: ``print(render_text(outcome))``.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if width is None:
        width = max(80, min(shutil.get_terminal_size((120, 24)).columns, 160))
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False,
                      emoji=False, highlight=False, markup=False, soft_wrap=False)
    checked = outcome.expectations
    status = (
        "no expectations"
        if not checked
        else ("all expectations hold" if outcome.ok else f"{len(outcome.failures)} expectation(s) FAILED")
    )
    console.print(f"{outcome.name}: session {outcome.session_id}, {len(outcome.lines)} lines, "
                  f"{checked} with expectations, {status}")

    table = Table(box=box.ASCII2, show_edge=False, pad_edge=False, expand=False)
    table.add_column("line", justify="right", no_wrap=True)
    table.add_column("op", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("reason / note", overflow="fold")
    if checked:
        table.add_column("check", overflow="fold")
    for r in outcome.lines:
        note_bits = [b for b in (r.reason, f"rule {r.rule}" if r.rule else None, r.error) if b]
        if r.detail and r.detail not in (r.rule,):
            note_bits.append(f"({r.detail})")
        row = [str(r.line), r.op, r.run or "", r.result, " ".join(note_bits)]
        if checked:
            if r.expect is None:
                row.append("")
            elif r.failures:
                row.append("FAIL: " + "; ".join(f"expected {f.expected}, got {f.got}" for f in r.failures))
            else:
                row.append("ok")
        table.add_row(*row)
    console.print(table)

    snap = outcome.snapshot.to_json()
    console.print()
    console.print(f"Snapshot after line {outcome.lines[-1].line}" + (" (disposed)" if snap.get("disposed") else ""))
    messages = Table(box=box.ASCII2, show_edge=False, pad_edge=False, title=None)
    messages.add_column("message", no_wrap=True)
    messages.add_column("role", no_wrap=True)
    messages.add_column("run", no_wrap=True)
    messages.add_column("parts", overflow="fold")
    for m in snap["messages"]:
        parts = m.get("parts") or []
        messages.add_row(
            str(m.get("id")),
            str(m.get("role")),
            str(m.get("runId", "")),
            "\n".join(_part_summary(p) for p in parts if isinstance(p, Mapping)) or "(no parts)",
        )
    if snap["messages"]:
        console.print(messages)
    else:
        console.print("  (no messages)")
    runs = Table(box=box.ASCII2, show_edge=False, pad_edge=False)
    for col in ("run", "status", "origin", "phase", "connection", "more"):
        runs.add_column(col, overflow="fold", no_wrap=col != "more")
    for r in snap["runs"]:
        more = []
        if "error" in r:
            more.append(f"error {r['error'].get('code')}: {_clip(str(r['error'].get('message')))}")
        if "interruptReason" in r:
            more.append(f"interrupt {r['interruptReason']}")
        if "abort" in r:
            a = r["abort"]
            more.append(f"abort {a.get('remote')}" + (" (output sealed)" if a.get("outputSealed") else ""))
        if "workItems" in r:
            more.append("work " + ", ".join(f"{k}={v.get('status')}" for k, v in r["workItems"].items()))
        runs.add_row(r["id"], r["status"], r["origin"], r["phase"], r["connection"], "; ".join(more))
    console.print()
    if snap["runs"]:
        console.print(runs)
    else:
        console.print("  (no runs)")
    if "history" in snap:
        h = snap["history"]
        console.print()
        console.print(
            "history: loaded, "
            + ("reconciliation required" if h.get("reconciliationRequired") else "reconciled")
            + (
                ""
                if "activeRun" not in h
                else ", no active run (known idle)"
                if h["activeRun"] is None
                else f", active run {h['activeRun'].get('runId')}"
            )
        )
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n"))


# --------------------------------------------------------------------------- command line


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ops = "\n".join(
        f"  {op:<19} {', '.join([*spec.required, *(f'[{k}]' for k in spec.optional)]) or '-'}"
        for op, spec in OPS.items()
    )
    p = sub.add_parser(
        "admit",
        help="feed a Core script (JSON Lines of commands and facts) into a fresh Core",
        description=(
            "Feed a Core script into a fresh Core and print what it did with each line. "
            "With --check, exit 1 when an expectation fails."
        ),
        epilog=(
            textwrap.fill(
                "One JSON object per line; blank lines and # comments are skipped; the first line "
                "is an open. Ops and their keys ([optional]; any line may add expect):",
                78,
            )
            + f"\n{ops}\n"
            + textwrap.fill(
                'expect: {"result": accepted|rejected|done|error, "reason": ..., "rule": ..., '
                '"snapshot": {...}}; "snapshot" is chatkit-trace\'s extension, a partial deep '
                "match on the snapshot after that line, and so is the op load_more (an older "
                "history page; history is the refresh). The scripted adapter accepts every "
                "dispatch and acknowledges every stop; the Core's clock reads the line number.",
                78,
            )
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("script", metavar="SCRIPT", help="the script (.jsonl), or - for standard input")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--check", action="store_true", help="exit 1 when any expectation fails")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    outcome = run_script(args.script)
    text = render_json(outcome) if args.format == "json" else render_text(outcome) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    if outcome.failures:
        sys.stderr.write(render_failures(outcome))
    if args.check and outcome.failures:
        return 1
    return 0
