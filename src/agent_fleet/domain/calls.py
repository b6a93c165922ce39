"""How a model's calls are shaped, and what a server is known not to do (its quirks).

:class:`CallShape` is what a user sets on the calls of a model — fleet.yaml ``models[]`` entries and
``deploy``'s ``--max-tokens`` / ``--temperature`` / ``--seed`` — and is sent as set: every field left
``None`` is the caller's own (or the wire's default). A shape laid :meth:`over` another wins where it
sets a field.

:data:`QUIRKS` names what OpenAI-compatible servers differ in; fleet.yaml ``compat`` declares them
(a list of names, or a mapping of name to true/false), and a provider learns some of them from the
server's own answers:

* ``content_null_as_empty``: the server refuses ``"content": null`` on an assistant message that
  carries tool calls (llama-cpp-python answers it with a 500): ``""`` is sent instead;
* ``no_streaming``: never stream; ``no_streaming_with_tools``: do not stream a call that offers tools
  (llama-cpp-python ignores the tools of a streamed call);
* ``no_usage_chunk``: a stream carries no usage, even when asked (``stream_options.include_usage``):
  calls are not streamed, so usage is read from the whole answer;
* ``client_errors_as_500``: the server answers a request it cannot take with a 500, not a 4xx: a 500 is
  a client error (not retried) rather than an outage;
* ``tool_results_as_user``: the server's chat template drops ``tool`` messages (llama-cpp-python's
  ``chatml-function-calling`` does), so the model never reads its tools' results: they are sent as user
  messages that name the tool (declared only: nothing in an answer shows it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from agent_fleet.domain.model import ChatRequest

__all__ = ["QUIRKS", "TOOL_CHOICES", "CallShape", "Quirks", "filled"]

TOOL_CHOICES: tuple[str, ...] = ("auto", "required", "none")

QUIRKS: tuple[str, ...] = (
    "content_null_as_empty",
    "no_streaming",
    "no_streaming_with_tools",
    "no_usage_chunk",
    "client_errors_as_500",
    "tool_results_as_user",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallShape:
    """What goes on the wire for one model's calls; ``None``: not set here."""

    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    tool_choice: str | None = None  # auto | required | none (sent only when tools are offered)
    timeout_s: float | None = None  # how long the server may stay silent (see spend.patience)

    def over(self, base: CallShape | None) -> CallShape:
        """This shape where it sets a field, else ``base``'s."""
        if base is None:
            return self
        return replace(base, **{f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None})

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (for a session's log)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def of(cls, entry: Any) -> CallShape:
        """The shape of a fleet.yaml ``models[]`` entry (anything with these fields)."""
        return cls(**{f.name: getattr(entry, f.name, None) for f in fields(cls)})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CallShape:
        data = data or {}
        return cls(
            max_tokens=_int(data.get("max_tokens")),
            temperature=None if data.get("temperature") is None else float(data["temperature"]),
            seed=_int(data.get("seed")),
            tool_choice=None if data.get("tool_choice") is None else str(data["tool_choice"]),
            timeout_s=None if data.get("timeout_s") is None else float(data["timeout_s"]),
        )


def filled(request: ChatRequest, shape: CallShape) -> ChatRequest:
    """``request`` with what it left unset (temperature, seed, tool choice) taken from ``shape``: a model's
    fleet.yaml entry reaches every call of the model, the ones the engine makes for itself included."""
    changes = {
        name: value
        for name in ("temperature", "seed", "tool_choice")
        if getattr(request, name) is None and (value := getattr(shape, name)) is not None
    }
    return replace(request, **changes) if changes else request


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class Quirks:
    """A server's quirks: each one declared true or false, or unknown (absent) and then learned."""

    known: Mapping[str, bool]

    @classmethod
    def declared(cls, value: Iterable[str] | Mapping[str, bool] | None) -> Quirks:
        """From fleet.yaml ``compat``: a list of names (each true) or a mapping. Unknown names raise ValueError."""
        if value is None:
            return cls({})
        known = dict(value) if isinstance(value, Mapping) else dict.fromkeys(value, True)
        unknown = sorted(set(known) - set(QUIRKS))
        if unknown:
            raise ValueError(f"unknown compat {', '.join(unknown)} (known: {', '.join(QUIRKS)})")
        return cls({k: bool(v) for k, v in known.items()})

    def has(self, name: str) -> bool | None:
        """True or False when declared or learned, None while unknown."""
        return self.known.get(name)

    def learned(self, name: str) -> Quirks:
        """These quirks with ``name`` found true (a declared false stays false)."""
        if self.known.get(name) is False:
            return self
        return Quirks({**self.known, name: True})
