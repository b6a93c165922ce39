"""Dedup on a real model's output: SmolLM2-135M-Instruct behind llama-cpp-python, a list with repeats.

The input is ``--distinct`` lines, then ``--repeats`` of them again (the first ones, in order), shuffled
with a fixed seed, so the same line lands in different partitions: ``deploy`` runs the built-in agent
over it (temperature 0, a seed) and the report's figures are read back. The baseline is the input's own
ground truth: a result about a repeated line has a twin about its other copy, so at most ``--repeats``
results are duplicates when the model gives one result per line; the report's ``Dedup vs claim`` line
is printed whole, to be read against it (does it say what the data shows?).

Needs ``FLEET_TEST_LLAMA_SERVER_PYTHON`` and ``FLEET_TEST_SMOLLM2_GGUF`` (``eval "$(bash
.ci/install-local-model)"``). Run: ``python benchmarks/local_model_dedup.py [--distinct 24 --repeats 8]``.
The model server uses ``--threads`` threads; on a shared machine the times say more about the load than
about the engine.

Measured (2 shared cores, load average 2-6, 32 lines, 8 agents): exit 0 in 67 s, 12 calls, 4 raw results,
4 unique (0 %), against at most 8 duplicates (25 %) at one result a line: the model gave a result for few
lines. The band line said "dedup 0% is below the 40%–50% claimed for web research: 4 raw results, 4 unique
... too few results for the rate to say much": it claims nothing the data does not show. With 32 agents
(32 calls queued at a server that answers one at a time) the run stopped with exit 4: calls waiting in
the queue were given up after 200 s of silence.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

FACTS = [
    "The Eiffel Tower is in Paris.",
    "Bananas are yellow.",
    "Python is a programming language.",
    "The Moon orbits the Earth.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The Nile is a river in Africa.",
    "Mount Everest is the highest mountain on Earth.",
    "Bees make honey.",
    "The piano has 88 keys.",
    "Tokyo is the capital of Japan.",
    "Penguins live in the Southern Hemisphere.",
    "Light travels faster than sound.",
    "The heart pumps blood through the body.",
    "Chess is played on a board of 64 squares.",
    "Rust is a systems programming language.",
    "The Amazon is a rainforest in South America.",
    "Coffee is made from roasted beans.",
    "The violin has four strings.",
    "Mars is called the red planet.",
    "Whales are mammals.",
    "The Great Wall is in China.",
    "Ice is frozen water.",
    "Shakespeare wrote Hamlet.",
    "The Sahara is a desert in Africa.",
    "Copper conducts electricity.",
    "Owls hunt at night.",
    "The Pacific is the largest ocean.",
    "Bread is baked from dough.",
    "Saturn has rings.",
    "Cats are often kept as pets.",
]
TASK = "Summarise each item: call submit_result with one result per item, the title its topic, the body one sentence."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(python: str, gguf: str, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    argv = [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--chat_format", "chatml-function-calling", "--n_ctx", "4096", "--n_threads", str(threads)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit("the model server exited while starting")
        time.sleep(0.2)
    proc.kill()
    sys.exit("the model server did not answer in 120 s")


def lines(distinct: int, repeats: int, seed: int) -> list[str]:
    if not 1 <= distinct <= len(FACTS) or not 0 <= repeats <= distinct:
        sys.exit(f"--distinct is 1..{len(FACTS)} and --repeats 0..--distinct")
    out = FACTS[:distinct] + FACTS[:repeats]
    random.Random(seed).shuffle(out)
    return out


def deploy(url: str, work: Path, items: list[str], agents: int, max_tokens: int) -> tuple[int, dict[str, Any], float]:
    (work / "lines.txt").write_text("\n".join(items) + "\n")
    model = {"name": "smollm2", "provider": url + "/v1", "model": "smollm2", "max_tokens": max_tokens}
    model |= {"context_window": 4096, "temperature": 0, "seed": 42}
    model["compat"] = ["no_usage_chunk", "tool_results_as_user"]
    (work / "fleet.yaml").write_text(json.dumps({"models": [model], "verification": {"fraction": 0, "minimum": 0}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    argv = [sys.executable, "-m", "agent_fleet.cli", "deploy", "--task", TASK, "--input", str(work / "lines.txt")]
    argv += ["--agents", str(agents), "--model", "smollm2", "--config", str(work / "fleet.yaml")]
    argv += ["--store", f"sqlite:///{work / 'fleet.db'}", "--out", str(work / "out"), "--embedder", "minilm", "--json"]
    t0 = time.perf_counter()
    ran = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if not ran.stdout.strip():
        sys.exit(f"deploy printed nothing (exit {ran.returncode}): {ran.stderr[-2000:]}")
    return ran.returncode, json.loads(ran.stdout), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distinct", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    python, gguf = os.environ.get("FLEET_TEST_LLAMA_SERVER_PYTHON"), os.environ.get("FLEET_TEST_SMOLLM2_GGUF")
    if not python or not gguf:
        need = "FLEET_TEST_LLAMA_SERVER_PYTHON and FLEET_TEST_SMOLLM2_GGUF"
        sys.exit(f'set {need} (eval "$(bash .ci/install-local-model)")')
    items = lines(args.distinct, args.repeats, args.seed)
    proc, url = _start_server(python, gguf, args.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            code, summary, took = deploy(url, Path(tmp), items, args.agents, args.max_tokens)
            rows = [json.loads(x) for x in (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()]
            report = (Path(summary["out_dir"]) / "report.md").read_text() if summary.get("out_dir") else ""
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    raw, unique = summary.get("results_raw", 0), summary.get("results_unique", len(rows))
    band = summary.get("dedup_band") or {}
    print(f"input: {len(items)} lines, {args.distinct} distinct ({args.repeats} repeated once), {args.agents} agents")
    print(f"exit {code} · {summary.get('status')} · {summary.get('llm_calls')} calls · {took:.0f} s wall")
    print(f"results: {raw} raw, {unique} unique: dedup {1 - unique / raw if raw else 0:.0%}")
    truth = f"{args.repeats} of {len(items)} ({args.repeats / len(items):.0%})"
    print(f"ground truth: at most {truth} duplicates at one result a line")
    print(f"band line: {band.get('note')}")
    line = next((x for x in report.splitlines() if "Dedup vs claim" in x), "")
    print(f"report.md: {line.strip()}")


if __name__ == "__main__":
    main()
