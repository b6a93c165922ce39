"""How long a model call may take: slow is not down.

A call is given up (a timeout, :class:`~agent_fleet.errors.ProviderTimeout`) only when the server has
been silent for too long, never because an answer that keeps coming takes long:

* a call streams where the server can and its answer may be slow (:func:`worth_streaming`); a streamed
  call may stay silent ``silence_s`` (fleet.yaml ``models[].timeout_s``, else
  ``provider.timeout_s``) before its first byte and between any two; every byte that comes is progress
  and starts the wait again, however long the whole answer takes (its ``max_tokens`` bounds it);
* a call that is not streamed shows no progress until its answer: it may take ``silence_s`` plus the time
  its ``max_tokens`` take at the model's pace, :data:`MARGIN` times over. The pace is the seconds per
  output token its answered calls took (a moving average, whole call included, so a server's queue and
  prompt reading count); before any answer, :data:`ASSUMED_SECONDS_PER_TOKEN` (20 tokens/s) for each
  call then in flight to the server (one that serves a call at a time answers them in turn); and each
  answer the server gives another call starts such a call's wait again (its queue is moving).

Progress also tells the provider's health (``spend.health``) that the server is alive: a provider is
down only when calls fail with no answer *and* no progress. The rules are pure (times come in);
:class:`CallWatch` is the clock-driven part the gateway runs a call under, and :func:`report_progress`
is how a provider's transport reports bytes of the call it is serving.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from agent_fleet.clock import Clock

__all__ = [
    "ASSUMED_SECONDS_PER_TOKEN",
    "DEFAULT_SILENCE_S",
    "FIRST_WAVE_CAP_S",
    "MARGIN",
    "CallWatch",
    "Pace",
    "answer_limit",
    "current_watch",
    "report_progress",
    "worth_streaming",
]

DEFAULT_SILENCE_S = 120.0  # provider.timeout_s: how long a server may stay silent
ASSUMED_SECONDS_PER_TOKEN = 0.05  # before a model's first answer: 20 output tokens a second
MARGIN = 2.0  # a whole answer may take twice its expected time before it is given up
# Before any answer, a server that hangs is found within this (beyond the silence allowed), however many
# calls wait for it: the first wave's wait for one another is assumed, not known.
FIRST_WAVE_CAP_S = 900.0
_SMOOTHING = 0.3  # weight of the newest answer in the pace


@dataclass(slots=True)
class Pace:
    """A model's observed seconds per output token (None until an answer came)."""

    seconds_per_token: float | None = None

    def observe(self, duration_s: float, output_tokens: int) -> None:
        if duration_s <= 0:
            return
        sample = duration_s / max(1, output_tokens)
        if self.seconds_per_token is None:
            self.seconds_per_token = sample
        else:
            self.seconds_per_token += _SMOOTHING * (sample - self.seconds_per_token)


def worth_streaming(*, silence_s: float, max_tokens: int, pace: Pace | None) -> bool:
    """Whether a call should stream: its whole answer may take more than a tenth of the silence allowed
    (always, before the model's pace is known). A fast server's answers come whole: a stream costs more
    to read (a third more CPU per call against the simulated provider) and keeps nothing alive there."""
    if pace is None or pace.seconds_per_token is None:
        return True
    return max(0, max_tokens) * pace.seconds_per_token > silence_s / 10


def answer_limit(*, silence_s: float, max_tokens: int, pace: Pace | None, streaming: bool, in_flight: int = 1) -> float:
    """Seconds a call may wait for its first progress (for a call that is not streamed: its answer).
    Before the model's pace is known, the calls ``in_flight`` to its server may be served one after
    another (a local server often takes one at a time): each may wait for all of them. Once known, the
    pace holds that wait (it is measured over whole calls)."""
    if streaming:
        return silence_s
    spt = pace.seconds_per_token if pace is not None and pace.seconds_per_token is not None else None
    if spt is None:
        queued = max(0, max_tokens) * ASSUMED_SECONDS_PER_TOKEN * MARGIN * max(1, in_flight)
        return silence_s + min(queued, FIRST_WAVE_CAP_S)
    return silence_s + max(0, max_tokens) * spt * MARGIN


_CURRENT: contextvars.ContextVar[CallWatch | None] = contextvars.ContextVar("agent_fleet_call_watch", default=None)


def current_watch() -> CallWatch | None:
    """The watch of the call this task is sending, if the gateway watches it."""
    return _CURRENT.get()


def report_progress(count: int = 1) -> None:
    """Bytes (or chunks) of the call in flight arrived: it is alive. A no-op outside a watched call."""
    watch = _CURRENT.get()
    if watch is not None:
        watch.progress(count)


class CallWatch:
    """``async with CallWatch(clock, silence_s=..., whole_s=...)``: the block (one send) is cancelled once
    the server has been silent too long, and :class:`TimeoutError` raised in its place (a cancellation
    from elsewhere stays a cancellation). Before the first progress a streamed request may wait
    ``silence_s`` and one that is not streamed ``whole_s`` (:func:`answer_limit`); after any progress,
    ``silence_s`` from the last. A transport says which it sends (:meth:`sending`, before each request;
    one that never says is taken as not streaming) and reports what arrives (:func:`report_progress`).

    ``on_progress(now)`` hears each progress (the provider's health). The watcher is one task of the
    block's own that sleeps on ``clock`` until the deadline and moves on when progress moved it."""

    __slots__ = (
        "_cancelling",
        "_clock",
        "_on_progress",
        "_task",
        "_token",
        "_watcher",
        "expired",
        "last_progress",
        "progressed",
        "silence_s",
        "started",
        "stream",
        "streaming",
        "whole_s",
    )

    def __init__(
        self,
        clock: Clock,
        *,
        silence_s: float,
        whole_s: float | None = None,
        on_progress: Callable[[float], None] | None = None,
        stream: bool = True,
    ) -> None:
        self._clock = clock
        self.stream = stream  # whether a transport that can stream should (worth_streaming)
        self.silence_s = silence_s
        self.whole_s = silence_s if whole_s is None else max(silence_s, whole_s)
        self._on_progress = on_progress
        self.started = clock.now()
        self.streaming = False
        self.last_progress: float | None = None
        self.progressed = 0  # progress reports (chunks of the answer)
        self.expired = False
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._token: contextvars.Token[CallWatch | None] | None = None
        self._cancelling = 0

    @property
    def first_s(self) -> float:
        """How long the request being sent may wait for its first progress."""
        return self.silence_s if self.streaming else self.whole_s

    def deadline(self) -> float:
        if self.last_progress is None:
            return self.started + self.first_s
        return self.last_progress + self.silence_s

    def sending(self, *, streaming: bool) -> None:
        """A request of this call goes out now (a transport may send a second one, unstreamed, after
        learning that the server cannot stream it): its wait starts again."""
        self.streaming = streaming
        self.started = self._clock.now()
        self.last_progress = None

    def queue_moved(self) -> None:
        """The server answered another call while this one, not streamed, waits: a server that answers
        calls in turn is working through its queue, so this call's wait for its answer starts again."""
        if not self.streaming and self.last_progress is None:
            self.started = self._clock.now()

    def progress(self, count: int = 1) -> None:
        now = self._clock.now()
        self.last_progress = now
        self.progressed += count
        if self._on_progress is not None:
            self._on_progress(now)

    async def __aenter__(self) -> CallWatch:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("CallWatch must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self.started = self._clock.now()
        self._token = _CURRENT.set(self)
        self._watcher = asyncio.get_running_loop().create_task(self._watch(task))
        return self

    async def _watch(self, task: asyncio.Task[object]) -> None:
        while (wait := self.deadline() - self._clock.now()) > 0:
            await self._clock.sleep(wait)
        self.expired = True
        task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None
        watcher, task = self._watcher, self._task
        if watcher is None or task is None:
            return
        if not watcher.done():  # it has not fired (firing is its last step): it never will now
            watcher.cancel()
            await asyncio.wait([watcher])
            return
        if self.expired and task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
