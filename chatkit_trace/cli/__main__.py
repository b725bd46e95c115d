"""``python -m chatkit_trace.cli``: the same command line as ``chatkit-trace``."""

import sys

from chatkit_trace.cli import main

sys.exit(main())
