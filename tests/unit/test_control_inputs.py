"""Where a server's runs may read their input: each team's folders, never the server's own files.

Real files on a real file system: symbolic links and hard links made with ``os``, every refusal checked
to say nothing about whether a path outside the caller's folders exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_fleet.config import TeamConfig
from agent_fleet.control.inputs import Confinement
from agent_fleet.errors import ConfigError, Refused, UsageError

TEAMS = {"alpha": TeamConfig(token_env="A"), "beta": TeamConfig(token_env="B")}


@pytest.fixture
def server(tmp_path: Path) -> Confinement:
    """A server directory: its store, its outputs, fleet.yaml, and two teams' default folders."""
    (tmp_path / "fleet.yaml").write_text("teams: {}\n")
    (tmp_path / "fleet.db").write_bytes(b"SQLite format 3\0")
    (tmp_path / "fleet.db-wal").write_bytes(b"wal")
    out = tmp_path / ".fleet" / "runs" / "run-1"
    out.mkdir(parents=True)
    (out / "report.md").write_text("beta's findings\n")
    confinement = Confinement.build(
        workdir=tmp_path,
        teams=TEAMS,
        config_path=str(tmp_path / "fleet.yaml"),
        store_file=tmp_path / "fleet.db",
        create=True,
    )
    (tmp_path / "inputs" / "alpha" / "urls.txt").write_text("https://example.com/a\n")
    (tmp_path / "inputs" / "alpha" / "repo").mkdir()
    (tmp_path / "inputs" / "alpha" / "repo" / "main.py").write_text("print(1)\n")
    (tmp_path / "inputs" / "beta" / "secret.txt").write_text("beta only\n")
    return confinement


def test_a_team_reads_its_own_folder(server: Confinement) -> None:
    base = server.workdir
    assert server.confine("alpha", "inputs/alpha/urls.txt") == str(base / "inputs/alpha/urls.txt")
    assert server.confine("alpha", str(base / "inputs/alpha/repo")) == str(base / "inputs/alpha/repo")
    assert server.confine(None, "inputs/beta/secret.txt")  # the admin's root is the server's directory


@pytest.mark.parametrize(
    "path",
    [
        "fleet.db",
        "fleet.db-wal",
        "fleet.db-shm",  # not there: refused all the same
        "fleet.yaml",
        ".fleet",
        ".fleet/runs/run-1/report.md",
        "inputs/beta/secret.txt",
        "inputs/beta/not-there.txt",
        "inputs/beta",
        "inputs/alpha/../beta/secret.txt",
        "inputs",
        ".",
        "../..",
        "/etc/passwd",
    ],
)
def test_everything_else_is_refused_for_a_team(server: Confinement, path: str) -> None:
    with pytest.raises(Refused):
        server.confine("alpha", path)


@pytest.mark.parametrize("path", ["fleet.db", "fleet.yaml", ".fleet/runs/run-1/report.md", ".", "inputs/.."])
def test_the_servers_own_files_are_refused_for_the_admin(server: Confinement, path: str) -> None:
    with pytest.raises(Refused):
        server.confine(None, path)


def test_a_missing_file_in_a_teams_own_folder_is_bad_input(server: Confinement) -> None:
    with pytest.raises(UsageError) as raised:
        server.confine("alpha", "inputs/alpha/nope.txt")
    assert not isinstance(raised.value, Refused)


@pytest.mark.parametrize("target", ["fleet.db", ".fleet/runs/run-1/report.md", "inputs/beta/secret.txt", ".fleet"])
def test_a_symbolic_link_out_is_refused(server: Confinement, target: str) -> None:
    link = server.workdir / "inputs" / "alpha" / "link"
    link.symlink_to(server.workdir / target)
    with pytest.raises(Refused):
        server.confine("alpha", "inputs/alpha/link")


@pytest.mark.parametrize("target", ["fleet.db", ".fleet/runs/run-1/report.md", "inputs/beta/secret.txt"])
def test_a_hard_link_to_a_protected_file_is_refused(server: Confinement, target: str) -> None:
    link = server.workdir / "inputs" / "alpha" / "copy.txt"
    os.link(server.workdir / target, link)
    with pytest.raises(Refused, match="hard link"):
        server.confine("alpha", "inputs/alpha/copy.txt")
    nested = server.workdir / "inputs" / "alpha" / "repo" / "notes.txt"
    os.link(server.workdir / target, nested)
    with pytest.raises(Refused, match="hard link"):  # inside a directory input too
        server.confine("alpha", "inputs/alpha/repo")


def test_a_hard_link_inside_the_teams_own_folders_is_fine(server: Confinement) -> None:
    alpha = server.workdir / "inputs" / "alpha"
    os.link(alpha / "urls.txt", alpha / "repo" / "urls-again.txt")
    assert server.confine("alpha", "inputs/alpha/repo")
    assert server.confine("alpha", "inputs/alpha/urls.txt")


def test_team_folders_may_not_overlap_the_servers_files_or_each_other(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("")

    def build(teams: dict[str, TeamConfig]) -> Confinement:
        return Confinement.build(
            workdir=tmp_path, teams=teams, config_path=str(tmp_path / "fleet.yaml"), store_file=tmp_path / "f.db"
        )

    with pytest.raises(ConfigError, match="overlaps the server's own"):
        build({"alpha": TeamConfig(token_env="A", inputs=(".",))})
    with pytest.raises(ConfigError, match="overlaps the server's own"):
        build({"alpha": TeamConfig(token_env="A", inputs=(".fleet/runs",))})
    with pytest.raises(ConfigError, match="overlaps team"):
        build(
            {
                "alpha": TeamConfig(token_env="A", inputs=("data",)),
                "beta": TeamConfig(token_env="B", inputs=("data/b",)),
            }
        )
    built = build({"alpha": TeamConfig(token_env="A", inputs=("data/a", "shared/a"))})
    assert built.roots("alpha") == (tmp_path.resolve() / "data/a", tmp_path.resolve() / "shared/a")
