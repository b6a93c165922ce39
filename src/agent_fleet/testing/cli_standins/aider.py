"""Stand-in for ``aider --message TASK --analytics-log FILE``: OpenAI SDK calls, aider's analytics
events (``message_send`` with tokens and cost) in the log, findings and chatter on stdout."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import uuid

import _common  # type: ignore[import-not-found]  # the script directory, when run by path
import openai

PRICE_IN, PRICE_OUT = 2.5, 10.0  # USD per million tokens


def main() -> int:
    args = _common.parse(sys.argv[1:])
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--analytics-log", required=True)
    log_path = p.parse_known_args(sys.argv[1:])[0].analytics_log
    items = _common.partition_items()
    client = openai.OpenAI(max_retries=0)
    user_id = str(uuid.uuid4())
    model = args.model or "gpt-4o"
    total_cost = 0.0
    reply = ""

    def event(name: str, **props: object) -> None:
        props.update(python_version=platform.python_version(), os_platform=platform.system(), aider_version="0.0")
        entry = {"event": name, "properties": props, "user_id": user_id, "time": int(time.time())}
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    event("launched")
    for call in range(args.calls):
        try:
            resp = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": _common.prompt(call, items)}]
            )
        except openai.APIError as exc:
            print(f"litellm.APIError: {type(exc).__name__}")
            event("exit", reason="error")
            return 1
        reply = resp.choices[0].message.content or ""
        pt = resp.usage.prompt_tokens if resp.usage else 0
        ct = resp.usage.completion_tokens if resp.usage else 0
        cost = (pt * PRICE_IN + ct * PRICE_OUT) / 1e6
        total_cost += cost
        event(
            "message_send",
            main_model=model,
            edit_format="diff",
            prompt_tokens=pt,
            completion_tokens=ct,
            total_tokens=pt + ct,
            cost=cost,
            total_cost=total_cost,
        )
        print(f"Tokens: {pt:,} sent, {ct:,} received. Cost: ${cost:.4f} message, ${total_cost:.4f} session.")
        if call == 0:
            _common.after_first_call(args)
    print(_common.lines(_common.findings(reply, items)))
    event("exit", reason="Completed --message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
