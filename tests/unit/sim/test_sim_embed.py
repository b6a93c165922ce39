"""Deterministic embeddings: unit vectors whose cosine tracks textual overlap."""

from __future__ import annotations

import math
import re

from agent_fleet.sim.embed import DIMENSIONS, embed


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_length_and_deterministic() -> None:
    for text in ("", "x", "Bare except swallows errors in billing/payments.py"):
        v = embed(text)
        assert len(v) == DIMENSIONS
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-9)
        assert embed(text) == v


def test_similarity_orders_near_duplicates_above_related_above_unrelated() -> None:
    a = "In stockroom/api/orders.py at line 29, a bare except catches every exception and hides failures."
    near = "In stockroom/api/products.py at line 24, a bare except catches every exception and hides failures."
    related = "Catching every exception with a bare except clause hides real failures."
    unrelated = "The quarterly sales report exports revenue per warehouse to CSV."
    s_near = cos(embed(a), embed(near))
    s_related = cos(embed(a), embed(related))
    s_unrelated = cos(embed(a), embed(unrelated))
    assert s_near > 0.95
    assert s_near > s_related > s_unrelated
    assert s_unrelated < 0.3


def test_truncated_dimensions_are_renormalised() -> None:
    v = embed("hello world", 64)
    assert len(v) == 64
    assert math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-9)


def test_demo_findings_of_one_rule_cluster_and_different_rules_do_not() -> None:
    import itertools
    import pathlib

    import agent_fleet
    from agent_fleet.sim.detectors import detect_many

    demo = pathlib.Path(agent_fleet.__file__).parent / "samples" / "demo-repo"
    findings = detect_many({p.relative_to(demo).as_posix(): p.read_text() for p in sorted(demo.rglob("*.py"))})
    # same rule, same wording (the body with its file, numbers and quoted code masked), different files
    groups: dict[tuple[str, str], list[str]] = {}
    for f in findings:
        wording = re.sub(r"`[^`]*`|\d+", "#", f.body.replace(f.path, "P"))
        groups.setdefault((f.rule, wording), []).append(f.title + " " + f.body)
    near = [cos(embed(x), embed(y)) for g in groups.values() for x, y in itertools.combinations(g, 2) if x != y]
    assert len(near) >= 50
    assert sum(s >= 0.95 for s in near) >= 0.9 * len(near)
    first_of_rule = {f.rule: f.title + " " + f.body for f in reversed(findings)}
    across = [cos(embed(x), embed(y)) for x, y in itertools.combinations(first_of_rule.values(), 2)]
    assert max(across) < 0.6
