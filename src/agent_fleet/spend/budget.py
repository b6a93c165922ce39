"""Budgets: reserve, then reconcile, against every cap that applies to a call.

An :class:`Account` is one cap holder — a session, the run (fleet), a team/queue or a model. Before a
call the gateway asks for its worst case (:class:`Demand`: prompt estimate + ``max_tokens``, and that
priced at the dearest list rate) on *all* of the call's accounts in one synchronous step; after the
call, :meth:`BudgetBook.settle` charges the real usage to the same accounts and drops the reservation
— on success, error, timeout and cancellation alike.

The rule, the same on every scope (``bounded`` mode, the default):

* An account admits a call while ``spent + reserved < cap``: a session with budget left is never
  refused. It reserves ``min(worst case, cap − spent − reserved)``.
* A reservation below the call's worst case is *short*. An account holds at most one short
  reservation at a time; a call that would need a second one waits until that account settles a call,
  as does a call that finds the account fully reserved. Waiting ends in a grant or, once
  ``spent ≥ cap``, in :class:`~agent_fleet.errors.BudgetExhausted` — never in a refusal while budget is
  left.
* ``spent ≥ cap`` refuses at once, naming the account; nothing is reserved anywhere.

The bound (tests pin it on a virtual clock with concurrent callers, exact values): a cap is exceeded by
at most what its one short call uses beyond its reservation — less than one call's worst case — plus
what fully reserved calls use beyond their reservation (only a prompt that tokenised to more than its
estimate; the estimator keeps that at zero in practice). This is Anthropic's managed-agent rule (the
request that crosses the cap finishes), held with parallel callers too.

``strict`` mode never overshoots: a call that does not fit has its ``max_tokens`` lowered to what is
left (:attr:`Reservation.max_tokens`; the caller forwards that), and is refused when fewer than
``floor`` output tokens would be left — or waits, when reservations in flight hold the rest.

Invariants: every account a call touched gets the same charge in the same step, so the run's spent
equals the sum of its sessions' spent, exactly (integers and Decimals, no rounding); after every call
has returned, ``reserved == 0``, no reservation is open and nobody waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from agent_fleet.domain.accounts import AccountScope
from agent_fleet.errors import BudgetExhausted

__all__ = ["MODES", "UNSET", "Account", "BudgetBook", "Demand", "Reservation"]

_ZERO = Decimal(0)
UNSET: Any = object()  # "leave this cap as it is" (None means "no cap")
Mode = Literal["bounded", "strict"]
MODES: tuple[str, ...] = ("bounded", "strict")


@dataclass(slots=True, eq=False)
class Account:
    scope: AccountScope
    key: str
    cap_tokens: int | None = None
    cap_usd: Decimal | None = None
    spent_tokens: int = 0
    spent_usd: Decimal = _ZERO
    reserved_tokens: int = 0
    reserved_usd: Decimal = _ZERO
    open_reservations: int = 0
    short_reservations: int = 0  # open reservations below their call's worst case (at most one)
    waiters: list[asyncio.Future[None]] = field(default_factory=list, repr=False)

    def room_for(self, tokens: int, usd: Decimal) -> str | None:
        """Why a reservation of this full size does not fit, or None if it does (a whole-job check)."""
        if self.cap_tokens is not None and self.spent_tokens + self.reserved_tokens + tokens > self.cap_tokens:
            return (
                f"{self.scope} {self.key}: token budget {self.cap_tokens:,} would be crossed "
                f"(spent {self.spent_tokens:,}, reserved {self.reserved_tokens:,}, this call up to {tokens:,})"
            )
        if self.cap_usd is not None and self.spent_usd + self.reserved_usd + usd > self.cap_usd:
            return (
                f"{self.scope} {self.key}: budget ${self.cap_usd} would be crossed "
                f"(spent ${_fmt(self.spent_usd)}, reserved ${_fmt(self.reserved_usd)}, this call up to ${_fmt(usd)})"
            )
        return None

    def why_exhausted(self) -> str | None:
        """Why this account admits nothing more (``spent ≥ cap``), or None."""
        if self.cap_tokens is not None and self.spent_tokens >= self.cap_tokens:
            return f"{self.scope} {self.key}: token budget {self.cap_tokens:,} reached (spent {self.spent_tokens:,})"
        if self.cap_usd is not None and self.spent_usd >= self.cap_usd:
            return f"{self.scope} {self.key}: budget ${self.cap_usd} reached (spent ${_fmt(self.spent_usd)})"
        return None

    @property
    def exhausted(self) -> bool:
        return self.why_exhausted() is not None

    def room_tokens(self) -> int | None:
        return None if self.cap_tokens is None else self.cap_tokens - self.spent_tokens - self.reserved_tokens

    def room_usd(self) -> Decimal | None:
        return None if self.cap_usd is None else self.cap_usd - self.spent_usd - self.reserved_usd

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "key": self.key,
            "cap_tokens": self.cap_tokens,
            "cap_usd": None if self.cap_usd is None else str(self.cap_usd),
            "spent_tokens": self.spent_tokens,
            "spent_usd": str(self.spent_usd),
            "reserved_tokens": self.reserved_tokens,
            "reserved_usd": str(self.reserved_usd),
            "open_reservations": self.open_reservations,
            "short_reservations": self.short_reservations,
            "waiting": len(self.waiters),
        }


def _fmt(value: Decimal) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"


@dataclass(frozen=True, slots=True)
class Demand:
    """A call's worst case: ``prompt_tokens + max_tokens`` tokens, ``prompt_usd + max_tokens × output_usd``."""

    prompt_tokens: int
    max_tokens: int
    prompt_usd: Decimal = _ZERO  # the prompt at the dearest input rate
    output_usd: Decimal = _ZERO  # one output token

    @property
    def worst_tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens

    def usd(self, max_tokens: int) -> Decimal:
        return self.prompt_usd + max_tokens * self.output_usd

    @property
    def worst_usd(self) -> Decimal:
        return self.usd(self.max_tokens)


class Reservation:
    """A granted reservation; :meth:`BudgetBook.settle` closes it exactly once.

    ``tokens``/``usd`` hold what each account reserved (in the order of ``accounts``); ``short`` says
    where that was below the worst case; ``max_tokens`` is the output limit the call may be sent with.
    """

    __slots__ = ("accounts", "max_tokens", "open", "short", "tokens", "usd")

    def __init__(
        self,
        accounts: tuple[Account, ...],
        tokens: tuple[int, ...],
        usd: tuple[Decimal, ...],
        short: tuple[bool, ...],
        max_tokens: int,
    ) -> None:
        self.accounts = accounts
        self.tokens = tokens
        self.usd = usd
        self.short = short
        self.max_tokens = max_tokens
        self.open = True

    def held(self) -> tuple[int, Decimal]:
        """The smallest reservation of the call (tokens, dollars): what a call of unknown fate is charged."""
        if not self.accounts:
            return 0, _ZERO
        return min(self.tokens), min(self.usd)


_Blocked = tuple[Account, ...]


class BudgetBook:
    """Every account of one gateway, with default caps for accounts created on first use.

    Accounts are created synchronously at first reservation with the defaults in force, so concurrent
    first calls of a new session cannot race past a budget that did not exist yet.
    """

    def __init__(
        self,
        *,
        session_tokens: int | None = 128_000,
        session_usd: Decimal | None = None,
        run_tokens: int | None = None,
        run_usd: Decimal | None = None,
        run_key: str = "fleet",
        mode: str = "bounded",
        strict_floor: int = 1024,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"budget mode is bounded or strict, not {mode!r}")
        self.mode = mode
        self.strict_floor = max(1, int(strict_floor))
        self.defaults: dict[AccountScope, tuple[int | None, Decimal | None]] = {
            AccountScope.SESSION: (session_tokens, session_usd)
        }
        self.accounts: dict[tuple[AccountScope, str], Account] = {}
        self.run = self.account(AccountScope.RUN, run_key)
        self.run.cap_tokens, self.run.cap_usd = run_tokens, run_usd

    def account(self, scope: AccountScope, key: str) -> Account:
        acct = self.accounts.get((scope, key))
        if acct is None:
            tokens, usd = self.defaults.get(scope, (None, None))
            acct = self.accounts[(scope, key)] = Account(scope, key, tokens, usd)
        return acct

    def find(self, scope: AccountScope, key: str) -> Account | None:
        return self.accounts.get((scope, key))

    def set_cap(self, scope: AccountScope, key: str, *, tokens: Any = UNSET, usd: Any = UNSET) -> Account:
        """Set (raise or lower) a cap; ``None`` removes it. Lowering stops new reservations at once."""
        acct = self.account(scope, key)
        if tokens is not UNSET:
            acct.cap_tokens = None if tokens is None else int(tokens)
        if usd is not UNSET:
            acct.cap_usd = None if usd is None else Decimal(str(usd))
        acct.wake()
        return acct

    def set_default(self, scope: AccountScope, *, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        old_t, old_u = self.defaults.get(scope, (None, None))
        self.defaults[scope] = (
            old_t if tokens is UNSET else tokens,
            old_u if usd is UNSET else (None if usd is None else Decimal(str(usd))),
        )

    # --- admission --------------------------------------------------------------------------------

    def try_reserve(self, accounts: Iterable[Account], demand: Demand) -> Reservation | _Blocked:
        """Reserve on every account or on none, without waiting.

        Returns the reservation, or the accounts to wait on (each holds reservations that will settle).
        Raises BudgetExhausted naming the first account that admits nothing more.
        """
        accts = tuple(accounts)
        for acct in accts:
            why = acct.why_exhausted()
            if why is not None:
                raise BudgetExhausted(why, scope=acct.scope)
        planned = self._plan_strict(accts, demand) if self.mode == "strict" else self._plan_bounded(accts, demand)
        if not isinstance(planned, Reservation):
            return planned
        for acct, tokens, usd, short in zip(accts, planned.tokens, planned.usd, planned.short, strict=True):
            acct.reserved_tokens += tokens
            acct.reserved_usd += usd
            acct.open_reservations += 1
            acct.short_reservations += short
        return planned

    def _plan_bounded(self, accts: tuple[Account, ...], demand: Demand) -> Reservation | _Blocked:
        worst_t, worst_u = demand.worst_tokens, demand.worst_usd
        tokens: list[int] = []
        usd: list[Decimal] = []
        short: list[bool] = []
        blocked: list[Account] = []
        for acct in accts:
            room_t, room_u = acct.room_tokens(), acct.room_usd()
            if (room_t is None or room_t >= worst_t) and (room_u is None or room_u >= worst_u):
                tokens.append(worst_t)
                usd.append(worst_u)
                short.append(False)
            elif (room_t is None or room_t > 0) and (room_u is None or room_u > 0) and not acct.short_reservations:
                tokens.append(worst_t if room_t is None else min(worst_t, room_t))
                usd.append(worst_u if room_u is None else min(worst_u, room_u))
                short.append(True)
            else:
                blocked.append(acct)  # fully reserved, or its one short call is still out
        if blocked:
            return tuple(blocked)
        return Reservation(accts, tuple(tokens), tuple(usd), tuple(short), demand.max_tokens)

    def _plan_strict(self, accts: tuple[Account, ...], demand: Demand) -> Reservation | _Blocked:
        need = min(self.strict_floor, demand.max_tokens)
        allowed = demand.max_tokens
        limiting: list[Account] = []
        for acct in accts:
            out = demand.max_tokens
            room_t, room_u = acct.room_tokens(), acct.room_usd()
            if room_t is not None:
                out = min(out, room_t - demand.prompt_tokens)
            if room_u is not None:
                if demand.output_usd > 0:
                    out = min(out, int((room_u - demand.prompt_usd) // demand.output_usd))
                elif room_u < demand.prompt_usd:
                    out = -1
            allowed = min(allowed, out)
            if out < need:
                limiting.append(acct)
        if allowed >= need:
            n = len(accts)
            return Reservation(
                accts,
                (demand.prompt_tokens + allowed,) * n,
                (demand.usd(allowed),) * n,
                (False,) * n,
                allowed,
            )
        idle = next((a for a in limiting if not a.open_reservations), None)
        if idle is not None:
            left = idle.room_tokens()
            what = f"{left:,} tokens" if left is not None and left - demand.prompt_tokens < need else "too little"
            raise BudgetExhausted(
                f"{idle.scope} {idle.key}: {what} left for this call's prompt (~{demand.prompt_tokens:,} tokens) "
                f"and the {need:,}-token minimum answer (strict budgets)",
                scope=idle.scope,
            )
        return tuple(limiting)

    async def acquire(self, accounts: Iterable[Account], demand: Demand) -> Reservation:
        """Reserve, waiting while the accounts' reservations in flight hold the room (see the module rule).

        Raises BudgetExhausted once an account admits nothing more; cancelling the wait reserves nothing.
        """
        accts = tuple(accounts)
        while True:
            got = self.try_reserve(accts, demand)
            if isinstance(got, Reservation):
                return got
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for acct in got:
                acct.waiters.append(fut)
            try:
                await fut
            finally:
                for acct in got:
                    with contextlib.suppress(ValueError):
                        acct.waiters.remove(fut)

    def settle(self, reservation: Reservation, tokens: int, usd: Decimal) -> None:
        """Charge the real amount and drop the reservation (idempotent: a second call does nothing)."""
        if not reservation.open:
            return
        reservation.open = False
        parts = zip(reservation.accounts, reservation.tokens, reservation.usd, reservation.short, strict=True)
        for acct, held_t, held_u, short in parts:
            acct.reserved_tokens -= held_t
            acct.reserved_usd -= held_u
            acct.open_reservations -= 1
            acct.short_reservations -= short
            acct.spent_tokens += tokens
            acct.spent_usd += usd
            acct.wake()

    def restore(self, accounts: Iterable[Account], tokens: int, usd: Decimal) -> None:
        """Seed what was spent before (a resumed run replays its log)."""
        for acct in accounts:
            acct.spent_tokens += tokens
            acct.spent_usd += usd
            acct.wake()

    def reserved_total(self) -> tuple[int, Decimal, int]:
        """(tokens, dollars, open reservations) summed over sessions: all zero when no call is in flight."""
        t, u, n = 0, _ZERO, 0
        for (scope, _), acct in self.accounts.items():
            if scope == AccountScope.SESSION:
                t += acct.reserved_tokens
                u += acct.reserved_usd
                n += acct.open_reservations
        return t, u, n

    def waiting(self) -> int:
        """Calls waiting for room on some account (each counted once per account it waits on)."""
        return sum(len(a.waiters) for a in self.accounts.values())
