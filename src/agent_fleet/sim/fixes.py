"""Mechanical fixes for the simulated agent's findings, as exact-text edits.

Where a detector's finding has a fix that needs no judgement, the simulated agent makes it besides
reporting the finding:

* ``bare-except``: ``except:`` becomes ``except Exception:``;
* ``eq-none``: ``== None`` / ``!= None`` become ``is None`` / ``is not None``;
* ``mutable-default``: ``name=[]`` (or ``{}``, ``list()``, ``dict()``, ``set()``, unannotated, on a
  one-line ``def``) becomes ``name=None`` and the body starts with ``if name is None: name = []``
  (after a one-line docstring);
* ``yaml-load``: ``yaml.load(`` without a ``Loader`` becomes ``yaml.safe_load(``;
* ``tls-verify-off``: ``verify=False`` becomes ``verify=True``.

:func:`plan_edits` turns one file's fixes into :class:`Edit` s — ``old`` text that occurs exactly once
in the file (a fixed line grown by neighbouring lines until it does), replaced by ``new`` — that apply
one after the other, in order, to the file as it was read; adjacent fixes share one edit. The same
file and findings always give the same edits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_fleet.sim.detectors import Finding

__all__ = ["FIXABLE", "Edit", "apply_edits", "plan_edits"]


@dataclass(frozen=True, slots=True)
class Edit:
    path: str
    old: str
    new: str
    line: int  # the first line ``old`` spans in the file as read (1-based)


_BARE_EXCEPT = re.compile(r"^(\s*)except\s*:")
_EQ_NONE = re.compile(r"==(\s*)None\b")
_NE_NONE = re.compile(r"!=(\s*)None\b")
_YAML_LOAD = re.compile(r"\byaml\.load\(")
_VERIFY_OFF = re.compile(r"\bverify(\s*)=(\s*)False\b")
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+\w+\s*\(.*\)\s*(?:->\s*[^:]+)?:\s*(?:#.*)?$")
_MUTABLE_PARAM = re.compile(r"(?<=[(,])(\s*)(\w+)(\s*)=(\s*)(\[\]|\{\}|list\(\)|dict\(\)|set\(\))(?=\s*[,)])")
_ONE_LINE_DOC = re.compile(r'^\s*(?:[rRuU]?)("""|\'\'\'|"|\').*\1\s*$')


def _line_fix(pattern: re.Pattern[str], repl: str) -> Callable[[str], str]:
    return lambda line: pattern.sub(repl, line)


_LINE_FIXES: dict[str, Callable[[str], str]] = {
    "bare-except": _line_fix(_BARE_EXCEPT, r"\1except Exception:"),
    "eq-none": lambda line: _NE_NONE.sub("is not None", _EQ_NONE.sub("is None", line)),
    "yaml-load": lambda line: line if "Loader" in line else _YAML_LOAD.sub("yaml.safe_load(", line),
    "tls-verify-off": _line_fix(_VERIFY_OFF, r"verify\1=\2True"),
}
FIXABLE = frozenset({*_LINE_FIXES, "mutable-default"})
"""Rules whose findings the simulated agent fixes."""


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _none_defaults(lines: list[str], idx: int) -> dict[int, list[str]] | None:
    """The mutable-default fix of the ``def`` at ``idx``: replacement lines by index, or None."""
    line = lines[idx]
    body = line.rstrip("\r\n")
    head = _DEF.match(body)
    if head is None:
        return None
    names: list[tuple[str, str]] = []

    def to_none(m: re.Match[str]) -> str:
        names.append((m.group(2), m.group(5)))
        return f"{m.group(1)}{m.group(2)}{m.group(3)}={m.group(4)}None"

    fixed = _MUTABLE_PARAM.sub(to_none, body)
    if not names:
        return None
    nxt = next((i for i in range(idx + 1, len(lines)) if lines[i].strip()), None)
    if nxt is None:
        return None
    first = lines[nxt]
    indent = first[: len(first) - len(first.lstrip())]
    if len(indent) <= len(head.group(1)):
        return None  # no indented body to put the check in
    end = _ending(line) or "\n"
    checks = [f"{indent}if {n} is None:{end}{indent}    {n} = {value}{end}" for n, value in names]
    out = {idx: [fixed + _ending(line)]}
    doc = first.lstrip()
    if doc.startswith(('"', "'", 'r"', "r'")):
        if not _ONE_LINE_DOC.match(first.rstrip("\r\n")):
            return None  # a multi-line docstring: not mechanical enough
        out[nxt] = [first if first.endswith(("\n", "\r")) else first + end, *checks]
    else:
        out[idx].extend(checks)
    return out


def _replacements(lines: list[str], findings: Sequence[Finding]) -> dict[int, list[str]]:
    repl: dict[int, list[str]] = {}
    for f in sorted(findings, key=lambda f: (f.line, f.rule)):
        idx = f.line - 1
        if not 0 <= idx < len(lines):
            continue
        if f.rule in _LINE_FIXES:
            current = repl.get(idx, [lines[idx]])
            fixed = _LINE_FIXES[f.rule](current[0])
            if fixed != current[0]:
                repl[idx] = [fixed, *current[1:]]
        elif f.rule == "mutable-default" and idx not in repl:
            more = _none_defaults(lines, idx)
            if more is not None and not set(more) & set(repl):
                repl.update(more)
    return repl


def _count(text: str, sub: str) -> int:
    n, at = 0, text.find(sub)
    while at >= 0:
        n += 1
        at = text.find(sub, at + 1)
    return n


def _hunks(lines: list[str], repl: dict[int, list[str]]) -> list[tuple[int, int]]:
    """Line spans ``[a, b]`` (inclusive) each of whose text occurs once in the file, not touching."""
    text = "".join(lines)
    spans = [[i, i] for i in sorted(repl)]
    while True:
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        grown = False
        for span in merged:
            # grow by a line after, then one before, until the old text is unique
            while _count(text, "".join(lines[span[0] : span[1] + 1])) > 1:
                if span[1] + 1 < len(lines):
                    span[1] += 1
                elif span[0] > 0:
                    span[0] -= 1
                else:
                    break
                grown = True
        spans = merged
        if not grown:
            return [(a, b) for a, b in spans]


def apply_edits(text: str, edits: Sequence[Edit]) -> str | None:
    """``text`` after ``edits`` one after the other; None when one would not apply (not exactly once)."""
    for e in edits:
        if _count(text, e.old) != 1:
            return None
        text = text.replace(e.old, e.new, 1)
    return text


def plan_edits(path: str, text: str, findings: Sequence[Finding]) -> list[Edit]:
    """The edits that fix ``findings`` of ``path`` (whose text is ``text``), in file order."""
    lines = text.splitlines(keepends=True)
    repl = _replacements(lines, [f for f in findings if f.path == path and f.rule in FIXABLE])
    if not repl:
        return []
    want = "".join(x for i, line in enumerate(lines) for x in repl.get(i, [line]))

    def edit(a: int, b: int) -> Edit:
        new = "".join(x for i in range(a, b + 1) for x in repl.get(i, [lines[i]]))
        return Edit(path, "".join(lines[a : b + 1]), new, a + 1)

    spans = _hunks(lines, repl)
    edits = [edit(a, b) for a, b in spans]
    if apply_edits(text, edits) == want:
        return edits
    # An edit's text became ambiguous after the ones before it: one edit over the whole span (a
    # superstring of a unique text is unique).
    one = [edit(spans[0][0], spans[-1][1])]
    return one if apply_edits(text, one) == want else []
