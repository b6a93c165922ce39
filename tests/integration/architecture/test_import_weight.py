"""Ports are real: importing a plane's port loads neither the plane's implementations nor any other
plane's, nor a third-party package (what a fresh interpreter has in ``sys.modules`` afterwards, beyond
what it starts with — the modules ``python -X importtime -c "import …"`` lists)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PLANES = ("admission", "aggregate", "brain", "decompose", "dispatch", "hands", "observe", "session", "spend")
PORTS = ("brain", "dispatch", "hands", "session", "spend")
# Pure value modules a port re-exports from its own plane (no I/O, no third-party imports).
PORT_VALUES = {
    "brain": {
        "agent_fleet.brain.step",
        "agent_fleet.brain.view",
        "agent_fleet.brain.protocol",
        "agent_fleet.brain.context",
    },
    "hands": {
        "agent_fleet.hands.resources",
        "agent_fleet.hands.cli_state",
        "agent_fleet.hands.cli_formats",
        "agent_fleet.hands.cli_text",
    },
}


def _loaded(statement: str) -> list[str]:
    code = f"{statement}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.splitlines()[-1]))


_STARTUP = frozenset(_loaded("pass"))


def imported_by(statement: str) -> list[str]:
    """The modules a fresh interpreter loads to run ``statement``, beyond those it starts with."""
    return [m for m in _loaded(statement) if m not in _STARTUP and m not in ("json", "json.decoder", "json.scanner")]


def _third_party(modules: list[str]) -> set[str]:
    return {r for r in {m.split(".")[0] for m in modules} if r not in sys.stdlib_module_names and r != "agent_fleet"}


def test_the_spend_port_loads_no_gateway_provider_or_http_client() -> None:
    mods = imported_by("import agent_fleet.spend.port")
    assert "agent_fleet.spend.port" in mods
    banned = [m for m in mods if m.startswith(("httpx", "aiohttp", "httpx_aiohttp", "agent_fleet.spend.providers"))]
    banned += [m for m in mods if m.startswith("agent_fleet.spend.") and m != "agent_fleet.spend.port"]
    assert banned == []
    assert _third_party(mods) == set()


def test_the_session_port_loads_neither_backend_nor_asyncpg() -> None:
    mods = imported_by("import agent_fleet.session.port")
    assert "agent_fleet.session.port" in mods
    backends = {"agent_fleet.session.sqlite", "agent_fleet.session.postgres", "agent_fleet.session.store"}
    assert backends.isdisjoint(mods)
    assert not [m for m in mods if m.split(".")[0] in ("asyncpg", "sqlite3", "_sqlite3")]
    assert _third_party(mods) == set()


@pytest.mark.parametrize("plane", PORTS)
def test_a_port_loads_only_ports_and_domain_values(plane: str) -> None:
    mods = [m for m in imported_by(f"import agent_fleet.{plane}.port") if m.startswith("agent_fleet")]
    allowed_values = set().union(*PORT_VALUES.values())  # a port may use another port's values
    for m in mods:
        parts = m.split(".")
        ok = (
            m in ("agent_fleet", "agent_fleet._lazy", "agent_fleet.errors")
            or parts[1] == "domain"
            or (len(parts) == 2 and parts[1] in PLANES)  # a plane's __init__ (its port and value types)
            or (len(parts) == 3 and parts[2] == "port")
            or m in allowed_values
        )
        assert ok, f"import agent_fleet.{plane}.port loads {m}"
    assert _third_party(mods) == set()


@pytest.mark.parametrize("plane", PLANES)
def test_a_plane_package_loads_no_implementation(plane: str) -> None:
    mods = imported_by(f"import agent_fleet.{plane}")
    ours = [m for m in mods if m.startswith(f"agent_fleet.{plane}.")]
    assert set(ours) <= {f"agent_fleet.{plane}.port"} | PORT_VALUES.get(plane, set()), ours
    assert _third_party(mods) == set()


def test_the_package_itself_loads_only_its_error_tree() -> None:
    mods = [m for m in imported_by("import agent_fleet") if m.startswith("agent_fleet")]
    assert sorted(mods) == ["agent_fleet", "agent_fleet._lazy", "agent_fleet.errors"]


_CLI = {"agent_fleet", "agent_fleet._lazy", "agent_fleet.errors", "agent_fleet.cli"} | {
    f"agent_fleet.cli.{name}"
    for name in (
        "app",
        "budget",
        "changes",
        "common",
        "dashboard",
        "demo",
        "gateway",
        "interrupt",
        "mcp",
        "queues",
        "review",
        "runs",
        "serve",
        "serve_client",
        "sim",
    )
}


def _cli_help(*args: str) -> list[str]:
    argv = ["agent-fleet", *args, "--help"]
    return imported_by(
        f"import sys\nsys.argv = {argv!r}\nfrom agent_fleet.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )


def test_the_help_of_the_cli_loads_no_engine_nor_any_heavy_package() -> None:
    mods = _cli_help()
    assert {m for m in mods if m.startswith("agent_fleet")} <= _CLI
    heavy = ("rich", "pydantic", "httpx", "aiohttp", "yaml", "asyncpg", "prometheus_client", "genai_prices", "numpy")
    assert not [m for m in mods if m.split(".")[0] in heavy]


@pytest.mark.parametrize(
    "command", [("deploy",), ("status",), ("queues", "simulate"), ("budget", "raise"), ("dashboard",), ("serve",)]
)
def test_the_help_of_a_command_loads_no_engine(command: tuple[str, ...]) -> None:
    mods = _cli_help(*command)
    assert {m for m in mods if m.startswith("agent_fleet")} <= _CLI
    assert not [m for m in mods if m.split(".")[0] in ("httpx", "aiohttp", "yaml", "asyncpg", "numpy", "rich")]
