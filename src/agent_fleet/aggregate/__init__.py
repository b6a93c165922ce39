"""aggregate."""
