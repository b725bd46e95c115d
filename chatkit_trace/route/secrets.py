"""Moved to :mod:`chatkit_trace.masking` (issue 32: the store masks derived rows
and may not import the routing layer).  Kept so older imports still work."""

from ..masking import *  # noqa: F403
from ..masking import __all__  # noqa: F401
