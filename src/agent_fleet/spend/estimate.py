"""Prompt-size estimates for reservations, calibrated against what providers report.

The raw estimate counts characters (content, tool-call arguments, tool schemas) at 3 per token, plus a
few tokens per message; English runs near 4 characters a token and code near 3, so it starts high.
Per model, a correction factor follows the real/estimated ratio: it jumps up at once when a prompt
turns out larger than estimated and drifts down slowly otherwise, so reservations stay on the safe
side of the real count (which is what keeps the budget overshoot bound at zero in practice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.tokens import raw_prompt_estimate

__all__ = ["PromptEstimator", "raw_prompt_estimate"]


@dataclass(slots=True)
class PromptEstimator:
    decay: float = 0.1  # how fast the factor drifts down toward a lower observed ratio
    floor: float = 0.5
    factors: dict[str, float] = field(default_factory=dict)

    def estimate(self, model: str, request: ChatRequest) -> tuple[int, int]:
        """(raw estimate, calibrated estimate) of the prompt's tokens."""
        raw = raw_prompt_estimate(request)
        return raw, math.ceil(raw * self.factors.get(model, 1.0))

    def estimate_raw(self, key: str, raw: int) -> int:
        """Calibrate a raw estimate made elsewhere (e.g. from a request body's size)."""
        return math.ceil(raw * self.factors.get(key, 1.0))

    def observe(self, model: str, raw: int, real_input_tokens: int) -> None:
        if raw <= 0 or real_input_tokens <= 0:
            return
        ratio = real_input_tokens / raw
        factor = self.factors.get(model, 1.0)
        factor = ratio if ratio > factor else max(self.floor, factor + (ratio - factor) * self.decay)
        self.factors[model] = factor
