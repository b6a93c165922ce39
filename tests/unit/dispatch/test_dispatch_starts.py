"""Sessions start a bounded number at a time: from waking to their first model call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_fleet.dispatch.starts import StartGate


async def test_the_gate_lets_in_its_limit_in_order_and_leave_is_idempotent() -> None:
    gate = StartGate(2)
    entered: list[int] = []
    leaves: dict[int, Any] = {}

    async def start(n: int) -> None:
        leaves[n] = await gate.enter()
        entered.append(n)

    tasks = [asyncio.create_task(start(n)) for n in range(5)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert entered == [0, 1] and gate.starting == 2
    leaves[0]()
    leaves[0]()  # a second leave gives nothing back
    for _ in range(5):
        await asyncio.sleep(0)
    assert entered == [0, 1, 2] and gate.starting == 2
    leaves[1]()
    leaves[2]()
    await asyncio.gather(*tasks)
    assert entered == [0, 1, 2, 3, 4] and gate.starting == 2


def test_a_gate_needs_room_for_one() -> None:
    with pytest.raises(ValueError):
        StartGate(0)
