"""The recorder's log lines as they reach mitmproxy's log (issue 32).

A log line quotes traffic: ids, event names, error messages a backend
chose.  :class:`SafeLines`, a filter on the recorder's loggers, masks every
line (the token shapes and the values the process learned:
:func:`chatkit_trace.masking.mask_derived`) and writes its control
characters as escapes (:func:`chatkit_trace.visible.visible`), so a line can
neither hold a secret a derivation put together nor steer the terminal.
Installed on ``chatkit_trace.capture`` and ``chatkit_trace.faults`` by the
modules that log there.
"""

from __future__ import annotations

import logging

from ..masking import mask_derived
from ..visible import visible

__all__ = ["SafeLines", "install"]


class SafeLines(logging.Filter):
    """Masks and shows (never sends) control characters of every record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format: logging says so itself
            return True
        safe = visible(mask_derived(message))
        if safe is not message or record.args:
            record.msg, record.args = safe, None
        return True


def install(logger: logging.Logger) -> logging.Logger:
    """``logger`` with one :class:`SafeLines` filter (idempotent)."""
    if not any(isinstance(f, SafeLines) for f in logger.filters):
        logger.addFilter(SafeLines())
    return logger
