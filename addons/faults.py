"""The fault-injection entry script: ``mitmdump -s addons/faults.py --set chatkit_fault=…``.

mitmproxy loads a ``-s`` script from its file path under a made-up module
name, so this file uses absolute imports only and stays a shim: the addon
is :class:`chatkit_trace.addons.fault_addon.Faults` (docs/faults.md).
Load it next to the recording addon (either order) to record what the
faults do::

    mitmdump -s chatkit_trace/addon.py -s addons/faults.py --mode reverse:http://127.0.0.1:8000 \\
        --set chatkit_profile=myproto --set chatkit_fault=cut:after=5,capability=run,nth=1

or let ``chatkit-trace record --fault RULE`` do it.
"""

from chatkit_trace.addons.fault_addon import Faults

addons = [Faults()]
