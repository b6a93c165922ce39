"""Lazy exports for package ``__init__`` modules (PEP 562).

A plane's ``__init__`` imports its port and value types; its implementations are named in a table
and imported on first use, so importing a port never loads the code behind it.
"""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False  # see agent_fleet/__init__.py: importing this must not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]

_TABLE = "__lazy_exports__"


class _ExportingPackage(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds each submodule to its parent's attribute of the same name once the
        # submodule is loaded. Where the package exports something else under that name (the function
        # ``agent_fleet.decompose``, ``agent_fleet.admission.simulate``), the export keeps the name.
        if isinstance(value, types.ModuleType) and name in vars(self).get(_TABLE, ()):
            return
        super().__setattr__(name, value)


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps an exported name to the module that
    defines it. The value is imported on first access and kept in the package's namespace."""
    module = sys.modules[package]
    vars(module)[_TABLE] = dict(table)
    module.__class__ = _ExportingPackage

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        vars(module)[name] = value
        return value

    return __getattr__
