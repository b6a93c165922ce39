"""``push_run_branches`` and ``clone_input`` against the token-protected loopback git server, in process:
what is pushed (the run's branches, no other), and each way a remote says no (one line, exit 4, the
branches stay local)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _git_server import GitServer, bare_repo, have_backend

from agent_fleet.engine.remotes import clone_input, parse_remote_input, push_run_branches
from agent_fleet.errors import GitRemoteError, InputError

pytestmark = pytest.mark.skipif(not have_backend(), reason="git http-backend is not installed")

TOKEN = "fgt-push-" + "0123456789abcdef" * 2
RUN = "run-0123456789ab012345"


def heads(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "for-each-ref", "--format=%(refname:short)", "refs/heads/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(out.split())


def test_the_runs_branches_and_no_other_are_pushed_and_a_refusal_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = tmp_path / "served"
    bare_repo(served, "proj", {"a.py": "A = 1\n"})
    monkeypatch.setenv("FLEET_GIT_TOKEN", TOKEN)
    with GitServer(served, TOKEN) as server:
        remote = parse_remote_input(f"{server.url}/proj.git#main")
        assert remote is not None
        clone = clone_input(remote, tmp_path / "cache")
        assert clone_input(remote, tmp_path / "cache") == clone  # the second time: a fetch into the same clone
        for name in (f"fleet/{RUN}/p00000", f"fleet/{RUN}/p00001", "fleet/run-0123456789ab0123456", "mine"):
            subprocess.run(["git", "-C", str(clone), "branch", name], check=True)
        server.refuse_push = True
        with pytest.raises(GitRemoteError, match="403") as refused:
            push_run_branches(clone, "origin", RUN)
        assert "\n" not in str(refused.value) and refused.value.exit_code == 4
        assert heads(served / "proj.git") == ["main"]
        server.refuse_push = False
        pushed = push_run_branches(clone, "origin", RUN)
        assert pushed == [f"fleet/{RUN}/p00000", f"fleet/{RUN}/p00001"]
        assert heads(served / "proj.git") == sorted(["main", *pushed])
        assert all(r["authorized"] for r in server.requests)
        with pytest.raises(InputError, match="no branch, tag or commit 'gone'"):
            clone_input(parse_remote_input(f"{server.url}/proj.git#gone"), tmp_path / "cache")  # type: ignore[arg-type]
        monkeypatch.delenv("FLEET_GIT_TOKEN")
        with pytest.raises(GitRemoteError, match="refused the credential"):
            clone_input(parse_remote_input(f"{server.url}/proj.git"), tmp_path / "other")  # type: ignore[arg-type]
    assert [p.name for p in (tmp_path / "other").iterdir() if p.is_dir()] == []  # no half clone in the cache
    assert TOKEN not in (clone / ".git" / "config").read_text()
