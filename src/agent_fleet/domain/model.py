"""Provider-neutral model call types.

Messages use the OpenAI chat-completions shape (``role``, ``content``,
``tool_calls``, ``tool_call_id``); the Anthropic provider translates both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.usage import Usage

__all__ = ["ChatRequest", "ChatResponse", "EmbeddingResult", "ToolCall", "ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    seed: int | None = None
    # auto | required | none; None: "auto" whenever tools are offered (a server may ignore tools otherwise)
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    # Set by the gateway: list-price cost of this call, and the kinds of errors it retried through
    # ("rate_limited", "server", "timeout") before this answer, so the log alone holds every figure.
    cost_usd: Decimal = Decimal(0)
    retried: tuple[str, ...] = ()

    def assistant_message(self) -> dict[str, Any]:
        """The response as an OpenAI-shaped assistant message, for the conversation history."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "model": self.model,
            "cost_usd": str(self.cost_usd),
            "retried": list(self.retried),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatResponse:
        return cls(
            content=data.get("content"),
            tool_calls=tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in data.get("tool_calls", [])),
            usage=Usage.from_dict(data.get("usage")),
            finish_reason=data.get("finish_reason", "stop"),
            model=data.get("model", ""),
            cost_usd=Decimal(str(data.get("cost_usd", "0"))),
            retried=tuple(data.get("retried", ())),
        )


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """One gateway embeddings call: a vector per input text (in input order), the tokens the provider
    reported (as ``input_tokens``: embeddings have no output) and their list-price cost."""

    vectors: list[list[float]]
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    model: str = ""
    retried: tuple[str, ...] = ()  # error kinds retried through, as on ChatResponse
