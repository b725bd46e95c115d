"""Every test starts with a process that learned no secret value yet.

A redactor's learned values also go to the process's set
(:data:`chatkit_trace.masking.PROCESS_SECRETS`), which masks what the
process derives; one test's secrets are no value to mask in the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatkit_trace.masking import PROCESS_SECRETS, keep_derived_secrets


@pytest.fixture(autouse=True)
def _fresh_process_secrets() -> Iterator[None]:
    yield
    PROCESS_SECRETS.clear()
    keep_derived_secrets(False)
