"""What kind of failure a model call met: one classification for the whole engine.

The gateway classifies every failed attempt with :func:`error_kind`; the kind is what the meter
counts, what ``model_error`` events (``kind``, and ``retried`` for the attempts before) and
``model_response`` events (``retried``) record, what ``summary.json`` ``errors`` and the
``fleet_llm_requests{outcome=...}`` metric show. The string values are stored in session logs, so
they never change::

    auth             401: the credentials are refused
    forbidden        403 (not a billing refusal): the key may not use this
    model_not_found  the provider does not serve the model asked for
    timeout          no answer in time (the request may have been processed)
    rate_limited     429 (not a quota)
    quota            insufficient_quota, 402, a billing 400/403: the account cannot pay
    server           5xx, 529, 408, 409: the provider failed or is overloaded
    unreachable      connection refused, DNS, a dropped connection
    bad_response     a 200 whose body is not the API's shape
    context_length   400: the prompt and its output limit exceed the model's context window
    client           any other 4xx
    other            anything else
"""

from __future__ import annotations

from enum import StrEnum

from agent_fleet.errors import (
    ClientRequestError,
    ContextLengthExceeded,
    MalformedResponse,
    ModelNotFound,
    Overloaded,
    ProviderAuthError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExhausted,
    RateLimited,
)

__all__ = ["ADAPTIVE_KINDS", "BREAKER_KINDS", "FATAL_KINDS", "ErrorKind", "error_kind", "recorded_kind"]


class ErrorKind(StrEnum):
    AUTH = "auth"
    FORBIDDEN = "forbidden"
    MODEL_NOT_FOUND = "model_not_found"
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    QUOTA = "quota"
    SERVER = "server"
    UNREACHABLE = "unreachable"
    BAD_RESPONSE = "bad_response"
    CONTEXT_LENGTH = "context_length"
    CLIENT = "client"
    OTHER = "other"


ADAPTIVE_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.SERVER, ErrorKind.TIMEOUT})
"""Errors the adaptive concurrency rule counts: signs of load."""

BREAKER_KINDS = frozenset({ErrorKind.SERVER, ErrorKind.TIMEOUT, ErrorKind.UNREACHABLE, ErrorKind.BAD_RESPONSE})
"""Errors the circuit breaker counts (a 429 means "slower": the limiter answers it)."""

FATAL_KINDS = frozenset({ErrorKind.AUTH, ErrorKind.FORBIDDEN})
"""Errors that stop a run at once: no retry, session or minute can fix refused credentials."""

# Before the kinds existed, ``model_error`` events recorded the error's class name.
_LEGACY = {
    "RateLimited": ErrorKind.RATE_LIMITED,
    "Overloaded": ErrorKind.SERVER,
    "ProviderUnreachable": ErrorKind.UNREACHABLE,
    "ProviderTimeout": ErrorKind.TIMEOUT,
    "QuotaExhausted": ErrorKind.QUOTA,
    "ClientRequestError": ErrorKind.CLIENT,
    "ProviderError": ErrorKind.OTHER,
}


# The first class a failure is an instance of names its kind (a subclass before its base).
_KIND_OF_CLASS: tuple[tuple[type[BaseException], ErrorKind], ...] = (
    (QuotaExhausted, ErrorKind.QUOTA),
    (RateLimited, ErrorKind.RATE_LIMITED),
    (Overloaded, ErrorKind.SERVER),
    (MalformedResponse, ErrorKind.BAD_RESPONSE),
    (ContextLengthExceeded, ErrorKind.CONTEXT_LENGTH),
    (ModelNotFound, ErrorKind.MODEL_NOT_FOUND),
    (ClientRequestError, ErrorKind.CLIENT),
    (ProviderTimeout, ErrorKind.TIMEOUT),
    (ProviderUnreachable, ErrorKind.UNREACHABLE),
)


def error_kind(exc: BaseException) -> ErrorKind:
    """The kind of a failed attempt."""
    if isinstance(exc, ProviderAuthError):
        return ErrorKind.AUTH if exc.status == 401 else ErrorKind.FORBIDDEN
    for cls, kind in _KIND_OF_CLASS:
        if isinstance(exc, cls):
            return kind
    return ErrorKind.OTHER


def recorded_kind(value: object) -> ErrorKind:
    """A kind as an event recorded it (older logs: the error's class name)."""
    text = str(value or "")
    try:
        return ErrorKind(text)
    except ValueError:
        return _LEGACY.get(text, ErrorKind.OTHER)
