"""Readers for list inputs: a text file (one item per non-blank line), JSON Lines, and CSV.

Every reader keeps input order and the 1-based line where each item starts, and guarantees that no item
contains a newline or a carriage return, so a partition can always be written one item per line.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from agent_fleet.decompose.decompose_options import DecomposeOptions
from agent_fleet.decompose.source import InputSource
from agent_fleet.domain.plan import InputKind
from agent_fleet.errors import InputError

__all__ = ["read_csv", "read_jsonl", "read_lines"]


def read_lines(path: Path, opts: DecomposeOptions) -> InputSource:
    """One item per non-blank line, trailing whitespace stripped, otherwise verbatim (e.g. URLs)."""
    items, lines = _non_blank_lines(_read_text(path))
    if not items:
        raise InputError(f"input has no items (every line is blank): {path}")
    return InputSource(InputKind.LIST, _resolved(path), items, _tokens(items, opts), lines)


def read_jsonl(path: Path, opts: DecomposeOptions) -> InputSource:
    """One JSON value per non-blank line; the item is the line itself (trailing whitespace stripped)."""
    items, lines = _non_blank_lines(_read_text(path))
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    for item, line in zip(items, lines, strict=True):
        try:
            decoder.decode(item)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {line} is not valid JSON ({e.msg} at column {e.colno})") from None
        except ValueError as e:
            raise InputError(f"{path}: line {line} is not valid JSON ({e})") from None
        except RecursionError:
            raise InputError(f"{path}: line {line} is not valid JSON (nested too deeply)") from None
    if not items:
        raise InputError(f"input has no records (every line is blank): {path}")
    return InputSource(InputKind.JSONL, _resolved(path), items, _tokens(items, opts), lines)


def read_csv(path: Path, opts: DecomposeOptions) -> InputSource:
    """A header row, then records; each record becomes one line of compact JSON keyed by the header.

    Quoted fields may hold commas and line breaks; the JSON rendering escapes them, so a record stays one line.
    Every record must have as many fields as the header.
    """
    text = _read_text(path, normalize_newlines=False)  # the csv module reads \r\n inside quoted fields itself
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    items: list[str] = []
    lines: list[int] = []
    prev_line = 0
    try:
        for row in reader:
            start, prev_line = prev_line + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            if header is None:
                header = _header_names(row)
                continue
            if len(row) != len(header):
                raise InputError(
                    f"{path}: line {start}: malformed CSV record with {len(row)} fields, the header has {len(header)}"
                )
            items.append(_one_line_json(dict(zip(header, row, strict=True))))
            lines.append(start)
    except csv.Error as e:
        raise InputError(f"{path}: line {reader.line_num}: malformed CSV ({e})") from None
    if header is None:
        raise InputError(f"input has no header row (the CSV file is blank): {path}")
    if not items:
        raise InputError(f"input has a header row but no records: {path}")
    return InputSource(InputKind.CSV, _resolved(path), items, _tokens(items, opts), lines)


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN and Infinity; JSON does not, and neither do most readers of the results.
    raise ValueError(f"{name} is not a JSON value")


def _read_text(path: Path, *, normalize_newlines: bool = True) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}: not UTF-8 text (invalid byte 0x{data[e.start]:02x} on line {line})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if normalize_newlines and "\r" in text:
        # Universal newlines, as Python's text mode reads them: \r\n and a lone \r end a line too.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _non_blank_lines(text: str) -> tuple[list[str], list[int]]:
    stripped = [s.rstrip() for s in text.split("\n")]
    lines = [n for n, s in enumerate(stripped, 1) if s]
    return [s for s in stripped if s], lines


def _tokens(items: list[str], opts: DecomposeOptions) -> list[int]:
    cpt = opts.chars_per_token
    if cpt == int(cpt):  # integer arithmetic: the same result, and faster on a million items
        c = int(cpt)
        return [-(-n // c) for n in map(len, items)]
    return [math.ceil(n / cpt) for n in map(len, items)]


def _header_names(row: list[str]) -> list[str]:
    """Column names for JSON keys: an empty name becomes ``column_<n>``, a repeated one gets ``_2``, ``_3``…,
    so no field of a record is lost to a key collision."""
    names: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(row, 1):
        base = raw.strip() or f"column_{i}"
        name, k = base, 1
        while name in seen:
            k += 1
            name = f"{base}_{k}"
        seen.add(name)
        names.append(name)
    return names


# Characters str.splitlines() treats as line ends that json.dumps(ensure_ascii=False) leaves raw.
_RAW_LINE_ENDS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _one_line_json(record: dict[str, str]) -> str:
    s = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in _RAW_LINE_ENDS.items():
        if ch in s:
            s = s.replace(ch, esc)
    return s


def _resolved(path: Path) -> str:
    return str(path.resolve())
