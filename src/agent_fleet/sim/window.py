"""The simulated provider's context windows: a request that does not fit is refused as the real APIs do.

A request fits when its prompt (the simulated count) plus its output limit (``max_tokens``,
``max_completion_tokens`` or ``max_output_tokens``) is at most the model's window. Otherwise:

* OpenAI (chat and Responses): 400 ``invalid_request_error`` with ``code: context_length_exceeded``,
  "This model's maximum context length is W tokens. However, you requested T tokens (P in the
  messages, O in the completion). ...";
* Anthropic: 400 ``invalid_request_error``, "prompt is too long: P tokens > W maximum" when the prompt
  alone is over, else "input length and `max_tokens` exceed context limit: P + O > W, ...".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["context_overflow", "window_for"]


def window_for(windows: Mapping[str, int], model: str) -> int | None:
    """The window of ``model``: its own entry, else the ``"*"`` entry, else none (unlimited)."""
    return windows.get(model) or windows.get("*")


def _output_limit(body: Mapping[str, Any]) -> int:
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def context_overflow(
    windows: Mapping[str, int], *, model: str, prompt_tokens: int, body: Mapping[str, Any], anthropic: bool
) -> tuple[str, str | None] | None:
    """``(message, code)`` of the 400 a request that overflows the window gets, or None when it fits."""
    window = window_for(windows, model)
    if window is None:
        return None
    out = _output_limit(body)
    if prompt_tokens + out <= window:
        return None
    if anthropic:
        if prompt_tokens > window:
            return f"prompt is too long: {prompt_tokens} tokens > {window} maximum", None
        msg = (
            f"input length and `max_tokens` exceed context limit: {prompt_tokens} + {out} > {window}, "
            "decrease input length or `max_tokens` and try again"
        )
        return msg, None
    msg = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt_tokens + out} tokens ({prompt_tokens} in the messages, {out} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return msg, "context_length_exceeded"
