"""Results as agents really send them — empty, a megabyte long, binary garbage, one text ten thousand
times — are aggregated and reported without an error, and the same text is embedded once."""

from __future__ import annotations

import json
import random
from pathlib import Path

from agent_fleet.aggregate import Aggregator, MiniLMEmbedder, write_outputs
from agent_fleet.domain.results import ResultItem


def odd_results() -> list[ResultItem]:
    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(1024)).decode("utf-8", "surrogateescape")
    lone = json.loads('"\\ud800 half a pair, and a NUL \\u0000"')  # what a JSON line may carry
    words = "The retry loop in the client never backs off and hammers the server during an outage. "
    out = [
        ResultItem("r-empty", "p0", "s0", "", ""),
        ResultItem("r-title", "p0", "s0", "Only a title", ""),
        ResultItem("r-mega", "p0", "s0", "A very long report", words * (1_000_000 // len(words))),
        ResultItem("r-garbage", "p1", "s1", garbage[:80], garbage),
        ResultItem("r-lone", "p1", "s1", lone, lone * 3),
    ]
    out += [ResultItem(f"r-same-{i:05d}", f"p{i % 7}", f"s{i % 50}", "Same", "The same text.") for i in range(10_000)]
    return out


async def test_odd_results_aggregate_and_report(tmp_path: Path) -> None:
    agg = Aggregator(MiniLMEmbedder())
    items = odd_results()
    await agg.add_many(items[:5000])
    await agg.extend(items)
    reps = await agg.finalize()
    stats = agg.stats()
    assert stats.raw == len(items)
    same = next(r for r in reps if r.title == "Same")
    assert len(same.duplicates) == 9_999 and same.extra["corroborated_by"] == 50
    assert stats.embedded <= 6  # the same text once, whatever its count
    write_outputs(tmp_path, {"run_id": "r", "task": "t"}, reps)
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(reps) and all(json.loads(x)["id"] for x in lines)
    assert (tmp_path / "report.md").stat().st_size < 2_000_000  # the megabyte body is excerpted
