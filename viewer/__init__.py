"""The Textual viewer (installed as chatkit_trace.viewer): ``chatkit-trace view TRACE``.

Importing this package is cheap; the app and Textual load on first use
(PEP 562), so ``chatkit-trace --help`` does not pay for them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Source", "ViewerApp", "open_source"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(name)
