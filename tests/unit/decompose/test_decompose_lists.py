"""List inputs (.txt, .jsonl, .csv): every item in exactly one leaf, verbatim, in order; bad input is one line."""

from __future__ import annotations

import csv
import json
import random
import string
from pathlib import Path

import pytest

from agent_fleet.decompose import URL_TOOLS, DecomposeOptions, decompose, read_items
from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.errors import InputError


def random_line(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + " ,;:/?&=.-_é中"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))).strip() or "x"


def leaf_items_in_order(plan: Plan) -> list[str]:
    return [item for p in plan.partitions for item in p.items]


def assert_exactly_once(plan: Plan, expected: list[str]) -> None:
    ids = sorted(i for p in plan.partitions for i in p.item_ids)
    assert ids == list(range(len(expected)))
    assert plan.total_items == len(expected)
    # Contiguous chunks in input order: reading the leaves left to right gives the input back.
    assert leaf_items_in_order(plan) == expected
    for p in plan.partitions:
        assert [expected[i] for i in p.item_ids] == list(p.items)


@pytest.mark.parametrize("seed", range(12))
def test_txt_every_line_in_exactly_one_leaf(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = [random_line(rng) for _ in range(rng.randint(1, 600))]
    raw: list[str] = []
    for line in lines:
        raw.extend([""] * rng.choice([0, 0, 0, 1, 2]))  # blank lines are not items
        raw.append(line + rng.choice(["", " ", "\t", "  "]))  # trailing whitespace is stripped
    f = tmp_path / "items.txt"
    f.write_text("\n".join(raw) + rng.choice(["", "\n"]), encoding="utf-8")
    agents = rng.randint(1, 50)
    plan = decompose("t", f, agents=agents)
    assert plan.kind is InputKind.LIST
    assert_exactly_once(plan, lines)
    assert len(plan.partitions) == min(agents, len(lines))  # nothing here needs splitting


@pytest.mark.parametrize("seed", range(8))
def test_jsonl_every_record_in_exactly_one_leaf_verbatim(tmp_path: Path, seed: int) -> None:
    rng = random.Random(100 + seed)
    records = [
        json.dumps({"id": i, "text": random_line(rng), "n": rng.random(), "tags": ["a"] * rng.randint(0, 3)})
        for i in range(rng.randint(1, 300))
    ]
    records[0] = '{"odd"  :  [1, 2,3] ,"spacing":true}'  # kept verbatim, not re-serialised
    f = tmp_path / "records.jsonl"
    f.write_text("\n".join(records) + "\n\n", encoding="utf-8")
    plan = decompose("t", f, agents=rng.randint(1, 40))
    assert plan.kind is InputKind.JSONL
    assert_exactly_once(plan, records)


@pytest.mark.parametrize("seed", range(8))
def test_csv_every_record_in_exactly_one_leaf_as_one_line_json(tmp_path: Path, seed: int) -> None:
    rng = random.Random(200 + seed)
    header = ["name", "note", "n"]
    rows = [
        [random_line(rng), rng.choice(["plain", "with, comma", 'with "quotes"', "two\nlines", "crlf\r\nend"]), str(i)]
        for i in range(rng.randint(1, 200))
    ]
    f = tmp_path / "table.csv"
    with f.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    plan = decompose("t", f, agents=rng.randint(1, 30))
    assert plan.kind is InputKind.CSV
    items = leaf_items_in_order(plan)
    assert all("\n" not in item and "\r" not in item for item in items)
    assert [json.loads(item) for item in items] == [dict(zip(header, row, strict=True)) for row in rows]
    assert sorted(i for p in plan.partitions for i in p.item_ids) == list(range(len(rows)))


def test_csv_record_labels_use_the_line_where_the_record_starts(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text('a,b\n1,"x\ny"\n\n2,z\n', encoding="utf-8")
    plan = decompose("t", f, agents=2)
    assert [p.label for p in plan.partitions] == ["line 2", "line 5"]
    assert plan.partitions[0].items == ('{"a":"1","b":"x\\ny"}',)


def test_csv_header_names_are_made_unique(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a,a,\n1,2,3\n", encoding="utf-8")
    assert list(read_items(f).items) == ['{"a":"1","a_2":"2","column_3":"3"}']


def test_csv_keeps_unicode_readable_but_escapes_unicode_line_separators(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("k\nÉté\u2028x\n", encoding="utf-8")
    (item,) = read_items(f).items
    assert "Été" in item and "\u2028" not in item and json.loads(item) == {"k": "Été\u2028x"}


def test_line_labels_and_url_tools(tmp_path: Path) -> None:
    f = tmp_path / "urls.txt"
    f.write_text("https://a.example/1\n\nhttps://a.example/2\nHTTP://b.example/x?y=1\nhttps://c.example\n")
    plan = decompose("t", f, agents=2)
    assert [p.label for p in plan.partitions] == ["lines 1–3", "lines 4–5"]
    assert all(p.tools == URL_TOOLS for p in plan.partitions)


def test_a_partition_with_a_non_url_line_gets_no_fetch_tool(tmp_path: Path) -> None:
    f = tmp_path / "mixed.txt"
    f.write_text("https://a.example/1\nnot a url\nhttps://a.example/2\nhttps://a.example/3\n")
    plan = decompose("t", f, agents=2)
    assert [p.tools for p in plan.partitions] == [(), URL_TOOLS]


def test_other_suffix_reads_as_a_list_and_crlf_is_handled(tmp_path: Path) -> None:
    f = tmp_path / "things.lst"
    f.write_bytes(b"\xef\xbb\xbfone\r\ntwo  \r\n\r\nthree")
    source = read_items(f)
    assert source.kind is InputKind.LIST
    assert list(source.items) == ["one", "two", "three"]
    assert list(source.lines) == [1, 2, 4]


@pytest.mark.parametrize("seed", range(6))
def test_balance_is_by_tokens_not_by_count(tmp_path: Path, seed: int) -> None:
    rng = random.Random(300 + seed)
    # Item sizes span two orders of magnitude; the largest chunk stays within ideal + one item.
    lines = ["x" * rng.choice([4, 8, 40, 400]) + str(i) for i in range(rng.randint(200, 800))]
    f = tmp_path / "sizes.txt"
    f.write_text("\n".join(lines))
    agents = rng.randint(2, 20)
    plan = decompose("t", f, agents=agents)
    tokens = list(read_items(f).tokens)
    ideal = sum(tokens) / agents
    assert max(p.est_tokens for p in plan.partitions) <= ideal + max(tokens)
    assert sum(p.est_tokens for p in plan.partitions) == sum(tokens)


def test_estimated_tokens_follow_chars_per_token(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("abcdefgh\nabc\n")
    assert list(read_items(f).tokens) == [2, 1]
    assert list(read_items(f, DecomposeOptions(chars_per_token=2)).tokens) == [4, 2]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("blank.txt", b"\n  \n\t\n", "no items"),
        ("empty.txt", b"", "no items"),
        ("bad.txt", b"ok\n\xff\xfe broken\n", "not UTF-8 text (invalid byte 0xff on line 2)"),
        ("bad.jsonl", b'{"a": 1}\n\n{"b": }\n', "line 3 is not valid JSON"),
        ("nan.jsonl", b'{"a": NaN}\n', "line 1 is not valid JSON (NaN is not a JSON value)"),
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1 is not valid JSON"),
        ("empty.jsonl", b"\n\n", "no records"),
        ("short.csv", b"a,b,c\n1,2,3\n4,5\n", "line 3: malformed CSV record with 2 fields, the header has 3"),
        ("quote.csv", b'a,b\n1,"unterminated\n', "malformed CSV"),
        ("stray.csv", b'a,b\n1,"x"y\n', "line 2: malformed CSV"),
        ("header.csv", b"a,b\n", "header row but no records"),
        ("blank.csv", b"\n\n", "no header row"),
    ],
)
def test_bad_input_is_one_readable_line(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    f = tmp_path / name
    f.write_bytes(content)
    with pytest.raises(InputError) as err:
        decompose("t", f, agents=3)
    text = str(err.value)
    assert message in text
    assert "\n" not in text
    assert err.value.exit_code == 2
