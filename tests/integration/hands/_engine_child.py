"""A stand-in engine process for the hands integration tests: run as a separate process so that
its environment (holding a fake provider key) and its death (kill -9) are real.

    python _engine_child.py hunt MODE ROOT ENGINE_DIR   -> prints one JSON line {inside, outside}
    python _engine_child.py hold MODE ROOT REPO [MCP_SERVER_SCRIPT] -> prints READY, then waits
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from agent_fleet.hands.isolation import ExecShim
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig

# The key's prefix is matched as sk-exfi[l]- so the hunter's own argv never matches itself.
HUNTER = r"""
P='sk-exfi[l]-'
if env | grep -q "$P"; then echo "FOUND env"; fi
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  if grep -qa "$P" "$f" 2>/dev/null; then echo "FOUND $f"; fi
done
echo "PROCS $(ls -d /proc/[0-9]* | wc -l)"
for d in . "$HOME" "${TMPDIR:-/tmp}" $HUNT_PATHS; do
  grep -rla "$P" "$d" 2>/dev/null | sed 's/^/FOUND file /'
done
echo "HUNT DONE"
"""


def provider(mode: str, root: str) -> LocalSandboxProvider:
    prov = LocalSandboxProvider(SandboxConfig(root=Path(root), use_bwrap=(mode == "bwrap")))
    if os.environ.get("FLEET_TEST_SHIM") == "python":  # the fallback, where util-linux is present too
        prov.shim = ExecShim()
    return prov


async def hunt(mode: str, root: str, engine_dir: str) -> None:
    prov = provider(mode, root)
    sibling = await prov.provision(ResourceSpec(), session_id="sibling")
    hunter = await prov.provision(ResourceSpec(), session_id="hunter")
    env = {"HUNT_PATHS": engine_dir}
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(sibling.run("sleep 3", env_extra={"OPENAI_API_KEY": "gateway-token-of-sibling"}))
            await asyncio.sleep(0.3)
            inside = await hunter.run("sh -s", stdin=HUNTER.encode(), env_extra=env, timeout=60)
        # Positive control: the very same hunt run by the engine itself, without a sandbox.
        proc = await asyncio.create_subprocess_exec(
            "sh",
            "-s",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, **env, "HOME": engine_dir, "TMPDIR": engine_dir},
            cwd=engine_dir,
        )
        outside, _ = await proc.communicate(HUNTER.encode())
    finally:
        await sibling.aclose()
        await hunter.aclose()
    print(json.dumps({"inside": inside.stdout, "inside_err": inside.stderr, "outside": outside.decode()}))


async def hold(mode: str, root: str, repo: str, mcp_script: str | None) -> None:
    prov = provider(mode, root)
    box = await prov.provision(ResourceSpec(), session_id="held", source=Path(repo))
    async with asyncio.TaskGroup() as tg:
        tg.create_task(box.run("sleep 600 & setsid sleep 600 & sleep 600", timeout=900))
        if mcp_script:
            from agent_fleet.hands.mcp_pool import McpPool, McpServerConfig

            pool = McpPool([McpServerConfig(name="demo", command=sys.executable, args=(mcp_script,))])
            await pool.start()
        await asyncio.sleep(0.5)
        print("READY", prov.owner, box.sandbox_id, flush=True)
        await asyncio.sleep(3600)


def main() -> None:
    cmd, mode, root, arg = sys.argv[1:5]
    if cmd == "hunt":
        asyncio.run(hunt(mode, root, arg))
    else:
        asyncio.run(hold(mode, root, arg, sys.argv[5] if len(sys.argv) > 5 else None))


if __name__ == "__main__":
    main()
