"""The one bounded YAML loader: size, alias and node limits; one line naming the file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_fleet.config import MAX_YAML_ALIASES, MAX_YAML_BYTES, load_config, load_yaml
from agent_fleet.errors import ConfigError


def _bomb(levels: int = 10, fan: int = 9) -> str:
    lines = [f"a0: &a0 [{', '.join(['lol'] * fan)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]")
    return "\n".join(lines)


def test_an_alias_bomb_under_mcp_servers_env_fails_fast(tmp_path: Path) -> None:
    body = "\n".join("      " + line for line in _bomb().splitlines())
    path = tmp_path / "fleet.yaml"
    path.write_text(f"mcp_servers:\n  evil:\n    command: echo\n    env:\n{body}\n")
    assert path.stat().st_size < 1_000
    started = time.process_time()
    with pytest.raises(ConfigError, match=r"fleet\.yaml: YAML too large: more than 500000 nodes") as caught:
        load_config(path)
    assert time.process_time() - started < 5.0  # walked up to the bound, never expanded (9**10 nodes)
    assert "\n" not in str(caught.value)


def test_alias_uses_are_bounded() -> None:
    text = "base: &b 1\nitems: [" + ", ".join(["*b"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    with pytest.raises(ConfigError, match=rf"x\.yaml: YAML refused: more than {MAX_YAML_ALIASES} aliases"):
        load_yaml(text, source="x.yaml")
    ok = "base: &b 1\nitems: [" + ", ".join(["*b"] * 10) + "]\n"
    assert load_yaml(ok, source="x.yaml") == {"base": 1, "items": [1] * 10}


def test_size_is_bounded_and_documents_are_read_one_or_all() -> None:
    with pytest.raises(ConfigError, match="larger than"):
        load_yaml("a: " + "x" * MAX_YAML_BYTES, source="big.yaml")
    assert load_yaml("a: 1\n---\nb: 2\n", source="k.yaml") == {"a": 1}
    assert load_yaml("a: 1\n---\nb: 2\n", source="k.yaml", all_documents=True) == [{"a": 1}, {"b": 2}]
    assert load_yaml("", source="e.yaml") is None


def test_bad_yaml_and_unsafe_tags_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^f\.yaml: line 2 is not valid YAML \(") as caught:
        load_yaml("models: [\n", source="f.yaml")
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml("x: !!python/object/apply:os.system ['true']\n", source="f.yaml")
    with pytest.raises(ConfigError, match="nesting too deep"):
        load_yaml("[" * 100_000, source="f.yaml")


def test_a_missing_fleet_yaml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^cannot read fleet\.yaml .*nope\.yaml: No such file or directory$"):
        load_config(tmp_path / "nope.yaml")


def test_a_fleet_yaml_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    from agent_fleet.config import load_config

    path = tmp_path / "fleet.yaml"
    path.write_text("rate_limit: {baseline_concurrency: 7}\n")
    first = load_config(path)
    assert load_config(str(path)) is first  # one reading for every plane of a run
    path.write_text("rate_limit: {baseline_concurrency: 9}\n")  # another size: read again
    again = load_config(path)
    assert again is not first and again.rate_limit.baseline_concurrency == 9


def test_a_models_call_shape_is_checked_in_one_line() -> None:
    from agent_fleet.config import parse_config
    from agent_fleet.domain.calls import CallShape, Quirks

    entry = {"name": "local", "provider": "http://127.0.0.1:8080/v1", "model": "m"}
    cfg = parse_config(
        {"models": [{**entry, "max_tokens": 256, "temperature": 0, "seed": 7, "compat": ["no_usage_chunk"]}]}
    )
    (model,) = cfg.models
    assert CallShape.of(model) == CallShape(max_tokens=256, temperature=0.0, seed=7)
    assert Quirks.declared(model.compat).has("no_usage_chunk") is True
    for bad, words in (
        ({"compat": ["streams_sideways"]}, "unknown compat streams_sideways"),
        ({"tool_choice": "sometimes"}, "models.0.tool_choice"),
        ({"temperature": 3}, "models.0.temperature"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config({"models": [{**entry, **bad}]})
        assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
