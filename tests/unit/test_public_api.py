"""The public API is explicit: this pins it, and checks what every name is and where it comes from."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest

import agent_fleet

# name → (what it is, the module it is also exported from)
EXPECTED: dict[str, tuple[str, str]] = {
    "AdmissionController": ("class", "agent_fleet.admission"),
    "Aggregator": ("class", "agent_fleet.aggregate"),
    "Engine": ("class", "agent_fleet.engine"),
    "FleetError": ("exception", "agent_fleet.errors"),
    "Gateway": ("class", "agent_fleet.spend"),
    "Partition": ("dataclass", "agent_fleet.domain"),
    "Plan": ("dataclass", "agent_fleet.domain"),
    "ResultItem": ("dataclass", "agent_fleet.domain"),
    "RunOptions": ("dataclass", "agent_fleet.options"),
    "RunReport": ("dataclass", "agent_fleet.options"),
    "SessionLog": ("protocol", "agent_fleet.session"),
    "__version__": ("str", "agent_fleet"),
    "decompose": ("function", "agent_fleet.decompose"),
    "deploy": ("coroutine function", "agent_fleet.engine"),
    "estimate": ("coroutine function", "agent_fleet.engine"),
    "open_engine": ("async context manager", "agent_fleet.engine"),
    "open_store": ("function", "agent_fleet.session"),
    "resume": ("coroutine function", "agent_fleet.engine"),
}


def kind_of(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if inspect.isclass(value):
        if issubclass(value, BaseException):
            return "exception"
        if getattr(value, "_is_protocol", False):
            return "protocol"
        return "dataclass" if dataclasses.is_dataclass(value) else "class"
    if inspect.iscoroutinefunction(value):
        return "coroutine function"
    if inspect.isfunction(value):
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None and inspect.isasyncgenfunction(wrapped):
            return "async context manager"
        return "function"
    return type(value).__name__  # a module, say: never what the API promises


def test_public_api_is_pinned() -> None:
    assert sorted(agent_fleet.__all__) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_public_name_is_what_it_says(name: str) -> None:
    kind, home = EXPECTED[name]
    value = getattr(agent_fleet, name)
    assert kind_of(value) == kind
    assert value is getattr(importlib.import_module(home), name)


def test_the_version_is_the_distributions() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert agent_fleet.__version__ == tomllib.loads(pyproject.read_text())["project"]["version"]


def test_decompose_is_the_function_even_after_its_package_is_imported(tmp_path: Path) -> None:
    # The import system binds a subpackage to its parent's attribute of the same name; the package
    # agent_fleet.decompose must not take the name of the function agent_fleet.decompose.
    package = importlib.import_module("agent_fleet.decompose")
    from agent_fleet import decompose

    assert inspect.isfunction(decompose) and decompose is package.decompose
    items = tmp_path / "items.txt"
    items.write_text("a\nb\nc\nd\n")
    plan = decompose("Review", items, agents=2)
    assert isinstance(plan, agent_fleet.Plan) and len(plan.partitions) == 2
    assert sorted(i for p in plan.partitions for i in p.items) == ["a", "b", "c", "d"]


def test_a_plane_export_keeps_its_name_over_a_submodule_of_that_name() -> None:
    importlib.import_module("agent_fleet.admission.simulate")
    import agent_fleet.admission as admission

    assert inspect.isfunction(admission.simulate)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agent_fleet.nope  # noqa: B018


def test_engine_exports_are_explicit() -> None:
    import agent_fleet.engine as engine

    for name in engine.__all__:
        assert hasattr(engine, name), name
