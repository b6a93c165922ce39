"""One check in a real sandbox (bubblewrap when present): the base plus that one change, the input's
directory as working directory, the sandbox's scrubbed environment; passed / failed / timeout by the
command's own exit, and a change that does not apply is a failed check saying why."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _hands_support import MODES, make_provider, sandbox_root

from agent_fleet.hands.check_sandbox import CheckSpec, run_check

SECRET = "sk-check-" + "5a5a" * 8


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, bytes]:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    patch = _git(repo, "diff", "--binary").encode()
    _git(repo, "checkout", "-q", "--", ".")
    return repo, base, patch


CHECK = 'pwd; test -z "$OPENAI_API_KEY$FLEET_GIT_TOKEN" && python3 -c "import calc; assert calc.add(2, 2) == 4"'


@pytest.mark.parametrize("mode", MODES)
async def test_a_check_sees_the_base_plus_its_change_from_the_inputs_directory(
    mode: str, repo: tuple[Path, str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "plain" and os.geteuid() != 0:
        pytest.skip("without bubblewrap a non-root engine shares its user with the sandbox")
    top, base, patch = repo
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("FLEET_GIT_TOKEN", SECRET)
    with sandbox_root() as root:
        provider = make_provider(mode, root)
        spec = CheckSpec(command=CHECK, repo=top, base=base, subdir="pkg", timeout=60)
        fixed = await run_check(provider, spec, name="s1", patch=patch)
        unfixed = await run_check(provider, spec, name="s2", patch=b"")  # the base alone fails the same check
        sleeper = CheckSpec(command="sleep 30", repo=top, base=base, timeout=0.5)
        slow = await run_check(provider, sleeper, name="s3", patch=patch)
        broken = patch.replace(b"return a - b", b"return a * b")  # a context the base does not have
        refused = await run_check(provider, spec, name="s4", patch=broken)
        assert not any(root.rglob("calc.py"))  # every check's sandbox is gone
    assert fixed.outcome == "passed" and fixed.exit_code == 0, fixed.output_tail
    assert fixed.output_tail.splitlines()[0].endswith("/pkg")
    assert unfixed.outcome == "failed" and "AssertionError" in unfixed.output_tail
    assert slow.outcome == "timeout" and slow.duration_s < 10
    assert refused.outcome == "failed" and "does not apply" in refused.output_tail
    assert _git(top, "status", "--porcelain") == "" and _git(top, "rev-parse", "HEAD").strip() == base
