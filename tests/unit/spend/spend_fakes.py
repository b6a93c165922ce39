"""A scripted in-process provider (the paid-model boundary) for gateway tests on a virtual clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.clock import Clock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.providers import RateSignals

Step = BaseException | ChatResponse | Callable[[ChatRequest], ChatResponse]


@dataclass
class FakeProvider:
    clock: Clock
    name: str = "fake"
    model: str = "gpt-4.1-mini"
    latency: float = 0.0
    usage: Usage = field(default_factory=lambda: Usage(100, 20))
    script: list[Step] = field(default_factory=list)
    calls: int = 0
    active: int = 0
    peak: int = 0
    closed: int = 0
    on_signals: Callable[[str, RateSignals], None] | None = None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.latency:
                await self.clock.sleep(self.latency)
            step: Step | None = self.script.pop(0) if self.script else None
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, ChatResponse):
                return step
            if step is not None:
                return step(request)
            return ChatResponse(content="ok", usage=self.usage, model=request.model or self.model)
        finally:
            self.active -= 1

    async def aclose(self) -> None:
        self.closed += 1
