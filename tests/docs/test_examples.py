"""The examples on the site's pages run, so they cannot rot.

Each page's fenced blocks run in order, in one fresh directory, as one bash script (the way a reader
follows a page top to bottom): a ``bash`` block runs as written; a ``python`` block without a title
runs through the interpreter of this venv; a block with ``title="PATH"`` (YAML, Python, text …) is
written to PATH for the blocks after it. A block the tests cannot run (it needs a paid provider key,
a Ray cluster, a Kubernetes cluster) says so on the line before it, with its reason:
``<!-- docs-test: skip REASON -->``. Other blocks (output, console sessions, diagrams) are not run.

The examples use the simulated provider (``agent-fleet sim-provider``) and small inputs, so a page runs
in seconds and offline; whatever a page starts in the background ends with it (its process group).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_fleet.testing.processes import kill_now

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s+(?P<reason>\S.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
RUN = ("bash", "sh", "python")
PAGE_TIMEOUT_S = 240


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    skip: str | None
    line: int


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        title = TITLE.search(m.group("info"))
        found.append(
            Block(
                lang=m.group("lang"),
                title=title.group("title") if title else None,
                body=m.group("body"),
                skip=skip.group("reason") if skip else None,
                line=text.count("\n", 0, m.start()) + 1,
            )
        )
    return found


def script(page: Path) -> str | None:
    """The page's runnable blocks as one bash script, or None when it has none."""
    parts = ["set -euo pipefail"]
    runnable = False
    for b in blocks(page):
        if b.skip is not None:
            continue
        if b.title is not None:
            path = shlex.quote(b.title)
            parts.append(f"mkdir -p \"$(dirname {path})\"\ncat > {path} <<'__DOCS_FILE__'\n{b.body}__DOCS_FILE__")
        elif b.lang in ("bash", "sh"):
            parts.append(f"# {page.name}:{b.line}\n{b.body}")
            runnable = True
        elif b.lang == "python":
            parts.append(f"# {page.name}:{b.line}\npython - <<'__DOCS_PY__'\n{b.body}__DOCS_PY__")
            runnable = True
    return "\n".join(parts) if runnable else None


def _env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(cwd)  # nothing a page does lands in the real home
    return env


def test_every_block_that_is_not_run_says_why() -> None:
    """A bash or python block is run, written to a file, or skipped with a reason: never ignored."""
    for page in PAGES:
        for b in blocks(page):
            if b.lang in RUN and b.skip is None and b.title is None:
                continue
            if b.skip is not None:
                assert len(b.skip) > 10, f"{page}:{b.line}: give the reason the block is not run"


RUNNABLE = [p for p in PAGES if script(p) is not None]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_the_page_runs(page: Path, tmp_path: Path) -> None:
    code = script(page)
    assert code is not None
    log = tmp_path.parent / f"{tmp_path.name}.out"  # a file, not a pipe: a background process holds no EOF back
    with log.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", code],
            cwd=tmp_path,
            env=_env(tmp_path),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the page's background processes share its group, and end with it
        )
        try:
            proc.wait(timeout=PAGE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{page.name} did not finish in {PAGE_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
        finally:
            kill_now(proc.pid, group=True)
            proc.wait()
    out = log.read_text()
    assert proc.returncode == 0, f"{page.name} failed (exit {proc.returncode}):\n{out[-4000:]}"
