"""The layering rules of ARCHITECTURE.md are import-linter contracts (pyproject.toml); these tests
run ``lint-imports`` on the package as it is, and on a copy with one forbidden import added to show
that each contract catches what it forbids."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(project / "src")}  # the copy shadows the installed package
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(project / "pyproject.toml")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "src" / "agent_fleet",
        tmp_path / "src" / "agent_fleet",
        ignore=shutil.ignore_patterns("samples", "__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _add_import(project: Path, module: str, line: str) -> None:
    path = project / "src" / Path(*module.split(".")).with_suffix(".py")
    if not path.exists():  # a package
        path = path.with_suffix("") / "__init__.py"
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")


def test_the_package_keeps_every_contract() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 4 kept, 0 broken." in proc.stdout


def test_the_unchanged_copy_keeps_every_contract(copy: Path) -> None:
    proc = _lint(copy)  # what the tests below break, one import at a time
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_plane_importing_another_planes_implementation_breaks_the_ports_contract(copy: Path) -> None:
    _add_import(copy, "agent_fleet.dispatch.runner", "from agent_fleet.spend.gateway import Gateway")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "Contracts: 3 kept, 1 broken." in proc.stdout
    assert "Illegal imports of protected package agent_fleet.spend" in proc.stdout
    assert "agent_fleet.dispatch.runner -> agent_fleet.spend.gateway" in proc.stdout


def test_a_plane_importing_another_planes_init_breaks_the_ports_contract(copy: Path) -> None:
    # a package __init__ may re-export implementations lazily: planes go through <plane>.port only
    _add_import(copy, "agent_fleet.observe.metrics", "from agent_fleet.aggregate import Aggregator")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "agent_fleet.observe.metrics -> agent_fleet.aggregate" in proc.stdout


def test_serves_host_importing_a_planes_implementation_breaks_the_ports_contract(copy: Path) -> None:
    # control reaches the planes through agent_fleet.engine: no whole-package exception covers it
    _add_import(copy, "agent_fleet.control.views", "from agent_fleet.observe.summary import read_run_figures")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "agent_fleet.control.views -> agent_fleet.observe.summary" in proc.stdout


def test_serves_host_importing_an_engine_module_breaks_the_control_contract(copy: Path) -> None:
    _add_import(copy, "agent_fleet.control.views", "from agent_fleet.engine.run import DEFAULT_GRACE_S")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "Contracts: 3 kept, 1 broken." in proc.stdout
    assert "agent_fleet.control.views -> agent_fleet.engine.run" in proc.stdout


def test_importing_a_port_keeps_the_contracts(copy: Path) -> None:
    _add_import(copy, "agent_fleet.aggregate.outputs", "from agent_fleet.session.port import SessionLog")
    proc = _lint(copy)
    assert proc.returncode == 0, proc.stdout


def test_domain_importing_the_package_breaks_the_domain_contract(copy: Path) -> None:
    _add_import(copy, "agent_fleet.domain.usage", "from agent_fleet.clock import RealClock")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "domain imports nothing else of the package" in proc.stdout
    assert "agent_fleet.domain is not allowed to import agent_fleet.clock" in proc.stdout


def test_a_plane_importing_the_engine_breaks_the_layers(copy: Path) -> None:
    _add_import(copy, "agent_fleet.spend.meter", "from agent_fleet.engine import Engine")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "agent_fleet.spend is not allowed to import agent_fleet.engine" in proc.stdout


def test_the_engine_importing_the_cli_breaks_the_layers(copy: Path) -> None:
    _add_import(copy, "agent_fleet.engine", "import agent_fleet.cli.common")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "agent_fleet.engine is not allowed to import agent_fleet.cli" in proc.stdout


def test_a_new_top_level_module_must_be_placed_in_a_layer(copy: Path) -> None:
    (copy / "src" / "agent_fleet" / "stray.py").write_text('"""Somewhere outside the layers."""\n')
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout
    assert "stray" in proc.stdout
