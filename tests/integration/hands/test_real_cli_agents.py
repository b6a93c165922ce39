"""The real coding CLIs as fleet members: Claude Code, Codex CLI and aider through the run's gateway service.

Each test runs ``agent-fleet deploy --agent-cmd`` with the real program (installed by
``.ci/install-agent-clis``; found through ``FLEET_TEST_CLAUDE`` / ``FLEET_TEST_CODEX`` /
``FLEET_TEST_AIDER`` or at their place in ``.ci-tools/``) against the simulated provider, which
answers them as ``agent_fleet.sim.coding`` describes. Metering must equal the simulated
provider's own bill, every finding must arrive as its own result, a session paused on budget must be
continued on resume (its first request after the raise carries the turns it had before), and a
refused credential must fail the attempt even where the tool exits 0.

Without the programs installed the tests skip, unless ``FLEET_REQUIRE_REAL_CLIS=1`` (``.ci/run`` sets
it), where a missing program fails. ``FLEET_REAL_CLI_AGENTS=N`` sets the Claude Code fleet size
(default 3; the figures in the report come from ``FLEET_REAL_CLI_AGENTS=50``); the Codex and aider
fleets have ten agents at least.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _hands_support import have_bwrap
from aiohttp import ClientSession, web

from agent_fleet.domain.events import EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.model import ChatResponse
from agent_fleet.session import open_store
from agent_fleet.sim.detectors import detect
from agent_fleet.sim.provider import SimConfig, sim_provider_process

REPO = Path(__file__).resolve().parents[3]
KEY = "sk-real-cli-" + "5d2a" * 6
AGENTS = int(os.environ.get("FLEET_REAL_CLI_AGENTS", "3"))
REQUIRED = os.environ.get("FLEET_REQUIRE_REAL_CLIS") == "1"
TEN = max(AGENTS, 10)  # the Codex and aider fleets: ten agents at least


def program(env: str, default: str) -> str:
    path = os.environ.get(env) or str(REPO / ".ci-tools" / default)
    if not os.access(path, os.X_OK):
        msg = f"{path} is not installed (bash .ci/install-agent-clis installs it)"
        if REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)
    if not have_bwrap() and os.geteuid() == 0:
        msg = "without bubblewrap, root drops sandboxes to nobody, who cannot enter this checkout"
        if REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)
    return path


# Each session's files: every one holds findings the simulated model's detectors report.
SNIPPET = (
    "import hashlib\n\n"
    "DB_PASSWORD = 'hunter2-{i}'\n\n\n"
    "def load_{i}(text, seen=[]):\n"
    "    try:\n"
    "        return eval(text)\n"
    "    except:\n"
    "        pass\n\n\n"
    "def digest_{i}(data):\n"
    "    return hashlib.md5(data).hexdigest()\n"
)


def make_repo(root: Path, files: int, padding: int = 40) -> dict[str, str]:
    out = {}
    for i in range(files):
        rel = f"pkg/mod_{i:03d}.py"
        out[rel] = SNIPPET.format(i=i) + "# padding line\n" * padding
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(out[rel])
    return out


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-real-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        yield url


def sim(url: str, path: str, *, post: bool = False) -> dict[str, Any]:
    req = urllib.request.Request(url.removesuffix("/v1") + path, method="POST" if post else "GET")
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


def cli(*args: str, cwd: Path, url: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{cwd / 'fleet.db'}")
    return subprocess.run(
        [sys.executable, "-m", "agent_fleet.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def deploy(
    workdir: Path,
    url: str,
    cmd: str,
    fmt: str,
    *extra: str,
    agents: int = AGENTS,
    config_extra: str = "",
    codes: tuple[int, ...] = (0, 3),
) -> dict[str, Any]:
    config = workdir / "fleet.yaml"
    config.write_text(
        f"hands: {{sandbox_root: {workdir / 'sandboxes'}}}\ndispatch: {{workers: {agents + 2}}}\n{config_extra}"
    )
    proc = cli(
        "deploy",
        "--task",
        "Review these files for bugs.",
        "--input",
        str(workdir / "repo"),
        "--agents",
        str(agents),
        "--config",
        str(config),
        "--agent-cmd",
        cmd,
        "--agent-format",
        fmt,
        "--embedder",
        "lexical",
        "--json",
        *extra,
        cwd=workdir,
        url=url,
    )
    assert proc.returncode in codes, proc.stderr[-3000:]
    assert KEY not in proc.stdout + proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout)
    summary["exit_code"] = proc.returncode
    return summary


async def session_events(workdir: Path, run_id: str) -> dict[str, list[Any]]:
    async with open_store(f"sqlite:///{workdir / 'fleet.db'}") as log:
        events = await log.events_of_run(run_id)
    out: dict[str, list[Any]] = {}
    for e in events:
        if ".s" in e.session_id:
            out.setdefault(e.session_id, []).append(e)
    return out


def expected_findings(files: dict[str, str]) -> set[tuple[str, str]]:
    return {(f.title, f.location) for path, text in files.items() for f in detect(path, text)}


CLAUDE_PROMPT = "\"$(printf '%s\\nFiles:\\n' {task}; sed 's/^/- /' {partition})\""


def test_claude_code_fleet_completes_and_metering_equals_the_bill(workdir: Path, sim_url: str) -> None:
    claude = program("FLEET_TEST_CLAUDE", "npm/node_modules/.bin/claude")
    files = make_repo(workdir / "repo", 4 * AGENTS)
    sim(sim_url, "/sim/reset", post=True)
    summary = deploy(
        workdir, sim_url, f"{claude} -p {CLAUDE_PROMPT} --output-format json", "claude", "--budget-tokens", "10000000"
    )
    bill = sim(sim_url, "/sim/stats")
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == AGENTS
    assert (summary["tokens"]["input"], summary["tokens"]["output"]) == (bill["tokens_in"], bill["tokens_out"])
    results = [json.loads(line) for line in (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()]
    raw = asyncio.run(session_events(workdir, summary["run_id"]))
    items = [e.data for evs in raw.values() for e in evs if e.type == EventType.RESULT_ITEM]
    # every finding the model reported through ReportFindings is one result, at its file and line
    assert {(i["title"][:60], i["location"]) for i in items} == {(t[:60], loc) for t, loc in expected_findings(files)}
    assert summary["results_raw"] == len(items) and 0 < len(results) <= len(items)
    for evs in raw.values():
        done = [e.data for e in evs if e.type == EventType.SESSION_COMPLETED]
        assert len(done) == 1 and done[0]["cli_session_id"]  # Claude Code's own session id


def test_claude_code_at_the_default_budget(workdir: Path, sim_url: str) -> None:
    claude = program("FLEET_TEST_CLAUDE", "npm/node_modules/.bin/claude")
    make_repo(workdir / "repo", 2 * AGENTS)
    summary = deploy(workdir, sim_url, f"{claude} -p {CLAUDE_PROMPT} --output-format json", "claude")
    assert summary["status"] == "completed", summary["sessions"]


class Recorder:
    """Sits between the gateway and the simulated provider and keeps each request's messages."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removesuffix("/v1")
        self.bodies: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.method == "POST" and request.path.endswith(("/messages", "/chat/completions", "/responses")):
            self.bodies.append(json.loads(body))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with (
            ClientSession() as s,
            s.request(request.method, self.upstream + request.path_qs, data=body, headers=headers) as r,
        ):
            data = await r.read()
            kept = {k: v for k, v in r.headers.items() if k.lower().startswith(("content-type", "x-", "retry"))}
            return web.Response(status=r.status, body=data, headers=kept)


@asynccontextmanager
async def recorder(upstream: str) -> AsyncIterator[tuple[Recorder, str]]:
    rec = Recorder(upstream)
    app = web.Application(client_max_size=2**26)
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield rec, f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def calls_of(evs: list[Any]) -> list[int]:
    return [
        ChatResponse.from_dict(e.data["response"]).usage.total_tokens for e in evs if e.type == EventType.MODEL_RESPONSE
    ]


def paused_then_resumed(
    workdir: Path, sim_url: str, cmd: str, fmt: str, *, budget: int, agents: int, config_extra: str = ""
) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """Deploy until every session pauses on ``budget``, raise it, resume: (each session's events, the
    request bodies that reached the provider after the raise). Checks the bound and the continuation."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        async with recorder(sim_url) as (rec, url):
            first = await asyncio.to_thread(
                deploy, workdir, url, cmd, fmt, "--budget-tokens", str(budget), agents=agents, config_extra=config_extra
            )
            before = len(rec.bodies)
            run_id = first["run_id"]
            raised = await asyncio.to_thread(
                cli, "budget", "raise", run_id, "--tokens", "10000000", cwd=workdir, url=url
            )
            assert raised.returncode == 0, raised.stderr
            again = await asyncio.to_thread(cli, "resume", run_id, "--json", cwd=workdir, url=url)
            assert again.returncode == 0, again.stderr[-3000:]
            return first, json.loads(again.stdout), rec.bodies[before:]

    first, second, after = asyncio.run(scenario())
    assert first["exit_code"] == 3 and first["sessions"]["paused"] == agents, first["sessions"]
    raw = asyncio.run(session_events(workdir, first["run_id"]))
    for sid in (session_id_for(first["run_id"], i) for i in range(agents)):
        evs = raw[sid]
        paused_at = next(n for n, e in enumerate(evs) if e.type == EventType.SESSION_PAUSED)
        spent = calls_of(evs[:paused_at])
        # within the bound: every call but the last was admitted below the cap
        assert spent and sum(spent[:-1]) < budget < sum(spent), spent
        state = [e.data for e in evs[:paused_at] if e.type == EventType.CLI_STATE]
        assert state and state[-1]["cli_session_id"]
        done = next(e.data for e in evs if e.type == EventType.SESSION_COMPLETED)
        assert done["continued"] and done["cli_session_id"] == state[-1]["cli_session_id"]
    assert second["status"] == "completed" and second["sessions"]["completed"] == agents
    return raw, after


def first_request_of(evs: list[Any], bodies: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The first of ``bodies`` whose conversation (``key``) lists this session's partition."""
    listed = "- " + evs[0].data["partition"]["items"][0] + "\n"  # its partition, in its task
    return next(b for b in bodies if listed in json.dumps(b[key]).replace("\\n", "\n"))


def test_claude_code_paused_on_budget_is_continued_on_resume(workdir: Path, sim_url: str) -> None:
    claude = program("FLEET_TEST_CLAUDE", "npm/node_modules/.bin/claude")
    # Claude Code's first call (its prompt and the partition) takes about 12,600 tokens, the second
    # (with the 10 files it read) about 20,100: the work needs more than the budget, and the call that
    # crosses it is the second
    make_repo(workdir / "repo", 10 * AGENTS)
    cmd = f"{claude} -p {CLAUDE_PROMPT} --output-format json"
    raw, after = paused_then_resumed(workdir, sim_url, cmd, "claude", budget=20_000, agents=AGENTS)
    # the first request of each session after the raise carries the turns it had before the pause
    for evs in raw.values():
        roles = [m["role"] for m in first_request_of(evs, after, "messages")["messages"]]
        assert "assistant" in roles and roles.count("user") >= 2, roles


def test_codex_paused_on_budget_is_continued_on_resume(workdir: Path, sim_url: str) -> None:
    codex = program("FLEET_TEST_CODEX", "npm/node_modules/.bin/codex")
    # Codex's first call takes about 10,000 tokens, the second (with 25 of its 30 small files read)
    # about 13,000: the second crosses the budget, and the third is refused (a partition of 30 files
    # still fits the quarter of the budget the planner sizes partitions to)
    make_repo(workdir / "repo", 30 * 2, padding=5)
    cmd = CODEX_CMD.replace("{codex}", codex)
    raw, after = paused_then_resumed(
        workdir, sim_url, cmd, "codex", budget=20_000, agents=2, config_extra=NATIVE_RESPONSES
    )
    for evs in raw.values():
        items = first_request_of(evs, after, "input")["input"]
        kinds = [i.get("type") for i in items]
        # `codex exec resume` sent the 25 reads and their outputs from before the pause
        assert kinds.count("function_call") >= 25 and kinds.count("function_call_output") >= 25, kinds


def test_aider_fleet_distinct_findings_are_distinct_results(workdir: Path, sim_url: str) -> None:
    aider = program("FLEET_TEST_AIDER", "aider/bin/aider")
    agents = TEN
    files = make_repo(workdir / "repo", 3 * agents)
    sim(sim_url, "/sim/reset", post=True)
    summary = deploy(
        workdir, sim_url, AIDER_CMD.replace("{aider}", aider), "aider", "--budget-tokens", "10000000", agents=agents
    )
    bill = sim(sim_url, "/sim/stats")
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == agents
    assert (summary["tokens"]["input"], summary["tokens"]["output"]) == (bill["tokens_in"], bill["tokens_out"])
    raw = asyncio.run(session_events(workdir, summary["run_id"]))
    items = [e.data for evs in raw.values() for e in evs if e.type == EventType.RESULT_ITEM]
    assert {(i["title"], i["location"]) for i in items} == expected_findings(files)
    assert len(items) == len(expected_findings(files)) > agents  # not one result per session


# Four files, two findings each, no two of one kind: eight distinct findings, one file per session.
EIGHT = (
    "DB_PASSWORD = 'hunter2-{i}'\n\n\ndef load(text):\n    return eval(text)\n",
    "def keep(item, seen=[]):\n    try:\n        seen.append(item)\n    except:\n        pass\n",
    "import pickle\nimport yaml\n\n\ndef read(raw, doc):\n    return pickle.loads(raw), yaml.load(doc)\n",
    "import os\nfrom json import *\n\n\ndef run(cmd):\n    os.system(cmd)\n",
)


def make_eight(root: Path) -> dict[str, str]:
    out = {}
    for i, text in enumerate(EIGHT):
        rel = f"pkg/part_{i}/mod.py"
        out[rel] = text.format(i=i)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(out[rel])
    assert len(expected_findings(out)) == 8 and len({t for t, _ in expected_findings(out)}) == 8
    return out


def eight_findings_are_eight_results(workdir: Path, sim_url: str, cmd: str, fmt: str) -> None:
    """4 sessions whose model answers in markdown, 8 findings between them: 8 results, each at its place."""
    files = make_eight(workdir / "repo")
    summary = deploy(workdir, sim_url, cmd, fmt, "--budget-tokens", "10000000", agents=4)
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == 4, summary["sessions"]
    raw = asyncio.run(session_events(workdir, summary["run_id"]))
    items = [e.data for evs in raw.values() for e in evs if e.type == EventType.RESULT_ITEM]
    assert len(raw) == 4 and all(sum(e.type == EventType.RESULT_ITEM for e in evs) == 2 for evs in raw.values())
    assert {(i["title"], i["location"]) for i in items} == expected_findings(files)
    assert summary["results_raw"] == 8 and summary["results_unique"] == 8


def test_aider_fleet_eight_findings_in_markdown_are_eight_results(workdir: Path, sim_url: str) -> None:
    aider = program("FLEET_TEST_AIDER", "aider/bin/aider")
    eight_findings_are_eight_results(workdir, sim_url, AIDER_CMD.replace("{aider}", aider), "aider")


def test_claude_code_review_in_markdown_is_one_result_per_finding(workdir: Path, sim_url: str) -> None:
    claude = program("FLEET_TEST_CLAUDE", "npm/node_modules/.bin/claude")
    # without its findings tool, Claude Code's model writes its review as markdown, a heading per finding
    cmd = f"{claude} -p {CLAUDE_PROMPT} --output-format json --disallowedTools ReportFindings"
    eight_findings_are_eight_results(workdir, sim_url, cmd, "claude")


CODEX_CMD = "{codex} exec --json --skip-git-repo-check -m gpt-4.1-mini " + CLAUDE_PROMPT
# The gateway passes Codex's Responses requests through to an endpoint that serves them, and
# translates them to chat completions for one that does not; the simulated provider serves both.
NATIVE_RESPONSES = "models: [{name: codex, provider: openai, model: gpt-4.1-mini, responses_api: true}]\n"


@pytest.mark.parametrize("route", ["native", "translated"])
def test_codex_fleet_completes_and_metering_equals_the_bill(workdir: Path, sim_url: str, route: str) -> None:
    codex = program("FLEET_TEST_CODEX", "npm/node_modules/.bin/codex")
    agents = TEN if route == "native" else 2
    files = make_repo(workdir / "repo", 3 * agents)
    sim(sim_url, "/sim/reset", post=True)
    summary = deploy(
        workdir,
        sim_url,
        CODEX_CMD.replace("{codex}", codex),
        "codex",
        "--budget-tokens",
        "10000000",
        agents=agents,
        config_extra=NATIVE_RESPONSES if route == "native" else "",
    )
    bill = sim(sim_url, "/sim/stats")
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == agents, summary
    assert (summary["tokens"]["input"], summary["tokens"]["output"]) == (bill["tokens_in"], bill["tokens_out"])
    raw = asyncio.run(session_events(workdir, summary["run_id"]))
    items = [e.data for evs in raw.values() for e in evs if e.type == EventType.RESULT_ITEM]
    assert {(i["title"], i["location"]) for i in items} == expected_findings(files)
    for evs in raw.values():
        done = [e.data for e in evs if e.type == EventType.SESSION_COMPLETED]
        assert len(done) == 1 and done[0]["cli_session_id"]  # Codex's own thread id
    # every call of the sessions reached the provider as a Responses request, or none did
    calls = sum(len(calls_of(evs)) for evs in raw.values())
    assert calls >= 2 * agents  # a turn that reads the files, one that reports
    if route == "native":
        assert bill["requests"]["/v1/responses"] == {"200": calls}, bill["requests"]
    else:
        assert "/v1/responses" not in bill["requests"], bill["requests"]


AIDER_CMD = (
    "{aider} --model openai/gpt-4.1-mini --message {task} --analytics-log {analytics_log} "
    "--no-git --yes-always --no-pretty --no-stream $(cat {partition})"
)


def test_an_authentication_error_fails_the_attempt(workdir: Path, sim_url: str) -> None:
    """A CLI refused by the gateway (a key it never issued) fails its attempt with the tool's error, even
    where the tool exits 0 after it (aider); no result is taken from its error text. The three tools
    run side by side, one fleet each."""
    cmds = {
        "claude": f"{program('FLEET_TEST_CLAUDE', 'npm/node_modules/.bin/claude')} -p {CLAUDE_PROMPT} "
        "--output-format json",
        "codex": CODEX_CMD.replace("{codex}", program("FLEET_TEST_CODEX", "npm/node_modules/.bin/codex")),
        "aider": AIDER_CMD.replace("{aider}", program("FLEET_TEST_AIDER", "aider/bin/aider")),
    }
    wrong = "OPENAI_API_KEY=sk-not-issued ANTHROPIC_API_KEY=sk-not-issued "

    def one(fmt: str) -> tuple[Path, dict[str, Any]]:
        where = workdir / fmt
        make_repo(where / "repo", 2)
        return where, deploy(where, sim_url, wrong + cmds[fmt], fmt, agents=1, codes=(1,))

    async def all_of_them() -> list[tuple[Path, dict[str, Any]]]:
        return list(await asyncio.gather(*(asyncio.to_thread(one, fmt) for fmt in cmds)))

    for where, summary in asyncio.run(all_of_them()):
        assert summary["sessions"]["failed"] == 1 and summary["results_raw"] == 0, summary["sessions"]
        raw = asyncio.run(session_events(where, summary["run_id"]))
        (evs,) = raw.values()
        # one attempt: another would be refused alike
        (failed,) = [e.data for e in evs if e.type == EventType.ATTEMPT_FAILED]
        assert failed["kind"] == "config" and failed["error"].startswith("the CLI agent "), (where.name, failed)
        assert any(w in failed["error"].lower() for w in ("401", "authenticate")), (where.name, failed)
        assert not [e for e in evs if e.type in (EventType.RESULT_ITEM, EventType.SESSION_COMPLETED)]
