"""analyze (see ARCHITECTURE.md)."""
