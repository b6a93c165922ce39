"""Stand-in for a CLI reviewer that reports planted findings (``agent_fleet.testing.planted``).

``planted_agent.py PARTITION_FILE``: prints, one JSON result item per line, every planted finding
located in a file the partition lists. No model call: the findings are known, so a run's dedup can be
checked against them. Loads ``planted.py`` by path (it imports only the standard library), so it runs
in any sandbox that can see this package's directory.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def main() -> int:
    spec = importlib.util.spec_from_file_location("planted", Path(__file__).resolve().parents[1] / "planted.py")
    assert spec is not None and spec.loader is not None
    planted = importlib.util.module_from_spec(spec)
    sys.modules["planted"] = planted  # dataclasses look their module up while the class is made
    spec.loader.exec_module(planted)
    mine = {line.strip().removeprefix("- ") for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()}
    for f in planted.planted_findings():
        if f.path in mine:
            print(json.dumps(f.to_item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
