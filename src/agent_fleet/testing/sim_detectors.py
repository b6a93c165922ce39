"""Deterministic code-review detectors the simulated agent runs over the files it has read.

Each rule is a line-level pattern with a fixed title, so the same mistake in two files yields findings
with the same title and similar bodies, the wording picked by a stable hash of rule, file and line: a
wording that names the file, line and offending construct; a general explanation with only the location
appended (near-duplicates across files); or the general explanation alone (exact duplicates). All
patterns are compiled once at import and results are cached per ``(path, text)``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
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


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector. ``templates`` use ``{path}``, ``{line}``, ``{code}`` and ``{name}``."""

    id: str
    title: str
    category: str
    confidence: float
    pattern: re.Pattern[str]
    templates: tuple[str, ...]
    applies: Callable[[_FileInfo], bool] = lambda info: True
    skip_comments: bool = True
    # The part of the line quoted as ``{code}``: the construct itself, not the whole line, so the same
    # mistake in two files reads alike (``pattern``'s match when unset).
    key: re.Pattern[str] | None = None

    @property
    def variants(self) -> tuple[str, ...]:
        """The templates, plus each detail-free one with the location appended (a near-duplicate wording)."""
        located = tuple(t + " Seen in {path} at line {line}." for t in self.templates if "{" not in t)
        return self.templates + located


def _library_only(info: _FileInfo) -> bool:
    return not info.is_test and not info.is_script


def _not_tests(info: _FileInfo) -> bool:
    return not info.is_test


RULES: tuple[Rule, ...] = (
    Rule(
        id="bare-except",
        title="Bare except swallows errors",
        category="error-handling",
        confidence=0.85,
        pattern=re.compile(r"^\s*except\s*:"),
        templates=(
            "In {path} at line {line}, `{code}` catches every exception, including KeyboardInterrupt and "
            "SystemExit, so real failures are hidden.",
            "{path}:{line} uses a bare `except:` which swallows every exception, even KeyboardInterrupt; "
            "catch the specific errors instead.",
            "A bare `except:` clause catches every exception, including KeyboardInterrupt and SystemExit, "
            "and hides real failures; catch the specific exceptions instead.",
        ),
    ),
    Rule(
        id="except-pass",
        title="Exception silently ignored",
        category="error-handling",
        confidence=0.8,
        pattern=re.compile(r"^\s*except\s+\(?\s*(Base)?Exception\b[^:]*:\s*(pass)?\s*(#.*)?$"),
        templates=(
            "In {path} at line {line}, `{code}` is followed by `pass`, so any error here is discarded "
            "without a log line.",
            "{path}:{line} catches Exception and does nothing with it (`{code}` then `pass`); failures "
            "in this block disappear silently.",
            "Catching Exception and passing discards every error without a trace; log it or let it propagate.",
        ),
    ),
    Rule(
        id="todo",
        title="Unresolved TODO left in code",
        category="maintainability",
        confidence=0.55,
        pattern=re.compile(r"#.*\b(TODO|FIXME|XXX)\b:?\s*(.*)$"),
        templates=(
            "{path} line {line} still carries an open marker: `{code}`.",
            "There is an unresolved marker in {path} at line {line} (`{code}`); track it or fix it.",
        ),
        skip_comments=False,
    ),
    Rule(
        id="eval-exec",
        title="eval/exec on dynamic input",
        category="security",
        confidence=0.9,
        pattern=re.compile(r"(?<![\w.])(eval|exec)\s*\("),
        templates=(
            "In {path} at line {line}, `{code}` evaluates a string as code; anyone who controls that "
            "string can run arbitrary Python.",
            "{path}:{line} passes data to eval/exec (`{code}`), which executes arbitrary code; parse "
            "the value instead (e.g. ast.literal_eval or json).",
        ),
        key=re.compile(r"(?<![\w.])(?:eval|exec)\s*\([^)]{0,30}\)?"),
    ),
    Rule(
        id="mutable-default",
        title="Mutable default argument",
        category="correctness",
        confidence=0.8,
        pattern=re.compile(
            r"^\s*(async\s+)?def\s+\w+\s*\(.*?\w+\s*(:\s*[\w\[\], .|]+)?=\s*(\[\]|\{\}|list\(\)|dict\(\)|set\(\))"
        ),
        templates=(
            "In {path} at line {line}, `{code}` uses a mutable default that is shared between calls, "
            "so state leaks from one call into the next.",
            "{path}:{line} declares a list/dict default argument (`{code}`); the same object is reused by every call.",
            "Mutable default arguments are created once and shared by every call; default to None and "
            "create the object inside the function.",
        ),
        key=re.compile(r"\w+\s*(?::[^=,()]+)?=\s*(?:\[\]|\{\}|list\(\)|dict\(\)|set\(\))"),
    ),
    Rule(
        id="eq-none",
        title="Comparison to None with ==",
        category="correctness",
        confidence=0.6,
        pattern=re.compile(r"[=!]=\s*None\b"),
        templates=(
            "In {path} at line {line}, `{code}` compares to None with ==/!=; use `is None` / `is not None`.",
            "Comparing to None with == calls __eq__ and can be fooled by custom types; use `is None`.",
        ),
        key=re.compile(r"[\w\]\)\.\"']+\s*[=!]=\s*None"),
    ),
    Rule(
        id="hardcoded-secret",
        title="Hard-coded credential in source",
        category="security",
        confidence=0.9,
        pattern=re.compile(
            r"""(?i)\b(\w*(?:password|passwd|secret|token|api_key|apikey)\w*)["']?\s*[:=]\s*["'][^"'\s]{4,}["']"""
        ),
        templates=(
            "{path} line {line} assigns a literal to `{name}`; the credential is committed with the code "
            "and shared with everyone who can read the repository.",
            "In {path} at line {line}, `{name}` is set to a hard-coded value; load it from the environment "
            "or a secret store instead.",
        ),
    ),
    Rule(
        id="sql-format",
        title="SQL built with string formatting",
        category="security",
        confidence=0.85,
        pattern=re.compile(
            r"""(?i)(\bf["'].*\b(select|insert|update|delete)\b.*\{)"""
            r"""|(["'].*\b(select\s.+\sfrom|insert\s+into|update\s+\w+\s+set|delete\s+from)\b.*["']\s*(%|\.format\(|\+))"""
        ),
        templates=(
            "In {path} at line {line}, `{code}` builds SQL by string formatting, which is open to SQL "
            "injection; pass the values as query parameters.",
            "{path}:{line} interpolates values into a SQL statement (`{code}`); use placeholders and "
            "let the driver quote them.",
        ),
    ),
    Rule(
        id="assert-validation",
        title="assert used for input validation",
        category="correctness",
        confidence=0.7,
        pattern=re.compile(r"^\s*assert\b"),
        templates=(
            "In {path} at line {line}, `{code}` validates input with assert, which is removed when "
            "Python runs with -O.",
            "{path}:{line} relies on `assert` to check arguments (`{code}`); raise ValueError instead.",
            "Asserts are stripped under `python -O`, so validation written as assert silently disappears "
            "in optimised runs.",
        ),
        applies=_not_tests,
        key=re.compile(r"assert\b[^,]{0,40}"),
    ),
    Rule(
        id="print-debug",
        title="Debug print in library code",
        category="maintainability",
        confidence=0.55,
        pattern=re.compile(r"^\s*print\("),
        templates=(
            "{path} line {line} prints to stdout (`{code}`); library code should use the logging module.",
            "Library code writes debugging output with print(); use a logger so callers can control it.",
        ),
        applies=_library_only,
        key=re.compile(r"print\([^)]{0,30}\)?"),
    ),
    Rule(
        id="wildcard-import",
        title="Wildcard import",
        category="maintainability",
        confidence=0.65,
        pattern=re.compile(r"^\s*from\s+[\w.]+\s+import\s+\*"),
        templates=(
            "In {path} at line {line}, `{code}` pulls every public name into the module, hiding where names come from.",
            "Wildcard imports hide where names come from and can shadow builtins; import names explicitly.",
        ),
    ),
    Rule(
        id="shell-command",
        title="Command run through the shell",
        category="security",
        confidence=0.85,
        pattern=re.compile(r"(\bsubprocess\.\w+\(.*shell\s*=\s*True)|(\bos\.system\()"),
        templates=(
            "In {path} at line {line}, `{code}` runs a command through the shell; a value containing "
            "shell syntax can inject commands.",
            "{path}:{line} starts a shell (`{code}`); pass an argument list without shell=True instead.",
        ),
        key=re.compile(r"shell\s*=\s*True|os\.system\("),
    ),
    Rule(
        id="open-without-with",
        title="File opened without a context manager",
        category="correctness",
        confidence=0.65,
        pattern=re.compile(r"^(?!\s*with\b)(?!.*\bwith\s+open\().*(?<![\w.])open\("),
        templates=(
            "In {path} at line {line}, `{code}` opens a file without `with`, so the handle leaks when an "
            "exception is raised.",
            "{path}:{line} calls open() outside a with-block (`{code}`); the file may never be closed.",
        ),
        key=re.compile(r"(?<![\w.])open\([^)]{0,30}\)?"),
    ),
    Rule(
        id="pickle-load",
        title="Unpickling untrusted data",
        category="security",
        confidence=0.8,
        pattern=re.compile(r"\bpickle\.loads?\("),
        templates=(
            "In {path} at line {line}, `{code}` unpickles data; a crafted pickle runs arbitrary code.",
            "{path}:{line} loads a pickle (`{code}`); use JSON for data that crosses a trust boundary.",
        ),
        key=re.compile(r"\bpickle\.loads?\([^)]{0,30}\)?"),
    ),
    Rule(
        id="yaml-load",
        title="yaml.load without a safe loader",
        category="security",
        confidence=0.85,
        pattern=re.compile(r"\byaml\.load\((?!.*Loader\s*=\s*yaml\.SafeLoader)"),
        templates=(
            "In {path} at line {line}, `{code}` can construct arbitrary Python objects; use yaml.safe_load.",
            "yaml.load without SafeLoader can build arbitrary objects from the document; use yaml.safe_load.",
        ),
        key=re.compile(r"\byaml\.load\([^)]{0,30}\)?"),
    ),
    Rule(
        id="tls-verify-off",
        title="TLS certificate verification disabled",
        category="security",
        confidence=0.9,
        pattern=re.compile(r"\bverify\s*=\s*False\b"),
        templates=(
            "In {path} at line {line}, `{code}` turns off certificate checks, allowing man-in-the-middle attacks.",
            "{path}:{line} disables TLS verification (`{code}`); remove verify=False.",
        ),
    ),
    Rule(
        id="weak-hash",
        title="Weak hash function",
        category="security",
        confidence=0.7,
        pattern=re.compile(r"\bhashlib\.(md5|sha1)\("),
        templates=(
            "In {path} at line {line}, `{code}` uses MD5/SHA-1, which are broken for security purposes.",
            "MD5 and SHA-1 are unsuitable for passwords or signatures; use hashlib.sha256 or a password hash.",
        ),
        key=re.compile(r"\bhashlib\.(?:md5|sha1)\([^)]{0,30}\)?"),
    ),
)

_SLEEP_RULE = Rule(
    id="sleep-in-loop",
    title="time.sleep inside a loop",
    category="performance",
    confidence=0.6,
    pattern=re.compile(r"\btime\.sleep\(|(?<![\w.])sleep\("),
    key=re.compile(r"(?:time\.)?sleep\([^)]{0,20}\)?"),
    templates=(
        "In {path} at line {line}, `{code}` sleeps inside a loop, blocking the worker on every iteration.",
        "{path}:{line} polls with a fixed sleep in a loop (`{code}`); use backoff or an event instead.",
        "A fixed time.sleep inside a loop blocks the thread and adds latency to every iteration.",
    ),
)

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
            if is_comment and rule.skip_comments:
                continue
            if not rule.pattern.search(raw):
                continue
            if rule.id == "except-pass" and not _ends_in_pass(raw, lines, idx):
                continue
            found.append(_make(rule, info, lineno, raw))
        if not is_comment and loop_indents and _SLEEP_RULE.pattern.search(raw):
            found.append(_make(_SLEEP_RULE, info, lineno, raw))
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
