"""Teams of ``agent-fleet serve``: who a token names, what a team may see and use, where it may listen."""

from __future__ import annotations

import base64

import pytest

from agent_fleet.config import TeamConfig, parse_config
from agent_fleet.control import ADMIN_TOKEN_ENV, TeamTokens, check_address
from agent_fleet.errors import ConfigError, UsageError

TEAMS = {
    "alpha": TeamConfig(token_env="A_TOKEN", queues=("alpha/default",)),
    "beta": TeamConfig(token_env="B_TOKEN"),
}
ENV = {"A_TOKEN": "tok-alpha", "B_TOKEN": "tok-beta", ADMIN_TOKEN_ENV: "tok-admin"}


def test_a_bearer_token_names_its_team() -> None:
    tokens = TeamTokens(TEAMS, ENV)
    alpha = tokens.identify("Bearer tok-alpha")
    assert alpha is not None and alpha.team == "alpha" and not alpha.admin
    beta = tokens.identify("bearer  tok-beta ")
    assert beta is not None and beta.team == "beta"
    admin = tokens.identify("Bearer tok-admin")
    assert admin is not None and admin.admin


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer ", "Bearer tok-gamma", "Token tok-alpha", "tok-alpha", "Basic !!"]
)
def test_anything_else_names_nobody(header: str | None) -> None:
    assert TeamTokens(TEAMS, ENV).identify(header) is None


def test_basic_carries_the_token_as_its_password() -> None:
    tokens = TeamTokens(TEAMS, ENV)
    header = "Basic " + base64.b64encode(b"anyone:tok-admin").decode()
    caller = tokens.identify(header)
    assert caller is not None and caller.admin


def test_only_digests_are_kept() -> None:
    tokens = TeamTokens(TEAMS, ENV)
    assert "tok-alpha" not in repr(vars(tokens))


def test_what_a_team_sees_and_uses() -> None:
    tokens = TeamTokens(TEAMS, ENV)
    alpha, beta, admin = (tokens.identify(f"Bearer tok-{n}") for n in ("alpha", "beta", "admin"))
    assert alpha is not None and beta is not None and admin is not None
    assert alpha.may_see("alpha") and not alpha.may_see("beta") and not alpha.may_see(None)
    assert admin.may_see("beta") and admin.may_see(None)
    assert alpha.may_use("alpha/default") and not alpha.may_use("default/default")
    assert beta.may_use("default/default")  # no queues listed: every queue


def test_a_missing_or_shared_token_stops_the_start() -> None:
    with pytest.raises(ConfigError, match=r"teams\.beta: \$B_TOKEN is not set"):
        TeamTokens(TEAMS, {"A_TOKEN": "x"})
    with pytest.raises(ConfigError, match="share one token"):
        TeamTokens(TEAMS, {"A_TOKEN": "same", "B_TOKEN": "same"})


def test_no_token_at_all_is_an_open_local_server() -> None:
    tokens = TeamTokens({}, {})
    assert tokens.open
    caller = tokens.identify(None)
    assert caller is not None and caller.admin


def test_fleet_yaml_teams() -> None:
    config = parse_config({"teams": {"alpha": {"token_env": "A_TOKEN", "queues": ["a/q"], "budget_usd": 5}}})
    assert config.teams["alpha"].queues == ("a/q",) and str(config.teams["alpha"].budget_usd) == "5"
    with pytest.raises(ConfigError, match="token"):
        parse_config({"teams": {"alpha": {"token": "in-clear"}}})


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.5"])
def test_loopback_needs_nothing(host: str) -> None:
    check_address(host, tls=False, insecure=False)


def test_another_address_needs_tls_or_insecure() -> None:
    with pytest.raises(UsageError, match="--tls-cert"):
        check_address("0.0.0.0", tls=False, insecure=False)
    check_address("0.0.0.0", tls=True, insecure=False)
    check_address("10.1.2.3", tls=False, insecure=True)
