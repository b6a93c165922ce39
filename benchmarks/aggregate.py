"""Aggregation benchmarks; every figure is a ratio to a baseline measured in the same run.

python benchmarks/aggregate.py whole [--n 10000] [--embedder minilm]
    The whole aggregation of N results — embedded as they arrive (batches of 512, as the live pass
    takes them), clustered, categorised (a fifth of them come without a category), the
    verification sample drawn, and results.jsonl, summary.json, report.md and report.html written —
    over the time the same embedder needs just to embed those texts (the distinct texts the
    aggregation embeds, in batches of 256). Goal <= 1.3x. Wall and CPU time of this process.
python benchmarks/aggregate.py tail [--latency 1.0] [--embedder minilm|fast]
    Runs through the engine against the simulated provider (log-normal latency, median 1 s, sigma
    0.3, as throughput.py): the time from the last session's end to the report, for 1,000 per-URL
    notes (100 agents) and for ~1,000 code findings over a generated codebase (every one compared
    with every other: the embedding is the tail). Goal <= 2 s. The code findings' tail is bound by
    the embedder's throughput: when embedding their distinct texts alone takes longer than the
    sessions, the rest is left for after the last session, however the live pass is paced.
python benchmarks/aggregate.py fast
    The fast embedder (the same all-MiniLM-L6-v2, int8 weights through ONNX Runtime) beside the
    numpy one: precision and recall on the labelled pairs (tests/data/dedup) at the default
    threshold, and texts/s on the same texts.
python benchmarks/aggregate.py planted [--embedder minilm]
    The 161 planted findings (agent_fleet.testing.planted): how many results they become (their
    100 distinct findings; 90-115 is the bar) and whether each family stands as its most confident
    member.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_fleet.aggregate import AggregateConfig, Aggregator, choose_embedder, sample_for_verification, write_outputs
from agent_fleet.aggregate.dedup_quality import load_labelled, pair_similarities, score_pairs
from agent_fleet.aggregate.embedders import embed_sync
from agent_fleet.aggregate.text import content_hash, embedding_text
from agent_fleet.domain.results import ResultItem

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "dedup"


class Timer:
    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall0, time.process_time() - self.cpu0


def findings(n: int, seed: int = 28) -> list[ResultItem]:
    """N code findings built from the labelled set's sentences: about a third are light rewordings of
    an earlier one (near duplicates), a fifth have no category; places inside files, so every one is
    compared with every other (no input item keeps them apart)."""
    items, _ = load_labelled(DATA)
    sentences = sorted({s.strip() for it in items.values() for s in it.body.split(". ") if len(s) > 30})
    titles = sorted({it.title for it in items.values()})
    rng = random.Random(seed)
    out: list[ResultItem] = []
    for i in range(n):
        if out and rng.random() < 0.33:
            base = out[rng.randrange(len(out))]
            words = base.body.split()
            words[rng.randrange(len(words))] = rng.choice(["the", "this", "a", "each"])
            title, body = base.title, " ".join(words)
        else:
            title = rng.choice(titles)
            body = ". ".join(rng.choice(sentences) for _ in range(rng.randint(2, 4))) + "."
        out.append(
            ResultItem(
                id=f"run.s{i // 10:05d}.r{i % 10:04d}",
                partition_id=f"p{i // 10:05d}",
                session_id=f"run.s{i // 10:05d}",
                title=title,
                body=body,
                category=None if rng.random() < 0.2 else rng.choice(["security", "correctness", "performance"]),
                confidence=round(rng.uniform(0.4, 0.95), 2),
                location=f"src/module_{rng.randrange(300)}.py:{rng.randrange(1, 400)}",
            )
        )
    return out


async def _aggregate(results: list[ResultItem], embedder: Any, out: Path) -> tuple[Aggregator, list[ResultItem]]:
    agg = Aggregator.for_run(out, embedder, config=AggregateConfig())
    for start in range(0, len(results), 512):  # as the live pass takes them while sessions run
        await agg.add_many(results[start : start + 512])
    reps = await agg.finalize()
    sample_for_verification(reps, fraction=0.05, minimum=20, seed=7)
    summary = {"run_id": "bench", "task": "Find bugs", "results_raw": len(results), "results_unique": len(reps)}
    summary["dedup"] = agg.stats().to_dict()
    write_outputs(out, summary, reps)
    return agg, reps


def whole(n: int, embedder_name: str, repeats: int) -> None:
    results = findings(n)
    emb = choose_embedder(embedder_name)
    seen: dict[str, str] = {}
    for r in results:  # what the aggregation embeds: each distinct text once
        seen.setdefault(content_hash(r), embedding_text(r))
    texts = list(seen.values())
    embed_sync(emb, texts[:64])  # the model loaded and warm for both
    print(f"whole aggregation of {n:,} results ({len(texts):,} distinct texts), embedder {emb.name}")
    base, ours = [], []
    for _ in range(repeats):  # alternately, so a burst of load from elsewhere lands on both
        clock = Timer()
        for start in range(0, len(texts), 256):
            embed_sync(emb, texts[start : start + 256])
        base.append(clock.stop())
        with tempfile.TemporaryDirectory() as tmp:
            clock = Timer()
            agg, reps = asyncio.run(_aggregate(results, emb, Path(tmp)))
            ours.append(clock.stop())
            assert agg.cache is not None
            agg.cache.close()
        stats = agg.stats()
        print(
            f"  embed only {base[-1][0]:.1f} s wall, {base[-1][1]:.1f} s CPU; "
            f"whole aggregation {ours[-1][0]:.1f} s wall, {ours[-1][1]:.1f} s CPU "
            f"({stats.embedded:,} embedded, {len(reps):,} unique)"
        )
    wall = statistics.median(o[0] for o in ours) / statistics.median(b[0] for b in base)
    cpu = statistics.median(o[1] for o in ours) / statistics.median(b[1] for b in base)
    print(f"  ratio whole / embed only: {wall:.2f}x wall, {cpu:.2f}x CPU (goal <= 1.3x)")


def planted(embedder_name: str) -> None:
    from agent_fleet.testing.planted import planted_findings

    found = planted_findings()
    items = [
        ResultItem(id=f"r{i:03d}", partition_id="p", session_id=f"s{i}", **f.to_item())  # type: ignore[arg-type]
        for i, f in enumerate(found)
    ]
    emb = choose_embedder(embedder_name)

    async def go() -> list[ResultItem]:
        agg = Aggregator(emb)
        await agg.add_many(items)
        return await agg.finalize()

    reps = asyncio.run(go())
    best: dict[int, Any] = {}
    for f in found:
        if f.family is not None and (f.finding not in best or f.confidence > best[f.finding].confidence):
            best[f.finding] = f
    kept = {(r.title, r.body) for r in reps}
    right = sum((f.title, f.body) in kept for f in best.values())
    print(
        f"planted findings with {emb.name}: {len(found)} raw -> {len(reps)} unique (100 distinct, bar 90-115); "
        f"{right} of {len(best)} reworded findings stand as their most confident member"
    )


def fast() -> None:
    from agent_fleet.aggregate.local import FastMiniLMEmbedder, MiniLMEmbedder

    items, pairs = load_labelled(DATA)
    numpy_model, int8 = MiniLMEmbedder(), FastMiniLMEmbedder()
    clock = Timer()
    int8.load()
    print(f"fast embedder ready in {clock.stop()[0]:.1f} s (the int8 model is built once, then cached)")
    for emb in (numpy_model, int8):
        sims = pair_similarities(emb, items, pairs)
        t = emb.default_threshold
        for split in ("test", "all"):
            sel = [p for p in pairs if split == "all" or p.split == split]
            q = score_pairs(sel, sims, t)
            print(
                f"  {emb.name:<28} threshold {t:.2f} {split:<4} precision {q.precision:.3f} recall {q.recall:.3f}"
                f"  (tp {q.tp}, fp {q.fp}, fn {q.fn}, tn {q.tn})"
            )
    texts = [f"{r.title}\n{r.body}" for r in findings(300, seed=3)]
    numpy_model.encode(texts[:32])
    int8.encode(texts[:32])
    best: dict[str, tuple[float, float]] = {}
    for _ in range(2):
        for name, emb in (("numpy", numpy_model), ("int8", int8)):
            clock = Timer()
            emb.encode(texts)
            w, c = clock.stop()
            old = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(old[0], w), min(old[1], c))
    print(
        f"  {len(texts)} texts, best of 2: numpy {len(texts) / best['numpy'][0]:.0f}/s wall "
        f"{len(texts) / best['numpy'][1]:.0f}/s CPU; int8 {len(texts) / best['int8'][0]:.0f}/s wall "
        f"{len(texts) / best['int8'][1]:.0f}/s CPU; speed-up {best['numpy'][0] / best['int8'][0]:.2f}x wall, "
        f"{best['numpy'][1] / best['int8'][1]:.2f}x CPU"
    )


SNIPPET = (
    "import hashlib\n\nDB_PASSWORD = 'hunter2-{i}'\n\n\ndef load_{i}(text, seen=[]):\n    try:\n"
    "        return eval(text)\n    except:\n        pass\n\n\ndef digest_{i}(data):\n"
    "    return hashlib.md5(data).hexdigest()\n"
)


async def _tail_run(task: str, src: Path, agents: int, url: str, workdir: Path, embedder: str) -> dict[str, Any]:
    """One run through the engine: (the last session's end -> the report) and its figures."""
    from agent_fleet.domain.events import EventType
    from agent_fleet.domain.ids import new_run_id
    from agent_fleet.engine import RunOptions, open_engine, plan_run

    ends = (EventType.SESSION_COMPLETED, EventType.SESSION_FAILED, EventType.SESSION_PAUSED)
    options = RunOptions(
        task=task,
        input_path=str(src),
        agents=agents,
        provider=url,
        out_dir=str(workdir / f"out-{time.monotonic_ns()}"),
        embedder=embedder,
    )
    store = f"sqlite:///{workdir / f'fleet-{time.monotonic_ns()}.db'}"
    ended: list[float] = []
    run_id = new_run_id()
    plan = plan_run(options)
    async with open_engine(options, run_id=run_id, store_url=store, api_key="sk-bench") as engine:
        engine.listen(lambda evs: ended.extend(time.perf_counter() for e in evs if e.type in ends))
        await engine.create_run(plan, options, run_id=run_id)
        t0 = time.perf_counter()
        report = await engine.run(run_id, plan, options)
        done = time.perf_counter()
    s = report.summary
    return {
        "sessions_s": ended[-1] - t0,
        "tail_s": done - ended[-1],
        "raw": s["results_raw"],
        "unique": s["results_unique"],
        "embedded": s["dedup"]["embedded"],
    }


def tail(latency: float, seed: int, embedder: str) -> None:
    from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process

    with (
        tempfile.TemporaryDirectory() as tmp,
        sim_provider_process(SimConfig(latency=LogNormalLatency(median=latency, sigma=0.3), seed=seed)) as url,
    ):
        work = Path(tmp)
        urls = work / "urls.txt"
        urls.write_text(
            "".join(f"https://site{i % 53}.example.com/docs/topic-{i % 17}/page-{i}\n" for i in range(1000))
        )
        repo = work / "repo"
        for i in range(200):
            (repo / f"pkg{i % 20}").mkdir(parents=True, exist_ok=True)
            (repo / f"pkg{i % 20}" / f"mod_{i:03d}.py").write_text(SNIPPET.format(i=i))
        name = choose_embedder(embedder).name
        print(f"run tails at log-normal latency, median {latency:g} s (sigma 0.3); embedder {name}")
        for label, task, src in (
            ("1,000 URLs, 100 agents", "Research these 1000 URLs", urls),
            ("a 200-file codebase, 100 agents", "Find bugs in this code", repo),
        ):
            r = asyncio.run(_tail_run(task, src, 100, url, work, embedder))
            print(
                f"  {label}: sessions {r['sessions_s']:.1f} s, tail after the last session {r['tail_s']:.2f} s "
                f"(goal <= 2 s); {r['raw']:,} raw -> {r['unique']:,} unique, {r['embedded']:,} embedded"
            )


def _ask(base_url: str, model: str, prompt: str) -> str:
    import httpx

    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 160,
        "temperature": 0.7,  # two sessions asked the same thing answer in their own words
    }
    r = httpx.post(f"{base_url.rstrip('/')}/chat/completions", json=body, timeout=600)
    r.raise_for_status()
    return str(r.json()["choices"][0]["message"]["content"] or "")


def local(base_url: str, model: str) -> None:
    from agent_fleet.aggregate import ItemIndex, band_check, classify_task
    from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
    from agent_fleet.hands.cli_text import split_findings

    urls = [f"https://{host}/{topic}" for host in ("docs.python.org/3/library", "realpython.com") for topic in
            ("asyncio", "pathlib", "sqlite3", "logging", "typing", "json", "csv", "itertools", "functools", "re",
             "unittest", "argparse", "datetime", "collections", "subprocess")]  # fmt: skip
    asked = urls + urls[:10]
    notes: list[ResultItem] = []
    clock = Timer()
    for i, url in enumerate(asked):
        text = _ask(base_url, model, f"Write a short research note (3 sentences) about the web page {url}.")
        notes.append(ResultItem(f"run.s{i:05d}.r0000", f"p{i % 30}", f"run.s{i:05d}", text.split(".")[0][:120],
                                text, location=url))  # fmt: skip
    parts = [Partition(f"p{i}", i, InputKind.LIST, (u,), (i,), 10) for i, u in enumerate(urls)]
    root = PlanNode("root", 10, len(urls), tuple(PlanNode(p.id, 10, 1, leaf=p.id) for p in parts))
    plan = Plan("Research these URLs", InputKind.LIST, "urls.txt", len(urls), tuple(parts), root, 1000)
    review: list[ResultItem] = []
    for f in range(6):
        code = SNIPPET.format(i=f)
        for reviewer in range(2):
            sid = f"run.s{100 + 2 * f + reviewer:05d}"
            text = _ask(base_url, model, f"List the bugs in pkg/mod_{f}.py as a numbered list, one per line:\n\n{code}")
            found = split_findings(text) or [{"title": text.strip().split("\n")[0][:120], "body": text}]
            for n, it in enumerate(found):
                review.append(ResultItem(f"{sid}.r{n:04d}", f"p{100 + f}", sid, it["title"], it["body"],
                                         location=it.get("location") or f"pkg/mod_{f}.py"))  # fmt: skip
    print(f"{len(asked) + 12} answers from {model} in {clock.stop()[0]:.0f} s")
    emb = choose_embedder("minilm")
    for label, results, task, index in (
        ("per-URL notes", notes, "Research these URLs", ItemIndex.from_plan(plan)),
        ("code review findings", review, "Review these files for bugs", None),
    ):

        async def go(results: list[ResultItem] = results, index: Any = index) -> Aggregator:
            agg = Aggregator(emb, config=AggregateConfig(items=index))
            await agg.add_many(results)
            await agg.finalize()
            return agg

        agg = asyncio.run(go())
        stats = agg.stats()
        band = band_check(classify_task(task, "list" if index else "directory"), stats)
        print(f"  {label}: {stats.raw} raw -> {stats.unique} unique; report: {band.note}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("whole", "tail", "fast", "planted", "local"))
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--latency", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.what == "whole":
        whole(a.n, a.embedder, a.repeats)
    elif a.what == "planted":
        planted(a.embedder)
    elif a.what == "fast":
        fast()
    elif a.what == "local":
        local(a.base_url, a.model)
    else:
        tail(a.latency, a.seed, a.embedder)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
