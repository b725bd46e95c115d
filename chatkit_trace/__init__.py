"""chatkit-trace: record, decode and diagnose chat backends' streaming traffic.

The layers (docs/architecture.md): ``core`` (sans-IO Core, stdlib only), ``wire``
(SSE / WebSocket / JSON-RPC framing), ``adapters`` (protocols -> facts),
``capture`` (the mitmproxy addon's work), ``store`` (SQLite), ``analyze``
(findings), ``fixtures`` (conformance fixtures and pytest replay), ``viewer``
(Textual).
"""

__version__ = "0.1.0"
