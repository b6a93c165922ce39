"""The simulated provider's former home: it is now :mod:`agent_fleet.sim` (``agent-fleet sim-provider``).

``from agent_fleet.testing.sim_provider import SimProvider`` and
``python -m agent_fleet.testing.sim_provider`` keep working.
"""

from __future__ import annotations

from agent_fleet.sim import provider as _provider
from agent_fleet.sim.provider import *  # noqa: F403  # the same names, from their one home
from agent_fleet.sim.provider import main, run_server

__all__ = [*_provider.__all__, "run_server"]

if __name__ == "__main__":
    raise SystemExit(main())
