"""The git credential's handling, without a network: the URL forms an input may take, and the one
environment the engine's git process gets (the token as a header scoped to the remote's URL)."""

from __future__ import annotations

import base64

import pytest

from agent_fleet.engine.remotes import RemoteInput, _scrub, git_env, parse_remote_input
from agent_fleet.errors import UsageError

TOKEN = "fgt-unit-0123456789abcdef"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://git.example.com/team/repo.git", RemoteInput("https://git.example.com/team/repo.git", None)),
        ("https://git.example.com/r.git#release/1.2", RemoteInput("https://git.example.com/r.git", "release/1.2")),
        ("http://127.0.0.1:8080/repo.git#abc123", RemoteInput("http://127.0.0.1:8080/repo.git", "abc123")),
        ("https://bot@git.example.com/repo.git", RemoteInput("https://bot@git.example.com/repo.git", None)),
        ("repo.git", None),  # a local path
        ("https://example.com/list.txt", None),  # not a repository
        ("./urls.txt", None),
        (None, None),
    ],
)
def test_remote_inputs(text: str | None, expected: RemoteInput | None) -> None:
    assert parse_remote_input(text) == expected


def test_a_password_in_the_url_is_refused_without_repeating_it() -> None:
    with pytest.raises(UsageError) as refused:
        parse_remote_input("https://bot:hunter2-secret@git.example.com/repo.git")
    assert "hunter2" not in str(refused.value) and "FLEET_GIT_TOKEN" in str(refused.value)


def test_the_token_goes_to_one_process_as_a_header_scoped_to_the_remote() -> None:
    url = "https://git.example.com/team/repo.git"
    env = git_env(url, {"FLEET_GIT_TOKEN": TOKEN, "GIT_TRACE_CURL": "1", "GIT_CURL_VERBOSE": "1", "PATH": "/usr/bin"})
    assert env["GIT_CONFIG_COUNT"] == "1" and env["GIT_CONFIG_KEY_0"] == f"http.{url}.extraHeader"
    scheme, value = env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: ").split()
    assert scheme == "Basic" and base64.b64decode(value).decode() == f"x-access-token:{TOKEN}"
    assert "GIT_TRACE_CURL" not in env and "GIT_CURL_VERBOSE" not in env  # they would print the header
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    # a configuration the user passes the same way is kept, ours added after it
    theirs = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "c"}
    kept = git_env(url, {"FLEET_GIT_TOKEN": TOKEN, **theirs})
    assert kept["GIT_CONFIG_COUNT"] == "2" and kept["GIT_CONFIG_KEY_0"] == "a.b"
    assert kept["GIT_CONFIG_KEY_1"].endswith(".extraHeader")
    # without a token, or for ssh, git's own configuration answers
    assert "GIT_CONFIG_COUNT" not in git_env(url, {})
    assert "GIT_CONFIG_COUNT" not in git_env("ssh://git@example.com/repo.git", {"FLEET_GIT_TOKEN": TOKEN})


def test_the_token_never_goes_over_plain_http_to_another_machine() -> None:
    with pytest.raises(UsageError, match="plain http"):
        git_env("http://git.example.com/repo.git", {"FLEET_GIT_TOKEN": TOKEN})
    assert "GIT_CONFIG_COUNT" in git_env("http://127.0.0.1:9/repo.git", {"FLEET_GIT_TOKEN": TOKEN})
    assert "GIT_CONFIG_COUNT" in git_env("http://localhost:9/repo.git", {"FLEET_GIT_TOKEN": TOKEN})


def test_git_output_is_scrubbed_of_the_token() -> None:
    text = f"fatal: x {TOKEN} y\n> Authorization: Basic eC1hY2Nlc3M=\n"
    clean = _scrub(text, {"FLEET_GIT_TOKEN": TOKEN})
    assert TOKEN not in clean and "eC1hY2Nlc3M=" not in clean
