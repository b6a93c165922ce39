"""``python -m agent_fleet.cli`` runs the ``agent-fleet`` command."""

from agent_fleet.cli.app import main

main()
