"""Sessions start a bounded number at a time: from waking to their first model call."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet.capacity import Permit
from agent_fleet.dispatch.starts import StartGate


async def test_the_gate_lets_in_its_limit_in_order_and_release_is_idempotent() -> None:
    gate = StartGate(2)
    entered: list[int] = []
    permits: dict[int, Permit] = {}

    async def start(n: int) -> None:
        permits[n] = await gate.acquire(f"s{n}")
        gate.mark_used(permits[n])
        entered.append(n)

    tasks = [asyncio.create_task(start(n)) for n in range(5)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert entered == [0, 1] and gate.statistics().in_use == 2 and gate.statistics().tasks_waiting == 3
    assert gate.release(permits[0])
    assert not gate.release(permits[0])  # a second release gives nothing back
    for _ in range(5):
        await asyncio.sleep(0)
    assert entered == [0, 1, 2] and gate.statistics().borrowed_tokens == 2
    gate.release(permits[1])
    gate.release(permits[2])
    await asyncio.gather(*tasks)
    assert entered == [0, 1, 2, 3, 4] and dict(gate.statistics().borrowers) == {"s3": 1, "s4": 1}
    assert repr(gate) == "<StartGate 2/2 (0 reserved, 2 in use), 0 waiting>"


def test_a_gate_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="start places"):
        StartGate(0)
