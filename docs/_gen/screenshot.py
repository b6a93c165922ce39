"""Makes docs/images/dashboard.png from a real run: 60 sessions against the simulated provider, the live
dashboard, one Chromium screenshot mid-run (Debian's chromium through Playwright).

    python docs/_gen/screenshot.py docs/images/dashboard.png
"""

import json, os, subprocess, sys, time
from playwright.sync_api import sync_playwright
from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process
from agent_fleet.testing.processes import stop

out = sys.argv[1]
with sim_provider_process(SimConfig(latency=LogNormalLatency(median=1.5, sigma=0.4), seed=11)) as url:
    env = {**os.environ, "FLEET_BASE_URL": url, "FLEET_API_KEY": "sk-test"}
    with open("items.txt", "w") as f:
        for i in range(600):
            f.write(f"https://docs.example.org/guide/page-{i}\n")
    dash = subprocess.Popen(["agent-fleet", "dashboard", "--port", "0", "--json"], stdout=subprocess.PIPE, text=True, env=env)
    info = json.loads(dash.stdout.readline())
    run = subprocess.Popen(["agent-fleet", "deploy", "--task", "Summarise each page", "--input", "items.txt",
                            "--agents", "60", "--max-concurrency", "20", "--embedder", "lexical"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(info["url"])
            time.sleep(16)
            page.screenshot(path=out, full_page=False)
            browser.close()
    finally:
        stop(run, timeout=30)
        stop(dash, timeout=10)
