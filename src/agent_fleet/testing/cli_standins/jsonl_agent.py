"""Stand-in for a generic CLI agent: OpenAI SDK calls, one JSON result item per stdout line."""

from __future__ import annotations

import sys

import _common  # type: ignore[import-not-found]  # the script directory, when run by path
import openai


def main() -> int:
    args = _common.parse(sys.argv[1:])
    items = _common.partition_items()
    client = openai.OpenAI(max_retries=0)
    reply = ""
    for call in range(args.calls):
        try:
            resp = client.chat.completions.create(
                model=args.model or "gpt-4.1-mini", messages=[{"role": "user", "content": _common.prompt(call, items)}]
            )
        except openai.APIError as exc:
            print(f"model call failed: {type(exc).__name__}", file=sys.stderr)
            return 1
        reply = resp.choices[0].message.content or ""
        print(f"working on pass {call + 1}")  # not JSON: ignored
        if call == 0:
            _common.after_first_call(args)
    print(_common.lines(_common.findings(reply, items)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
