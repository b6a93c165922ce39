"""Stand-in for ``codex exec --json TASK``: OpenAI SDK calls, Codex's JSONL event stream."""

from __future__ import annotations

import json
import sys
import uuid

import _common  # type: ignore[import-not-found]  # the script directory, when run by path
import openai


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def main() -> int:
    args = _common.parse(sys.argv[1:])
    items = _common.partition_items()
    client = openai.OpenAI(max_retries=0)
    emit({"type": "thread.started", "thread_id": str(uuid.uuid4())})
    for call in range(args.calls):
        emit({"type": "turn.started"})
        try:
            resp = client.chat.completions.create(
                model=args.model or "gpt-5-codex", messages=[{"role": "user", "content": _common.prompt(call, items)}]
            )
        except openai.APIError as exc:
            emit({"type": "turn.failed", "error": {"message": f"{type(exc).__name__}"}})
            return 1
        reply = resp.choices[0].message.content or ""
        last = call == args.calls - 1
        text = _common.lines(_common.findings(reply, items)) if last else reply
        emit({"type": "item.completed", "item": {"id": f"item_{call}", "type": "agent_message", "text": text}})
        u = resp.usage
        cached = 0
        if u is not None and u.prompt_tokens_details is not None:
            cached = u.prompt_tokens_details.cached_tokens or 0
        emit(
            {
                "type": "turn.completed",
                "usage": {
                    "input_tokens": u.prompt_tokens if u else 0,
                    "cached_input_tokens": cached,
                    "output_tokens": u.completion_tokens if u else 0,
                },
            }
        )
        if call == 0:
            _common.after_first_call(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
