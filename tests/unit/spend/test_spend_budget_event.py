"""The data of a ``budget_raised`` event, exactly as ``agent-fleet budget raise`` writes it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent_fleet.cli.budget import budget_event_data
from agent_fleet.errors import UsageError


def test_event_data_is_exact():
    assert budget_event_data(None, "$0.10") == {"usd": "0.10"}
    assert Decimal(budget_event_data(5, "1e-2")["usd"]) == Decimal("0.01")
    with pytest.raises(UsageError):
        budget_event_data(None, "nan")
