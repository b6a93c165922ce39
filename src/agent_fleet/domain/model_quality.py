"""Per-model quality signals: what the session log says about how well a model does its work.

The supervision plane counts them from the log; the router reads them to demote a model for new
sessions. A value with no policy in it: thresholds live in fleet.yaml ``supervision.quality``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ModelSignals"]


@dataclass(frozen=True, slots=True)
class ModelSignals:
    model: str  # the provider's model id, as the responses name it
    calls: int = 0  # model responses
    truncated: int = 0  # responses cut at the output limit (finish_reason "length")
    tool_calls: int = 0
    malformed: int = 0  # tool calls whose arguments the tool could not accept, or unknown tools
    confirmed: int = 0  # verification verdicts on this model's results
    refuted: int = 0

    @property
    def judged(self) -> int:
        return self.confirmed + self.refuted

    @property
    def agreement(self) -> float | None:
        return self.confirmed / self.judged if self.judged else None

    @property
    def truncated_rate(self) -> float | None:
        return self.truncated / self.calls if self.calls else None

    @property
    def malformed_rate(self) -> float | None:
        return self.malformed / self.tool_calls if self.tool_calls else None

    def __add__(self, other: ModelSignals) -> ModelSignals:
        return ModelSignals(
            self.model,
            self.calls + other.calls,
            self.truncated + other.truncated,
            self.tool_calls + other.tool_calls,
            self.malformed + other.malformed,
            self.confirmed + other.confirmed,
            self.refuted + other.refuted,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSignals:
        counts = ("calls", "truncated", "tool_calls", "malformed", "confirmed", "refuted")
        return cls(str(data["model"]), *(int(data.get(k, 0)) for k in counts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "calls": self.calls,
            "truncated": self.truncated,
            "tool_calls": self.tool_calls,
            "malformed": self.malformed,
            "confirmed": self.confirmed,
            "refuted": self.refuted,
            "agreement": self.agreement,
            "truncated_rate": self.truncated_rate,
            "malformed_rate": self.malformed_rate,
        }
