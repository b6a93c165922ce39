"""Stand-in for ``claude -p TASK --output-format json``: Anthropic SDK calls, one result object."""

from __future__ import annotations

import json
import sys
import time
import uuid

import _common  # type: ignore[import-not-found]  # the script directory, when run by path
import anthropic

PRICE_IN, PRICE_OUT, PRICE_CACHE_READ, PRICE_CACHE_WRITE = 3.0, 15.0, 0.3, 3.75  # USD per million tokens


def main() -> int:
    args = _common.parse(sys.argv[1:])
    model = args.model or "claude-sonnet-4-5"
    items = _common.partition_items()
    client = anthropic.Anthropic(max_retries=0)
    started = time.monotonic()
    usage = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}
    replies: list[str] = []
    error = None
    for call in range(args.calls):
        try:
            msg = client.messages.create(
                model=model, max_tokens=256, messages=[{"role": "user", "content": _common.prompt(call, items)}]
            )
        except anthropic.APIError as exc:
            error = type(exc).__name__
            break
        u = msg.usage
        usage["input_tokens"] += u.input_tokens
        usage["output_tokens"] += u.output_tokens
        usage["cache_read_input_tokens"] += u.cache_read_input_tokens or 0
        usage["cache_creation_input_tokens"] += u.cache_creation_input_tokens or 0
        replies.append("".join(b.text for b in msg.content if b.type == "text"))
        if call == 0:
            _common.after_first_call(args)
    cost = (
        usage["input_tokens"] * PRICE_IN
        + usage["output_tokens"] * PRICE_OUT
        + usage["cache_read_input_tokens"] * PRICE_CACHE_READ
        + usage["cache_creation_input_tokens"] * PRICE_CACHE_WRITE
    ) / 1e6
    text = _common.lines(_common.findings(replies[-1], items)) if replies else ""
    result: dict[str, object] = {
        "type": "result",
        "subtype": "success" if error is None else "error_during_execution",
        "is_error": error is not None,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "duration_api_ms": int((time.monotonic() - started) * 1000),
        "num_turns": len(replies),
        "result": text,
        "session_id": str(uuid.uuid4()),
        "total_cost_usd": cost,
        "usage": {**usage, "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
        "modelUsage": {
            model: {
                "inputTokens": usage["input_tokens"],
                "outputTokens": usage["output_tokens"],
                "cacheReadInputTokens": usage["cache_read_input_tokens"],
                "cacheCreationInputTokens": usage["cache_creation_input_tokens"],
                "webSearchRequests": 0,
                "costUSD": cost,
                "contextWindow": 200000,
            }
        },
        "permission_denials": [],
        "uuid": str(uuid.uuid4()),
    }
    print(json.dumps(result))
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
