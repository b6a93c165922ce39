"""What every HTTP provider shares: reading a transport's answers, error mapping and rate-limit signals.

The one error mapping of every provider call, whatever its transport (the engine's own calls, the
gateway service's pass-through, embeddings); each maps to one :class:`~agent_fleet.domain.error_kinds.ErrorKind`::

    429 insufficient_quota / 402 / billing 400 / 403 billing  -> QuotaExhausted      quota (never retried)
    401, other 403                                             -> ProviderAuthError   auth / forbidden (stops the run)
    429 otherwise                                              -> RateLimited         rate_limited (retry_after)
    408, 409, 5xx, 529                                         -> Overloaded          server (retryable)
    404 / 400 naming the model (model_not_found, not_found)    -> ModelNotFound       model_not_found
    400 context_length_exceeded / "prompt is too long"         -> ContextLengthExceeded context_length
    other 4xx                                                  -> ClientRequestError  client
    no answer in time                                          -> ProviderTimeout     timeout
    connect error, broken connection                           -> ProviderUnreachable unreachable
    a 200 that is not the API's shape (providers' parsers)     -> MalformedResponse   bad_response

Messages name the host and the status, never a credential.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import orjson

from agent_fleet.errors import (
    ClientRequestError,
    ContextLengthExceeded,
    MalformedResponse,
    ModelNotFound,
    Overloaded,
    ProviderAuthError,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExhausted,
    RateLimited,
)
from agent_fleet.spend.providers.transport import Answer, Transport, TransportError

__all__ = [
    "ProviderTimeout",
    "RateSignals",
    "SignalSink",
    "answer_of",
    "connection_error",
    "dump_json",
    "error_from_status",
    "exchange",
    "failed_exchange",
    "host_of",
    "load_json",
    "parse_duration",
    "read_signals",
    "signals_from_headers",
]


@dataclass(frozen=True, slots=True)
class RateSignals:
    """The provider's own view of our rate limits, read from response headers.

    ``reset_*`` are seconds from now until the window is fully restored (not a wait).
    """

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens: float | None = None
    retry_after: float | None = None


SignalSink = Callable[[str, RateSignals], None]
"""Receives ``(model, signals)`` after each response that carried rate-limit headers."""


def host_of(base_url: str) -> str:
    return urlsplit(base_url).netloc or base_url


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@lru_cache(maxsize=512)  # read off every answer; a provider repeats the same few values ("1s", "6m0s")
def parse_duration(text: str) -> float | None:
    """OpenAI reset durations: ``1s``, ``6m0s``, ``12ms``, ``1h2m3.5s``; plain numbers are seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total = 0.0
    matched = False
    for number, unit in _DURATION.findall(text):
        matched = True
        value = float(number)
        total += value / 1000 if unit == "ms" else value * {"h": 3600, "m": 60, "s": 1}[unit]
    return total if matched else None


def _until(stamp: str) -> float | None:
    """Seconds from now until an RFC 3339 time (Anthropic reset headers)."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return parse_duration(stamp)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def retry_after_of(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        from email.utils import parsedate_to_datetime

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def signals_from_headers(headers: Mapping[str, str]) -> RateSignals | None:
    """Read OpenAI ``x-ratelimit-*`` or Anthropic ``anthropic-ratelimit-*`` headers; None when absent."""
    get = headers.get
    if get("x-ratelimit-limit-requests") is not None or get("x-ratelimit-remaining-tokens") is not None:
        reset_r = get("x-ratelimit-reset-requests")
        reset_t = get("x-ratelimit-reset-tokens")
        return RateSignals(
            limit_requests=_int(get("x-ratelimit-limit-requests")),
            remaining_requests=_int(get("x-ratelimit-remaining-requests")),
            reset_requests=parse_duration(reset_r) if reset_r else None,
            limit_tokens=_int(get("x-ratelimit-limit-tokens")),
            remaining_tokens=_int(get("x-ratelimit-remaining-tokens")),
            reset_tokens=parse_duration(reset_t) if reset_t else None,
            retry_after=retry_after_of(headers),
        )
    if get("anthropic-ratelimit-requests-limit") is not None or get("anthropic-ratelimit-tokens-limit") is not None:
        reset_r = get("anthropic-ratelimit-requests-reset")
        reset_t = get("anthropic-ratelimit-tokens-reset") or get("anthropic-ratelimit-input-tokens-reset")
        return RateSignals(
            limit_requests=_int(get("anthropic-ratelimit-requests-limit")),
            remaining_requests=_int(get("anthropic-ratelimit-requests-remaining")),
            reset_requests=_until(reset_r) if reset_r else None,
            limit_tokens=_int(get("anthropic-ratelimit-tokens-limit") or get("anthropic-ratelimit-input-tokens-limit")),
            remaining_tokens=_int(
                get("anthropic-ratelimit-tokens-remaining") or get("anthropic-ratelimit-input-tokens-remaining")
            ),
            reset_tokens=_until(reset_t) if reset_t else None,
            retry_after=retry_after_of(headers),
        )
    return None


_QUOTA_WORDS = ("insufficient_quota", "billing", "credit balance", "spend limit", "usage limit", "quota")


def _error_fields(body: bytes) -> tuple[str, str, str]:
    """(type, code, message) of an OpenAI- or Anthropic-shaped error body; empty when unreadable."""
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "", "", body[:200].decode("utf-8", "replace")
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return "", "", ""
    return str(err.get("type") or ""), str(err.get("code") or ""), str(err.get("message") or "")[:300]


def error_from_status(
    host: str, status: int, headers: Mapping[str, str], content: bytes, *, scrub: str = ""
) -> ProviderError:
    etype, code, message = _error_fields(content)
    if scrub and scrub in message:
        message = message.replace(scrub, "***")
    retry_after = retry_after_of(headers)
    detail = f"{etype or code or 'error'}: {message}" if message else (etype or code or "error")
    text = f"{host} answered {status} ({detail})"
    lowered = f"{etype} {code} {message}".lower()
    # insufficient_quota (OpenAI 429), billing 400 (Anthropic spend limit): retrying cannot help.
    # A 429 counts only with the explicit words: its ordinary messages may mention quotas.
    quota_words = any(w in lowered for w in _QUOTA_WORDS)
    quota_429 = "insufficient_quota" in lowered or "billing" in lowered
    if status == 402 or (status in (400, 403) and quota_words) or (status == 429 and quota_429):
        return QuotaExhausted(text, status=status)
    if status in (401, 403):
        return ProviderAuthError(text, status=status)
    if status == 429:
        return RateLimited(text, status=status, retry_after=retry_after)
    if status >= 500 or status in (408, 409, 529):
        return Overloaded(text, status=status, retry_after=retry_after)
    if status in (400, 413) and _context_overflow(code, message):
        return ContextLengthExceeded(text, status=status)
    if _names_a_model(status, etype, code, message):
        return ModelNotFound(text, status=status)
    return ClientRequestError(text, status=status)


def _context_overflow(code: str, message: str) -> bool:
    """OpenAI: 400 ``context_length_exceeded`` ("This model's maximum context length is ..."); Anthropic:
    400 ``invalid_request_error`` "prompt is too long: N tokens > M maximum" (or "... exceed context limit")."""
    lowered = message.lower()
    return (
        code == "context_length_exceeded"
        or "prompt is too long" in lowered
        or "maximum context length" in lowered
        or "exceed context limit" in lowered
    )


def _names_a_model(status: int, etype: str, code: str, message: str) -> bool:
    """OpenAI: 404 ``model_not_found``; Anthropic: 404 ``not_found_error`` "model: ..."; vLLM and
    others: 400/404 whose message says the model does not exist."""
    if code == "model_not_found" or etype == "model_not_found":
        return True
    lowered = message.lower()
    if status == 404 and etype == "not_found_error" and lowered.startswith("model"):
        return True
    return status in (400, 404) and "model" in lowered and ("not found" in lowered or "does not exist" in lowered)


def connection_error(host: str, *, timed_out: bool, sent: bool, cause: str) -> ProviderUnreachable:
    """A call that got no answer. ``sent`` says whether the request may have reached the provider
    (and may be billed): a timeout after sending is never sent again."""
    err: ProviderUnreachable
    if timed_out:
        err = ProviderTimeout(f"{host} did not answer in time ({cause})")
    elif sent:
        err = ProviderUnreachable(f"lost the connection to {host} ({cause})")
    else:
        err = ProviderUnreachable(f"cannot reach {host} ({cause})")
    err.sent = sent  # type: ignore[attr-defined]
    return err


def dump_json(value: Any) -> bytes:
    """A request body. orjson is several times faster than ``json`` on a conversation-sized body (the
    bodies differ only in whitespace and in non-ASCII text sent as UTF-8); what orjson will not write
    (an integer wider than 64 bits, a key that is not a string) goes through ``json``."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def load_json(body: bytes) -> Any:
    """A response body, several times faster than ``json``; what orjson refuses (NaN, Infinity) gets
    ``json``'s reading. orjson reads an integer wider than 64 bits as a float, so this reads only bodies
    whose numbers the engine takes as counts (an OpenAI chat completion: its text and tool arguments are
    strings), never one that carries a model's own JSON (an Anthropic tool input)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def answer_of(
    host: str, body: bytes, *, api: str, key: str, loads: Callable[[bytes], Any] = json.loads
) -> dict[str, Any]:
    """A 200's JSON body, which must be an object whose ``key`` is a non-empty list (``choices`` of a
    chat completion, ``content`` of a Message); anything else — HTML from a proxy, another API's JSON —
    is a :class:`MalformedResponse`, never an empty answer."""
    try:
        data = loads(body)
    except (ValueError, UnicodeDecodeError):
        start = body[:60].decode("utf-8", "replace").strip().replace("\n", " ")
        raise MalformedResponse(f"{host} answered 200 with a body that is not JSON ({start!r})", status=200) from None
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list) or (key == "choices" and not (value and isinstance(value[0], dict))):
        raise MalformedResponse(f"{host} answered 200 with a body that is not {api} response (no {key})", status=200)
    return data  # type: ignore[no-any-return]


def failed_exchange(host: str, exc: TransportError) -> ProviderUnreachable:
    """A transport's "no answer" as :func:`connection_error` names it."""
    return connection_error(host, timed_out=exc.timed_out, sent=exc.sent, cause=exc.cause)


def read_signals(headers: Mapping[str, str], model: str, sink: SignalSink | None) -> None:
    """Tell ``sink`` what an answer's rate-limit headers said, if anything."""
    if sink is not None:
        signals = signals_from_headers(headers)
        if signals is not None:
            sink(model, signals)


async def exchange(
    transport: Transport,
    path: str,
    payload: bytes,
    *,
    host: str,
    model: str,
    secret: str,
    on_signals: SignalSink | None,
    on_progress: Callable[[int], None] | None = None,
) -> bytes:
    """POST through ``transport`` and read the answer: its body, or the mapped error. A redirect is not
    followed: a 3xx is an answer that is not the API's."""
    try:
        answer: Answer = await transport.post(path, payload, on_progress=on_progress)
    except TransportError as exc:
        raise failed_exchange(host, exc) from None
    read_signals(answer.headers, model, on_signals)
    if answer.status >= 300:
        raise error_from_status(host, answer.status, answer.headers, answer.body, scrub=secret)
    return answer.body
