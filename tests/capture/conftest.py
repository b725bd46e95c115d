"""The recorder opens its default trace (``chatkit-trace.db``) in the current
folder whenever an addon is configured without ``chatkit_db``: keep that out
of the repository by running these tests in a temporary folder."""

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
