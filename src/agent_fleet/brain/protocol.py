"""The built-in agent's tool protocol (SPEC.md): prompts, ``submit_result`` and ``finish``."""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.domain.plan import InputKind, Partition

__all__ = [
    "FINISH",
    "SUBMIT_RESULT",
    "SYSTEM_PROMPT",
    "ToolArgumentError",
    "first_user_message",
    "parse_arguments",
    "parse_result_items",
]

SYSTEM_PROMPT = (
    "You are one agent of a fleet. Work only on the partition you are given. "
    "Report each finding with submit_result (you may call it many times), then call finish."
)

SUBMIT_RESULT = ToolSpec(
    "submit_result",
    "Submit findings. May be called many times.",
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "body": {"type": "string"},
                        "category": {"type": "string"},
                        "confidence": {"type": "number"},
                        "location": {"type": "string"},
                    },
                    "required": ["title", "body"],
                },
            }
        },
        "required": ["items"],
    },
)

FINISH = ToolSpec(
    "finish",
    "End the session.",
    {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
)

_MAX_ITEMS_PER_SUBMIT = 500
_MAX_FIELD_CHARS = 20_000


class ToolArgumentError(ValueError):
    """Arguments a model sent that the tool cannot accept; returned to the model as a tool error."""


def first_user_message(task: str, partition: Partition) -> str:
    if partition.kind is InputKind.DIRECTORY:
        listing = "\n".join(f"- {p}" for p in partition.items)
        return f"Task: {task}\n\nFiles:\n{listing}"
    if partition.kind is InputKind.NONE or not partition.items:
        return f"Task: {task}"
    return f"Task: {task}\n\nItems:\n" + "\n".join(partition.items)


def parse_arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    return value


def parse_result_items(args: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate ``submit_result`` items; keep agent-supplied extras (severity, priority …)."""
    items = args.get("items")
    if not isinstance(items, list):
        raise ToolArgumentError("submit_result needs 'items': a list of {title, body, …}")
    if len(items) > _MAX_ITEMS_PER_SUBMIT:
        raise ToolArgumentError(f"at most {_MAX_ITEMS_PER_SUBMIT} items per call")
    out: list[dict[str, Any]] = []
    for n, raw in enumerate(items):
        if not isinstance(raw, dict):
            raise ToolArgumentError(f"item {n} is not an object")
        title, body = raw.get("title"), raw.get("body")
        if not isinstance(title, str) or not isinstance(body, str) or not (title.strip() or body.strip()):
            raise ToolArgumentError(f"item {n} needs string 'title' and 'body'")
        item: dict[str, Any] = {"title": title[:_MAX_FIELD_CHARS], "body": body[:_MAX_FIELD_CHARS]}
        conf = raw.get("confidence")
        if conf is not None:
            if isinstance(conf, bool) or not isinstance(conf, int | float):
                raise ToolArgumentError(f"item {n}: 'confidence' must be a number")
            item["confidence"] = min(1.0, max(0.0, float(conf)))
        for key in ("category", "location"):
            val = raw.get(key)
            if val is not None:
                item[key] = str(val)[:1000]
        for key, val in raw.items():
            if key not in item and key not in ("title", "body", "confidence", "category", "location"):
                item[key] = val
        out.append(item)
    return out
