from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_check import program_paths, visible_roots
from agent_fleet.hands.cli_formats import own_files
from agent_fleet.hands.cli_setup import setup_files
from agent_fleet.hands.cli_state import CliState, read_own_files, resumed_command


def test_state_round_trips_and_moves_claudes_project_dir(tmp_path: Path) -> None:
    old = "/tmp/sbx-1/work"
    state = CliState(
        "claude",
        "abc",
        old,
        {".claude/projects/-tmp-sbx-1-work/abc.jsonl": '{"type": "user"}\n', "../escape": "x", "notes.txt": "n"},
    )
    again = CliState.from_dict(state.to_dict())
    assert again == state and state.to_dict()["bytes"] == state.size
    new_home = Path("/tmp/sbx-2/work")
    assert again.relocated(new_home) == {
        ".claude/projects/-tmp-sbx-2-work/abc.jsonl": '{"type": "user"}\n',
        "notes.txt": "n",
    }


def test_resumed_command_per_format() -> None:
    claude = CliState("claude", "abc", "/w", {})
    assert resumed_command("claude -p {task}", "claude", claude) == "claude -p {task} --resume abc"
    assert resumed_command("claude {resume} -p {task}", "claude", claude) == "claude --resume abc -p {task}"
    assert resumed_command("claude {resume} -p {task}", "claude", None) == "claude  -p {task}"
    codex = CliState("codex", "t-1", "/w", {})
    assert resumed_command("codex exec --json {task}", "codex", codex) == "codex exec resume t-1 --json {task}"
    aider = CliState("aider", ".aider.chat.history.md", "/w", {})
    assert resumed_command("aider --message {task}", "aider", aider) == "aider --message {task} --restore-chat-history"
    assert resumed_command("my-agent {task}", "jsonl", CliState("jsonl", None, "/w", {})) == "my-agent {task}"


def test_read_own_files_keeps_the_tools_files_only(tmp_path: Path) -> None:
    (tmp_path / ".claude/projects/-w").mkdir(parents=True)
    (tmp_path / ".claude/projects/-w/s.jsonl").write_text("t")
    (tmp_path / "other.txt").write_text("o")
    assert read_own_files("claude", tmp_path) == {".claude/projects/-w/s.jsonl": "t"}
    assert read_own_files("jsonl", tmp_path, ("other.txt", "../x")) == {"other.txt": "o"}


def test_program_paths_follow_the_interpreter_and_find_the_installation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {tmp_path / 'base' / 'bin'}\n")
    python = venv / "bin" / "python"
    python.write_text("")
    tool = venv / "bin" / "tool"
    tool.write_text(f"#!{python}\nprint()\n")
    for p in (python, tool):
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    npm = tmp_path / "npm" / "node_modules" / "pkg" / "bin"
    npm.mkdir(parents=True)
    js = npm / "cli.js"
    js.write_text("#!/usr/bin/env node\n")
    js.chmod(0o755)
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{npm}{os.pathsep}/usr/bin:/bin")
    assert program_paths("FOO=1 tool --flag 'a b'") == [str(tool), str(python)]
    assert visible_roots("tool") == (str(venv), str(tmp_path / "base"))
    assert visible_roots("cli.js run") == (str(tmp_path / "npm" / "node_modules"),)
    assert program_paths("cd x && tool") == []  # shell syntax first: nothing to check
    with pytest.raises(UsageError, match="no-such-agent: command not found"):
        program_paths("no-such-agent -p x")


def test_codex_gets_the_gateway_as_its_only_provider() -> None:
    files = setup_files("codex", openai_base_url="http://127.0.0.1:4100/v1/")
    assert list(files) == [".codex/config.toml"]
    conf = tomllib.loads(files[".codex/config.toml"])
    provider = conf["model_providers"][conf["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:4100/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY" and provider["request_max_retries"] == 0
    assert conf["approval_policy"] == "never" and conf["analytics"]["enabled"] is False
    assert setup_files("claude", openai_base_url="http://x/v1") == {} == setup_files("aider", openai_base_url="x")
    # what a resume keeps is the tool's conversation, not this file
    assert not any(Path(".codex/config.toml").match(g) for g in own_files("codex"))
