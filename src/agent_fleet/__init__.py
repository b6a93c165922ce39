"""Agent Fleet Manager: run many LLM agents as one fleet — decompose, dispatch, aggregate."""

from agent_fleet.errors import FleetError

__version__ = "0.1.0"

__all__ = ["FleetError", "__version__"]
