"""Extra mitmproxy addons (installed as chatkit_trace.addons).

* ``faults.py``: the fault-injection script (``mitmdump -s addons/faults.py``,
  ``chatkit-trace record --fault RULE``); docs/faults.md.  Its parts:
  ``fault_rules`` (the rule syntax), ``fault_addon`` (the mitmproxy addon),
  ``fault_relay`` (the in-process relay that times, cuts and rewrites
  responses) and ``fault_stream`` (events, re-encoding, the pump).
"""

import os

__all__ = ["faults_path"]


def faults_path() -> str:
    """The absolute path of the installed ``faults.py`` script (for ``mitmdump -s``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults.py")
