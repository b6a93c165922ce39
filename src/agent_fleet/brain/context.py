"""Context care: keep the request a session sends inside its model's context window.

The session log keeps every event; only the request built from it is reduced. :func:`fit` is a pure
function of the conversation folded from the log (and of the summary a ``context_compacted`` event
recorded), so a harness rebuilt on any attempt sends the same request:

* a conversation whose estimate stays at or under the limit is sent unchanged;
* the limit is ``threshold`` of (window - the request's output limit), estimated as the gateway's raw
  estimate does (3 characters a token, which runs high for English), times the session's ``factor``:
  what its model's server counted for the last request it answered over that request's raw estimate,
  when it counted more (a chat template that adds its own text, a tokenizer that splits finer). The
  factor is folded from the session's log (each ``model_request`` records its raw estimate, each
  ``model_response`` the server's count), so it too is the same on every attempt;
* over it, the turns a recorded summary covers are replaced by the summary (appended to the first
  user message, so both wire formats keep their user/assistant order), then the tool results of the
  oldest turns outside the last ``keep_turns`` are trimmed — each replaced by a short stub naming what
  was cut, so every tool call keeps its result — through a turn that is a multiple of ``trim_step``
  (the trimmed prefix then stays the same for several requests, which keeps prompt caches warm);
* when even that does not fit, :func:`fit` asks for a compaction: the turns after the last summary up
  to the last ``keep_turns`` are summarised by one model call (:func:`compaction_request`), which the
  harness meters through the gateway and records before it sends the turn. A recorded summary is
  never summarised again: the next compaction starts from its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_fleet.domain.model import ChatRequest, ToolSpec
from agent_fleet.domain.tokens import CHARS_PER_TOKEN, PER_MESSAGE, PER_REQUEST, message_chars, tools_chars

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "DEFAULT_CONTEXT_WINDOW",
    "ContextCare",
    "Fitted",
    "Summary",
    "compaction_request",
    "fit",
]

DEFAULT_CONTEXT_WINDOW = 128_000

COMPACT_SYSTEM_PROMPT = (
    "Compact this agent conversation. Summarise the turns given in a few plain sentences: what the agent "
    "looked at, what it found and reported, and what is left to do. Keep names, paths and figures exact."
)

_TASK_CHARS = 2_000
_MIN_LINE_CHARS = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCare:
    """How a session's requests are kept inside the model's window (fleet.yaml ``context``)."""

    enabled: bool = True
    window: Callable[[str], int] | None = None  # model -> its context window (the price table's)
    threshold: float = 0.75
    keep_turns: int = 4
    summary_tokens: int = 512
    # Tool results are trimmed a turn at a time, through a turn number that is a multiple of this, so
    # the trimmed prefix stays the same for several requests (and the provider's prompt cache holds).
    trim_step: int = 8

    def window_of(self, model: str) -> int:
        return self.window(model) if self.window is not None else DEFAULT_CONTEXT_WINDOW

    def limit(self, model: str, max_tokens: int, factor: float = 1.0) -> int:
        """The most prompt tokens (raw estimate) a request with this output limit may carry, when the
        server counts ``factor`` times the raw estimate."""
        return int((self.window_of(model) - max_tokens) * self.threshold / max(1.0, factor))


@dataclass(frozen=True, slots=True)
class Summary:
    """What a ``context_compacted`` event recorded: turns ``from_turn``..``through_turn`` in a few lines."""

    from_turn: int
    through_turn: int
    text: str


@dataclass(frozen=True, slots=True)
class Fitted:
    messages: list[dict[str, Any]]
    estimate: int  # estimated prompt tokens of ``messages`` (with the tools), raw: before the factor
    full_estimate: int  # ... of the whole conversation
    trimmed: int = 0  # tool results replaced by a stub
    compact: tuple[int, int] | None = None  # turns to compact before sending, (from, through)


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The messages after the first user message, one list per turn (its assistant message, then results)."""
    turns: list[list[dict[str, Any]]] = []
    for msg in messages[2:]:
        if msg.get("role") == "assistant" or not turns:
            turns.append([msg])
        else:
            turns[-1].append(msg)
    return turns


def _estimate(chars: int, count: int, tools: int) -> int:
    return (chars + tools) // CHARS_PER_TOKEN + PER_MESSAGE * count + PER_REQUEST


def _stub(msg: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    name = names.get(str(msg.get("tool_call_id")), "tool")
    size = message_chars(msg)
    return {**msg, "content": f"[trimmed to fit the context window: {size} characters of {name} output]"}


def _with_summary(first: dict[str, Any], summary: Summary) -> dict[str, Any]:
    note = f"\n\nEarlier turns {summary.from_turn}-{summary.through_turn}, compacted: {summary.text}"
    return {**first, "content": f"{first.get('content') or ''}{note}"}


def fit(
    messages: list[dict[str, Any]],
    tools: tuple[ToolSpec, ...],
    *,
    model: str,
    max_tokens: int,
    care: ContextCare,
    summary: Summary | None = None,
    factor: float = 1.0,
) -> Fitted:
    """The messages to send for this conversation (see the module docstring); ``factor``: how many tokens
    the model's server counts per token of the raw estimate (1 or more)."""
    tool_chars = tools_chars(tools)
    full = _estimate(sum(message_chars(m) for m in messages), len(messages), tool_chars)
    limit = care.limit(model, max_tokens, factor)
    if not care.enabled or limit <= 0 or (full <= limit and summary is None) or len(messages) < 2:
        return Fitted(list(messages), full, full)
    turns = _turns(messages)
    done = 0
    head = list(messages[:2])
    if summary is not None:
        done = min(summary.through_turn, len(turns))
        head[1] = _with_summary(head[1], summary)
    kept = [list(t) for t in turns[done:]]
    flat = head + [m for t in kept for m in t]
    chars = sum(message_chars(m) for m in flat)
    est = _estimate(chars, len(flat), tool_chars)
    names = {
        str(c.get("id")): str((c.get("function") or {}).get("name") or "tool")
        for t in kept
        for c in t[0].get("tool_calls") or ()
    }
    trimmed = 0
    for n, turn in enumerate(kept[: max(0, len(kept) - care.keep_turns)], start=done + 1):
        if est <= limit and (n == done + 1 or (n - 1) % care.trim_step == 0):
            break  # it fits, and any trimmed turns end on a step: the next requests share this prefix
        for i, msg in enumerate(turn):
            stub = _stub(msg, names) if msg.get("role") == "tool" else msg
            saved = message_chars(msg) - message_chars(stub)
            if saved > 0:
                turn[i] = stub
                chars -= saved
                trimmed += 1
        est = _estimate(chars, len(flat), tool_chars)
    out = head + [m for t in kept for m in t]
    compact = None
    through = len(turns) - care.keep_turns
    if est > limit and through > done:
        compact = (done + 1, through)
    return Fitted(out, est, full, trimmed, compact)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def _turn_line(number: int, turn: list[dict[str, Any]], limit: int) -> str:
    first = turn[0]
    calls = [
        f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments') or ''})"
        for c in first.get("tool_calls") or ()
    ]
    said = str(first.get("content") or "")
    results = [str(m.get("content") or "") for m in turn[1:]]
    text = f"Turn {number}: " + (f"said {said}; " if said else "") + f"called {', '.join(calls) or 'nothing'}"
    if results:
        text += " -> " + " | ".join(results)
    return _clip(text, limit)


def compaction_request(
    messages: list[dict[str, Any]],
    span: tuple[int, int],
    *,
    model: str,
    care: ContextCare,
    summary: Summary | None = None,
    factor: float = 1.0,
) -> ChatRequest:
    """The model call that summarises turns ``span`` (the summary before them is its starting point).

    Each turn is one line (its calls, then its results), clipped so the whole request stays inside the
    window whatever the number of turns (at the server's count: ``factor`` as for :func:`fit`)."""
    start, end = span
    turns = _turns(messages)[start - 1 : end]
    task = _clip(str(messages[1].get("content") or ""), _TASK_CHARS) if len(messages) > 1 else ""
    before = f"Summary of turns {summary.from_turn}-{summary.through_turn}: {summary.text}\n\n" if summary else ""
    lead = f"{before}Task message:\n{task}\n\nTurns {start}-{end}:\n"
    budget = care.limit(model, care.summary_tokens, factor) - PER_REQUEST - 2 * PER_MESSAGE
    room = max(0, budget * CHARS_PER_TOKEN - len(COMPACT_SYSTEM_PROMPT) - len(lead))
    per_line = max(_MIN_LINE_CHARS, room // max(1, len(turns)) - 1)
    lines = [_turn_line(start + i, t, per_line) for i, t in enumerate(turns)]
    return ChatRequest(
        model=model,
        messages=[
            {"role": "system", "content": COMPACT_SYSTEM_PROMPT},
            {"role": "user", "content": lead + "\n".join(lines)},
        ],
        max_tokens=care.summary_tokens,
    )
