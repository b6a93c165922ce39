"""Our HTTP gateway beside LiteLLM's proxy: CPU per proxied call, and one session's dollar overshoot.

Same run, same simulated provider (``agent-fleet sim-provider`` in its own process, 0.2 s latency),
each gateway in its own process:

* ours: ``agent-fleet gateway`` (per-session tokens, reserve-then-reconcile budgets);
* LiteLLM: its proxy (installed for this benchmark only, in ``.bench-venv/``, no database), with an
  agent whose ``litellm_params.max_budget_per_session`` is the same dollar cap, and a ``custom_auth``
  that ties every key to that agent (the way LiteLLM applies per-session budgets).

CPU per call: the gateway process tree's user + system CPU time (from /proc) over ``--calls``
non-streamed completions sent 16 at a time, divided by the calls. Overshoot: one session with a
$0.01 cap, hit by 8 and then by 50 concurrent callers that each call until refused; the session's
real spend (the provider's reported usage, priced at gpt-4.1-mini list rates, the same table for
both) divided by the cap. Prompts differ per call so no prompt cache is involved. Also, in this
process: CPU per call of ``Gateway.complete`` beside the bare official ``openai`` SDK (the engine's
per-call budget is the SDK's cost), against the same provider.

    python benchmarks/gateway.py [--calls 1000] [--skip-litellm]

Goal: ≥ 7× less CPU per call than LiteLLM, and no overshoot beyond the documented bound. Ours admits a
call while the cap is not reached and lets the one that crosses it finish (``agent_fleet.spend.budget``):
spend stays below cap + one call's worst case (printed), however many callers share the session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx

from agent_fleet.domain.usage import Usage
from agent_fleet.spend.prices import PriceTable

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENV = ROOT / ".bench-venv"
MODEL = "gpt-4.1-mini"
CAP = Decimal("0.01")
PROVIDER_KEY = "sk-bench-provider-" + secrets.token_hex(8)
PRICES = PriceTable()
FILLER = "The quick brown fox checks every file for off-by-one errors. " * 120

_AUTH = """
import hashlib

from litellm.proxy._types import UserAPIKeyAuth

AGENT_ID = hashlib.sha256(b"bench").hexdigest()


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    return UserAPIKeyAuth(api_key=api_key, agent_id=AGENT_ID)
"""


def ensure_litellm() -> Path:
    exe = BENCH_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    print("installing LiteLLM's proxy into .bench-venv/ (once) …", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    pip = [str(BENCH_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]>=1.70"]
    subprocess.run(pip, check=True)
    return exe


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its descendants, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        stats[int(entry)] = (int(fields[11]), int(fields[12]))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        u, s = stats.get(p, (0, 0))
        total += u + s
        todo.extend(children.get(p, ()))
    return total / tick


@contextlib.contextmanager
def process(
    cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
        )
        try:
            yield proc
        except BaseException:
            log.seek(0)
            tail = log.read()[-2000:]
            if tail.strip():
                print(f"--- {Path(cmd[0]).name} said:\n{tail}", file=sys.stderr)
            raise
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 2)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()


def body(session: str | None, i: int, *, metadata: bool) -> dict[str, object]:
    content = f"Task: review batch {session}-{i}-{secrets.token_hex(4)}.\n{FILLER}"
    b: dict[str, object] = {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 400}
    if metadata and session is not None:
        b["metadata"] = {"session_id": session}
    return b


def one_call_worst() -> Decimal:
    """What ours reserves for one benchmark call at most: its first prompt estimate plus max_tokens."""
    raw = len(json.dumps(body("fifty", 0, metadata=False)).encode())
    return PRICES.worst_case(MODEL, raw // 3 + 16, 400)


async def measure_cpu(url: str, headers: dict[str, str], pid: int, calls: int, *, metadata: bool) -> float:
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                r = await client.post(url, json=body(None, i, metadata=metadata), headers=headers)
                r.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(50)))  # warm up
        before = cpu_seconds(pid)
        await asyncio.gather(*(one(i) for i in range(calls)))
        return (cpu_seconds(pid) - before) / calls


async def overshoot(url: str, headers: dict[str, str], session: str, callers: int, *, metadata: bool) -> Decimal:
    spent = Decimal(0)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=callers + 4)) as client:

        async def caller(k: int) -> None:
            nonlocal spent
            for i in range(10_000):
                r = await client.post(url, json=body(session, k * 10_000 + i, metadata=metadata), headers=headers)
                if r.status_code != 200:
                    return
                u = r.json()["usage"]
                cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                spent += PRICES.cost(MODEL, Usage(u["prompt_tokens"], u["completion_tokens"], cached))

        await asyncio.gather(*(caller(k) for k in range(callers)))
    return spent / CAP


async def ours(sim_url: str, calls: int) -> dict[str, float]:
    env = {**os.environ, "FLEET_API_KEY": PROVIDER_KEY}
    cmd = [sys.executable, "-m", "agent_fleet.cli", "gateway", "--port", "0", "--provider", sim_url]
    cmd += ["--model", MODEL, "--budget-usd", str(CAP), "--budget-tokens", "1000000000", "--json"]
    with process(cmd, env=env) as proc:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        root, admin = info["anthropic_base_url"], {"Authorization": f"Bearer {info['admin_token']}"}
        async with httpx.AsyncClient() as http:

            async def token(session: str, usd: str | None = None) -> dict[str, str]:
                r = await http.post(root + "/fleet/sessions", json={"session_id": session}, headers=admin)
                if usd is not None:
                    await http.post(root + "/fleet/budget", json={"id": session, "usd": usd}, headers=admin)
                return {"Authorization": f"Bearer {r.json()['token']}"}

            cpu_headers = await token("cpu", usd="1000000")
            s8, s50 = await token("eight"), await token("fifty")
        url = info["openai_base_url"] + "/chat/completions"
        return {
            "cpu": await measure_cpu(url, cpu_headers, proc.pid, calls, metadata=False),
            "x8": float(await overshoot(url, s8, "eight", 8, metadata=False)),
            "x50": float(await overshoot(url, s50, "fifty", 50, metadata=False)),
        }


async def litellm(sim_url: str, calls: int) -> dict[str, float]:
    exe = ensure_litellm()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "bench_auth.py").write_text(_AUTH)
        master = "sk-bench-master-" + secrets.token_hex(16)
        config = {
            "model_list": [
                {
                    "model_name": MODEL,
                    "litellm_params": {"model": f"openai/{MODEL}", "api_base": sim_url, "api_key": PROVIDER_KEY},
                }
            ],
            "agents": [
                {
                    "agent_name": "bench",
                    "agent_card_params": {
                        "name": "bench",
                        "description": "bench",
                        "url": "http://127.0.0.1:1",
                        "version": "1",
                    },
                    "litellm_params": {"max_budget_per_session": float(CAP)},
                }
            ],
            "general_settings": {"master_key": master, "custom_auth": "bench_auth.user_api_key_auth"},
            "litellm_settings": {"telemetry": False},
        }
        (work / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
        port = _free_port()
        env = {**os.environ, "LITELLM_LOG": "ERROR"}
        cmd = [str(exe), "--config", "config.yaml", "--port", str(port), "--host", "127.0.0.1", "--num_workers", "1"]
        with process(cmd, cwd=work, env=env) as proc:
            base = f"http://127.0.0.1:{port}"
            await _wait_up(base + "/health/liveliness", 300)
            url = base + "/v1/chat/completions"
            headers = {"Authorization": "Bearer sk-any"}
            return {
                "cpu": await measure_cpu(url, headers, proc.pid, calls, metadata=False),
                "x8": float(await overshoot(url, headers, "eight", 8, metadata=True)),
                "x50": float(await overshoot(url, headers, "fifty", 50, metadata=True)),
            }


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_up(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise SystemExit(f"{url} did not come up in {seconds:.0f} s")


async def in_process(sim_url: str, calls: int) -> dict[str, float]:
    """CPU of this process per call: ``Gateway.complete`` beside the bare official OpenAI SDK."""
    import openai

    from agent_fleet.domain.model import ChatRequest
    from agent_fleet.spend.gateway import Gateway
    from agent_fleet.spend.providers import OpenAIProvider

    sem = asyncio.Semaphore(16)
    sdk = openai.AsyncOpenAI(base_url=sim_url, api_key=PROVIDER_KEY, max_retries=0)
    gw = Gateway(OpenAIProvider(api_key=PROVIDER_KEY, base_url=sim_url, model=MODEL), session_tokens=None)

    async def via_sdk(i: int) -> None:
        async with sem:
            b = body(None, i, metadata=False)
            await sdk.chat.completions.create(model=MODEL, messages=b["messages"], max_tokens=400)  # type: ignore[arg-type]

    async def via_gateway(i: int) -> None:
        async with sem:
            b = body(None, i, metadata=False)
            await gw.complete(f"s{i % 50}", ChatRequest(model=MODEL, messages=b["messages"], max_tokens=400))  # type: ignore[arg-type]

    out: dict[str, float] = {}
    try:
        for name, fn in (("sdk", via_sdk), ("gateway", via_gateway)):
            await asyncio.gather(*(fn(i) for i in range(50)))
            before = time.process_time()
            await asyncio.gather(*(fn(i) for i in range(calls)))
            out[name] = (time.process_time() - before) / calls
    finally:
        await sdk.close()
        await gw.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--skip-litellm", action="store_true", help="measure ours only")
    args = parser.parse_args()
    sim_cmd = [sys.executable, "-m", "agent_fleet.cli", "sim-provider", "--port", "0", "--latency-median", "0.2"]
    with process(sim_cmd) as sim:
        assert sim.stdout is not None
        sim_url = sim.stdout.readline().strip()
        local = await in_process(sim_url, args.calls)
        a = await ours(sim_url, args.calls)
        b = None if args.skip_litellm else await litellm(sim_url, args.calls)
    print(f"one simulated provider (0.2 s latency), {args.calls} calls for CPU, session cap ${CAP}\n")
    print(f"{'':<34}{'ours':>12}{'LiteLLM proxy':>16}")
    theirs_cpu = f"{b['cpu'] * 1000:>13.2f} ms" if b else f"{'—':>16}"
    print(f"{'CPU per proxied call':<34}{a['cpu'] * 1000:>9.2f} ms{theirs_cpu}")
    for key, label in (("x8", "spend / cap, 8 concurrent callers"), ("x50", "spend / cap, 50 concurrent callers")):
        theirs = f"{b[key]:>15.2f}×" if b else f"{'—':>16}"
        print(f"{label:<34}{a[key]:>11.2f}×{theirs}")
    print(
        f"\nin process, CPU per call: Gateway.complete {local['gateway'] * 1000:.2f} ms beside the official "
        f"openai SDK {local['sdk'] * 1000:.2f} ms (ratio {local['gateway'] / local['sdk']:.2f})"
    )
    bound = 1 + float(one_call_worst() / CAP)
    within = a["x8"] < bound and a["x50"] < bound
    print(f"ours stays under cap + one call ({bound:.2f}× the cap): {'yes' if within else 'NO'}")
    if b:
        ratio = b["cpu"] / a["cpu"]
        met = ratio >= 7 and within
        print(f"\nCPU: LiteLLM / ours = {ratio:.1f}× lighter (goal ≥ 7×): {'met' if met else 'NOT met'}")
        raise SystemExit(0 if met else 1)


if __name__ == "__main__":
    asyncio.run(main())
