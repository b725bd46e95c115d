"""Public test helpers: the adapter conformance suite (SPEC R12)."""

from .conformance import (
    SCENARIOS,
    Check,
    ConformanceHarness,
    ScenarioReport,
    run_adapter_conformance,
    run_scenario,
)

__all__ = ["SCENARIOS", "Check", "ConformanceHarness", "ScenarioReport", "run_adapter_conformance", "run_scenario"]
