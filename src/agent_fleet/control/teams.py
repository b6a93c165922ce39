"""Who calls ``agent-fleet serve``: bearer tokens of the fleet.yaml ``teams:`` and of the admin.

Tokens are read once from the variables fleet.yaml names (``token_env``) and kept only as SHA-256
digests; a presented token is hashed and compared with every digest in constant time
(``hmac.compare_digest``), so neither the token nor which team's digest matched first leaks through
timing. Nothing here ever logs a token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from agent_fleet.config import TeamConfig
from agent_fleet.errors import ConfigError

__all__ = ["ADMIN_TOKEN_ENV", "Caller", "TeamTokens"]

ADMIN_TOKEN_ENV = "FLEET_ADMIN_TOKEN"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: a team, or the admin (``team`` None) who sees every run."""

    team: str | None
    queues: tuple[str, ...] = ()  # LocalQueues (namespace/name) the team may use; empty: every one
    budget_usd: Decimal | None = None

    @property
    def admin(self) -> bool:
        return self.team is None

    def may_see(self, owner: str | None) -> bool:
        return self.admin or owner == self.team

    def may_use(self, queue_key: str) -> bool:
        return self.admin or not self.queues or queue_key in self.queues


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TeamTokens:
    """The digests of the teams' and the admin's tokens. ``open`` when no token is configured at all:
    every caller is the admin (a local, loopback-only server)."""

    def __init__(self, teams: Mapping[str, TeamConfig], env: Mapping[str, str]) -> None:
        self._entries: list[tuple[bytes, Caller]] = []
        for name, team in sorted(teams.items()):
            token = env.get(team.token_env, "")
            if not token:
                raise ConfigError(f"teams.{name}: ${team.token_env} is not set")
            self._entries.append((_digest(token), Caller(name, tuple(team.queues), team.budget_usd)))
        admin = env.get(ADMIN_TOKEN_ENV, "")
        if admin:
            self._entries.append((_digest(admin), Caller(None)))
        digests = [d for d, _ in self._entries]
        if len(set(digests)) != len(digests):
            raise ConfigError("teams: two teams (or a team and the admin) share one token")

    @property
    def open(self) -> bool:
        return not self._entries

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller of an ``Authorization`` header, or None (no or unknown token). ``Bearer TOKEN``;
        or ``Basic`` with the token as the password, which is how a browser reaches the dashboard."""
        if self.open:
            return Caller(None)
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                token = base64.b64decode(token.strip(), validate=True).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                return None
        elif scheme.lower() != "bearer":
            return None
        if not token.strip():
            return None
        presented = _digest(token.strip())
        found: Caller | None = None
        for digest, caller in self._entries:  # every digest is compared: the time does not depend on which
            if hmac.compare_digest(presented, digest):
                found = caller
        return found
