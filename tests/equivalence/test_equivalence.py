"""Every recording and fixture under recordings/ re-derives exactly as the
golden file says: the same facts with the same admission results, the same
frame outcomes and the same findings (issue 18: speed-ups change nothing).

The golden file is made by ``tests/equivalence/derive.py`` with the code of
the baseline (``bench-base-18``); an intended change of an outcome
regenerates it with the current code after reading every changed finding.
"""

from __future__ import annotations

import json

import pytest

from .derive import GOLDEN, ROOT, derive, inputs

_GOLDEN = json.loads(GOLDEN.read_text())


def test_golden_covers_every_recording():
    names = {str(p.relative_to(ROOT)) for p in inputs()}
    assert names == set(_GOLDEN), (sorted(names - set(_GOLDEN)), sorted(set(_GOLDEN) - names))
    assert len(names) > 70  # traces and fixtures of every protocol


@pytest.mark.parametrize("path", inputs(), ids=lambda p: str(p.relative_to(ROOT / "recordings")))
def test_rederived_identically(path):
    want = _GOLDEN[str(path.relative_to(ROOT))]
    got = derive(path)
    assert got["findings"] == want["findings"]
    assert got["facts"] == want["facts"], "facts or their admission results changed"
    assert got["frames"] == want["frames"], "frame outcomes changed"
