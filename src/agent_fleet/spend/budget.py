"""Budgets: reserve, then reconcile, against every cap that applies to a call.

An :class:`Account` is one cap holder — a session, the run (fleet), a team/queue or a model. Before a
call the gateway reserves the call's worst case (prompt estimate + ``max_tokens``, and that priced at
the dearest list rate) on *all* of the call's accounts in one synchronous step: either every account
has room, or nothing is reserved and :class:`~agent_fleet.errors.BudgetExhausted` names the first
account without room. After the call, :meth:`BudgetBook.settle` charges the real usage to the same
accounts and drops the reservation — on success, error, timeout and cancellation alike.

Invariants (tests pin each):

* ``spent + reserved ≤ cap`` whenever a reservation is granted, so concurrent calls — of one session
  or many — cannot jointly pass a cap by reserving: the check and the reservation are one step.
* The bound: a cap is exceeded only by what calls in flight consume *beyond their reservation*, i.e.
  ``spent ≤ cap + Σ_in-flight max(0, real − reserved)``. The reservation covers ``max_tokens`` fully,
  so the only excess is a prompt that tokenised to more than its estimate; with a prompt estimate that
  is not below the real count the overshoot is zero.
* Every account a call touched gets the same charge in the same step, so the run's spent equals the
  sum of its sessions' spent, exactly (integers and Decimals, no rounding).
* After every call has returned: ``reserved == 0`` and no reservation is outstanding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agent_fleet.domain.accounts import AccountScope
from agent_fleet.errors import BudgetExhausted

__all__ = ["UNSET", "Account", "BudgetBook", "Reservation"]

_ZERO = Decimal(0)
UNSET: Any = object()  # "leave this cap as it is" (None means "no cap")


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

    def room_for(self, tokens: int, usd: Decimal) -> str | None:
        """Why a reservation of this size does not fit, or None if it does."""
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

    @property
    def exhausted(self) -> bool:
        return (self.cap_tokens is not None and self.spent_tokens >= self.cap_tokens) or (
            self.cap_usd is not None and self.spent_usd >= self.cap_usd
        )

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
        }


def _fmt(value: Decimal) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"


class Reservation:
    """A granted reservation; :meth:`BudgetBook.settle` closes it exactly once."""

    __slots__ = ("accounts", "open", "tokens", "usd")

    def __init__(self, accounts: tuple[Account, ...], tokens: int, usd: Decimal) -> None:
        self.accounts = accounts
        self.tokens = tokens
        self.usd = usd
        self.open = True


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
    ) -> None:
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
        return acct

    def set_default(self, scope: AccountScope, *, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        old_t, old_u = self.defaults.get(scope, (None, None))
        self.defaults[scope] = (
            old_t if tokens is UNSET else tokens,
            old_u if usd is UNSET else (None if usd is None else Decimal(str(usd))),
        )

    def reserve(self, accounts: Iterable[Account], tokens: int, usd: Decimal) -> Reservation:
        """Reserve on every account or on none. Raises BudgetExhausted naming the first full account."""
        accts = tuple(accounts)
        for acct in accts:
            why = acct.room_for(tokens, usd)
            if why is not None:
                raise BudgetExhausted(why, scope=acct.scope)
        for acct in accts:
            acct.reserved_tokens += tokens
            acct.reserved_usd += usd
            acct.open_reservations += 1
        return Reservation(accts, tokens, usd)

    def settle(self, reservation: Reservation, tokens: int, usd: Decimal) -> None:
        """Charge the real amount and drop the reservation (idempotent: a second call does nothing)."""
        if not reservation.open:
            return
        reservation.open = False
        for acct in reservation.accounts:
            acct.reserved_tokens -= reservation.tokens
            acct.reserved_usd -= reservation.usd
            acct.open_reservations -= 1
            acct.spent_tokens += tokens
            acct.spent_usd += usd

    def restore(self, accounts: Iterable[Account], tokens: int, usd: Decimal) -> None:
        """Seed what was spent before (a resumed run replays its log)."""
        for acct in accounts:
            acct.spent_tokens += tokens
            acct.spent_usd += usd

    def reserved_total(self) -> tuple[int, Decimal, int]:
        """(tokens, dollars, open reservations) summed over sessions: all zero when no call is in flight."""
        t, u, n = 0, _ZERO, 0
        for (scope, _), acct in self.accounts.items():
            if scope == AccountScope.SESSION:
                t += acct.reserved_tokens
                u += acct.reserved_usd
                n += acct.open_reservations
        return t, u, n
