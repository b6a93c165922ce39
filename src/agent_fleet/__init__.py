"""Agent Fleet Manager: run many LLM agents as one fleet — decompose, dispatch, aggregate.

The public API (pinned by a test)::

    from agent_fleet import RunOptions, deploy, resume, estimate, decompose
    report = await deploy(RunOptions(task="Find bugs", input_path="./repo", agents=100))

Phases on their own: :func:`decompose` → :class:`Plan`; :func:`open_engine` →
``Engine.create_run`` / ``Engine.dispatch`` / ``Engine.aggregate``. Every error derives from
:class:`FleetError`. Heavier pieces are imported on first use.
"""

from __future__ import annotations

from agent_fleet._lazy import lazy_exports
from agent_fleet.errors import FleetError

# typing.TYPE_CHECKING without importing typing (mypy treats the name as true): the CLI installs its
# signal handlers only once this package has run, so this package imports next to nothing.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from agent_fleet.admission import AdmissionController
    from agent_fleet.aggregate import Aggregator
    from agent_fleet.decompose import decompose
    from agent_fleet.domain import Partition, Plan, ResultItem
    from agent_fleet.engine import Engine, deploy, estimate, open_engine, resume
    from agent_fleet.options import RunOptions, RunReport
    from agent_fleet.session import SessionLog, open_store
    from agent_fleet.spend.gateway import Gateway

__version__ = "0.1.0"

__all__ = [
    "AdmissionController",
    "Aggregator",
    "Engine",
    "FleetError",
    "Gateway",
    "Partition",
    "Plan",
    "ResultItem",
    "RunOptions",
    "RunReport",
    "SessionLog",
    "__version__",
    "decompose",
    "deploy",
    "estimate",
    "open_engine",
    "open_store",
    "resume",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "AdmissionController": "agent_fleet.admission",
        "Aggregator": "agent_fleet.aggregate",
        "Engine": "agent_fleet.engine",
        "Gateway": "agent_fleet.spend.gateway",
        "Partition": "agent_fleet.domain",
        "Plan": "agent_fleet.domain",
        "ResultItem": "agent_fleet.domain",
        "RunOptions": "agent_fleet.options",
        "RunReport": "agent_fleet.options",
        "SessionLog": "agent_fleet.session",
        # the function: the package agent_fleet.decompose never takes this name (see _lazy.py)
        "decompose": "agent_fleet.decompose.planner",
        "deploy": "agent_fleet.engine",
        "estimate": "agent_fleet.engine",
        "open_engine": "agent_fleet.engine",
        "open_store": "agent_fleet.session",
        "resume": "agent_fleet.engine",
    },
)
