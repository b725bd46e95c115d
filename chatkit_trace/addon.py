"""The mitmproxy entry script: ``mitmdump -s chatkit_trace/addon.py --set chatkit_profile=…``.

mitmproxy loads a ``-s`` script from its file path under a made-up module
name (``__mitmproxy_script__.addon``), so this file uses absolute imports
only and stays a shim: the addon itself is
:class:`chatkit_trace.capture.recorder.Recorder`.  ``chatkit-trace
addon-path`` prints where this file is installed (for ``mitmweb -s``).
"""

from chatkit_trace.capture.recorder import Recorder

addons = [Recorder()]
