"""The README stays short and its links lead somewhere: at most 12,000 bytes, every relative link
(pages, images, anchors aside) names a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_at_most_12000_bytes() -> None:
    size = len(README.read_bytes())
    assert size <= 12_000, f"README.md is {size:,} bytes: move detail into docs/"


def test_every_relative_link_resolves() -> None:
    targets = [t for t in LINK.findall(README.read_text()) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]
    assert targets, "the README links into the site"
    broken = [t for t in targets if not t.startswith("#") and not (ROOT / t.split("#", 1)[0]).exists()]
    assert not broken, f"README.md links to files that do not exist: {broken}"


def test_the_picture_is_a_png() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert images
    for image in images:
        assert (ROOT / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
