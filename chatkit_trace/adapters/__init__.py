"""adapters (see ARCHITECTURE.md)."""
