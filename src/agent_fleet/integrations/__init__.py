"""The fleet as a part other tools call: one module per integration, each behind its own extra.

* :mod:`.langgraph` (extra ``langgraph``): ``fleet_node`` — a LangGraph node that runs a list of
  items as one fleet run, durable across crashes of the graph process, budget pauses as interrupts;
  ``fleet_sends`` for ``Send`` fan-out.
* :mod:`.crewai` (extra ``crewai``): ``FleetTool``, a CrewAI tool that hands a parallel step to the fleet.
* :mod:`.mcp` (extra ``mcp``): the MCP server behind ``agent-fleet mcp``.
* :mod:`.a2a` (extra ``a2a``): ``serve`` as an A2A agent — its card, and JSON-RPC tasks that are
  fleet runs; ``serve`` mounts it when a2a-sdk is installed.
* :mod:`.client`: how every integration reaches a fleet — the :class:`~.client.FleetClient` seam and
  the local engine behind it.

Importing this package imports none of those frameworks; each module imports its own on use.
The integrations sit between the CLI and the engine: they drive the engine through its phase API.
OpenTelemetry export (extra ``otel``) is wired by the engine itself: :mod:`agent_fleet.observe.telemetry`.
"""

__all__: list[str] = []
