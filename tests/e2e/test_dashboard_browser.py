"""The dashboard in a real browser: Playwright drives the system Chromium while a run goes.

``agent-fleet dashboard`` and ``agent-fleet deploy`` are separate processes on one SQLite store; the page
must show the run's counts change without a reload, drill into a session and show its event log.
Screenshots go to ``test-artifacts/dashboard/`` (git-ignored). Nothing is downloaded: the browser is
Debian's ``chromium`` (``executable_path``); without it the test is skipped, unless
``FLEET_REQUIRE_BROWSER=1`` (CI sets it when the package installed).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .conftest import Cli, write_lines

CHROMIUM = os.environ.get("FLEET_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"


def _browser_or_skip() -> None:
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    if not Path(CHROMIUM).exists():
        missing.append(f"a Chromium at {CHROMIUM}")
    if missing:
        if os.environ.get("FLEET_REQUIRE_BROWSER"):
            pytest.fail("FLEET_REQUIRE_BROWSER is set but there is no " + " and no ".join(missing))
        pytest.skip("no " + " and no ".join(missing))


def _int(text: str) -> int:
    digits = text.replace(",", "").strip()
    return int(digits) if digits.isdigit() else -1


@pytest.mark.slow
def test_dashboard_shows_a_live_run_and_a_sessions_events(slow_cli: Cli, tmp_path: Path) -> None:
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dashboard = slow_cli.popen("dashboard", "--port", "0", "--json")
    deploy = None
    try:
        assert dashboard.stdout is not None
        url = json.loads(dashboard.stdout.readline())["url"]
        src = write_lines(tmp_path / "urls.txt", 60)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            outside: list[str] = []
            page.on("request", lambda req: None if req.url.startswith((url, "data:")) else outside.append(req.url))
            page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.goto(url)
            page.wait_for_function("document.getElementById('conn').textContent === 'live'", timeout=30_000)
            # the run starts once the page is live: however long the browser took to start, it sees the run go
            deploy = slow_cli.popen(
                "deploy", "--task", "Summarise", "--input", str(src), "--agents", "6", "--embedder", "lexical",
                "--max-concurrency", "3", "--json",
            )  # fmt: skip

            # the run appears and its counts move while it goes, with no reload
            page.wait_for_selector("#runs tbody tr[data-run]", timeout=60_000)
            page.wait_for_function("Number(document.getElementById('active-agents').textContent) > 0", timeout=60_000)
            first = _int(page.inner_text("#tokens-total").split()[0])
            tokens = "Number(document.getElementById('tokens-total').textContent.split(' ')[0].replace(/,/g, ''))"
            page.wait_for_function(f"{tokens} > {first}", timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "1-overview-live.png"), full_page=True)

            # run → its sessions → one session's event log
            run_id = page.get_attribute("#runs tbody tr[data-run]", "data-run")
            assert run_id
            page.click(f"#runs tbody tr[data-run='{run_id}']")
            page.wait_for_selector("#sessions tbody tr[data-session]", timeout=30_000)
            sessions = page.eval_on_selector_all("#sessions tbody tr[data-session]", "rows => rows.length")
            assert sessions == 6
            page.screenshot(path=str(ARTIFACTS / "2-run-sessions.png"), full_page=True)
            sid = page.get_attribute("#sessions tbody tr[data-session]", "data-session")
            page.click(f"#sessions tbody tr[data-session='{sid}']")
            page.wait_for_selector("#events li[data-type='session_created']", timeout=30_000)
            page.wait_for_selector("#events li[data-type='model_response']", timeout=60_000)
            assert page.inner_text("#session-title") == sid
            page.screenshot(path=str(ARTIFACTS / "3-session-events.png"), full_page=True)

            # the run ends; the page shows it, still without a reload
            code = deploy.wait(240)
            assert code == 0, deploy.stderr.read() if deploy.stderr else code
            page.wait_for_selector(f"#runs tbody tr[data-run='{run_id}'] td.state-completed", timeout=60_000)
            page.wait_for_selector("#events li[data-type='session_completed']", timeout=30_000)
            events = page.eval_on_selector_all("#events li", "items => items.map(li => li.dataset.type)")
            assert events[0] == "session_created" and events[-1] == "session_completed"
            seqs = page.eval_on_selector_all("#events li", "items => items.map(li => li.value)")
            assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order
            page.screenshot(path=str(ARTIFACTS / "4-run-completed.png"), full_page=True)
            browser.close()
        assert problems == []
        assert outside == []  # every asset came from the dashboard itself
    finally:
        for proc in (deploy, dashboard):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)


def _looping_codebase(root: Path) -> Path:
    src = root / "repo"
    src.mkdir()
    for n in range(8):
        body = f"def f{n}(x):\n    return x + {n}\n"
        if n == 3:
            body += "# fleet-sim: loop 20\n"  # the simulated agent re-reads this file, one call a turn
        (src / f"mod{n:02d}.py").write_text(body)
    return src


@pytest.mark.slow
def test_a_shape_alarm_is_decided_on_the_dashboard(cli: Cli, tmp_path: Path) -> None:
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    from agent_fleet.domain.events import EventType
    from agent_fleet.session import open_store

    config = tmp_path / "fleet.yaml"
    config.write_text(
        "guards: {repeated_tool_calls: 100, no_progress_turns: 100}\n"
        "verification: {fraction: 0, minimum: 0}\n"
        "supervision: {shape: {z_threshold: 3.5}}\n"
    )
    args = ("--task", "Review this code", "--input", str(_looping_codebase(tmp_path)), "--agents", "8")
    code, summary = cli.json("deploy", *args, "--config", str(config), "--embedder", "lexical")
    assert code == 0, summary
    run_id = summary["run_id"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dashboard = cli.popen("dashboard", "--port", "0", "--json")
    try:
        assert dashboard.stdout is not None
        url = json.loads(dashboard.stdout.readline())["url"]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}#run={run_id}")  # a link straight to the run
            row = page.wait_for_selector("#review-items tbody tr[data-item^='shape.']", timeout=30_000)
            assert row is not None
            item = row.get_attribute("data-item")
            assert page.inner_text(f"#review-items tr[data-item='{item}'] td:nth-child(4)") == "open"
            page.fill("#review-note", "a deliberately slow file")
            page.screenshot(path=str(ARTIFACTS / "5-review-queue.png"), full_page=True)
            page.click(f"#review-items tr[data-item='{item}'] button[data-decision='approve']")
            page.wait_for_function(
                f"document.querySelector(\"#review-items tr[data-item='{item}'] td:nth-child(4)\")"
                ".textContent.startsWith('approved')",
                timeout=30_000,
            )
            assert page.query_selector(f"#review-items tr[data-item='{item}'] button") is None
            page.screenshot(path=str(ARTIFACTS / "6-review-approved.png"), full_page=True)
            browser.close()
    finally:
        dashboard.terminate()
        dashboard.wait(30)

    async def decisions() -> list[dict[str, object]]:
        async with open_store(cli.store) as log:
            return [e.data for e in await log.get_events(run_id) if e.type == EventType.REVIEW_DECISION]

    import asyncio

    (decided,) = asyncio.run(decisions())
    assert (decided["item"], decided["decision"], decided["note"]) == (item, "approve", "a deliberately slow file")
