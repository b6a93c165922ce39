"""The simulated agent's detectors, run over the bundled demo codebase."""

from __future__ import annotations

import collections
import pathlib

import pytest

import agent_fleet
from agent_fleet.sim.detectors import RULES, detect, detect_many

DEMO = pathlib.Path(agent_fleet.__file__).parent / "samples" / "demo-repo"


def _demo_files() -> dict[str, str]:
    return {p.relative_to(DEMO).as_posix(): p.read_text() for p in sorted(DEMO.rglob("*.py"))}


def _shipped(root: pathlib.Path) -> list[pathlib.Path]:
    """The demo's files as the package ships them: byte-code an install or an import compiled beside
    them (``__pycache__/``, which the demo's own .gitignore leaves out) is not part of it."""
    return [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts]


def test_demo_repo_is_installed_with_its_ignored_files() -> None:
    files = {p.relative_to(DEMO).as_posix() for p in _shipped(DEMO)}
    assert 40 <= len(files) <= 70
    assert {".gitignore", "build/out.txt", "debug.log", "README.md"} <= files
    ignored = (DEMO / ".gitignore").read_text().splitlines()
    assert "build/" in ignored and "__pycache__/" in ignored
    assert sum(p.stat().st_size for p in _shipped(DEMO)) < 200_000


def test_demo_files_are_valid_python() -> None:
    for path, text in _demo_files().items():
        compile(text, path, "exec")


def test_demo_yields_dozens_of_findings_across_many_rules() -> None:
    findings = detect_many(_demo_files())
    assert len(findings) >= 60
    rules = collections.Counter(f.rule for f in findings)
    assert len(rules) >= 12
    # the mistakes are copied between modules, so the common rules fire in several files
    for rule in ("bare-except", "sql-format", "hardcoded-secret", "mutable-default", "eq-none"):
        assert len({f.path for f in findings if f.rule == rule}) >= 4, rule


def test_same_rule_gives_same_title_and_near_duplicate_or_exact_bodies() -> None:
    findings = detect_many(_demo_files())
    by_rule: dict[str, list[str]] = collections.defaultdict(list)
    titles: dict[str, set[str]] = collections.defaultdict(set)
    for f in findings:
        by_rule[f.rule].append(f.body)
        titles[f.rule].add(f.title)
    assert all(len(t) == 1 for t in titles.values())
    assert {r.title for r in RULES} >= {next(iter(t)) for t in titles.values()}
    bare = by_rule["bare-except"]
    assert len(set(bare)) >= 2, "file-specific wording must differ between files"
    exact = collections.Counter((f.title, f.body) for f in findings)
    assert any(n > 1 for n in exact.values()), "some findings carry no file detail and repeat exactly"


def test_findings_point_at_the_offending_line() -> None:
    files = _demo_files()
    for f in detect_many(files):
        path, line = f.location.rsplit(":", 1)
        assert path == f.path
        source_line = files[path].splitlines()[int(line) - 1]
        assert source_line.strip(), f.location
        assert 0.5 <= f.confidence <= 0.95
        assert f.category in {"error-handling", "security", "maintainability", "correctness", "performance"}


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("try:\n    x()\nexcept:\n    raise\n", "bare-except"),
        ("try:\n    x()\nexcept Exception:\n    pass\n", "except-pass"),
        ("x = 1  # TODO: remove\n", "todo"),
        ("value = eval(text)\n", "eval-exec"),
        ("def f(a, b=[]):\n    return b\n", "mutable-default"),
        ("if a == None:\n    pass\n", "eq-none"),
        ('API_TOKEN = "abcd1234"\n', "hardcoded-secret"),
        ('cur.execute(f"SELECT * FROM t WHERE id = {i}")\n', "sql-format"),
        ("def f(x):\n    assert x > 0\n", "assert-validation"),
        ("def f():\n    print('debug')\n", "print-debug"),
        ("from os.path import *\n", "wildcard-import"),
        ("subprocess.run(cmd, shell=True)\n", "shell-command"),
        ("fh = open(p)\n", "open-without-with"),
        ("for i in range(3):\n    time.sleep(1)\n", "sleep-in-loop"),
        ("data = pickle.loads(blob)\n", "pickle-load"),
        ("cfg = yaml.load(text)\n", "yaml-load"),
        ("requests.get(u, verify=False)\n", "tls-verify-off"),
        ("h = hashlib.md5(b)\n", "weak-hash"),
    ],
)
def test_each_rule_fires_on_its_pattern(code: str, rule: str) -> None:
    assert rule in {f.rule for f in detect("pkg/module.py", code)}


@pytest.mark.parametrize(
    "code",
    [
        "try:\n    x()\nexcept ValueError:\n    pass\n",
        "if a is None:\n    pass\n",
        "with open(p) as fh:\n    data = fh.read()\n",
        "time.sleep(1)\n",
        "# eval(text) is never used here\n",
        'cur.execute("SELECT * FROM t WHERE id = %s", (i,))\n',
        "cfg = yaml.safe_load(text)\n",
    ],
)
def test_clean_code_has_no_findings(code: str) -> None:
    assert detect("pkg/module.py", code) == ()


def test_tests_and_scripts_are_spared_library_only_rules() -> None:
    code = "def f(x):\n    assert x\n    print(x)\n"
    assert {f.rule for f in detect("pkg/module.py", code)} == {"assert-validation", "print-debug"}
    assert detect("tests/test_module.py", code) == ()
    assert {f.rule for f in detect("scripts/tool.py", code)} == {"assert-validation"}


def test_non_python_files_have_no_findings() -> None:
    assert detect("README.md", "except:\n# TODO\n") == ()


def test_detection_is_deterministic_and_cached() -> None:
    text = (DEMO / "stockroom" / "db" / "queries.py").read_text()
    first = detect("stockroom/db/queries.py", text)
    second = detect("stockroom/db/queries.py", "".join(text))
    assert first == second
    assert detect.cache_info().hits >= 1
