"""Is a provider able to serve the run at all? The rule that stops a run early (pure: times come in).

* Refused credentials (401, or a 403 that is not a billing refusal) stop the run at once: no retry,
  other session or later minute can fix them.
* Otherwise, once a call fails (anything but a 429, which says "slower", not "broken", or a refusal of
  the request itself: a prompt over the context window, another 4xx) the provider
  has ``give_up_after_s`` to answer one call successfully; a success starts the clock again. A
  provider that only fails — answers 500 or HTML to everything, refuses connections, times out —
  stops the run after that long instead of failing every session one by one. An idle provider, or
  one whose calls are merely slow, never trips it. After a sixth of that time without a success the
  provider counts as in an outage: errors then carry ``outage = True`` and dispatch does not charge
  them to the session, so sessions wait for the verdict instead of failing for good. Progress of a call
  in flight (a streamed answer's bytes) counts as a success: "down" means no answer and no progress.

The verdict is a :class:`~agent_fleet.errors.ProviderDown` (exit 4): one line naming the provider and
what it answered; the run stops as an interrupted one does, and ``resume`` continues it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_fleet.domain.error_kinds import FATAL_KINDS, ErrorKind
from agent_fleet.errors import ProviderDown

__all__ = ["DEFAULT_GIVE_UP_AFTER_S", "ProviderHealth"]

DEFAULT_GIVE_UP_AFTER_S = 60.0
# Answers that say the server is up: "slower" (429), or this request is at fault (a prompt over the
# context window, another 4xx). Only failures of the server itself count toward "down".
_ANSWERING = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.CONTEXT_LENGTH, ErrorKind.CLIENT})


@dataclass(slots=True)
class ProviderHealth:
    name: str
    give_up_after_s: float = DEFAULT_GIVE_UP_AFTER_S
    last_success: float | None = None
    failing_since: float | None = None  # the first failure after the last success
    last_error: str = ""
    failures: int = 0  # since the last success
    refused: str | None = None  # set by refused credentials: the run must stop

    def success(self, now: float) -> None:
        self.last_success = now
        self.failing_since = None
        self.failures = 0

    def progress(self, now: float) -> None:
        """A call in flight received part of its answer: the provider is alive, however slow
        (``spend.patience``). It counts as a success for the verdict: down means no answer and no progress."""
        self.failing_since = None
        self.failures = 0

    def failure(self, now: float, kind: ErrorKind, error: BaseException) -> None:
        if kind in FATAL_KINDS:
            if self.refused is None:
                self.refused = f"provider {self.name} refused the credentials: {error}"
            return
        if kind in _ANSWERING:
            return
        if self.failing_since is None:
            self.failing_since = now
        self.failures += 1
        self.last_error = str(error)

    def in_outage(self, now: float) -> bool:
        """No call has succeeded for a sixth of ``give_up_after_s`` while calls failed: a failure now
        is the provider's, not the session's (dispatch does not count it toward the session's attempts)."""
        return self.failing_since is not None and now - self.failing_since >= self.give_up_after_s / 6

    def down_in(self, now: float) -> float | None:
        """Seconds until the provider counts as down (0: it is), or None while it is not failing."""
        if self.refused is not None:
            return 0.0
        if self.failing_since is None:
            return None
        return max(0.0, self.failing_since + self.give_up_after_s - now)

    def verdict(self, now: float) -> ProviderDown | None:
        """The error that stops the run, or None while the provider may still recover."""
        if self.refused is not None:
            return ProviderDown(self.refused)
        if self.failing_since is None or now - self.failing_since < self.give_up_after_s:
            return None
        return ProviderDown(
            f"provider {self.name}: no call succeeded for {now - self.failing_since:.0f} s "
            f"({self.failures} failed; last: {self.last_error}); the run is resumable"
        )
