"""What an A2A message asks of the fleet: the run it starts, or the budget raise of a paused one.

The message's text parts are the task. Its first data part that is a JSON object (else the message's
metadata, else the request's) holds the rest: ``items`` (a list: strings, one per line; anything else
one JSON record per line) or ``input_path`` (under the server's working directory), and the options of
``POST /v1/runs`` (``agents``, ``budget_tokens``, ``budget_usd``, ``model``, ``queue`` …), read by the
same model and checked by the same check. The server writes ``items`` as the run's input file, as
``deploy --input`` would read it.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import get_data_parts, get_text_parts
from a2a.server.agent_execution import RequestContext
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from agent_fleet.control.schema import RunCreate
from agent_fleet.errors import UsageError

__all__ = ["BudgetAsk", "message_options", "run_request"]


def message_options(context: RequestContext) -> dict[str, Any]:
    """The options object of the message (see the module's doc); ``{}`` when it has none."""
    message = context.message
    if message is not None:
        for data in get_data_parts(message.parts):
            if isinstance(data, dict):
                return _whole_numbers(data)
        if message.metadata:
            return _whole_numbers(MessageToDict(message.metadata))
    return _whole_numbers(context.metadata)


def _whole_numbers(data: dict[str, Any]) -> dict[str, Any]:
    """JSON numbers cross A2A as doubles (``google.protobuf.Value``): 4 arrives as 4.0."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if key in ("budget_usd", "usd") and isinstance(value, int | float):
            value = str(value)
        out[key] = value
    return out


def run_request(context: RequestContext) -> RunCreate:
    """The run the message asks for, read as ``POST /v1/runs`` reads its body (its ``items`` included).
    UsageError with one readable line when it is not a valid run."""
    options = message_options(context)
    text = "\n".join(t for t in get_text_parts(context.message.parts) if t.strip()) if context.message else ""
    body: dict[str, Any] = {"task": text.strip(), **options} if text.strip() else dict(options)
    try:
        return RunCreate.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "message"
        if where == "task":
            where = "task (the message's text)"
        raise UsageError(f"{where}: {err.get('msg', 'invalid')}") from None


class BudgetAsk:
    """A reply to a run paused on its budget: new caps, ``tokens`` and/or ``usd`` (as ``budget raise``)."""

    def __init__(self, context: RequestContext) -> None:
        options = message_options(context)
        tokens = options.get("budget_tokens", options.get("tokens"))
        usd = options.get("budget_usd", options.get("usd"))
        if tokens is not None and not isinstance(tokens, int):
            raise UsageError("budget_tokens: must be a whole number")
        if usd is not None and not isinstance(usd, str):
            raise UsageError("budget_usd: must be a number of dollars")
        self.tokens: int | None = tokens
        self.usd: str | None = usd
