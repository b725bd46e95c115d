"""The findings corpus: each small wire input reports exactly its codes,
with the decisive frame first (docs/rules.md#finding-codes; one case per code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatkit_trace.analyze import CATALOGUE, analyze

from .corpus import CORPUS, load_case

CASES = sorted(CORPUS.glob("*.json"))

#: Codes no recorded traffic can reach through create_adapter's ProtocolUpdates
#: (tested on synthetic replays in test_unreachable.py).
UNREACHABLE_FROM_WIRE = {"CK109", "CK111"}
#: Codes that come from a trace's meta, not its traffic (tests/analyze/test_recording.py).
FROM_META = {"CK701"}
#: Codes no longer reported (codes never change severity: another code took the cause).
RETIRED = {"CK113"}  # CK117 (issue 33)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_reports_exactly_its_codes(path: Path):
    case, exchanges, adapter = load_case(path)
    _, findings = analyze(exchanges, adapter)
    got = sorted({f.code for f in findings})
    assert got == sorted(set(case["expect"])), [(f.code, f.message) for f in findings]
    for code, frame in case.get("decisive", {}).items():
        first = [f for f in findings if f.code == code][0]
        assert first.frames[0] == frame, (code, first.frames)
    for f in findings:
        assert f.severity == CATALOGUE[f.code].severity and f.rule == CATALOGUE[f.code].rule
        assert f.message and f.fingerprint.startswith(f.code)


def test_every_code_has_a_case():
    covered = set()
    for path in CASES:
        covered |= {c for c in path.stem.split("-") if c.startswith("CK")}
    assert set(CATALOGUE) - UNREACHABLE_FROM_WIRE - FROM_META - RETIRED <= covered, sorted(set(CATALOGUE) - covered)
    assert not RETIRED & covered


def test_fingerprints_are_stable_across_re_analysis():
    for path in CASES:
        case, exchanges, adapter = load_case(path)
        a = [f.fingerprint for f in analyze(exchanges, adapter)[1]]
        _, exchanges2, adapter2 = load_case(path)
        b = [f.fingerprint for f in analyze(exchanges2, adapter2)[1]]
        assert a == b and len(set(a)) == len(a), path.stem
