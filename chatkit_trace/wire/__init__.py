"""wire (see ARCHITECTURE.md)."""
