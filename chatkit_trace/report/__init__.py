"""The self-contained HTML report: ``chatkit-trace report TRACE -o report.html``
(and ``check --html``).

One file, no network: the page's HTML, CSS and JavaScript are inlined
(``template/``), each session's data is embedded as gzip-compressed JSON
(base64) and decoded in the page with ``DecompressionStream`` when a run
is opened; the findings summary is plain HTML (it prints, and reads without
JavaScript).  The data is what ``check`` computes, from the same pass
(:mod:`._build`).
"""

from ._build import ReportError, ReportResult, write_report
from ._rules import rule_text

__all__ = ["ReportError", "ReportResult", "rule_text", "write_report"]
