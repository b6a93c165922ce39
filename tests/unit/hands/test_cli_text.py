"""A CLI agent's free-text answer becomes one result per finding, each at the place it names."""

from __future__ import annotations

from agent_fleet.hands.cli_formats import items_from_text, parse_output
from agent_fleet.hands.cli_text import split_findings

AIDER = """I reviewed the files you added. Here are the problems I found:

1. **Hard-coded credential** in `pkg/mod_000.py:3`: the database password is a string literal.
2. **eval on input** — `pkg/mod_000.py:8`: `load_0` passes its text to eval.
   Anyone who controls the text runs code.
3. **Bare except** in pkg/mod_001.py line 10 swallows every error.

Let me know if you want me to fix them.
"""

CLAUDE = """## Review

### 1. SQL built with string formatting
**Location:** `app/db.py:42`

The query interpolates `user_id`.

- **Impact:** injection
- **Fix:** bind parameters

### 2. Unpickling untrusted data
**Location:** `app/cache.py:7`

`pickle.loads` on bytes from the network.
"""

SECTIONS = """## Security
- `a.py:1` hard-coded token
- `b.py:2` shell=True with user input

## Style
- `c.py:3` wildcard import
"""

LINES = """src/x.py:10: unused variable tmp
src/y.py:22: division by zero when the list is empty
"""


def test_numbered_markdown_splits_into_findings_with_their_places() -> None:
    items = split_findings(AIDER)
    assert [(i["title"], i.get("location")) for i in items] == [
        ("Hard-coded credential", "pkg/mod_000.py:3"),
        ("eval on input", "pkg/mod_000.py:8"),
        ("Bare except", "pkg/mod_001.py:10"),
    ]
    assert "Anyone who controls" in items[1]["body"]  # the indented line belongs to its finding
    assert all("Let me know" not in i["body"] for i in items)  # the closing words are no finding


def test_headings_sections_and_plain_lines() -> None:
    claude = split_findings(CLAUDE)
    assert [(i["title"], i["location"]) for i in claude] == [
        ("SQL built with string formatting", "app/db.py:42"),
        ("Unpickling untrusted data", "app/cache.py:7"),
    ]
    assert "bind parameters" in claude[0]["body"]  # its detail list stays with it
    assert [i["location"] for i in split_findings(SECTIONS)] == ["a.py:1", "b.py:2", "c.py:3"]
    assert [i["location"] for i in split_findings(LINES)] == ["src/x.py:10", "src/y.py:22"]


def test_prose_stays_one_result_and_code_is_no_list() -> None:
    prose = "The code looks fine overall.\nI found nothing that needs a change."
    assert split_findings(prose) == []
    assert len(items_from_text(prose)) == 1
    code = "One issue, in `a.py:3`:\n```diff\n- old line\n- another old line\n+ new\n```\n"
    assert split_findings(code) == []
    assert split_findings("Found one:\n- a race in `a.py:1`") == [
        {"title": "a race in `a.py:1`", "body": "a race in `a.py:1`", "location": "a.py:1"}
    ]
    assert split_findings("Found one:\n- a race somewhere") == []


def test_aider_history_review_in_markdown_is_one_result_per_finding() -> None:
    history = "# aider chat started at 2026-01-01\n\n#### Review these files for bugs.\n\n" + AIDER
    report = parse_output("aider", "", files={".aider.chat.history.md": history})
    assert [i.get("location") for i in report.items] == ["pkg/mod_000.py:3", "pkg/mod_000.py:8", "pkg/mod_001.py:10"]
