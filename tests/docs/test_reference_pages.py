"""The generated reference pages cover what they are generated from: every command of the Typer app,
every section and key of fleet.yaml's models, every path and method of the OpenAPI document."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from agent_fleet.cli.app import build_app
from agent_fleet.config import FleetConfig
from agent_fleet.control.schema import openapi_document

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_gen"))

import refgen


def _commands(group: typer.Typer, prefix: str) -> list[str]:
    names = [f"{prefix} {c.name}" for c in group.registered_commands if c.name]
    for sub in group.registered_groups:
        if sub.typer_instance is not None and sub.name:
            names += _commands(sub.typer_instance, f"{prefix} {sub.name}")
    return names


def test_the_cli_page_has_every_command_and_option() -> None:
    page = refgen.cli_markdown()
    commands = _commands(build_app(), "agent-fleet")
    assert len(commands) > 15
    for name in commands:
        assert f"## `{name}`" in page or f"`{name}`" in page, name
    for flag in ("--task", "--budget-tokens", "--progress", "--store", "--retry-failed"):
        assert f"`{flag}" in page, flag


def test_the_fleet_yaml_page_has_every_key() -> None:
    page = refgen.fleet_yaml_markdown()
    for name, field in FleetConfig.model_fields.items():
        assert f"| `{name}` |" in page, name
        for sub in refgen._models_in(field.annotation):
            assert f"{{ #{sub.__name__.lower()} }}" in page, sub
            for key in sub.model_fields:
                assert f"| `{key}` |" in page, (name, key)


def test_the_rest_page_has_every_path_and_method() -> None:
    document = openapi_document()
    page = refgen.rest_markdown(document)
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"## `{method.upper()} {path}`" in page
