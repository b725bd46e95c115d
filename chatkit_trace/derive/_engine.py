"""The derive engine: a stored trace, one session at a time, through the
replay (:mod:`chatkit_trace.pipeline`) and the analyzers
(:mod:`chatkit_trace.analyze`).

Sessions never share Core state, so only one session's exchanges, frames
and facts are in memory at a time, and its derived rows can be written as
soon as it is done.  A session's exchanges are selected in one place
(:class:`~chatkit_trace.derive.TraceSessions`): those filed under it, and
its own frames of every socket several sessions share (issue 20).  What only the whole trace can say is settled at the
end, in one place (:func:`merge_findings`): the once-per-trace codes
(:data:`TRACE_LEVEL`) are merged across sessions, and the codes about the
recording itself (CK7xx) come from the trace's meta.  CK203 learns up front
whether the trace holds any history read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..adapters import Adapter
from ..analyze import Finding, Options, analyze_replay, severity_rank, trace_findings
from ..analyze.outcomes import stop_notice_message
from ..pipeline import DEFAULT_SESSION, Replay, Replayer, replay, understood_exchanges
from ..store import TraceStore
from ..trace import Exchange
from ..wire import Frame
from ._rows import RunSummary, derived_rows, finding_rows, run_summaries
from ._sessions import TraceSessions

__all__ = [
    "TRACE_LEVEL",
    "DeriveResult",
    "Deriver",
    "SessionDerivation",
    "derive_exchanges",
    "merge_findings",
    "session_counts",
]

#: ``observe(kind, exchange, frame, replayer)``: after every replay event (kind
#: 0 request start, 1 frame, 2 end of stream; :func:`chatkit_trace.pipeline.replay`).
Observe = Callable[[int, Exchange, "Frame | None", Replayer], None]
#: ``prepare(exchanges)``: the exchanges to replay instead (e.g. scrubbed).
Prepare = Callable[[list[Exchange]], list[Exchange]]

#: What deriving one session yields: its findings (before the trace-level
#: merge), its counts (:func:`session_counts`) and, when the derived tables
#: are written, its rows (:meth:`SessionDerivation.rows`, or packed by a worker).
Outcome = tuple[list[Finding], dict[str, int], "Mapping[str, Any] | None"]

#: Codes reported once per trace: each session's are merged (:func:`merge_findings`).
TRACE_LEVEL = ("CK112", "CK115", "CK117", "CK203", "CK207", "CK306", "CK307", "CK308", "CK401", "CK406", "CK505")


@dataclass
class SessionDerivation:
    """One session, derived: its exchanges, their replay and its findings
    (before the trace-level merge)."""

    #: the stored session id (None: the exchanges that carry none)
    session_id: str | None
    exchanges: list[Exchange]
    replay: Replay
    findings: list[Finding] = field(default_factory=list)

    @property
    def names(self) -> set[str]:
        """Every session the replay made (an event may name another), and the stored one."""
        return set(self.replay.sessions) | {self.session_id if self.session_id is not None else DEFAULT_SESSION}

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The derived tables' rows (:func:`~chatkit_trace.derive.derived_rows`)."""
        return derived_rows(self.replay)

    def runs(self) -> list[RunSummary]:
        return run_summaries(self.replay)


@dataclass
class DeriveResult:
    """The trace's findings (merged, sorted) and what was derived: ``frames``,
    ``facts``, ``violations``, ``sessions``, ``matched`` (exchanges a route
    matched) and ``understood`` (those the adapter made sense of)."""

    findings: list[Finding]
    counts: dict[str, int]


def derive_exchanges(
    exchanges: list[Exchange],
    adapter: Adapter,
    *,
    capabilities: Iterable[str] | None = None,
    options: Options | None = None,
    analyse: bool = True,
    session_id: str | None = None,
    observe: Observe | None = None,
    only: Iterable[str] | None = None,
) -> SessionDerivation:
    """Replay one session's ``exchanges`` and (``analyse``) find what is wrong.
    ``only``: the sessions whose frames of a socket several sessions share
    the replay records (:meth:`TraceSessions.only`)."""
    rep = replay(exchanges, adapter, capabilities=capabilities, observe=observe, only=only)
    found = analyze_replay(rep, exchanges, adapter, options) if analyse else []
    return SessionDerivation(session_id, exchanges, rep, found)


class Deriver:
    """Derive a stored trace session by session (see the module docstring).

    :param store: the trace (read: its classified exchanges and meta).
    :param capabilities: the Core's (from the route profile); default the adapter's.
    :param options: the analyzers' thresholds.
    :param prepare: what to replay instead of a session's stored exchanges
        (the HTML report's ``--scrub-text``).
    :param observe: called after every replay event (the HTML report reads
        the snapshot the UI had at each).
    """

    def __init__(
        self,
        store: TraceStore,
        adapter: Adapter,
        *,
        capabilities: Any = None,
        options: Options | None = None,
        prepare: Prepare | None = None,
        observe: Observe | None = None,
    ) -> None:
        self.store = store
        self.adapter = adapter
        self.capabilities = capabilities
        self.prepare = prepare
        self.observe = observe
        self.options = replace(options or Options(), trace_has_history=store.has_capability("history"))
        #: the one selection of a session's exchanges (shared sockets split per event)
        self.split = TraceSessions(store, adapter)

    def sessions(self) -> list[str | None]:
        """The sessions, in the order they first appear: the stored session
        ids, and every session a shared socket's frames name."""
        return self.split.sessions()

    def together(self, sessions: Iterable[str | None]) -> set[str | None]:
        """``sessions`` and every session that shares a socket with one of them."""
        return self.split.together(sessions)

    def shared_sockets(self) -> set[int]:
        """The exchanges (index) of the sockets several sessions share: their
        derived rows belong to every session they carry."""
        return set(self.split.sockets())

    def session(self, session_id: str | None, *, analyse: bool = True) -> SessionDerivation:
        """Replay (and ``analyse``) one session: its classified exchanges and
        its own frames of every shared socket (:class:`TraceSessions`)."""
        exchanges = self.split.exchanges(session_id)
        if self.prepare is not None:
            exchanges = self.prepare(exchanges)
        return derive_exchanges(
            exchanges,
            self.adapter,
            capabilities=self.capabilities,
            options=self.options,
            analyse=analyse,
            session_id=session_id,
            observe=self.observe,
            only=self.split.only(session_id),
        )

    def analyse(self, derived: SessionDerivation) -> list[Finding]:
        """Find what is wrong in a session replayed without analysis."""
        derived.findings = analyze_replay(derived.replay, derived.exchanges, self.adapter, self.options)
        return derived.findings

    def run(
        self,
        *,
        write_to: TraceStore | None = None,
        analyse: bool = True,
        on_session: Callable[[SessionDerivation], None] | None = None,
    ) -> DeriveResult:
        """Derive every session; merge the trace's findings.

        ``write_to``: a store whose derived tables are replaced by the
        result (the trace itself for ``redecode`` and ``import``, a side
        database for the viewer), a session's rows as soon as it is done,
        the findings at the end (when ``analyse``).  ``on_session`` is
        called after each session (progress; a caller may read its replay).
        """

        def outcomes() -> Iterator[Outcome]:
            for sid in self.sessions():
                d = self.session(sid, analyse=analyse)
                yield d.findings, session_counts(d), d.rows() if write_to is not None else None
                if on_session is not None:
                    on_session(d)
                del d  # one session in memory at a time

        return self.collect(outcomes(), write_to=write_to, analyse=analyse)

    def collect(self, outcomes: Iterable[Outcome], *, write_to: TraceStore | None = None, analyse: bool = True) -> DeriveResult:
        """The trace's result from its sessions' outcomes in session order
        (derived here, :meth:`run`, or in worker processes,
        :func:`~chatkit_trace.derive.derive_parallel`): each session's rows
        written to ``write_to`` as it comes, the findings merged at the end."""
        findings: list[Finding] = []
        counts = {"frames": 0, "facts": 0, "sessions": 0, "violations": 0, "matched": 0, "understood": 0}
        if write_to is not None:
            write_to.clear_derived()
        for found, n, rows in outcomes:
            findings.extend(found)
            for key, value in n.items():
                counts[key] += value
            if write_to is not None and rows is not None:
                write_to.write_derived(rows)
        merged = merge_findings(findings, self.store.meta()) if analyse else []
        if write_to is not None and analyse:
            write_to.replace_findings(finding_rows(merged))
        if write_to is not None:
            write_to.derived_everything()
        return DeriveResult(merged, counts)


def session_counts(d: SessionDerivation) -> dict[str, int]:
    """What one derived session adds to :attr:`DeriveResult.counts`."""
    rep = d.replay
    return {
        "frames": len(rep.frames),
        "facts": len(rep.facts),
        "violations": sum(1 for f in rep.facts if f.result.violation),
        "sessions": 1,
        "matched": len(d.exchanges),
        "understood": len(understood_exchanges(rep)),
    }


def merge_findings(findings: Iterable[Finding], meta: Mapping[str, Any]) -> list[Finding]:
    """The trace's findings from its sessions': once-per-trace codes merged
    (frames, counts and examples added up), the recording's own (CK7xx)
    from ``meta``, sorted by session, run, severity and code."""
    by_fp: dict[str, Finding] = {}
    out: list[Finding] = []
    for f in findings:
        if f.code not in TRACE_LEVEL:
            out.append(f)
            continue
        first = by_fp.get(f.fingerprint)
        if first is None:
            by_fp[f.fingerprint] = f
            continue
        first.frames = (first.frames + [x for x in f.frames if x not in first.frames])[:20]
        if f.code == "CK406":
            types = dict(first.detail.get("types", {}))
            for t, n in f.detail.get("types", {}).items():
                types[t] = types.get(t, 0) + n
            first.detail["types"] = types
            total = sum(types.values())
            top = sorted(types.items(), key=lambda kv: -kv[1])[:5]
            first.message = (
                f"{total} frame(s) of {len(types)} event type(s) decoded to nothing and were ignored "
                f"({', '.join(f'{t} x{n}' for t, n in top)})."
            )
        elif f.code == "CK401":
            first.detail["exchanges"] = first.detail.get("exchanges", 0) + f.detail.get("exchanges", 0)
        elif f.code in ("CK306", "CK307"):
            first.detail["events"] = first.detail.get("events", 0) + f.detail.get("events", 0)
        elif f.code == "CK308":
            first.detail["reads"] = sorted(set(first.detail.get("reads", [])) | set(f.detail.get("reads", [])))
        elif f.code == "CK117":
            d = first.detail
            d["runs"] = list(dict.fromkeys(d.get("runs", []) + f.detail.get("runs", [])))[:20]
            d["count"] = d.get("count", 0) + f.detail.get("count", 0)
            d["texts"] = list(dict.fromkeys(d.get("texts", []) + f.detail.get("texts", [])))[:5]
            d["how"] = sorted(set(d.get("how", [])) | set(f.detail.get("how", [])))
            d["reads"] = sorted(set(d.get("reads", [])) | set(f.detail.get("reads", [])))
            first.message = stop_notice_message(d)
        elif f.code == "CK505":
            first.detail["count"] = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["runs"] = (first.detail.get("runs", []) + f.detail.get("runs", []))[:20]
            first.message = first.message.rsplit("; ", 1)[0] + f"; {first.detail['count']} such run(s))."
        elif f.code == "CK207":
            first.detail["reads"] = first.detail.get("reads", 0) + f.detail.get("reads", 0)
        elif f.code in ("CK112", "CK115"):
            count = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["count"] = count
            first.detail["runs"] = (first.detail.get("runs", []) + f.detail.get("runs", []))[:20]
            first.message = re.sub(r"^\d+ run\(s\)", f"{count} run(s)", first.message)
        elif f.code == "CK203":
            first.detail["count"] = first.detail.get("count", 0) + f.detail.get("count", 0)
            first.detail["examples"] = (first.detail.get("examples", []) + f.detail.get("examples", []))[:10]
    merged = out + list(by_fp.values()) + trace_findings(meta)
    merged.sort(key=lambda f: (f.session_id or "", f.run_id or "", severity_rank(f.severity), f.code, f.frames[:1]))
    return merged
