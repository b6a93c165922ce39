"""A run's changes for people and programs, folded from its log alone (pure functions).

* :func:`listing`: ``agent-fleet changes RUN_ID --json`` (SPEC.md "Changes"), one entry per session
  that changed something, in partition order;
* :func:`summary_block`: ``summary.json``'s ``changes``;
* :func:`markdown` / :func:`html`: the reports' section. Identical changes (the same patch from
  several sessions) are listed once there, with every session and branch that made it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from agent_fleet.changes.change_record import Change
from agent_fleet.changes.checkout import RunBase
from agent_fleet.changes.integrate import Integration, partition_branch, run_branch

__all__ = ["NOT_CAPTURED", "html", "listing", "markdown", "summary_block"]

NOT_CAPTURED = "the run's input is not a directory in a git repository: its changes were not captured"
_PENDING = "not merged yet: the run's changes are merged when its sessions have ended"
_DIFF_LINES = 80  # of a change's patch shown in a report
_LISTED = 200  # changes listed in a report; the rest are in `agent-fleet changes`


def listing(
    run_id: str,
    base: RunBase | None,
    changes: Sequence[tuple[str, str, Change]],
    integration: Integration | None,
    *,
    error: str | None = None,
) -> dict[str, Any]:
    """``changes`` are ``(session_id, partition_id, change)`` in partition order; ``integration``
    the last one recorded (None before the run's end); ``error`` why integrating failed."""
    if base is None:
        return {"base": None, "branch": None, "changes": [], "note": NOT_CAPTURED}
    placed = {p.session_id: p for p in integration.placed} if integration is not None else {}
    rows = []
    for sid, pid, ch in changes:
        p = placed.get(sid)
        reason = p.reason if p is not None else (error or _PENDING)
        rows.append(
            {
                "session_id": sid,
                "partition_id": pid,
                "branch": p.branch if p is not None else partition_branch(run_id, pid),
                "files": [f.path for f in ch.files],
                "insertions": ch.insertions,
                "deletions": ch.deletions,
                "out_of_scope": list(ch.out_of_scope),
                "check": p.check if p is not None else None,
                "merged": bool(p is not None and p.merged),
                "reason": None if p is not None and p.merged else reason,
                "refused": [r.to_dict() for r in ch.refused],
                "commit": p.commit if p is not None else None,
                "file_stats": [f.to_dict() for f in ch.files],
                "digest": ch.digest,
            }
        )
    out: dict[str, Any] = {
        "base": base.commit,
        "branch": run_branch(run_id),
        "commit": integration.commit if integration is not None else None,
        "repo": base.repo,
        "changes": rows,
    }
    if base.dirty:
        out["note"] = "the checkout had uncommitted changes when the run started: the run based on HEAD without them"
    if error is not None:
        out["error"] = error
    return out


def summary_block(view: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json``'s ``changes`` from a :func:`listing`."""
    rows = view.get("changes") or []
    checks = {"passed": 0, "failed": 0, "timeout": 0}
    for r in rows:
        outcome = (r.get("check") or {}).get("outcome")
        if outcome in checks:
            checks[outcome] += 1
    block: dict[str, Any] = {
        "sessions_with_changes": len(rows),
        "files": sum(len(r["files"]) for r in rows),
        "insertions": sum(r["insertions"] for r in rows),
        "deletions": sum(r["deletions"] for r in rows),
        "out_of_scope": sum(1 for r in rows if r["out_of_scope"]),
        "checks": checks,
        "merged": sum(1 for r in rows if r["merged"]),
        "branch": view.get("branch"),
        "unique": len({r["digest"] for r in rows}),
    }
    for key in ("note", "error"):
        if view.get(key):
            block[key] = view[key]
    return block


def _groups(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Rows with the same patch together, in the order each patch first appears."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(str(r["digest"]), []).append(r)
    return list(by.values())


def _state(r: Mapping[str, Any]) -> str:
    check = r.get("check") or {}
    text = "merged" if r["merged"] else f"not merged: {r.get('reason') or 'unknown'}"
    if check.get("outcome"):
        text = f"check {check['outcome']} · {text}"
    return text


def _file_line(f: Mapping[str, Any]) -> str:
    size = "binary" if f.get("binary") else f"+{f.get('insertions', 0)} −{f.get('deletions', 0)}"
    moved = f" (from {f['old_path']})" if f.get("old_path") else ""
    return f"{f['path']}{moved}: {f['status']}, {size}"


def _excerpt(patch: bytes) -> tuple[str, int]:
    lines = patch.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[:_DIFF_LINES]), max(0, len(lines) - _DIFF_LINES)


def markdown(view: Mapping[str, Any], patches: Mapping[str, bytes]) -> str:
    """The reports' "Changes" section; ``patches`` by session id (for the diff excerpts)."""
    out = ["## Changes", ""]
    if view.get("base") is None:
        return "\n".join([*out, str(view.get("note", NOT_CAPTURED)), ""])
    rows = view.get("changes") or []
    merged = sum(1 for r in rows if r["merged"])
    out.append(
        f"Base `{str(view['base'])[:12]}` · {len(rows)} session(s) changed code · {merged} merged into "
        f"`{view['branch']}` (`agent-fleet apply RUN_ID` merges it into your checkout)"
    )
    for key in ("note", "error"):
        if view.get(key):
            out += ["", f"*{view[key]}*"]
    out.append("")
    for group in _groups(rows)[:_LISTED]:
        r = group[0]
        out.append(f"### {r['partition_id']} · +{r['insertions']} −{r['deletions']} · {_state(r)}")
        out.append("")
        if len(group) > 1:
            places = ", ".join(f"{g['session_id']} (`{g['branch']}`)" for g in group)
            out += [f"The same change was made by {len(group)} sessions: {places}", ""]
        else:
            out += [f"Session {r['session_id']}, branch `{r['branch']}`", ""]
        out += [f"- `{_file_line(f)}`" for f in r["file_stats"]]
        out += [f"- refused `{x['path']}`: {x['reason']}" for x in r["refused"]]
        if r["out_of_scope"]:
            out.append("- outside the partition: " + ", ".join(f"`{p}`" for p in r["out_of_scope"]))
        excerpt, more = _excerpt(patches.get(r["session_id"], b""))
        if excerpt:
            fence = "````" if "```" in excerpt else "```"
            out += ["", f"{fence}diff", excerpt, fence]
            if more:
                out.append(f"… {more} more line(s): `git show {r['commit'] or r['branch']}`")
        out.append("")
    if len(_groups(rows)) > _LISTED:
        out.append(f"… and more: `agent-fleet changes {view['branch'].removeprefix('fleet/')}`")
    return "\n".join(out).rstrip() + "\n"


def html(view: Mapping[str, Any], patches: Mapping[str, bytes]) -> str:
    """The same section as :func:`markdown`, for report.html (diffs folded)."""
    parts = ["<h2>Changes</h2>"]
    if view.get("base") is None:
        return parts[0] + f"<p>{escape(str(view.get('note', NOT_CAPTURED)))}</p>"
    rows = view.get("changes") or []
    merged = sum(1 for r in rows if r["merged"])
    parts.append(
        f"<p>Base <code>{escape(str(view['base'])[:12])}</code> · {len(rows)} session(s) changed code · "
        f"{merged} merged into <code>{escape(str(view['branch']))}</code></p>"
    )
    for key in ("note", "error"):
        if view.get(key):
            parts.append(f'<p class="alarm">{escape(str(view[key]))}</p>')
    parts.append("<ol>")
    for group in _groups(rows)[:_LISTED]:
        r = group[0]
        head = f"{r['partition_id']} · +{r['insertions']} −{r['deletions']} · {_state(r)}"
        who = ", ".join(f"{g['session_id']} ({g['branch']})" for g in group)
        files = "".join(f"<li><code>{escape(_file_line(f))}</code></li>" for f in r["file_stats"])
        files += "".join(
            f"<li>refused <code>{escape(x['path'])}</code>: {escape(x['reason'])}</li>" for x in r["refused"]
        )
        if r["out_of_scope"]:
            files += (
                "<li>outside the partition: "
                + ", ".join(f"<code>{escape(p)}</code>" for p in r["out_of_scope"])
                + "</li>"
            )
        excerpt, more = _excerpt(patches.get(r["session_id"], b""))
        diff = ""
        if excerpt:
            tail = f"\n… {more} more line(s)" if more else ""
            diff = f'<details><summary>diff</summary><pre class="body">{escape(excerpt + tail)}</pre></details>'
        same = f"made by {len(group)} sessions: " if len(group) > 1 else ""
        parts.append(
            f'<li><strong>{escape(head)}</strong><div class="facts">{escape(same + who)}</div>'
            f"<ul>{files}</ul>{diff}</li>"
        )
    parts.append("</ol>")
    return "\n".join(parts)
