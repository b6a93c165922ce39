"""Config errors are found before a run is recorded: exit 2, one line, no run left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Cli, write_lines


def _bomb_yaml(path: Path) -> Path:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    body = "\n".join("      " + line for line in lines)
    path.write_text(f"mcp_servers:\n  evil:\n    command: echo\n    env:\n{body}\n")
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--queue", "nope"), "unknown --queue 'nope': no such LocalQueue (known: default/default)"),
        (("--priority", "urgent"), "unknown --priority 'urgent': no such WorkloadPriorityClass (known: none)"),
        (("--embedder", "foo"), "unknown embedder 'foo': use auto, lexical, minilm or provider"),
        (("--config", "queues-missing.yaml"), "queues: no such file"),
        (("--config", "bomb.yaml"), "bomb.yaml: YAML too large: more than 500000 nodes once aliases are expanded"),
    ],
)
def test_a_config_error_is_one_line_exit_2_and_no_run(
    cli: Cli, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    src = write_lines(tmp_path / "urls.txt", 20)
    (tmp_path / "queues-missing.yaml").write_text("queues: kueue-nowhere.yaml\n")
    _bomb_yaml(tmp_path / "bomb.yaml")
    args = ["--task", "Summarise", "--input", str(src), "--agents", "2", "--embedder", "lexical"]
    proc = cli.run("deploy", *args, *extra, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("agent-fleet: error: "), proc.stderr
    assert message in proc.stderr
    code, runs = cli.json("status")
    assert code == 0 and runs["runs"] == []  # nothing recorded
