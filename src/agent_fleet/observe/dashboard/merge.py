"""Merge the Prometheus texts that runs store (``metrics:RUN`` snapshots) into one exposition.

Every live run stores its figures each tick: ``fleet_*`` families labelled by run, and its admission
controller's ``kueue_*`` families labelled by ClusterQueue. Texts cannot simply be concatenated (a
family may appear once), so samples are grouped by family and summed where names and labels are equal:
``kueue_admitted_workloads_total{cluster_queue="default"}`` of two runs is their sum. A finished run's
gauges describe its last tick, not now, so only its counters and histograms are kept: a finished run
exports no gauge (no ``fleet_api_concurrency_limit``, no ``fleet_sessions``), its ``fleet_*`` counters stay.

Runs that share one controller (the runs of one ``agent-fleet serve``) each store a copy of its one
set of ``kueue_*`` families: those are counted once, from the latest copy — a controller's counters
only grow, so the copy with the most scheduling cycles is the latest (a live run's, if any is live).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MergedFamilies", "histogram_quantile", "merge_texts"]

_CUMULATIVE = ("counter", "histogram", "summary")


@dataclass(slots=True)
class MergedFamilies:
    """Families by name; each holds summed samples keyed by (sample name, sorted labels)."""

    kinds: dict[str, str] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    samples: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = field(default_factory=dict)

    def add(self, family: Metric, *, gauges: bool) -> None:
        if family.type not in _CUMULATIVE and not gauges:
            return
        self.kinds.setdefault(family.name, family.type)
        self.docs.setdefault(family.name, family.documentation)
        into = self.samples.setdefault(family.name, {})
        for s in family.samples:
            if s.name.endswith("_created"):  # creation times do not add up
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            into[key] = into.get(key, 0.0) + s.value

    def families(self) -> Iterable[Metric]:
        for name in sorted(self.samples):
            metric = Metric(name, self.docs[name], self.kinds[name])
            for (sample, labels), value in sorted(self.samples[name].items()):
                metric.add_sample(sample, dict(labels), value)
            yield metric

    def values(self, sample: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every value of one sample name, by its labels."""
        for name, rows in self.samples.items():
            if sample.startswith(name):
                found = {labels: v for (s, labels), v in rows.items() if s == sample}
                if found:
                    return found
        return {}


def merge_texts(texts: Sequence[tuple[str, bool] | tuple[str, bool, str]]) -> MergedFamilies:
    """Merge ``(text, live)`` or ``(text, live, source)`` entries; a text that is not live keeps only
    its cumulative families (its ``fleet_*`` ones labelled by their run).
    Of the texts with one non-empty ``source`` (one admission controller), only the latest copy's
    ``kueue_*`` families count."""
    merged = MergedFamilies()
    latest: dict[str, tuple[tuple[bool, float], list[Metric], bool]] = {}
    for entry in texts:
        text, live = entry[0], entry[1]
        source = entry[2] if len(entry) > 2 else ""
        kueue: list[Metric] = []
        for family in text_string_to_metric_families(text):
            if not family.name.startswith("kueue_"):
                merged.add(family, gauges=live)
            elif source:
                kueue.append(family)
            else:
                merged.add(family, gauges=live)
        if source:
            rank = (live, _cycles(kueue))
            if source not in latest or rank > latest[source][0]:
                latest[source] = (rank, kueue, live)
    for _, families, live in latest.values():
        for family in families:
            merged.add(family, gauges=live)
    return merged


def _cycles(families: Sequence[Metric]) -> float:
    """The controller's scheduling cycles so far: it only grows, so it orders copies in time."""
    return sum(
        s.value
        for f in families
        if f.name == "kueue_admission_attempts"
        for s in f.samples
        if s.name.endswith("_total")
    )


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' ``histogram_quantile`` over cumulative ``{le: count}`` buckets (linear inside a bucket);
    None without observations."""
    edges = sorted(buckets.items())
    if not edges or edges[-1][1] <= 0:
        return None
    total = edges[-1][1]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in edges:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le
