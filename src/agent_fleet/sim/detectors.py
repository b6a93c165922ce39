"""Deterministic code-review detectors the simulated agent runs over the files it has read.

Each rule (an entry of ``rules.toml``) is a line-level pattern with a fixed title, so the same
mistake in two files yields findings with the same title and similar bodies, the wording picked by a
stable hash of rule, file and line: a wording that names the file, line and offending construct; a
general explanation with only the location appended (near-duplicates across files); or the general
explanation alone (exact duplicates). All patterns are compiled once at import and results are cached
per ``(path, text)``."""

from __future__ import annotations

import re
import tomllib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["RULES", "Finding", "Rule", "detect", "detect_many"]

# A file contributes at most this many findings, so one generated file cannot flood a partition.
_MAX_FINDINGS_PER_FILE = 30
_SNIPPET_CHARS = 48


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    title: str
    body: str
    category: str
    confidence: float
    path: str
    line: int

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def to_item(self) -> dict[str, Any]:
        """The finding as a ``submit_result`` item."""
        return {
            "title": self.title,
            "body": self.body,
            "category": self.category,
            "confidence": self.confidence,
            "location": self.location,
        }


@dataclass(frozen=True, slots=True)
class _FileInfo:
    path: str
    is_test: bool
    is_script: bool


def _every_file(info: _FileInfo) -> bool:
    return True


def _library_only(info: _FileInfo) -> bool:
    return not info.is_test and not info.is_script


def _not_tests(info: _FileInfo) -> bool:
    return not info.is_test


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector. ``templates`` use ``{path}``, ``{line}``, ``{code}`` and ``{name}``."""

    id: str
    title: str
    category: str
    confidence: float
    pattern: re.Pattern[str]
    templates: tuple[str, ...]
    applies: Callable[[_FileInfo], bool] = _every_file
    skip_comments: bool = True
    # The part of the line quoted as ``{code}``: the construct itself, not the whole line, so the same
    # mistake in two files reads alike (``pattern``'s match when unset).
    key: re.Pattern[str] | None = None
    in_loops: bool = False  # only inside the body of a ``for`` or ``while`` loop

    @property
    def variants(self) -> tuple[str, ...]:
        """The templates, plus each detail-free one with the location appended (a near-duplicate wording)."""
        located = tuple(t + " Seen in {path} at line {line}." for t in self.templates if "{" not in t)
        return self.templates + located


_FILES: dict[str, Callable[[_FileInfo], bool]] = {
    "all": _every_file,
    "not-tests": _not_tests,
    "library": _library_only,
}


def _rule(raw: dict[str, Any]) -> Rule:
    key = raw.get("key")
    return Rule(
        id=raw["id"],
        title=raw["title"],
        category=raw["category"],
        confidence=float(raw["confidence"]),
        pattern=re.compile(raw["pattern"]),
        templates=tuple(raw["templates"]),
        applies=_FILES[raw.get("files", "all")],
        skip_comments=raw.get("skip_comments", True),
        key=None if key is None else re.compile(key),
        in_loops=raw.get("in_loops", False),
    )


RULES: tuple[Rule, ...] = tuple(
    _rule(raw) for raw in tomllib.loads(Path(__file__).with_name("rules.toml").read_text("utf-8"))["rule"]
)
"""The rules of ``rules.toml``, in the order they run over a line."""

_LOOP_START = re.compile(r"^(\s*)(for|while|async\s+for)\b.*:\s*(#.*)?$")
_COMMENT_LINE = re.compile(r"^\s*#")
_PASS_LINE = re.compile(r"^\s*pass\s*(#.*)?$")
_INLINE_PASS = re.compile(r":\s*pass\b")
_NAME_CAPTURE = re.compile(r"""(?i)\b(\w*(?:password|passwd|secret|token|api_key|apikey)\w*)""")


def _file_info(path: str) -> _FileInfo:
    parts = path.replace("\\", "/").split("/")
    name = parts[-1]
    is_test = "tests" in parts[:-1] or "test" in parts[:-1] or name.startswith("test_") or name == "conftest.py"
    is_script = "scripts" in parts[:-1] or name in {"__main__.py", "setup.py", "manage.py"}
    return _FileInfo(path=path, is_test=is_test, is_script=is_script)


def _stable(*parts: object) -> int:
    return zlib.crc32("\x1f".join(str(p) for p in parts).encode())


def _make(rule: Rule, info: _FileInfo, lineno: int, raw: str) -> Finding:
    m = (rule.key or rule.pattern).search(raw)
    code = (m.group(0) if m else raw).strip()
    if len(code) > _SNIPPET_CHARS:
        code = code[: _SNIPPET_CHARS - 1] + "…"
    h = _stable(rule.id, info.path, lineno)
    template = rule.variants[h % len(rule.variants)]
    name = ""
    if "{name}" in template:
        m = _NAME_CAPTURE.search(raw)
        name = m.group(1) if m else "a credential"
    body = template.format(path=info.path, line=lineno, code=code, name=name)
    jitter = ((h >> 8) % 11 - 5) / 100
    confidence = round(min(0.95, max(0.5, rule.confidence + jitter)), 2)
    return Finding(rule.id, rule.title, body, rule.category, confidence, info.path, lineno)


@lru_cache(maxsize=4096)
def detect(path: str, text: str) -> tuple[Finding, ...]:
    """Run every rule over one file's text; findings are in line order."""
    if not path.endswith(".py"):
        return ()
    info = _file_info(path)
    rules = [r for r in RULES if r.applies(info)]
    lines = text.splitlines()
    found: list[Finding] = []
    loop_indents: list[int] = []
    for idx, raw in enumerate(lines):
        if not raw.strip():
            continue
        lineno = idx + 1
        indent = len(raw) - len(raw.lstrip())
        while loop_indents and indent <= loop_indents[-1]:
            loop_indents.pop()
        is_comment = bool(_COMMENT_LINE.match(raw))
        for rule in rules:
            if (is_comment and rule.skip_comments) or (rule.in_loops and not loop_indents):
                continue
            if not rule.pattern.search(raw):
                continue
            if rule.id == "except-pass" and not _ends_in_pass(raw, lines, idx):
                continue
            found.append(_make(rule, info, lineno, raw))
        loop = _LOOP_START.match(raw)
        if loop:
            loop_indents.append(len(loop.group(1)))
        if len(found) >= _MAX_FINDINGS_PER_FILE:
            break
    return tuple(found[:_MAX_FINDINGS_PER_FILE])


def _ends_in_pass(raw: str, lines: list[str], idx: int) -> bool:
    if _INLINE_PASS.search(raw):
        return True
    for nxt in lines[idx + 1 :]:
        if nxt.strip():
            return bool(_PASS_LINE.match(nxt))
    return False


def detect_many(files: dict[str, str]) -> list[Finding]:
    """Findings over several files, in the order the files are given."""
    out: list[Finding] = []
    for path, text in files.items():
        out.extend(detect(path, text))
    return out
