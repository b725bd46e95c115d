"""Example adapters and scripted backends (docs/adapters.md).

* ``my_protocol`` / ``my_backend``: the seed's "my protocol" rewritten in
  Python, with an in-memory scripted backend (run, abort, history, a
  truncating regenerate);
* ``agui_backend``: a scripted AG-UI backend built on the real
  ``ag-ui-protocol`` package (needs it installed: chatkit-trace's ``test``
  extra), for the ``agui`` adapter's conformance suite and for recording;
* ``shared_socket`` (with ``shared_socket.toml``): a shared WebSocket, one
  socket for several sessions, client messages as commands, history over
  HTTP (docs/profiles.md, "WebSocket"); its backend is
  ``tests/integration/shared_socket_backend.py``.
"""
