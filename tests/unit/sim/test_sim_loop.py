"""The simulated provider's event loop: epoll's events with select()'s microsecond timeouts."""

from __future__ import annotations

import asyncio
import selectors
import socket
import time
from typing import Any

import pytest

from agent_fleet.sim.event_loop import PreciseSelector, precise_event_loop


def test_a_ready_descriptor_is_returned_without_waiting_out_the_timeout() -> None:
    a, b = socket.socketpair()
    sel = PreciseSelector()
    try:
        sel.register(a, selectors.EVENT_READ, "a")
        assert sel.select(0) == []
        b.send(b"x")
        started = time.monotonic()
        ready = sel.select(30.0)
        assert [(key.data, events) for key, events in ready] == [("a", selectors.EVENT_READ)]
        assert time.monotonic() - started < 10.0  # returned on the event, not at the timeout
    finally:
        sel.close()
        a.close()
        b.close()


def test_an_idle_wait_never_ends_before_its_timeout() -> None:
    sel = PreciseSelector()
    try:
        for timeout in (0.0004, 0.0031, 0.0127):
            started = time.monotonic()
            assert sel.select(timeout) == []
            assert time.monotonic() - started >= timeout
    finally:
        sel.close()


def test_the_loop_runs_timers_and_sockets() -> None:
    async def main() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop._selector, PreciseSelector)  # type: ignore[attr-defined]
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        try:
            loop.call_later(0.002, b.send, b"ping")
            deadline = loop.time() + 0.005
            got = await loop.sock_recv(a, 4)
            await asyncio.sleep(deadline - loop.time())
            return got, loop.time() - deadline
        finally:
            a.close()
            b.close()

    with asyncio.Runner(loop_factory=precise_event_loop) as runner:
        got, late = runner.run(main())
    assert got == b"ping" and late >= 0.0


def test_the_wait_is_handed_to_select_unrounded_and_epoll_only_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_fleet.sim.event_loop as sim_loop

    waited: list[float] = []
    real_select = sim_loop.select.select

    def recording(r: list[int], w: list[int], x: list[int], timeout: float) -> Any:
        waited.append(timeout)
        return real_select(r, w, x, timeout)

    monkeypatch.setattr(sim_loop.select, "select", recording)
    polled: list[float | None] = []
    base = selectors.DefaultSelector.select

    def collecting(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
        polled.append(timeout)
        return base(self, timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(selectors.DefaultSelector, "select", collecting)
    sel = PreciseSelector()
    try:
        assert sel.select(0.0004) == []
        assert sel.select(0) == []
    finally:
        sel.close()
    assert waited == [0.0004]  # microseconds kept: epoll would have waited a whole millisecond
    assert polled == [0, 0]  # epoll never waits itself; a zero timeout goes straight to it
