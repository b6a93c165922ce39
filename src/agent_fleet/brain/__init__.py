"""brain."""
