"""The composition root: every part an engine is built from closes again, in reverse, when a later
one fails; fleet.yaml is read once per run, and that one reading reaches every plane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agent_fleet.engine.compose as compose
import agent_fleet.engine.phases as phases
import agent_fleet.engine.workforce as workforce
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.engine import RunOptions, deploy, open_engine
from agent_fleet.engine.workforce import Workforce
from agent_fleet.errors import ConfigError
from agent_fleet.session.lease import LeaseKeeper
from agent_fleet.session.sqlite import SqliteSessionLog
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.provider import SimConfig
from agent_fleet.spend.gateway import Gateway


async def test_a_part_that_fails_closes_what_was_built_before_it_in_reverse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []

    def recording(cls: type[Any], name: str, label: str) -> None:
        inner = getattr(cls, name)

        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            closed.append(label)
            return await inner(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    recording(SqliteSessionLog, "close", "log")
    recording(LeaseKeeper, "release", "lease")
    recording(Gateway, "aclose", "gateway")

    async def no_workforce(**_kwargs: Any) -> Workforce:
        raise ConfigError("fleet.yaml: hands: the sandbox root belongs to someone else")

    monkeypatch.setattr(Workforce, "open", no_workforce)
    options = RunOptions(task="t", provider="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="sandbox root"):
        async with open_engine(options, run_id="run-c", store_url=f"sqlite:///{tmp_path / 'f.db'}", check=False):
            pytest.fail("the engine must not open")
    assert closed == ["gateway", "lease", "log"]


async def test_fleet_yaml_is_read_once_per_run_and_every_plane_gets_that_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("guards: {max_turns: 7}\nverification: {fraction: 0, minimum: 0}\n")
    reads: list[str | None] = []
    readings: list[FleetConfig] = []

    def counted(path: str | Path | None) -> FleetConfig:
        reads.append(str(path))
        readings.append(load_config(path))
        return readings[-1]

    for module in (phases, compose, workforce):
        monkeypatch.setattr(module, "load_config", counted)
    seen: list[FleetConfig] = []
    opened = Workforce.open

    async def watched(**kwargs: Any) -> Workforce:
        seen.append(kwargs["config"])
        return await opened(**kwargs)

    monkeypatch.setattr(Workforce, "open", watched)
    items = tmp_path / "items.txt"
    items.write_text("one\ntwo\n")
    async with SimProvider(SimConfig(latency=0.0)) as sim:
        options = RunOptions(
            task="Summarise each item",
            input_path=str(items),
            agents=2,
            provider=sim.base_url,
            config_path=str(config),
            embedder="lexical",
            out_dir=str(tmp_path / "out"),
        )
        report = await deploy(options, store_url=f"sqlite:///{tmp_path / 'f.db'}", api_key="sk-test")
    assert report.status == "completed"
    assert reads == [str(config)]
    assert seen[0] is readings[0] and seen[0].guards.max_turns == 7  # the workforce got the one reading
    assert "verification" not in report.summary  # and so did the run's verification
