"""The Textual viewer (installed as chatkit_trace.viewer)."""
