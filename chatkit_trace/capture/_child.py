"""The recorder's child processes: ``python -P -m chatkit_trace.capture._child writer``
(or ``deriver``), started by :func:`._pipe.spawn` for :mod:`.link`.

Apart from :mod:`._pipe` (the framing both ends use) so the framing imports
neither process and the processes import only the framing.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["TERMINATED", "main"]

#: set when SIGTERM came before the deriver installed its own handler
TERMINATED: list[bool] = []


def _terminated(signum: int, frame: object) -> None:
    TERMINATED.append(True)


def main(role: str) -> int:
    # Ctrl-C in a terminal signals the whole process group: the proxy stops
    # its children in order (the writer first), so they ignore it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if role == "deriver":
        # A stop can come before the deriver is ready (a busy machine starts
        # it slowly): remembered here, the deriver stops as soon as it can and
        # says what is left (deriver.serve is given TERMINATED).
        signal.signal(signal.SIGTERM, _terminated)
    # The messages to the proxy get their own descriptor; fd 1 becomes stderr,
    # so nothing a library prints can break the framing.
    out = os.dup(1)
    os.dup2(2, 1)
    if role == "writer":
        from .writer import serve

        return serve(0, out)
    if role == "deriver":
        from .deriver import serve as serve_deriver

        return serve_deriver(0, out, TERMINATED)
    print(f"chatkit_trace.capture._child: unknown role {role!r} (writer, deriver)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
