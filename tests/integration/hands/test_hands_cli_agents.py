from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from _hands_support import git_repo, have_bwrap, owner_pids, sandbox_root
from _stub_gateway import StubGateway, stub_gateway

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_agents import CliAgentSpec, CommandAgent, GatewayAccess
from agent_fleet.hands.cli_check import check_agent_command
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.testing.cli_standins import standin_command

pytestmark = pytest.mark.skipif(
    not have_bwrap() and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody, who cannot run this Python",
)

ITEMS = ("https://example.org/a", "https://example.org/b", "https://example.org/c")


@pytest.fixture
def provider() -> Iterator[LocalSandboxProvider]:
    with sandbox_root() as root:
        yield LocalSandboxProvider(SandboxConfig(root=root))


def partition(kind: InputKind = InputKind.LIST, items: tuple[str, ...] = ITEMS) -> Partition:
    return Partition(id="p0003", index=3, kind=kind, items=items, item_ids=tuple(range(len(items))), est_tokens=100)


def access(gw: StubGateway) -> GatewayAccess:
    return GatewayAccess(openai_base_url=f"{gw.url}/v1", anthropic_base_url=gw.url, token="gw-" + secrets.token_hex(8))


@pytest.mark.parametrize(
    ("fmt", "price"),
    [("claude", (3.0, 15.0)), ("codex", None), ("aider", (2.5, 10.0)), ("jsonl", None)],
)
async def test_standins_report_items_usage_and_cost(
    fmt: str, price: tuple[float, float] | None, provider: LocalSandboxProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-never-in-sandbox")
    async with stub_gateway() as gw:
        gate = access(gw)
        out = await CommandAgent(
            CliAgentSpec(command=standin_command(fmt, "--calls 2"), format=fmt, timeout=60), provider
        ).run(
            session_id="run-x.s00003",
            partition=partition(),
            task="Review these pages for broken links",
            gateway=gate,
        )
    assert out.ok, (out.error, out.stderr_tail)
    assert [i.location for i in out.items] == list(ITEMS)
    assert all(i.session_id == "run-x.s00003" and i.partition_id == "p0003" for i in out.items)
    assert gw.seen_keys == {gate.token}  # only the session's own token reached the model endpoint
    assert gw.calls[gate.token] == 2
    if fmt == "jsonl":
        assert out.usage.total_tokens == 0  # the generic format reports no usage; the gateway meters it
    else:
        assert out.usage.total_tokens == gw.used[gate.token]
    if price is None:
        assert out.cost_usd is None
    else:
        expected = (out.usage.input_tokens * price[0] + out.usage.output_tokens * price[1]) / 1e6
        assert out.cost_usd is not None and abs(out.cost_usd - Decimal(str(expected))) < Decimal("1e-9")


async def test_hanging_cli_is_killed_at_its_hard_timeout(provider: LocalSandboxProvider) -> None:
    async with stub_gateway() as gw:
        out = await CommandAgent(
            CliAgentSpec(command=standin_command("codex", "--hang"), format="codex", timeout=20), provider
        ).run(
            session_id="s-hang",
            partition=partition(),
            task="t",
            gateway=access(gw),
        )
    assert out.timed_out and not out.ok and out.error is not None and "timed out" in out.error
    assert out.usage.total_tokens > 0  # what it reported before hanging is kept
    assert owner_pids(provider.owner) == []
    assert os.listdir(provider.root) == []


async def test_crashing_cli_fails_its_session(provider: LocalSandboxProvider) -> None:
    async with stub_gateway() as gw:
        out = await CommandAgent(
            CliAgentSpec(command=standin_command("jsonl", "--crash"), format="jsonl", timeout=60), provider
        ).run(
            session_id="s-crash",
            partition=partition(),
            task="t",
            gateway=access(gw),
        )
    assert not out.ok and out.items == ()
    assert out.killed or out.exit_code == 137


async def test_budget_stops_a_cli_agent(provider: LocalSandboxProvider) -> None:
    async with stub_gateway() as gw:
        gate = access(gw)
        gw.budgets[gate.token] = 1  # the first call spends it
        out = await CommandAgent(
            CliAgentSpec(command=standin_command("codex", "--calls 5"), format="codex", timeout=60), provider
        ).run(
            session_id="s-budget",
            partition=partition(),
            task="t",
            gateway=gate,
        )
    assert gw.calls[gate.token] == 1 and gw.refused[gate.token] == 1
    assert not out.ok and out.error == "exited with code 1: RateLimitError"
    assert out.usage.total_tokens == gw.used[gate.token]


async def test_directory_partition_runs_in_a_worktree_with_its_partition_file(
    provider: LocalSandboxProvider, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "alpha\n", "b.py": "beta\n"})
    cmd = (
        'for f in $(cat {partition}); do printf \'{"title": "%s", "body": "%s", "location": "%s"}\\n\' '
        '"$(cat $f)" "$FLEET_TASK" "$f"; done; echo "session $FLEET_SESSION_ID"'
    )
    async with stub_gateway() as gw:
        out = await CommandAgent(CliAgentSpec(command=cmd, timeout=30), provider, repo).run(
            session_id="s-dir",
            partition=partition(InputKind.DIRECTORY, ("b.py",)),
            task="check",
            gateway=access(gw),
        )
    assert out.ok, out.stderr_tail
    assert [(i.title, i.body, i.location) for i in out.items] == [("beta", "check", "b.py")]


async def test_a_command_that_cannot_start_fails_with_its_stderr(
    provider: LocalSandboxProvider, tmp_path: Path
) -> None:
    async with stub_gateway() as gw:
        out = await CommandAgent(
            CliAgentSpec(command="/nonexistent/agent --go", format="jsonl", timeout=30), provider
        ).run(
            session_id="s-nostart",
            partition=partition(),
            task="t",
            gateway=access(gw),
        )
    assert out.exit_code == 127 and out.error is not None
    assert out.error.startswith("exited with code 127; stderr: ") and "/nonexistent/agent" in out.error


async def test_the_pre_run_check_names_a_program_the_sandbox_cannot_start(
    provider: LocalSandboxProvider, tmp_path: Path
) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/nonexistent/python3\nprint('x')\n")
    script.chmod(0o755)
    # the sandbox shows neither this directory nor the interpreter: the check names the first it misses
    with pytest.raises(UsageError, match=rf"cannot start inside the sandbox: {re.escape(str(script))}: not found"):
        await check_agent_command(f"{script} -p x", provider, ResourceSpec())
    await check_agent_command("/bin/true", provider, ResourceSpec())  # a system program is fine
