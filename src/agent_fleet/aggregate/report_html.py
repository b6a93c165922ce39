"""report.html: report.md's content as one self-contained page (inline CSS and SVG, no script)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from agent_fleet.aggregate.outputs import Groups, category_rows
from agent_fleet.aggregate.report_md import (
    ALSO_FOUND_MAX,
    also_found,
    model_rows,
    other_wordings,
    result_facts,
    summary_rows,
    verification_line,
)
from agent_fleet.aggregate.svg import Bar, bar_chart, timeline_chart
from agent_fleet.domain.results import ResultItem

__all__ = ["render_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:60em;
color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;
vertical-align:top}th{background:#f4f4f4}td.n{text-align:right}
.alarm{background:#fbe9eb;border:1px solid #b5525c;padding:.6em 1em;margin:1em 0}
.ok{background:#eef6f0;border:1px solid #5a9e6f;padding:.6em 1em;margin:1em 0}
ol li{margin:.6em 0}.facts{color:#555;font-size:.92em}.body{white-space:pre-wrap;margin:.2em 0 0;color:#333}
code{background:#f4f4f4;padding:0 .2em}.chart{margin:1em 0}svg .t{font:600 13px sans-serif}
svg .l{font:11px sans-serif;fill:#333}.also{color:#444;font-size:.92em}.also ul{margin:.1em 0;padding-left:1.4em}
"""


def _facts_html(r: ResultItem) -> str:
    return " · ".join(escape(f.strip("`")) for f in result_facts(r))


def _also_html(r: ResultItem) -> str:
    places = also_found(r)
    if not places:
        return ""
    items = "".join(f"<li>{escape(p)}</li>" for p in places[:ALSO_FOUND_MAX])
    more = (
        f"<li>… and {len(places) - ALSO_FOUND_MAX} more in results.jsonl</li>" if len(places) > ALSO_FOUND_MAX else ""
    )
    n = len(places)
    return f'<div class="also">Also found in {n} other place{"s" if n != 1 else ""}:<ul>{items}{more}</ul></div>'


def _wordings_html(r: ResultItem) -> str:
    said = other_wordings(r)
    if not said:
        return ""
    items = "".join(
        f"<li><code>{escape(where)}</code>: {escape(text if len(text) <= 600 else text[:599] + '…')}</li>"
        for where, text in said[:ALSO_FOUND_MAX]
    )
    if len(said) > ALSO_FOUND_MAX:
        items += f"<li>… and {len(said) - ALSO_FOUND_MAX} more in results.jsonl</li>"
    return f'<div class="also">In other words ({len(said)}):<ul>{items}</ul></div>'


def render_html(
    summary: dict[str, Any],
    groups: Groups,
    *,
    per_model: dict[str, dict[str, Any]],
    timeline: Sequence[dict[str, Any]],
    top: int = 20,
    sections: Sequence[str] = (),
) -> str:
    """``sections``: HTML other planes add after the timeline (the run's changes)."""
    task = " ".join(str(summary.get("task", "")).split())
    title = f"Fleet run report: {task}" if task else "Fleet run report"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    line = verification_line(summary)
    ver = summary.get("verification")
    if line and isinstance(ver, dict):
        parts.append(f'<div class="{"alarm" if ver.get("alarm") else "ok"}">Verification: {escape(line)}</div>')
    parts.append("<table>")
    parts += [f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in summary_rows(summary)]
    parts.append("</table>")

    rows = category_rows(groups)
    parts.append("<h2>Dedup per category</h2>")
    bars = [
        Bar(
            r["category"],
            (float(r["raw"]), float(r["unique"])),
            (f"{r['raw']} → {r['unique']}", f"{r['dedup_rate']:.0%}"),
        )
        for r in rows
    ]
    parts.append(f'<div class="chart">{bar_chart(bars, series=("raw", "unique"), title="Results per category")}</div>')
    if rows:
        parts.append("<table><tr><th>category</th><th>raw</th><th>unique</th><th>dedup</th></tr>")
        parts += [
            f'<tr><td>{escape(r["category"])}</td><td class="n">{r["raw"]}</td><td class="n">{r["unique"]}</td>'
            f'<td class="n">{r["dedup_rate"]:.1%}</td></tr>'
            for r in rows
        ]
        parts.append("</table>")

    parts.append("<h2>Cost and tokens per model</h2>")
    mrows = model_rows(per_model)
    mbars = [Bar(m, (float(t), usd), (f"{t:,} tok", f"${usd:,.4f}", f"{c:,} calls")) for m, c, t, usd in mrows]
    spend = bar_chart(mbars, series=("tokens", "cost"), title="Spend per model", shared_scale=False)
    parts.append(f'<div class="chart">{spend}</div>')

    parts.append("<h2>Timeline</h2>")
    parts.append(f'<div class="chart">{timeline_chart(timeline)}</div>')
    parts += list(sections)

    for cat, items in groups:
        parts.append(f"<h2>{escape(cat)} ({len(items)})</h2><ol>")
        for r in items[:top]:
            body = r.body.strip()
            excerpt = body if len(body) <= 1200 else body[:1197].rstrip() + "…"
            body_html = f'<div class="body">{escape(excerpt)}</div>' if body and body != r.title.strip() else ""
            parts.append(
                f"<li><strong>{escape(r.title) or '(untitled)'}</strong>"
                f'<div class="facts">{_facts_html(r)}</div>{_also_html(r)}{body_html}{_wordings_html(r)}</li>'
            )
        parts.append("</ol>")
        if len(items) > top:
            parts.append(f"<p>… and {len(items) - top} more in results.jsonl</p>")
    if not groups:
        parts.append("<p>No results.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
