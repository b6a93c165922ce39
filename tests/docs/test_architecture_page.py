"""The architecture page describes the code as it is: every top-level package and module of
``src/agent_fleet`` is named with what it owns, the package map puts each in its import-linter layer,
and the dependency rules are the import-linter layers of pyproject.toml, in their order."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import agent_fleet

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "concepts" / "architecture.md"
PACKAGE = Path(agent_fleet.__file__).parent


def _rows() -> dict[str, str]:
    """First cell → second cell of every table row whose first cell is one code span."""
    rows: dict[str, str] = {}
    for line in PAGE.read_text().splitlines():
        m = re.match(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def _top_level() -> list[str]:
    names = []
    for entry in sorted(PACKAGE.iterdir()):
        if entry.is_dir() and not entry.name.startswith(("__", ".")):
            names.append(entry.name + "/")
        elif entry.suffix == ".py":
            names.append(entry.name)
    return names


def test_every_top_level_package_and_module_is_named_with_what_it_owns() -> None:
    rows = _rows()
    missing = [name for name in _top_level() if len(rows.get(name, "")) < 20]
    assert not missing, f"not on docs/concepts/architecture.md (with what it owns): {missing}"


def test_the_page_names_nothing_that_is_gone() -> None:
    present = set(_top_level())
    stale = [name for name in _rows() if name.endswith(("/", ".py")) and name not in present]
    assert not stale, f"named on the architecture page but not in src/agent_fleet: {stale}"


def test_the_layers_are_pyprojects_in_order() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    text = PAGE.read_text()
    listed = re.findall(r"^\d+\. `([^`]+)`", text, flags=re.MULTILINE)
    assert listed == layers


def test_the_package_map_puts_each_package_in_its_pyproject_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    members = [{name.strip("() ") for name in layer.split(":")} for layer in layers]
    placed = {}
    for line in PAGE.read_text().splitlines():
        m = re.match(r"^\|\s*`([^`]+)`\s*\|\s*(\d+)\s*\|", line)
        if m:
            placed[m.group(1).removesuffix("/").removesuffix(".py")] = int(m.group(2))
    every_layered = {name for layer in members for name in layer}
    unplaced = every_layered - set(placed)
    assert not unplaced, f"in a layer of pyproject.toml but not on the map: {unplaced}"
    wrong = {name: n for name, n in placed.items() if name not in members[n - 1]}
    assert not wrong, f"on the map in a layer pyproject.toml does not put them in: {wrong}"
