"""A sandboxed command hunting for the provider key finds nothing.

The engine runs as a separate process whose environment holds a fake provider key (so it is in its
/proc/<pid>/environ) and which keeps the key in a 0600 credentials file next to a session store. A
hunter inside a sandbox searches its environment, every /proc/*/environ and cmdline it can read
(parent, siblings, anything), its working tree, HOME, /tmp and the engine's directory. The same
hunt run by the engine itself must find the key, so the test can fail.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _hands_support import MODES, have_bwrap

CHILD = Path(__file__).with_name("_engine_child.py")


@pytest.mark.parametrize("mode", MODES)
def test_sandboxed_hunter_finds_no_provider_key(mode: str) -> None:
    if mode == "bwrap" and not have_bwrap():
        pytest.skip("bubblewrap is not available here")
    if mode == "plain" and os.geteuid() != 0:
        pytest.skip("without bubblewrap a non-root engine shares its user with the sandbox (documented)")
    key = "sk-exfil-" + secrets.token_hex(16)
    top = Path(tempfile.mkdtemp(prefix="fleet-exfil-"))
    try:
        os.chmod(top, 0o755)
        engine_dir = top / "engine"
        (engine_dir / "secrets").mkdir(parents=True)
        cred = engine_dir / "secrets" / "provider.env"
        cred.write_text(f"OPENAI_API_KEY={key}\n")
        cred.chmod(0o600)
        (engine_dir / ".fleet").mkdir()
        with sqlite3.connect(engine_dir / ".fleet" / "fleet.db") as db:  # a session store, no key in it
            db.execute("create table events (session_id text, seq int, type text, data text)")
            db.execute("insert into events values ('run-1.s00000', 1, 'session_created', '{}')")
        os.chmod(engine_dir, 0o755)
        env = {**os.environ, "OPENAI_API_KEY": key, "FLEET_API_KEY": key, "ANTHROPIC_API_KEY": key}
        out = subprocess.run(
            [sys.executable, str(CHILD), "hunt", mode, str(top / "sandboxes"), str(engine_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        report = json.loads(out.stdout.strip().splitlines()[-1])
        inside, outside = report["inside"], report["outside"]
        assert "HUNT DONE" in inside, report["inside_err"]
        assert [line for line in inside.splitlines() if line.startswith("FOUND")] == []
        assert key not in inside
        # the control hunt outside the sandbox does find the key where it was put
        assert "FOUND env" in outside
        assert f"FOUND file {engine_dir}/secrets/provider.env" in outside
        assert "/environ" in outside  # the engine's own environ is readable to the engine's user
    finally:
        shutil.rmtree(top, ignore_errors=True)
