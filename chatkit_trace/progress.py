"""Progress for long commands: rich on a terminal, silent when piped."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

__all__ = ["progress_iter"]


def progress_iter(items: Iterable[T], description: str, total: int | None = None, *, enabled: bool = True) -> Iterator[T]:
    """Yield ``items``, showing a rich progress bar on stderr when ``enabled``."""
    if not enabled:
        yield from items
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        for item in items:
            yield item
            progress.advance(task)
