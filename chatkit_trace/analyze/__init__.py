"""Analyzers: findings with stable codes (docs/rules.md#finding-codes) from a replayed trace.

``analyze(exchanges, adapter)`` replays a trace through the adapter and the
Core (:mod:`chatkit_trace.pipeline`) and runs every analyzer; each code's
detection logic lives in one function (``lifecycle``: CK1xx, ``identity``:
CK2xx, ``outcomes``: CK117-CK122, ``validity``: CK3xx, ``stream``: CK4xx, ``routing``: CK5xx,
``timing``: CK6xx, ``recording``: CK7xx, from the trace's meta, once per
trace: :func:`trace_findings`).

A stored trace is analysed a session at a time by the derive engine
(:class:`chatkit_trace.derive.Deriver`), which also merges the codes
reported once per trace.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..adapters import Adapter
from ..pipeline import Replay, replay
from ..trace import Exchange
from . import identity, lifecycle, outcomes, routing, stream, timing, validity  # noqa: F401 - registers analyzers
from ._context import ANALYZERS, Context, Options
from ._finding import (
    CATALOGUE,
    REASON_CODES,
    SEVERITIES,
    CodeInfo,
    Finding,
    clip,
    make_finding,
    severity_rank,
)
from .recording import gap_findings, trace_findings

__all__ = [
    "ANALYZERS",
    "CATALOGUE",
    "REASON_CODES",
    "SEVERITIES",
    "CodeInfo",
    "Context",
    "Finding",
    "Options",
    "analyze",
    "analyze_replay",
    "clip",
    "make_finding",
    "severity_rank",
    "trace_findings",
]


def _attach_faults(findings: list[Finding], exchanges: dict[int, Exchange]) -> None:
    """A finding whose frames lie in an exchange the fault addon acted on names
    the injected cause next to its effect (issue 9); the fingerprint stays."""
    for f in findings:
        for ref in f.frames:
            try:
                ex = exchanges.get(int(ref.split(":", 1)[0]))
            except ValueError:
                continue
            fault = (ex.notes or {}).get("fault") if ex is not None else None
            applied = fault.get("applied") if isinstance(fault, dict) else None
            if applied and ex is not None and isinstance(fault, dict):  # applied implies both
                kinds = ", ".join(sorted({str(a.get("kind", "?")) for a in applied if isinstance(a, dict)}))
                f.detail["injected_fault"] = {"exchange": ex.index, "applied": applied, "seed": fault.get("seed")}
                f.message = f"{f.message} (fault injected on exchange {ex.index}: {kinds})"
                break


def analyze_replay(rep: Replay, exchanges: Iterable[Exchange], adapter: Adapter, options: Options | None = None) -> list[Finding]:
    by_index = {e.index: e for e in exchanges}
    ctx = Context(rep, by_index, adapter, options or Options())
    findings: list[Finding] = []
    for _codes, fn in ANALYZERS:
        findings.extend(fn(ctx))
    findings = gap_findings(ctx, findings)  # the recording's own losses (CK702, CK703) and what they withhold
    _attach_faults(findings, by_index)
    findings.sort(key=lambda f: (f.session_id or "", f.run_id or "", severity_rank(f.severity), f.code, f.frames[:1]))
    return findings


def analyze(
    exchanges: Iterable[Exchange],
    adapter: Adapter,
    *,
    capabilities: Iterable[str] | None = None,
    options: Options | None = None,
) -> tuple[Replay, list[Finding]]:
    """Replay ``exchanges`` and report findings."""
    exs = list(exchanges)
    rep = replay(exs, adapter, capabilities=capabilities)
    return rep, analyze_replay(rep, exs, adapter, options)
