"""Export → load gives the same admission decisions: every ``queues simulate`` scenario of the test
suite is run as written and again with its objects replaced by their Kueue v1beta2 export, and the
two ``--json`` results must be equal."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from kueue_v1beta2_rules import API, check

from agent_fleet.admission import load_kueue_yaml, parse_scenario, simulate
from agent_fleet.admission.kueue_export import dump_yaml, export_objects

TESTS = Path(__file__).resolve().parents[2]
# Where the suite's scenarios live, and the names they are kept under there.
SOURCES = {
    "integration/admission/test_queues_cli.py": ("SCENARIO", "FAIR_SCENARIO"),
    "unit/admission/test_simulate_and_controller.py": ("SCENARIOS",),
    "unit/admission/test_fair_sharing.py": ("SCENARIOS",),
    "e2e/test_quotas.py": ("SCENARIOS",),
}


def _module(relative: str) -> ModuleType:
    name = "roundtrip_" + re.sub(r"\W", "_", relative)
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def suite_scenarios() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for relative, names in SOURCES.items():
        module = _module(relative)
        for name in names:
            value = getattr(module, name)
            if isinstance(value, str):
                found[f"{relative}:{name}"] = yaml.safe_load(value)
            else:
                found.update({f"{relative}:{key}": scenario for key, scenario in value.items()})
    return found


SCENARIOS = suite_scenarios()


def exported(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(dump_yaml(export_objects(load_kueue_yaml(objects)))))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_export_then_load_gives_the_same_admission_decisions(name: str) -> None:
    scenario = SCENARIOS[name]
    docs = exported(scenario["objects"])
    assert all(check(d) == [] for d in docs if d["apiVersion"] == API)
    again = {**scenario, "objects": docs}
    before = simulate(parse_scenario(scenario)).to_json()
    after = simulate(parse_scenario(again)).to_json()
    assert after == before
    assert before["timeline"]  # the scenario decided something
    # The objects themselves come back equal, so any other workload would be decided alike too.
    original, reloaded = parse_scenario(scenario).objects, parse_scenario(again).objects
    assert replace(reloaded, warnings=()) == replace(original, warnings=())


def test_every_scenario_of_the_suite_is_in_the_round_trip() -> None:
    # A new test file that runs scenarios must name them in SOURCES, or this fails.
    users = {
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("test_*.py")
        if path.name != Path(__file__).name
        and re.search(r"parse_scenario\(|load_scenario\(|\"queues\",\s*\"simulate\",\s*\w", path.read_text())
    }
    assert users == set(SOURCES)
    assert len(SCENARIOS) == 12


def test_a_scenario_whose_export_lost_a_field_would_decide_differently() -> None:
    # The comparison can fail: dropping the preemption policy the export writes changes the outcome.
    scenario = SCENARIOS["unit/admission/test_simulate_and_controller.py:preempted runtime restarts"]
    docs = exported(scenario["objects"])
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            del doc["spec"]["preemption"]
    broken = simulate(parse_scenario({**scenario, "objects": docs})).to_json()
    assert broken["final"] != simulate(parse_scenario(scenario)).to_json()["final"]
