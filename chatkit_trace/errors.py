"""Every exception chatkit-trace raises on purpose, in one tree.

::

    ChatkitTraceError                     base of every chatkit-trace exception
    ├── InvalidMessageError(ValueError)     core: a message breaks a validation rule (R3.7)
    ├── HistoryFormatError(ValueError)      core: a HistoryResult envelope is not of its shape (R8.1)
    ├── WireDecodeError(ValueError)         wire: bytes that are not what their framing says
    ├── AdapterNotFound(LookupError)        adapters: no adapter of that name
    ├── ProfileError(ValueError)            capture: a route profile that cannot be used
    ├── RecordTargetError(ValueError)       capture: a trace file a recorder cannot record into
    ├── TraceFormatError(ValueError)        store: not a trace database this version can read
    ├── TraceInputError(ValueError)         loading: an input that cannot be read as a trace
    ├── TraceImportError(ValueError)        import: a HAR or flow file that cannot be imported
    ├── FixtureError(ValueError)            fixtures: not a fixture this version can read
    ├── ExportError(ValueError)             export: the export cannot be made as asked
    ├── ReplayMismatch(AssertionError)      replay: a fixture no longer replays as recorded
    ├── ReportError(ValueError)             report: cannot be written where asked
    ├── UnknownRule(LookupError)            rules: neither a rule number nor a finding code
    ├── FaultRuleError(ValueError)          the fault addon: a rule that cannot be parsed
    ├── HTTPStatusError                     runtime: a capability's response had status >= 400
    └── UsageError                          the command line: a user mistake (one line, exit 2)
        └── NothingToJudge                  check: nothing the adapter could judge (exit 2, never a pass)

The command line turns any of them into one line on stderr and exit code 2
(:func:`chatkit_trace.cli.main`), never a traceback.  The Core's three live
in :mod:`chatkit_trace.core` (it imports nothing but the standard library)
and ``WireDecodeError`` in :mod:`chatkit_trace.wire.errors` (the wire layer
imports nothing above the Core); the others are defined here and re-exported where they were raised before
(``chatkit_trace.store.TraceFormatError``, ``chatkit_trace.runtime.HTTPStatusError``
and so on), so either import path works.  Rejected facts and decode problems
are *values* (``FactResult``, ``wire.DecodeError``), never exceptions.
"""

from __future__ import annotations

from .core import ChatkitTraceError, HistoryFormatError, InvalidMessageError
from .wire.errors import WireDecodeError

__all__ = [
    "AdapterNotFound",
    "ChatkitTraceError",
    "ExportError",
    "FaultRuleError",
    "FixtureError",
    "HTTPStatusError",
    "HistoryFormatError",
    "InvalidMessageError",
    "NothingToJudge",
    "ProfileError",
    "RecordTargetError",
    "ReplayMismatch",
    "ReportError",
    "TraceFormatError",
    "TraceImportError",
    "TraceInputError",
    "UnknownRule",
    "UsageError",
    "WireDecodeError",
]


class AdapterNotFound(ChatkitTraceError, LookupError):
    """No adapter of that name; the message lists what is installed."""


class ProfileError(ChatkitTraceError, ValueError):
    """A profile that cannot be used; the message says which file, which key and what."""


class RecordTargetError(ChatkitTraceError, ValueError):
    """A recorder cannot record into that file (another recorder holds it, not
    a trace, no room, not writable); the message names the file and why."""


class TraceFormatError(ChatkitTraceError, ValueError):
    """A file is not a trace database this version can read; the message says why."""


class TraceInputError(ChatkitTraceError, ValueError):
    """The input cannot be read as a trace; the message says why."""


class TraceImportError(ChatkitTraceError, ValueError):
    """A HAR or flow file cannot be imported; the message names the file and the reason."""


class FixtureError(ChatkitTraceError, ValueError):
    """A file is not a fixture this version can read; the message says what and where."""


class ExportError(ChatkitTraceError, ValueError):
    """The export cannot be made as asked; the message says why (and what exists)."""


class ReplayMismatch(ChatkitTraceError, AssertionError):
    """A fixture no longer replays as recorded; the message is the diff."""


class ReportError(ChatkitTraceError, ValueError):
    """A report cannot be written where asked; the message says why."""


class UnknownRule(ChatkitTraceError, LookupError):
    """A name that is neither a rule number nor a finding code of docs/rules.md."""


class FaultRuleError(ChatkitTraceError, ValueError):
    """A fault rule that cannot be parsed; the message names the rule and the key."""


class HTTPStatusError(ChatkitTraceError):
    """A capability's HTTP response had status >= 400 (the call did not complete, R2.2)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class UsageError(ChatkitTraceError):
    """A user mistake: printed as one line, exit code 2."""


class NothingToJudge(UsageError):
    """The trace holds nothing the profile's adapter could judge: exit 2, never a pass."""
