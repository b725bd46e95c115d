"""store (see ARCHITECTURE.md)."""
