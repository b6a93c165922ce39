"""Shared by the stand-in CLIs: read the partition, parse the common flags, build prompts."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--crash", action="store_true")
    p.add_argument("--model", default=None)
    args, _rest = p.parse_known_args(argv)
    return args


def partition_items() -> list[str]:
    path = os.environ.get("FLEET_PARTITION", "")
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f if line.strip()]
    except OSError:
        return []


def task() -> str:
    return os.environ.get("FLEET_TASK", "")


def prompt(call: int, items: list[str]) -> str:
    listing = "\n".join(f"- {i}" for i in items)
    return f"{task()}\n\nPass {call + 1}. Your partition:\n{listing}\n"


def findings(reply: str, items: list[str]) -> list[dict[str, object]]:
    first = (reply.strip().splitlines() or ["(no reply)"])[0][:80]
    return [
        {"title": f"{item}: {first}", "body": reply, "category": "review", "confidence": 0.5, "location": item}
        for item in (items or ["(no items)"])
    ]


def after_first_call(args: argparse.Namespace) -> None:
    if args.crash:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.hang:
        while True:
            time.sleep(3600)


def lines(objs: list[dict[str, object]]) -> str:
    return "\n".join(json.dumps(o) for o in objs)
