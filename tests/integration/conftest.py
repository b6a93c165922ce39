"""The integration tests, one folder per plane of ``agent_fleet`` (as ``tests/unit``), and what they share.

Helpers that only one folder uses live in it (``hands/_engine_child.py``, ``engine/_git_server.py``, …);
the ones several folders use live here: ``_hands_support`` (sandboxes, git repositories, process
checks), imported by its bare name from every folder, and ``_mcp_server.py``, a script the tests start
as ``Path(__file__).parents[1] / "_mcp_server.py"``. For the former this folder goes on ``sys.path``
below (pytest's default import mode puts only each test module's own folder there; a conftest's too,
as it imports one, but the helpers should not hang on that).
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
