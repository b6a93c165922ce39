"""Inline SVG charts for the HTML report: no script, no external asset, readable in any browser offline."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["Bar", "bar_chart", "timeline_chart"]

PALETTE = ("#3b6ea8", "#e39b3b", "#5a9e6f", "#b5525c", "#7d6bb0", "#8c8c8c")
STATE_COLOURS = {
    "completed": "#5a9e6f",
    "failed": "#b5525c",
    "paused": "#e39b3b",
    "running": "#3b6ea8",
    "interrupted": "#8c8c8c",
}


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    values: tuple[float, ...]  # one per series
    texts: tuple[str, ...] = ()  # shown after the bars; defaults to the values


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.4g}"


def bar_chart(
    bars: Sequence[Bar],
    *,
    series: Sequence[str],
    title: str,
    shared_scale: bool = True,
    width: int = 760,
    max_bars: int = 30,
) -> str:
    """Horizontal grouped bars, one group per label. Series share one scale when they count the same
    thing (raw vs unique); otherwise (tokens vs dollars) each is scaled to its own maximum."""
    bars = list(bars)[:max_bars]
    label_w, text_w, row_h, bar_h, top = 200, 230, 10 + 12 * len(series), 11, 44
    plot_w = width - label_w - text_w
    height = top + row_h * max(1, len(bars)) + 10
    maxima = [max((b.values[s] for b in bars), default=0.0) or 1.0 for s in range(len(series))]
    if shared_scale:
        maxima = [max(maxima)] * len(series)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="16" class="t">{escape(title)}</text>',
    ]
    x = label_w
    for s, name in enumerate(series):
        colour = PALETTE[s % len(PALETTE)]
        out.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14}" y="35" class="l">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    if not bars:
        out.append(f'<text x="{label_w}" y="{top + 14}" class="l">no data</text>')
    for i, bar in enumerate(bars):
        y = top + i * row_h
        label = bar.label if len(bar.label) <= 32 else bar.label[:31] + "…"
        out.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" class="l">{escape(label)}</text>')
        for s in range(len(series)):
            w = max(0.0, plot_w * bar.values[s] / maxima[s])
            by = y + 2 + s * 12
            out.append(
                f'<rect x="{label_w}" y="{by}" width="{w:.1f}" height="{bar_h}" '
                f'fill="{PALETTE[s % len(PALETTE)]}"><title>{escape(series[s])}: {_num(bar.values[s])}</title></rect>'
            )
        text = " · ".join(bar.texts) if bar.texts else " · ".join(_num(v) for v in bar.values)
        out.append(f'<text x="{label_w + plot_w + 6}" y="{y + 12}" class="l">{escape(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def _span(s: dict[str, Any]) -> tuple[float, float] | None:
    start, end = s.get("start"), s.get("end")
    if start is None:
        return None
    start_f = float(start)
    return start_f, float(end) if end is not None else start_f


def timeline_chart(sessions: Sequence[dict[str, Any]], *, width: int = 760, max_rows: int = 120) -> str:
    """Sessions over time: one bar per session (coloured by final state) when they are few,
    else the number of sessions active over time."""
    spans = [(s, sp) for s in sessions if (sp := _span(s)) is not None]
    title = "Sessions over time"
    if not spans:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40">'
            f'<text x="0" y="16" class="t">{title}</text><text x="0" y="34" class="l">no data</text></svg>'
        )
    t0 = min(sp[0] for _, sp in spans)
    t1 = max(sp[1] for _, sp in spans)
    total = max(t1 - t0, 1e-9)
    left, right, top = 60, 10, 28
    plot_w = width - left - right
    if len(spans) <= max_rows:
        row_h = 6 if len(spans) > 40 else 12
        height = top + row_h * len(spans) + 24
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{title}">',
            f'<text x="0" y="16" class="t">{title}</text>',
        ]
        for i, (s, (a, b)) in enumerate(sorted(spans, key=lambda x: (x[1][0], str(x[0].get("session_id"))))):
            x = left + plot_w * (a - t0) / total
            w = max(1.0, plot_w * (b - a) / total)
            colour = STATE_COLOURS.get(str(s.get("state", "")), "#3b6ea8")
            tip = f"{s.get('session_id', '')} {s.get('state', '')} {b - a:.1f}s"
            out.append(
                f'<rect x="{x:.1f}" y="{top + i * row_h}" width="{w:.1f}" height="{row_h - 1}" fill="{colour}">'
                f"<title>{escape(tip)}</title></rect>"
            )
        axis_y = top + row_h * len(spans) + 14
        states = sorted({str(s.get("state", "")) for s, _ in spans} & STATE_COLOURS.keys())
        x = width - 10 - sum(24 + 7 * len(st) for st in states)
        for st in states:
            out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{STATE_COLOURS[st]}"/>')
            out.append(f'<text x="{x + 14}" y="15" class="l">{escape(st)}</text>')
            x += 24 + 7 * len(st)
    else:
        bins = 200
        starts = sorted(sp[0] for _, sp in spans)
        ends = sorted(sp[1] for _, sp in spans)
        # Sessions active at each sample time: started at or before it, not yet ended.
        times = [t0 + total * k / (bins - 1) for k in range(bins)]
        active = [bisect_right(starts, t) - bisect_left(ends, t) for t in times]
        peak = max(active) or 1
        chart_h = 140
        height = top + chart_h + 24
        points = " ".join(
            f"{left + plot_w * k / (bins - 1):.1f},{top + chart_h - chart_h * n / peak:.1f}"
            for k, n in enumerate(active)
        )
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{title}">',
            f'<text x="0" y="16" class="t">{title}: active sessions (peak {peak})</text>',
            f'<polyline points="{left},{top + chart_h} {points} {left + plot_w},{top + chart_h}" '
            f'fill="#3b6ea8" fill-opacity="0.35" stroke="#3b6ea8"/>',
            f'<text x="{left - 6}" y="{top + 10}" text-anchor="end" class="l">{peak}</text>',
            f'<text x="{left - 6}" y="{top + chart_h}" text-anchor="end" class="l">0</text>',
        ]
        axis_y = top + chart_h + 14
    out.append(f'<text x="{left}" y="{axis_y}" class="l">0 s</text>')
    out.append(f'<text x="{left + plot_w}" y="{axis_y}" text-anchor="end" class="l">{total:,.1f} s</text>')
    out.append("</svg>")
    return "".join(out)
