"""testing (see ARCHITECTURE.md)."""
