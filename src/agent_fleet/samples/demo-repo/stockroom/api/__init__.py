"""HTTP API handlers."""
