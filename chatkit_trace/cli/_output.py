"""What every command writes to the terminal goes through here (issue 32).

* :func:`guarded` wraps standard output and standard error for the length of
  a command: every text written is masked (:func:`chatkit_trace.masking.mask_derived`:
  the token shapes and every value the process learned), so a secret a
  command derives (a run's text joined from its deltas, a finding quoting
  it) reaches no terminal, log file or CI artifact either;
* :func:`console` is the rich console of the text outputs (``check``,
  ``runs``, ``diff``): recorded text with control characters is shown with
  them made visible (:func:`chatkit_trace.visible.visible`), after rich has
  laid it out and before its own colour codes are added, so a trace cannot
  move the cursor, set the window title or print a fake verdict.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.segment import Segment

from ..masking import mask_derived
from ..visible import visible

__all__ = ["SafeConsole", "console", "guarded"]


class _Masked:
    """A text stream that masks what is written to it (everything else is the stream's)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask_derived(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guarded() -> Iterator[None]:
    """Standard output and error masked (:class:`_Masked`) until the block ends."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = _Masked(out)
    sys.stderr = _Masked(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


class SafeConsole(Console):
    """A rich console that shows control characters in the text it prints
    (:func:`visible`); rich's own codes (colours, links) are added after."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_shown(buffer))

    def export_text(self, *, clear: bool = True, styles: bool = False) -> str:
        with self._record_buffer_lock:
            self._record_buffer[:] = _shown(self._record_buffer)
        return super().export_text(clear=clear, styles=styles)


def _shown(buffer: Iterable[Segment]) -> list[Segment]:
    return [seg if seg.control else Segment(visible(seg.text), seg.style, seg.control) for seg in buffer]


def console(**kwargs: Any) -> SafeConsole:
    """A :class:`SafeConsole` (rich's ``Console`` arguments)."""
    return SafeConsole(**kwargs)
