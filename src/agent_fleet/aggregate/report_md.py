"""report.md: the summary table, dedup per category, verification, spend per model, then one section
per category with its top results, their duplicate counts and verification status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_fleet.aggregate.members import corroboration
from agent_fleet.aggregate.outputs import Groups, category_rows, urgency_label
from agent_fleet.domain.results import ResultItem

__all__ = [
    "also_found",
    "model_rows",
    "other_wordings",
    "render_markdown",
    "result_facts",
    "summary_rows",
    "verification_line",
]

ALSO_FOUND_MAX = 200  # places listed under one result in the reports; results.jsonl has them all


def _pct(v: Any) -> str:
    return f"{float(v):.1%}" if isinstance(v, int | float) else "–"


def _int(v: Any) -> str:
    return f"{int(v):,}" if isinstance(v, int | float) else "–"


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    sessions = summary.get("sessions") or {}
    tokens = summary.get("tokens") or {}
    errors = summary.get("errors") or {}
    rows = [
        ("Run", str(summary.get("run_id", "–"))),
        ("Status", str(summary.get("status", "–"))),
        ("Partitions", _int(summary.get("partitions"))),
        (
            "Sessions",
            ", ".join(f"{k} {_int(v)}" for k, v in sessions.items()) if isinstance(sessions, dict) else "–",
        ),
        ("Results (raw → unique)", f"{_int(summary.get('results_raw'))} → {_int(summary.get('results_unique'))}"),
        ("Dedup rate", _pct(summary.get("dedup_rate"))),
        ("Results refused (returned to the model to fix)", _int(summary.get("results_refused"))),
        (
            "Tokens (in / out / total)",
            f"{_int(tokens.get('input'))} / {_int(tokens.get('output'))} / {_int(tokens.get('total'))}",
        ),
        ("Cost (list price)", f"${float(summary['cost_usd']):,.4f}" if "cost_usd" in summary else "–"),
        ("Model calls", _int(summary.get("llm_calls"))),
        (
            "Errors (429 / server / timeout)",
            " / ".join(_int(errors.get(k)) for k in ("rate_limited", "server", "timeout")),
        ),
        ("Duration", f"{float(summary['duration_s']):,.1f} s" if "duration_s" in summary else "–"),
    ]
    rule = summary.get("dedup_scope")
    if isinstance(rule, dict) and rule.get("rule"):
        rows.append(("Dedup rule", str(rule["rule"])))
    band = summary.get("dedup_band")
    if isinstance(band, dict) and band.get("note"):
        rows.append(("Dedup vs claim", str(band["note"])))
    return rows


def verification_line(summary: dict[str, Any]) -> str | None:
    v = summary.get("verification")
    if not isinstance(v, dict):
        return None
    if v.get("agreement") is None:
        text = f"{v.get('sampled', 0)} sampled, no decisive verdict"
    else:
        lo, hi = v.get("agreement_ci", [0, 1])
        text = (
            f"agreement {_pct(v['agreement'])} (95% CI {_pct(lo)}–{_pct(hi)}) on {v.get('sampled', 0)} sampled: "
            f"{v.get('confirmed', 0)} confirmed, {v.get('refuted', 0)} refuted, {v.get('unsure', 0)} unsure"
        )
        if v.get("not_verified"):
            text += f", {v['not_verified']} not verified"
    if v.get("alarm"):
        text += f" — ALARM: below the {_pct(v.get('threshold'))} threshold, the output needs review"
    return text


def model_rows(per_model: dict[str, dict[str, Any]]) -> list[tuple[str, int, int, float]]:
    rows = []
    for model, m in sorted(per_model.items()):
        cost = m.get("cost_usd", 0)
        rows.append((model, int(m.get("calls", 0)), int(m.get("tokens", 0)), float(cost or 0)))
    return rows


def result_facts(r: ResultItem) -> list[str]:
    facts = []
    if r.location:
        facts.append(f"`{r.location}`" if "`" not in r.location else r.location)
    if r.confidence is not None:
        facts.append(f"confidence {r.confidence:.2f}")
    level = urgency_label(r)
    if level:
        facts.append(f"severity {level}" if "severity" in r.extra else f"priority {level}")
    k = corroboration(r)
    if k > 1:
        facts.append(f"reported by {k} sessions")
    if r.duplicates:
        facts.append(f"{len(r.duplicates)} duplicate{'s' if len(r.duplicates) != 1 else ''}")
    ver = r.extra.get("verification")
    if isinstance(ver, dict) and ver.get("status"):
        facts.append(f"verification: {ver['status']}")
    return facts


def also_found(r: ResultItem) -> list[str]:
    """Every other place a merged result occurs: its location (or, without one, its session), with the
    session and confidence it was reported with; one entry per place."""
    places: dict[str, list[str]] = {}
    for occ in r.extra.get("occurrences") or ():
        if not isinstance(occ, dict):
            continue
        where = str(occ.get("location") or f"session {occ.get('session_id', '?')}")
        note = str(occ.get("session_id") or "").rsplit(".", 1)[-1]  # RUN.s00003 -> s00003
        if isinstance(occ.get("confidence"), int | float):
            note += f", confidence {float(occ['confidence']):.2f}"
        places.setdefault(where, []).append(note.strip(", "))
    return [f"{where} ({'; '.join(n for n in notes if n)})" if any(notes) else where for where, notes in places.items()]


def other_wordings(r: ResultItem) -> list[tuple[str, str]]:
    """The members of a merged result that said it in other words: (where, their title and body)."""
    out = []
    for occ in r.extra.get("occurrences") or ():
        if not isinstance(occ, dict) or "body" not in occ:
            continue
        where = str(occ.get("location") or f"session {occ.get('session_id', '?')}")
        title, body = str(occ.get("title") or "").strip(), str(occ.get("body") or "").strip()
        text = title if not body or body == title else (f"{title}: {body}" if title else body)
        out.append((where, text))
    return out


def _excerpt(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _wordings_lines(r: ResultItem) -> list[str]:
    said = other_wordings(r)
    if not said:
        return []
    lines = ["", f"   In other words ({len(said)}):"]
    for where, text in said[:ALSO_FOUND_MAX]:
        lines.append(
            f"   - `{where}`: {_excerpt(text, 300)}" if "`" not in where else f"   - {where}: {_excerpt(text, 300)}"
        )
    if len(said) > ALSO_FOUND_MAX:
        lines.append(f"   - … and {len(said) - ALSO_FOUND_MAX} more in results.jsonl")
    return lines


def _also_line(r: ResultItem, code: bool) -> str | None:
    places = also_found(r)
    if not places:
        return None
    shown = places[:ALSO_FOUND_MAX]

    def fmt(p: str) -> str:
        where, _, rest = p.partition(" (")
        return (f"`{where}`" if code and "`" not in where else where) + (f" ({rest}" if rest else "")

    more = f", and {len(places) - len(shown)} more in results.jsonl" if len(places) > len(shown) else ""
    return (
        f"also found in {len(places)} other place{'s' if len(places) != 1 else ''}: "
        + ", ".join(map(fmt, shown))
        + more
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(
    summary: dict[str, Any],
    groups: Groups,
    *,
    per_model: dict[str, dict[str, Any]],
    top: int = 20,
    sections: Sequence[str] = (),
) -> str:
    """``groups``: the results by :func:`~agent_fleet.aggregate.outputs.group_by_category`;
    ``sections``: markdown other planes add after the spend table (the decision audit)."""
    task = " ".join(str(summary.get("task", "")).split())
    out = [f"# Fleet run report: {task}" if task else "# Fleet run report", ""]
    out += ["| | |", "|---|---|"]
    out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in summary_rows(summary)]
    line = verification_line(summary)
    if line:
        out += [f"| Verification | {_cell(line)} |"]
    out.append("")
    rows = category_rows(groups)
    if rows:
        out += ["## Dedup per category", "", "| category | raw | unique | dedup |", "|---|---:|---:|---:|"]
        out += [f"| {_cell(r['category'])} | {r['raw']} | {r['unique']} | {r['dedup_rate']:.1%} |" for r in rows]
        out.append("")
    if per_model:
        out += ["## Cost and tokens per model", "", "| model | calls | tokens | cost |", "|---|---:|---:|---:|"]
        out += [f"| {_cell(m)} | {c:,} | {t:,} | ${usd:,.4f} |" for m, c, t, usd in model_rows(per_model)]
        out.append("")
    for section in sections:
        out += [section.rstrip(), ""]
    for cat, items in groups:
        out += [f"## {cat} ({len(items)})", ""]
        for n, r in enumerate(items[:top], 1):
            facts = " · ".join(result_facts(r))
            out.append(f"{n}. **{_cell(r.title) or '(untitled)'}**" + (f" — {facts}" if facts else ""))
            also = _also_line(r, code=True)
            if also:
                out += ["", f"   *{also[:1].upper()}{also[1:]}*"]
            body = r.body.strip()
            if body and body != r.title.strip():
                excerpt = body if len(body) <= 600 else body[:597].rstrip() + "…"
                out += ["", "   " + excerpt.replace("\n", "\n   "), ""]
            out += _wordings_lines(r)
        if len(items) > top:
            out.append(f"\n… and {len(items) - top} more in results.jsonl")
        out.append("")
    if not groups:
        out += ["No results.", ""]
    return "\n".join(out).rstrip() + "\n"
