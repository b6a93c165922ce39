"""The simulated provider's context windows, and how the engine classifies the refusal."""

from __future__ import annotations

import json

import pytest

from agent_fleet.domain.error_kinds import ErrorKind, error_kind
from agent_fleet.errors import ContextLengthExceeded
from agent_fleet.sim.settings import SimConfig, SimConfigError
from agent_fleet.sim.window import context_overflow
from agent_fleet.sim.wire import anthropic_error, openai_error
from agent_fleet.spend.providers._wire import error_from_status

WINDOWS = {"sim-small": 16_000}


def test_a_request_that_fits_is_served() -> None:
    body = {"max_tokens": 2000}
    assert context_overflow(WINDOWS, model="sim-small", prompt_tokens=14_000, body=body, anthropic=False) is None
    assert context_overflow(WINDOWS, model="other", prompt_tokens=10**6, body=body, anthropic=False) is None
    assert context_overflow({"*": 100}, model="other", prompt_tokens=90, body={"max_tokens": 11}, anthropic=True)


def test_the_refusals_read_as_the_apis_do() -> None:
    body = {"max_completion_tokens": 2000}
    msg, code = context_overflow(WINDOWS, model="sim-small", prompt_tokens=14_001, body=body, anthropic=False) or (
        "",
        "",
    )
    assert code == "context_length_exceeded"
    assert msg.startswith("This model's maximum context length is 16000 tokens. However, you requested 16001 tokens")
    too_long = context_overflow(
        WINDOWS, model="sim-small", prompt_tokens=16_500, body={"max_tokens": 10}, anthropic=True
    )
    assert too_long == ("prompt is too long: 16500 tokens > 16000 maximum", None)
    over = context_overflow(WINDOWS, model="sim-small", prompt_tokens=15_000, body={"max_tokens": 2000}, anthropic=True)
    assert over is not None and over[0].startswith("input length and `max_tokens` exceed context limit: 15000 + 2000")


@pytest.mark.parametrize(
    "content",
    [
        openai_error(
            "This model's maximum context length is 16000 tokens.",
            type_="invalid_request_error",
            code="context_length_exceeded",
        ),
        anthropic_error(
            "prompt is too long: 16500 tokens > 16000 maximum", type_="invalid_request_error", request_id="req_1"
        ),
    ],
)
def test_the_engine_classifies_the_refusal(content: bytes) -> None:
    err = error_from_status("sim", 400, {}, content)
    assert isinstance(err, ContextLengthExceeded) and not err.retryable
    assert error_kind(err) is ErrorKind.CONTEXT_LENGTH


def test_windows_round_trip_and_are_checked() -> None:
    cfg = SimConfig(context_windows={"sim-small": 16_000})
    assert SimConfig.from_json(json.loads(json.dumps(cfg.to_json()))).context_windows == {"sim-small": 16_000}
    with pytest.raises(SimConfigError):
        SimConfig(context_windows={"sim-small": 0})
