"""The one error tree of the engine.

Every error the engine raises on purpose derives from :class:`FleetError`; each
carries the process exit code the CLI uses for it (SPEC.md, "Exit codes")::

    FleetError                      exit 1
    ├── UsageError                  exit 2  bad flag values, bad usage
    │   ├── ConfigError             exit 2  malformed fleet.yaml / Kueue objects
    │   ├── InputError              exit 2  missing or unreadable input
    │   └── Refused                 exit 2  not the caller's to use: an input outside its folders, a queue
    ├── PlanInvariantError          exit 1  a plan that breaks "every item in exactly one leaf"
    ├── UnreachableError            exit 4
    │   ├── ProviderUnreachable     exit 4  model provider cannot be reached
    │   │   └── ProviderTimeout     exit 4  it did not answer in time
    │   ├── ProviderDown            exit 4  the run stops: credentials refused, or no success for too long
    │   ├── StoreUnreachable        exit 4  session store cannot be opened
    │   └── GitRemoteError          exit 4  a git remote cannot be reached, or refuses (clone, fetch, push)
    ├── ProviderError               exit 1  a provider answered with an error
    │   ├── RateLimited                     429 (retryable, carries retry_after)
    │   ├── Overloaded                      500/503/529 (retryable)
    │   ├── QuotaExhausted                  spend/credit exhausted (never retried)
    │   ├── ProviderAuthError       exit 4  401/403: the credentials are refused (never retried)
    │   ├── MalformedResponse               a 200 whose body is not the API's shape (never retried)
    │   └── ClientRequestError              other 4xx (never retried)
    │       └── ModelNotFound               the provider does not serve the model
    ├── BudgetExhausted             exit 3  a budget stops a session (it pauses, it is not killed)
    ├── SessionNotFound             exit 2
    ├── RunOwned                    exit 5  another live engine holds the run's lease
    ├── GitError                    exit 1  git failed on the run's repository (changes, branches)
    └── StoreError                  exit 4  the store failed while open
        ├── StoreUnavailable        exit 4  writes kept failing past the store's retry deadline
        └── LeaseLost               exit 5  a write of an engine whose lease was taken over (fencing)

Messages never contain credentials: constructors take only what is safe to show.
"""

from __future__ import annotations

__all__ = [
    "BudgetExhausted",
    "ClientRequestError",
    "ContextLengthExceeded",
    "ConfigError",
    "FleetError",
    "GitError",
    "GitRemoteError",
    "InputError",
    "LeaseLost",
    "MalformedResponse",
    "ModelNotFound",
    "Overloaded",
    "PlanInvariantError",
    "ProviderAuthError",
    "ProviderDown",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnreachable",
    "OutOfQuota",
    "QuotaExhausted",
    "RateLimited",
    "Refused",
    "RunOwned",
    "SessionNotFound",
    "StoreError",
    "StoreUnavailable",
    "StoreUnreachable",
    "UnreachableError",
    "UsageError",
    "cause_of",
]


class FleetError(Exception):
    """Root of every error the engine raises on purpose."""

    exit_code: int = 1


class UsageError(FleetError):
    exit_code = 2


class ConfigError(UsageError):
    pass


class InputError(UsageError):
    pass


class Refused(UsageError):
    """The caller may not use what it named (``serve``: an input outside its team's folders or one of the
    server's own files, a queue that is not its team's). The API answers 403."""


class PlanInvariantError(FleetError):
    pass


class UnreachableError(FleetError):
    exit_code = 4


class ProviderUnreachable(UnreachableError):
    pass


class ProviderTimeout(ProviderUnreachable):
    """The provider did not answer in time (the request may or may not have been processed)."""


class ProviderDown(UnreachableError):
    """A run stops because its provider cannot serve it: the credentials were refused, or no call
    succeeded for longer than the configured bound. The run is resumable."""


class StoreUnreachable(UnreachableError):
    pass


class GitRemoteError(UnreachableError):
    """A git remote (an ``--input`` URL, a ``--push`` remote) cannot be reached, or refuses the
    credential or the push. Nothing of the run is lost: its branches stay in the local repository."""


class StoreError(FleetError):
    exit_code = 4


class StoreUnavailable(StoreError):
    """Writes failed on fresh connections until the retry deadline passed; the run is resumable."""


class LeaseLost(StoreError):
    """Fencing refused a write: another engine took the run's lease over (a newer epoch)."""

    exit_code = 5


class RunOwned(FleetError):
    """Another live engine owns the run (its lease is held and not expired)."""

    exit_code = 5


class GitError(FleetError):
    """git failed on a run's repository (keeping, committing or merging the sessions' changes)."""

    def __init__(self, message: str, *, stderr: bytes = b"") -> None:
        super().__init__(message)
        self.stderr = stderr


class SessionNotFound(FleetError):
    exit_code = 2


class ProviderError(FleetError):
    """A provider answered with an error status."""

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return False


class RateLimited(ProviderError):
    @property
    def retryable(self) -> bool:
        return True


class Overloaded(ProviderError):
    @property
    def retryable(self) -> bool:
        return True


class QuotaExhausted(ProviderError):
    """The account is out of quota or credits for a model (``insufficient_quota``, a billing refusal)."""


class OutOfQuota(QuotaExhausted):
    """Out of quota with no route left to another model: no session can go on until the account is
    topped up, so the run stops (exit 4, resumable) instead of failing every session in turn."""

    exit_code = 4


class ProviderAuthError(ProviderError):
    """401 or 403 (not a billing refusal): retrying, another session or another minute cannot help."""

    exit_code = 4


class MalformedResponse(ProviderError):
    """The provider answered 200 with a body that is not the API's shape (HTML, another API's JSON)."""


class ClientRequestError(ProviderError):
    pass


class ModelNotFound(ClientRequestError):
    """The provider does not serve the model asked for (404 ``model_not_found`` and the like)."""


class ContextLengthExceeded(ClientRequestError):
    """The prompt and its output limit do not fit the model's context window (OpenAI 400
    ``context_length_exceeded``, Anthropic 400 "prompt is too long"): the same request never fits."""


class BudgetExhausted(FleetError):
    """Raised by the gateway when a call would cross a budget; the caller pauses."""

    exit_code = 3

    def __init__(self, message: str, *, scope: str = "session") -> None:
        super().__init__(message)
        self.scope = scope


def cause_of(exc: BaseException) -> BaseException:
    """The one error an ``ExceptionGroup`` (task groups, nested) stands for: its first FleetError,
    else its first interrupt, else its first other leaf. Any other exception is its own cause."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        item = stack.pop(0)
        if isinstance(item, BaseExceptionGroup):
            stack[:0] = list(item.exceptions)
        else:
            leaves.append(item)
    for wanted in (FleetError, KeyboardInterrupt):
        for leaf in leaves:
            if isinstance(leaf, wanted):
                return leaf
    return leaves[0] if leaves else exc
