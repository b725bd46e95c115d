"""capture: the live recorder (mitmproxy addon, writer and deriver processes) and ``import``.

How traffic is classified (profiles, identity, redaction, end kinds) is
:mod:`chatkit_trace.route`.  Its names are re-exported here, where they
lived before issue 15 step 3, for the code outside the package that imports
them from ``chatkit_trace.capture`` (the package's own code imports
:mod:`chatkit_trace.route`).
"""

from .. import route as _route
from ..route import *  # noqa: F403 - the same names, one list: route's __all__

__all__ = list(_route.__all__)
