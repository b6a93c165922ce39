"""The dashboard page's size and first-render time, against a blank page rendered by the same browser.

A SQLite store is seeded with one run of ``--sessions`` agent sessions (a few turns each, and the
``metrics:RUN`` snapshot a live run stores); ``agent-fleet dashboard`` serves it; Playwright drives the
system Chromium (``--chromium``, nothing downloaded).

Figures, each the median of ``--repeat`` cold loads (a fresh browser context each time):

* page bytes: every response the first load fetched (HTML, script, styles, uPlot), the live stream aside
* first contentful paint of the dashboard, and of the baseline: a blank HTML page the browser's router
  answers (no server), so the ratio is the dashboard's cost over the browser's own floor
* first data render: navigation start until the tiles show the store's figures (the first SSE overview)

Run: ``python benchmarks/dashboard.py [--sessions 500] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.observe.metrics import FleetSnapshot, ModelFigures, metrics_key, render
from agent_fleet.session.store import open_store

BLANK = "<!doctype html><html><head><title>blank</title></head><body><p>blank</p></body></html>"


async def seed(url: str, sessions: int) -> None:
    log = open_store(url)
    async with log:
        run = "run-bench"
        created = {"task": "Summarise", "options": {"agents": sessions, "model": "m1"}, "forecast": None}
        await log.emit_events(run, [(EventType.RUN_CREATED, created), (EventType.PLAN, {"plan": {}})])
        resp = ChatResponse(content="ok", usage=Usage(400, 80), model="m1", cost_usd=Decimal("0.0004")).to_dict()

        async def one(i: int) -> None:
            sid = f"{run}.s{i:05d}"
            events: list[tuple[str, dict[str, object]]] = [(EventType.SESSION_CREATED, {"run_id": run, "index": i})]
            for turn in range(3):
                events += [(EventType.MODEL_REQUEST, {"turn": turn, "model": "m1"})]
                events += [(EventType.MODEL_RESPONSE, {"turn": turn, "response": resp})]
            await log.emit_events(sid, events)

        await asyncio.gather(*(one(i) for i in range(sessions)))
        snap = FleetSnapshot(
            run_id=run, models={"m1": ModelFigures(calls=3 * sessions)}, concurrency_limit=50, in_flight=0, sessions={}
        )
        await log.put_snapshot(metrics_key(run), {"text": render(snap).decode()})


def measure(url: str, chromium: str, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"bytes": [], "fcp": [], "data": [], "blank_fcp": []}
    fcp = "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium)
        for _ in range(repeat):
            ctx = browser.new_context()
            page = ctx.new_page()
            page.route(url + "__blank", lambda route: route.fulfill(body=BLANK, content_type="text/html"))
            page.goto(url + "__blank")
            page.wait_for_function(f"({fcp}) >= 0")
            out["blank_fcp"].append(page.evaluate(fcp))
            ctx.close()

            ctx = browser.new_context()
            page = ctx.new_page()
            sizes: list[int] = []
            page.on("requestfinished", lambda req, into=sizes: into.append(req.sizes()["responseBodySize"]))
            page.goto(url)
            page.wait_for_function("document.getElementById('active-agents').textContent !== '–'")
            out["data"].append(page.evaluate("performance.now()"))
            page.wait_for_function(f"({fcp}) >= 0")
            out["fcp"].append(page.evaluate(fcp))
            out["bytes"].append(sum(sizes))  # the SSE stream never finishes: not counted
            ctx.close()
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    if not Path(args.chromium).exists():
        sys.exit(f"no Chromium at {args.chromium} (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{Path(tmp) / 'fleet.db'}"
        asyncio.run(seed(store, args.sessions))
        cmd = [sys.executable, "-m", "agent_fleet.cli", "dashboard", "--store", store, "--port", "0", "--json"]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            url = json.loads(server.stdout.readline())["url"]
            got = measure(url, args.chromium, args.repeat)
        finally:
            server.terminate()
            server.wait(30)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"dashboard over a store of {args.sessions} sessions, median of {args.repeat} cold loads")
    print(f"  page bytes (HTML, JS, CSS, uPlot):  {med['bytes'] / 1024:8.1f} KiB")
    print(f"  baseline: blank page FCP:           {med['blank_fcp']:8.1f} ms")
    print(f"  dashboard FCP:                      {med['fcp']:8.1f} ms  ({med['fcp'] / med['blank_fcp']:.2f}x blank)")
    print(f"  first data render (tiles filled):   {med['data']:8.1f} ms  ({med['data'] / med['blank_fcp']:.2f}x blank)")


if __name__ == "__main__":
    main()
