"""capture (see ARCHITECTURE.md)."""
