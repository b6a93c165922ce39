"""decompose."""
