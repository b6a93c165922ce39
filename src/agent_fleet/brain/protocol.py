"""The built-in agent's tool protocol (SPEC.md): prompts, ``submit_result`` and ``finish``."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.domain.plan import InputKind, Partition

__all__ = [
    "FINISH",
    "SUBMIT_RESULT",
    "SYSTEM_PROMPT",
    "ToolArgumentError",
    "finding_key",
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
                        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
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


# What a result record holds besides the finding itself: where it was recorded, and the dedup's merges.
_NOT_THE_FINDING = frozenset({"id", "partition_id", "session_id", "duplicates"})


def finding_key(record: Mapping[str, Any]) -> str:
    """A result record's finding (title, body and the rest the model gave), without where it was recorded:
    two records of one session with the same key submitted the same finding."""
    finding = {k: v for k, v in record.items() if k not in _NOT_THE_FINDING and v is not None}
    return json.dumps(finding, sort_keys=True, ensure_ascii=False, default=str)


_TAG = re.compile(r"<[^<>]{0,200}>")
# An HTML character reference, escaped text a model wrote for plain text ("&#39;", "&amp;#40;"); the
# semicolon is required, so "?a=1&copy=2" in a URL is not one.
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,30});")


def _has_text(text: str) -> bool:
    """Whether ``text`` says something: a letter or digit once HTML entities are read and tags dropped."""
    plain = _TAG.sub(" ", html.unescape(html.unescape(text)))
    return any(ch.isalnum() for ch in plain)


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
        if not isinstance(title, str) or not isinstance(body, str):
            raise ToolArgumentError(f"item {n} needs string 'title' and 'body'")
        for name, text in (("title", title), ("body", body)):
            if not _has_text(text):
                what = "is empty" if not text.strip() else "holds no text (only markup or HTML entities)"
                raise ToolArgumentError(f"item {n}: '{name}' {what}: write what was found")
            if entity := _ENTITY.search(text):
                raise ToolArgumentError(f"item {n}: '{name}' holds HTML entities ({entity.group()}): write plain text")
        item: dict[str, Any] = {"title": title[:_MAX_FIELD_CHARS], "body": body[:_MAX_FIELD_CHARS]}
        conf = raw.get("confidence")
        if conf is not None:
            if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1:
                # never clamped: 9 may mean 90 % or 9 out of 10; the model says which
                raise ToolArgumentError(f"item {n}: 'confidence' must be a number from 0 to 1, not {conf!r}")
            item["confidence"] = float(conf)
        for key in ("category", "location"):
            val = raw.get(key)
            if val is not None:
                item[key] = str(val)[:1000]
        for key, val in raw.items():
            if key not in item and key not in ("title", "body", "confidence", "category", "location"):
                item[key] = val
        out.append(item)
    return out
