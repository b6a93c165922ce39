"""Git remotes through a real smart-HTTP server on loopback (``git http-backend`` behind a front that
demands the token): ``--input URL#REF`` is cloned with ``FLEET_GIT_TOKEN``, ``--push`` sends the run's
branches; the token reaches no sandbox, no log, no output.

The run's sessions are a probe: a CLI agent that hunts for the token in its environment, every
``/proc/*/environ`` and ``cmdline`` it can see, its files, HOME, TMPDIR and its worktree's git config,
and reports each place as a result. The repository holds a planted canary (the token's prefix and
other characters) so the probe provably finds what is there; run outside the sandbox, with the token
in its environment, the same probe finds it, so the test can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _git_server import GitServer, bare_repo, have_backend

from agent_fleet.sim.provider import SimConfig, sim_provider_process

pytestmark = pytest.mark.skipif(not have_backend(), reason="git http-backend is not installed")

KEY = "sk-remotes-" + "4b7d" * 6
TOKEN = "fgt-tokn-" + "9e2f61c0a7d34b58" * 2  # the probe looks for its prefix, and the header's base64
# base64("x-access-token:fgt-tokn-"): what an Authorization header carrying the token starts with
# (after "Basic "); split so that the probe's own text never matches itself
PROBE = r"""
P1="fgt-to"; P1="${P1}kn-"
P2="eC1hY2Nlc3Mt"; P2="${P2}dG9rZW46Zmd0LXRva24t"
hit() { printf '{"title": "FOUND %s", "body": "%s"}\n' "$1" "$1"; }
env | grep -q -e "$P1" -e "$P2" && hit env
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  grep -qa -e "$P1" -e "$P2" "$f" 2>/dev/null && hit "$f"
done
for d in . "$HOME" "${TMPDIR:-/tmp}"; do
  grep -rla -e "$P1" -e "$P2" "$d" 2>/dev/null | while read -r f; do hit "file $f"; done
done
git config --list --show-origin 2>/dev/null | grep -qi -e "$P1" -e "$P2" -e extraheader && hit "git config"
common=$(git rev-parse --git-common-dir 2>/dev/null) &&
  grep -qi -e "$P1" -e extraheader "$common/config" 2>/dev/null && hit "repo config"
printf '{"title": "PROBE DONE %s", "body": "%s"}\n' "$(ls /proc | grep -c '^[0-9]')" "$(pwd)"
for f in $(cat "$FLEET_PARTITION"); do echo "# probed" >> "$f"; done
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        yield url


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-remotes-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def cli(*args: str, cwd: Path, url: str, token: str | None = TOKEN, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_", "GIT_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{cwd / 'fleet.db'}")
    env.update(FLEET_GIT_CACHE=str(cwd / "cache"), **extra)
    if token is not None:
        env["FLEET_GIT_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "agent_fleet.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


def branches(repo: Path, *, bare: bool = False) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "for-each-ref", "--format=%(refname:short)", "refs/heads/fleet/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(out.split())


def tip(repo: Path, ref: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True).stdout.strip()


def test_clone_probe_and_push_through_a_token_protected_server(workdir: Path, sim_url: str) -> None:
    served = workdir / "served"
    canary = "fgt-tokn-" + "canary"
    bare_repo(served, "proj", {"pkg/a.py": "A = 1\n", "pkg/b.py": "B = 2\n", "probe.sh": PROBE, "canary.txt": canary})
    config = workdir / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {workdir / 'sandboxes'}}}\n")
    seen: list[str] = []
    with GitServer(served, TOKEN) as server:
        url = f"{server.url}/proj.git"
        server.refuse_push = True  # the remote refuses the run's push: the run itself loses nothing
        run = cli(
            "deploy",
            "--task",
            "Probe",
            "--input",
            f"{url}#v1",
            "--agents",
            "2",
            "--agent-cmd",
            "sh probe.sh",
            "--push",
            "origin",
            "--embedder",
            "lexical",
            "--config",
            str(config),
            "--json",
            cwd=workdir,
            url=sim_url,
        )
        seen += [run.stdout, run.stderr]
        assert run.returncode == 4, run.stderr
        assert "Traceback" not in run.stderr and "403" in run.stderr.strip().splitlines()[-1]
        summary = json.loads(run.stdout)  # the run completed and reported
        run_id = summary["run_id"]
        assert summary["status"] == "completed" and summary["changes"]["merged"] == 2
        # cloned once, through the server, every request with the token
        assert server.requests and all(r["authorized"] for r in server.requests)
        clones = [p for p in (workdir / "cache").iterdir() if p.is_dir()]
        assert len(clones) == 1
        clone = clones[0]
        assert (clone / "pkg" / "a.py").read_text() == "A = 1\n"  # the clone's checkout is the base
        # the probe ran in every session and found the canary it was shown, and nothing else
        results = [json.loads(line) for line in (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()]
        titles = sorted({r["title"] for r in results})
        assert [t for t in titles if t.startswith("PROBE DONE")], titles
        found = [t for t in titles if t.startswith("FOUND")]
        assert found and all(t.endswith("canary.txt") for t in found), found
        local = branches(clone)
        assert f"fleet/{run_id}" in local and len(local) == 3  # the run's branch and one per session
        assert branches(served / "proj.git") == []

        server.refuse_push = False
        refused = cli("resume", run_id, "--push", "origin", cwd=workdir, url=sim_url, token="fgt-tokn-wrong")
        seen += [refused.stdout, refused.stderr]
        assert refused.returncode == 4, refused.stderr
        line = one_line(refused.stderr)
        assert "refused the credential" in line and run_id in line and "apply" in line
        assert branches(served / "proj.git") == [] and branches(clone) == local

        applied = cli("apply", run_id, "--push", "origin", cwd=workdir, url=sim_url)
        seen += [applied.stdout, applied.stderr]
        assert applied.returncode == 0, applied.stderr
        assert branches(served / "proj.git") == local
        assert tip(served / "proj.git", f"fleet/{run_id}") == tip(clone, f"fleet/{run_id}")

    # the token is in no output, no event, no summary or report, no file the run or the clone wrote
    for text in seen:
        assert TOKEN not in text
    files = [f for f in workdir.rglob("*") if f.is_file() and "served" not in f.parts]
    assert any(f.name.startswith("fleet.db") for f in files) and any(f.name == "summary.json" for f in files)
    for f in files:
        data = f.read_bytes()
        assert TOKEN.encode() not in data, f
        if f.name == "config" and ".git" in f.parts:
            assert b"extraheader" not in data.lower(), f

    # the same probe outside any sandbox, with the token in its environment, does find it
    outside = subprocess.run(
        ["sh", "-c", PROBE],
        env={**os.environ, "FLEET_GIT_TOKEN": TOKEN, "HOME": str(workdir), "TMPDIR": str(workdir)},
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert "FOUND env" in outside.stdout


def test_bad_remote_input_is_one_line_and_its_exit_code(workdir: Path, sim_url: str) -> None:
    served = workdir / "served"
    bare_repo(served, "proj", {"a.py": "A = 1\n"})
    with GitServer(served, TOKEN) as server:
        wrong = f"{server.url}/proj.git#no-such"
        missing_ref = cli("deploy", "--task", "x", "--input", wrong, cwd=workdir, url=sim_url)
        assert missing_ref.returncode == 2 and "no-such" in one_line(missing_ref.stderr)
    dead = f"http://127.0.0.1:{_free_port()}/proj.git"
    unreachable = cli("deploy", "--task", "x", "--input", dead, cwd=workdir, url=sim_url)
    assert unreachable.returncode == 4 and dead in one_line(unreachable.stderr)
    plain = workdir / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("A = 1\n")
    check = cli("deploy", "--task", "x", "--input", str(plain), "--check", "true", cwd=workdir, url=sim_url)
    assert check.returncode == 2 and "--check" in one_line(check.stderr)
    assert not (workdir / "fleet.db").exists()  # refused before any run was recorded
