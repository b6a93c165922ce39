"""Reading what external CLI agents print: result items, token usage and cost.

Formats (``--agent-format``):

* ``jsonl`` (default): each stdout line that is a JSON object with ``title`` and ``body`` is a
  result item ``{title, body, category?, confidence?, location?}``; other lines are ignored.
* ``claude``: ``claude -p --output-format json`` prints one result object: ``result`` (final text),
  ``is_error``/``subtype``, ``usage`` (``input_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens``), ``total_cost_usd`` and ``modelUsage`` (per
  model ``inputTokens``, ``outputTokens``, ``cacheReadInputTokens``, ``cacheCreationInputTokens``,
  ``costUSD``).
* ``codex``: ``codex exec --json`` prints JSON events, one per line: ``item.completed`` carrying an
  ``agent_message`` item (its ``text``), ``turn.completed`` carrying ``usage`` (``input_tokens``,
  ``cached_input_tokens``, ``output_tokens``), ``turn.failed`` / ``error`` on failure.
* ``aider``: aider's ``--analytics-log`` file, JSON lines of ``{event, properties, ...}``;
  ``message_send`` events carry ``prompt_tokens``, ``completion_tokens``, ``cost`` and the running
  ``total_cost``. Result items come from stdout as in ``jsonl``.

For the formats with a final text (claude, codex, aider's stdout), JSON result items inside that
text are used when present; otherwise the whole text counts as one result, as for the built-in agent.
Usage follows :class:`~agent_fleet.domain.usage.Usage`: ``input_tokens`` includes cached tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from agent_fleet.domain.usage import Usage
from agent_fleet.errors import UsageError

__all__ = ["FORMATS", "CliReport", "items_from_text", "parse_output"]

FORMATS = ("jsonl", "claude", "codex", "aider")
_ITEM_KEYS = ("title", "body", "category", "confidence", "location")


@dataclass(frozen=True, slots=True)
class CliReport:
    items: tuple[dict[str, Any], ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = None
    model_usage: dict[str, Usage] = field(default_factory=dict)
    final_text: str | None = None
    error: str | None = None  # the CLI itself reported a failure


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def _money(v: Any) -> Decimal | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return Decimal(str(v))
    except InvalidOperation:
        return None


def _item(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    title, body = obj.get("title"), obj.get("body")
    if not isinstance(title, str) or not title.strip() or not isinstance(body, str):
        return None
    item: dict[str, Any] = {k: v for k, v in obj.items() if k not in _ITEM_KEYS}
    item.update(title=title.strip(), body=body)
    for key in ("category", "location"):
        if isinstance(obj.get(key), str):
            item[key] = obj[key]
    conf = obj.get("confidence")
    if isinstance(conf, int | float) and not isinstance(conf, bool) and 0.0 <= conf <= 1.0:
        item["confidence"] = float(conf)
    return item


def _json_lines(text: str) -> Iterable[Any]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _items_in(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for obj in _json_lines(text):
        for cand in obj if isinstance(obj, list) else [obj]:
            it = _item(cand)
            if it is not None:
                found.append(it)
    if not found:
        try:
            whole = json.loads(text)
        except ValueError:
            return found
        cands = whole.get("items") if isinstance(whole, dict) else whole
        if isinstance(cands, list):
            found = [it for it in (_item(c) for c in cands) if it is not None]
    return found


def items_from_text(text: str | None) -> list[dict[str, Any]]:
    """Result items in a final text; else the text itself as one item (empty text: none)."""
    if not text or not text.strip():
        return []
    found = _items_in(text)
    if found:
        return found
    first = next(line.strip() for line in text.splitlines() if line.strip())
    return [{"title": first[:120], "body": text.strip()}]


def _parse_jsonl(stdout: str) -> CliReport:
    return CliReport(items=tuple(it for it in (_item(o) for o in _json_lines(stdout)) if it is not None))


def _parse_claude(stdout: str) -> CliReport:
    result: dict[str, Any] | None = None
    for obj in _json_lines(stdout):
        if isinstance(obj, dict) and obj.get("type") == "result":
            result = obj
    if result is None:
        try:
            whole = json.loads(stdout)
        except ValueError:
            whole = None
        result = whole if isinstance(whole, dict) else None
    if result is None:
        return CliReport(error="no result object on stdout")
    u = result.get("usage") or {}
    cache_read, cache_write = _int(u.get("cache_read_input_tokens")), _int(u.get("cache_creation_input_tokens"))
    usage = Usage(
        input_tokens=_int(u.get("input_tokens")) + cache_read + cache_write,
        output_tokens=_int(u.get("output_tokens")),
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
    per_model: dict[str, Usage] = {}
    for model, mu in (result.get("modelUsage") or {}).items():
        if isinstance(mu, dict):
            r, w = _int(mu.get("cacheReadInputTokens")), _int(mu.get("cacheCreationInputTokens"))
            per_model[str(model)] = Usage(_int(mu.get("inputTokens")) + r + w, _int(mu.get("outputTokens")), r, w)
    text = result.get("result") if isinstance(result.get("result"), str) else None
    failed = bool(result.get("is_error")) or str(result.get("subtype", "success")) != "success"
    return CliReport(
        items=tuple(items_from_text(text)) if not failed else (),
        usage=usage,
        cost_usd=_money(result.get("total_cost_usd")),
        model_usage=per_model,
        final_text=text,
        error=str(result.get("subtype") or "error") if failed else None,
    )


def _parse_codex(stdout: str) -> CliReport:
    usage = Usage()
    messages: list[str] = []
    error: str | None = None
    for ev in _json_lines(stdout):
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type")
        if kind == "turn.completed":
            u = ev.get("usage") or {}
            usage = usage + Usage(
                input_tokens=_int(u.get("input_tokens")),
                output_tokens=_int(u.get("output_tokens")),
                cached_input_tokens=_int(u.get("cached_input_tokens")),
            )
        elif kind == "item.completed":
            item = ev.get("item") or {}
            itype = item.get("type") or item.get("item_type")
            if itype in ("agent_message", "assistant_message") and isinstance(item.get("text"), str):
                messages.append(item["text"])
        elif kind in ("turn.failed", "error"):
            err = ev.get("error") if kind == "turn.failed" else ev
            msg = err.get("message") if isinstance(err, dict) else None
            error = str(msg or kind)
    final = messages[-1] if messages else None
    return CliReport(items=tuple(items_from_text(final)), usage=usage, final_text=final, error=error)


def _parse_aider(stdout: str, analytics: str) -> CliReport:
    usage = Usage()
    total: Decimal | None = None
    summed = Decimal(0)
    for ev in _json_lines(analytics):
        if not isinstance(ev, dict) or ev.get("event") != "message_send":
            continue
        props = ev.get("properties") or {}
        usage = usage + Usage(_int(props.get("prompt_tokens")), _int(props.get("completion_tokens")))
        summed += _money(props.get("cost")) or Decimal(0)
        running = _money(props.get("total_cost"))
        if running is not None:
            total = running if total is None else max(total, running)
    cost = total if total is not None else (summed if summed else None)
    text = stdout.strip() or None
    return CliReport(items=tuple(items_from_text(text)), usage=usage, cost_usd=cost, final_text=text)


def parse_output(fmt: str, stdout: str, *, analytics_log: str = "") -> CliReport:
    if fmt == "jsonl":
        return _parse_jsonl(stdout)
    if fmt == "claude":
        return _parse_claude(stdout)
    if fmt == "codex":
        return _parse_codex(stdout)
    if fmt == "aider":
        return _parse_aider(stdout, analytics_log)
    raise UsageError(f"unknown --agent-format {fmt!r} (choose from {', '.join(FORMATS)})")
