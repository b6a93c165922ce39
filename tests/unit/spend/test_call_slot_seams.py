"""A call's steps reach the gateway through public members only: no ``other._name`` in the spend plane.

``CallSlot`` works against :class:`~agent_fleet.spend.call.SlotHost` and the shared
:class:`~agent_fleet.spend.traffic.Traffic`; every other module of the plane that takes a gateway (or a
provider, a meter) uses its public members too. Attributes of ``self`` and ``cls`` are the class's own
and are allowed, as are dunders.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest

import agent_fleet.spend
from agent_fleet.clock import VirtualClock
from agent_fleet.spend.call import SlotHost
from agent_fleet.spend.gateway import Gateway
from agent_fleet.testing.fakes import FakeProvider

SEAMED = sorted(m.name for m in pkgutil.walk_packages(agent_fleet.spend.__path__, "agent_fleet.spend.") if not m.ispkg)


def private_reaches(source: str) -> list[str]:
    """``owner._name`` attribute accesses where the owner is not ``self`` or ``cls``, as written, and
    ``getattr(owner, "_name", ...)`` on any owner."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
            named = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            if isinstance(named, str) and named.startswith("_") and not named.startswith("__"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
            continue
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_sees_a_reach_into_another_object() -> None:
    source = (
        "def f(gw, self):\n    gw._exhausted.add(1)\n    self._x = gw.book._accounts\n    self.__class__\n"
        "    getattr(gw, '_max_field', 'm')\n    getattr(gw, '__wrapped__', None)\n"
    )
    assert sorted(private_reaches(source)) == [
        "line 2: gw._exhausted",
        "line 3: gw.book._accounts",
        "line 5: getattr(gw, '_max_field', 'm')",
    ]


def test_the_call_and_its_neighbours_are_among_the_modules_checked() -> None:
    assert {"agent_fleet.spend.call", "agent_fleet.spend.traffic", "agent_fleet.spend.gateway"} <= set(SEAMED)


@pytest.mark.parametrize("module", SEAMED)
def test_no_module_of_the_spend_plane_reaches_into_another_objects_private_members(module: str) -> None:
    source = inspect.getsource(importlib.import_module(module))
    assert private_reaches(source) == []


def test_the_gateway_hands_itself_to_its_slots_as_their_host() -> None:
    clock = VirtualClock()
    gw = Gateway(FakeProvider(clock, model="m"), clock=clock)
    members = {n for n in dir(SlotHost) if not n.startswith("_")}
    assert members == {"accounts", "book", "clock", "meter", "prices", "rand", "retry", "traffic"}
    assert [n for n in sorted(members) if not hasattr(gw, n)] == []
    slot = gw.slot("s1", model="m", prompt_tokens=10, max_tokens=10)
    assert slot.lane is gw.traffic.lanes["fake"]
