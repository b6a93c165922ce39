from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hands_support import MODES, git_repo, make_provider, marked_pids, sandbox_root, worktrees

from agent_fleet.clock import VirtualClock
from agent_fleet.hands import isolation
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LazySandbox, SandboxError, SandboxState
from agent_fleet.hands.shell import SandboxHands


@pytest.fixture
def root() -> Iterator[Path]:
    with sandbox_root() as r:
        yield r


@pytest.mark.parametrize("mode", MODES)
async def test_environment_is_scrubbed(mode: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-scrub-0123456789")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-0123456789")
    monkeypatch.setenv("SOME_SETTING", "harmless")
    box = await make_provider(mode, root).provision(ResourceSpec(), session_id="s-env")
    try:
        run = await box.run("env", env_extra={"FLEET_TASK": "find bugs"})
        names = {line.split("=", 1)[0] for line in run.stdout.splitlines()}
        assert run.ok
        assert "FLEET_TASK" in names and "PATH" in names and "FLEET_SANDBOX_ID" in names
        assert not {"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "SOME_SETTING"} & names
        assert "sk-test-scrub" not in run.stdout
        with pytest.raises(SandboxError, match="credential"):
            await box.run("true", env_extra={"ANY_NAME": "sk-test-scrub-0123456789"})
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_timeout_kills_the_whole_process_group(mode: str, root: Path) -> None:
    box = await make_provider(mode, root).provision(ResourceSpec(), session_id="s-timeout")
    try:
        run = await box.run("sleep 60 & sleep 60 & echo started; wait", timeout=1.0)
        assert run.timed_out and not run.ok and run.exit_code is None
        assert run.stdout.strip() == "started"
        assert 0.9 < run.duration < 5.0
        assert marked_pids(box.sandbox_id) == []
        run = await box.run("sleep 60 & echo left-behind", timeout=10.0)  # exits at once
        assert run.ok and run.duration < 5.0
        assert marked_pids(box.sandbox_id) == []  # its background child went with it
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_stdin_is_fed_and_an_ignored_stdin_does_not_hang(mode: str, root: Path) -> None:
    box = await make_provider(mode, root).provision(ResourceSpec(), session_id="s-stdin")
    try:
        run = await box.run("tr a-z A-Z", stdin=b"hello sandbox")
        assert run.ok and run.stdout == "HELLO SANDBOX"
        run = await box.run("echo ignored", stdin=b"x" * 5_000_000, timeout=10)
        assert run.ok and run.stdout == "ignored\n" and run.duration < 5
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_output_is_capped(mode: str, root: Path) -> None:
    spec = ResourceSpec(max_output_bytes=1000)
    box = await make_provider(mode, root).provision(spec, session_id="s-out")
    try:
        run = await box.run("yes | head -c 100000; echo done >&2")
        assert len(run.stdout) == 1000 and run.truncated
        assert run.stderr == "done\n" and run.ok
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_memory_cpu_and_file_limits(mode: str, root: Path) -> None:
    spec = ResourceSpec.of({"cpu": "250m", "memory": "64Mi"}, {"cpu": "500m", "memory": "128Mi"})
    spec = ResourceSpec(requests=spec.requests, limits=spec.limits, max_file_bytes=2**20)
    box = await make_provider(mode, root).provision(spec, session_id="s-limits")
    try:
        small = await box.run('awk \'BEGIN{s=sprintf("%*s", 16000000, ""); print length(s)}\'')
        assert small.ok and small.stdout.strip() == "16000000"
        big = await box.run('awk \'BEGIN{s=sprintf("%*s", 300000000, ""); print length(s)}\'')
        assert not big.ok and "16000000" not in big.stdout
        fsize = await box.run("head -c 3000000 /dev/zero > big; wc -c < big")
        assert fsize.stdout.strip() == str(2**20)
    finally:
        await box.aclose()
    # cpu: 0.05 core over a 20 s wall clock is 1 s of cpu time; a busy loop hits it long before
    # 20 s, even on a machine so loaded that the loop gets a twentieth of a core
    slow = ResourceSpec.of({"cpu": "25m"}, {"cpu": "50m"})
    assert slow.cpu_seconds(20.0) == 1
    box = await make_provider(mode, root).provision(slow, session_id="s-cpu")
    try:
        cpu = await box.run("while :; do :; done", timeout=20.0)
        assert cpu.killed and cpu.signal == signal.SIGXCPU and not cpu.timed_out
        assert cpu.duration < 20.0
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_git_input_gets_a_worktree_removed_on_close(mode: str, root: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "print(1)\n", "pkg/b.py": "x = 2\n"})
    box = await make_provider(mode, root).provision(ResourceSpec(), session_id="s-git", source=repo)
    assert len(worktrees(repo)) == 2
    run = await box.run("cat a.py pkg/b.py; echo new > c.txt")
    assert run.ok and run.stdout == "print(1)\nx = 2\n"
    assert (box.workdir / "c.txt").exists() and not (repo / "c.txt").exists()
    await box.aclose()
    await box.aclose()  # twice is fine
    assert worktrees(repo) == [str(repo.resolve())]
    assert not box.workspace.base.exists()


@pytest.mark.parametrize("mode", MODES)
async def test_plain_input_copies_only_the_partition(mode: str, root: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for rel in ("a.txt", "b.txt", "sub/c.txt"):
        (src / rel).write_text(rel)
    (tmp_path / "outside.txt").write_text("no")
    box = await make_provider(mode, root).provision(
        ResourceSpec(), session_id="s-copy", source=src, items=("a.txt", "sub/c.txt", "../outside.txt")
    )
    try:
        run = await box.run("find . -type f | sort")
        assert run.stdout.split() == ["./a.txt", "./sub/c.txt"]
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_dead_sandbox_is_a_retryable_tool_error(mode: str, root: Path) -> None:
    lazy = LazySandbox(make_provider(mode, root), ResourceSpec(), session_id="s-dead")
    hands = SandboxHands(lazy)
    assert lazy.provisioned == 0 and lazy.current is None  # nothing until a tool needs it
    assert [s.name for s in hands.specs()] == ["run_command"]
    try:
        first = await hands.execute("run_command", {"command": "echo hello"})
        assert not first.is_error and first.output.startswith("hello") and lazy.provisioned == 1
        box = lazy.current
        assert box is not None

        async def kill_when_running() -> None:
            while not marked_pids(box.sandbox_id):
                await asyncio.sleep(0.02)
            for pid in marked_pids(box.sandbox_id):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # the sandbox dies mid-tool-call

        async with asyncio.TaskGroup() as tg:
            tg.create_task(kill_when_running())
            call = tg.create_task(hands.execute("run_command", {"command": "sleep 30; echo never"}))
        out = call.result()
        assert out.is_error and "killed by signal 9" in out.output and "retry" in out.output
        again = await hands.execute("run_command", {"command": "echo again"})
        assert not again.is_error and again.output.startswith("again")
        # the workspace vanishing makes the sandbox dead: the next call gets a fresh one
        import shutil

        shutil.rmtree(box.workdir)
        assert box.state is SandboxState.DEAD
        with pytest.raises(SandboxError):
            await box.run("true")
        fresh = await hands.execute("run_command", {"command": "echo fresh"})
        assert not fresh.is_error and lazy.provisioned == 2
        bad = await hands.execute("run_command", {"command": ""})
        assert bad.is_error
    finally:
        await hands.aclose()
    assert lazy.current is None
    assert os.listdir(root) == []


async def test_bwrap_hides_host_files_and_network(root: Path, tmp_path: Path) -> None:
    provider = make_provider("bwrap", root)
    secret = tmp_path / "host-only.txt"
    secret.write_text("host")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        closed = await provider.provision(ResourceSpec(), session_id="s-iso")
        opened = await provider.provision(ResourceSpec(), session_id="s-net", allow_network=True)
        try:
            run = await closed.run(f"cat {secret}; touch /usr/x; ls /root /home 2>&1 | wc -l")
            assert "host" not in run.stdout
            assert "Read-only" in run.stderr or "Permission" in run.stderr
            assert (await closed.run([sys.executable, "-c", probe])).ok is False
            net = await opened.run([sys.executable, "-c", probe])
            assert net.ok and net.stdout.strip() == "connected"
        finally:
            await closed.aclose()
            await opened.aclose()


async def test_plain_mode_drops_root_to_nobody(root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root drops privileges")
    box = await make_provider("plain", root).provision(ResourceSpec(), session_id="s-uid")
    try:
        run = await box.run("id -u; touch mine && echo wrote")
        assert run.stdout.split() == ["65534", "wrote"]
    finally:
        await box.aclose()


SHIMS = {"util-linux": isolation.exec_shim(), "python": isolation.ExecShim()}


def _limit(limits: str, name: str) -> list[str]:
    line = next(row for row in limits.splitlines() if row.startswith(name))
    return line[len(name) :].split()[:2]


@pytest.mark.parametrize("shim", sorted(SHIMS))
@pytest.mark.parametrize("mode", MODES)
async def test_the_exec_shim_applies_every_limit(mode: str, shim: str, root: Path) -> None:
    if shim == "util-linux" and SHIMS[shim].kind != "util-linux":
        pytest.skip("setpriv/prlimit are not usable here")
    provider = make_provider(mode, root)
    provider.shim = SHIMS[shim]
    spec = ResourceSpec.of({"cpu": "250m", "memory": "64Mi"}, {"cpu": "500m", "memory": "128Mi"})
    spec = ResourceSpec(requests=spec.requests, limits=spec.limits, max_file_bytes=2**20, max_processes=77)
    box = await provider.provision(spec, session_id="s-shim")
    try:
        run = await box.run("cat /proc/self/limits", timeout=8.0)
        assert run.ok, run.stderr
        cpu = spec.cpu_seconds(8.0)
        assert _limit(run.stdout, "Max cpu time") == [str(cpu), str(cpu + 1)]
        assert _limit(run.stdout, "Max address space") == [str(128 * 2**20)] * 2
        assert _limit(run.stdout, "Max file size") == [str(2**20)] * 2
        assert _limit(run.stdout, "Max core file size") == ["0", "0"]
        if mode == "plain" or os.geteuid() != 0:
            assert _limit(run.stdout, "Max processes") == ["77", "77"]
        if mode == "plain":  # bwrap reports a missing command itself
            missing = await box.run(["no-such-command-here"])
            assert missing.exit_code == 127 and "cannot start the command" in missing.stderr
    finally:
        await box.aclose()


@pytest.mark.parametrize("shim", sorted(SHIMS))
async def test_plain_mode_drops_uid_gid_and_groups(shim: str, root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root drops privileges")
    if shim == "util-linux" and SHIMS[shim].kind != "util-linux":
        pytest.skip("setpriv/prlimit are not usable here")
    provider = make_provider("plain", root)
    provider.shim = SHIMS[shim]
    box = await provider.provision(ResourceSpec(), session_id="s-ids")
    try:
        run = await box.run("id -u; id -g; id -G")
        assert run.stdout.split() == ["65534", "65534", "65534"]
    finally:
        await box.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_the_wall_timeout_runs_on_the_injected_clock(mode: str, root: Path) -> None:
    """On a virtual clock that jumps whenever everything waits, a 30 s timeout ends a sleeping
    command at once, at exactly 30 virtual seconds."""
    clock = VirtualClock(start=1000.0)
    provider = make_provider(mode, root)
    provider.clock = clock
    box = await provider.provision(ResourceSpec(), session_id="s-vclock")
    try:
        async with clock.auto_advance():
            run = await box.run("sleep 60", timeout=30.0)
        assert run.timed_out and run.duration == 30.0 and clock.now() == 1030.0
        assert marked_pids(box.sandbox_id) == []
    finally:
        await box.aclose()
