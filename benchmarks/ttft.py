"""Time to first token: lazy sandbox provisioning against eager provisioning (the baseline).

Eager: a session creates its sandbox before its first model call. Lazy: the session makes its first
model call at once and creates the sandbox only when a tool first needs it (what the hands do).

Sandbox start times come from two sources, both reported:

* **local**: real ``LocalSandboxProvider.provision`` calls in this run (a git worktree of this
  repository per session, bubblewrap when present), ``--concurrency`` sessions starting at once;
* **container**: a modelled container or pod start, log-normal with median 1.5 s (sigma 0.6,
  p95 about 4 s), as cold container starts typically are.

The first model call's time to first token is modelled log-normal with median 0.8 s (sigma 0.5) and
is the same, paired, sample for both arms. Prints p50/p95 of both arms and lazy/eager ratios.

    python benchmarks/ttft.py [--sessions 40] [--concurrency 10] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LazySandbox, LocalSandboxProvider, SandboxConfig
from agent_fleet.hands.shell import SandboxHands
from agent_fleet.hands.workspace import git_toplevel


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


async def measure_local(
    n: int, concurrency: int, top: Path, source: Path | None
) -> tuple[list[float], list[float], str]:
    """Real eager provisioning times and real lazy set-up times, ``concurrency`` at a time."""
    provider = LocalSandboxProvider(SandboxConfig(root=top / "sandboxes"))
    eager: list[float] = []
    lazy: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            t0 = time.perf_counter()
            box = await provider.provision(ResourceSpec(), session_id=f"bench.s{i:05d}", source=source)
            eager.append(time.perf_counter() - t0)
            await box.aclose()
            t0 = time.perf_counter()
            hands = SandboxHands(LazySandbox(provider, ResourceSpec(), session_id=f"bench.l{i:05d}", source=source))
            hands.specs()  # what a session needs before its first model call
            lazy.append(time.perf_counter() - t0)
            await hands.aclose()

    async with asyncio.TaskGroup() as tg:
        for i in range(n):
            tg.create_task(one(i))
    return eager, lazy, provider.isolation


def row(name: str, values: list[float]) -> str:
    return f"  {name:<34} p50 {pct(values, 0.5):7.3f} s   p95 {pct(values, 0.95):7.3f} s"


def compare(label: str, eager: list[float], lazy: list[float]) -> None:
    print(label)
    print(row("eager (baseline)", eager))
    print(row("lazy", lazy))
    for q, name in ((0.5, "p50"), (0.95, "p95")):
        e, lz = pct(eager, q), pct(lazy, q)
        print(f"  {name}: lazy/eager = {lz / e:.3f}  ({(lz / e - 1) * 100:+.0f} %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    first_token = [rng.lognormvariate(math.log(0.8), 0.5) for _ in range(args.sessions)]
    container = [rng.lognormvariate(math.log(1.5), 0.6) for _ in range(args.sessions)]

    top = Path(tempfile.mkdtemp(prefix="fleet-ttft-"))
    top.chmod(0o755)  # an unprivileged sandbox user must reach its workspace
    repo_root = Path(__file__).resolve().parents[1]
    source = repo_root if git_toplevel(repo_root) else None
    try:
        prov_eager, prov_lazy, isolation = asyncio.run(measure_local(args.sessions, args.concurrency, top, source))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"time to first token, {args.sessions} sessions, {args.concurrency} starting at once")
    print(f"local sandbox: {isolation}")
    print(
        f"measured local provisioning: median {statistics.median(prov_eager) * 1000:.1f} ms, "
        f"lazy set-up median {statistics.median(prov_lazy) * 1e6:.0f} us"
    )
    print()
    compare(
        "local sandboxes (measured start + modelled first token)",
        [p + t for p, t in zip(prov_eager, first_token, strict=True)],
        [p + t for p, t in zip(prov_lazy, first_token, strict=True)],
    )
    print()
    compare(
        "containers (modelled start, median 1.5 s + modelled first token)",
        [c + t for c, t in zip(container, first_token, strict=True)],
        [p + t for p, t in zip(prov_lazy, first_token, strict=True)],
    )


if __name__ == "__main__":
    main()
