"""Fixtures for the recorder's integration tests: a real backend, real mitmdump processes."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.store import TraceStore

from .backend import Backend
from .backend import backend as _backend
from .proxy import Proc, mitmdump, record


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.mitmdump)
            item.add_marker(pytest.mark.timeout(120))


@pytest.fixture
def server() -> Iterator[Backend]:
    with _backend() as b:
        yield b


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Every process a test started; all are killed at the end, whatever happened."""
    started: list[Proc] = []
    yield started
    for p in started:
        p.kill()


@pytest.fixture
def proxy(server: Backend, tmp_path: Path, procs: list[Proc]) -> Callable[..., Proc]:
    """``proxy(**kw)``: a mitmdump with the addon in front of ``server`` (see proxy.mitmdump)."""

    def start(**kw: Any) -> Proc:
        kw.setdefault("upstream", server.url)
        kw.setdefault("db", tmp_path / "trace.db")
        p = mitmdump(**kw)
        procs.append(p)
        return p

    return start


@pytest.fixture
def recorder_cmd(server: Backend, tmp_path: Path, procs: list[Proc]) -> Callable[..., Proc]:
    def start(**kw: Any) -> Proc:
        kw.setdefault("upstream", server.url)
        kw.setdefault("db", tmp_path / "trace.db")
        p = record(**kw)
        procs.append(p)
        return p

    return start


def stopped_store(p: Proc, db: Path, sig: int = signal.SIGINT) -> TraceStore:
    """Stop ``p`` (the addon flushes on done) and open its trace for reading."""
    rc = p.stop(sig)
    assert rc == 0, p.output
    return TraceStore(db, readonly=True)
