"""The public API is explicit: this pins it, and every name resolves to what it says."""

from __future__ import annotations

import agent_fleet

EXPECTED = [
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


def test_public_api_is_pinned() -> None:
    assert sorted(agent_fleet.__all__) == sorted(EXPECTED)


def test_every_public_name_resolves() -> None:
    from agent_fleet.engine import deploy
    from agent_fleet.options import RunOptions

    for name in agent_fleet.__all__:
        assert getattr(agent_fleet, name) is not None
    assert agent_fleet.deploy is deploy and agent_fleet.RunOptions is RunOptions
    assert issubclass(agent_fleet.FleetError, Exception)


def test_engine_exports_are_explicit() -> None:
    import agent_fleet.engine as engine

    for name in engine.__all__:
        assert hasattr(engine, name), name
