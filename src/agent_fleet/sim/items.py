"""Deterministic answers for list items, verifier verdicts and tool-less requests.

Everything here is a pure function of the text it is given; items from the same host or of the same
kind get near-identical wording, as a real model summarising similar sources would.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

__all__ = ["COMPACT_PREFIX", "compaction_summary", "note_for_item", "plain_answer", "plan_for_goal", "verdict_for"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$", re.IGNORECASE)
_NOISE = frozenset({"www", "html", "htm", "php", "aspx", "index", "en", "us", "com", "org", "io", "amp"})
_STOPWORD_TEXT = (
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with "
    "what when where which who why how into than then there these those about after before your you our "
    "we they them their please can could would should does did done also just more most very"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_INTERROGATIVES = frozenset(
    {"how", "why", "what", "where", "when", "which", "who", "can", "is", "does", "do", "should"}
)

# (host fragment, kind of source, category)
_SOURCE_KINDS: tuple[tuple[str, str, str], ...] = (
    ("github.com", "code repository page", "code"),
    ("gitlab", "code repository page", "code"),
    ("readthedocs", "documentation page", "documentation"),
    ("docs.", "documentation page", "documentation"),
    ("wikipedia.org", "encyclopedia article", "reference"),
    ("arxiv.org", "research paper", "research"),
    ("stackoverflow.com", "question-and-answer thread", "q-and-a"),
    ("medium.com", "blog post", "blog"),
    ("blog", "blog post", "blog"),
    ("news", "news article", "news"),
)

# (category, keywords, sentence)
_LINE_CLASSES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "bug-report",
        ("error", "crash", "crashes", "fail", "fails", "failed", "broken", "bug", "exception", "wrong"),
        "It describes a defect: something that used to work or should work does not.",
    ),
    (
        "feature-request",
        ("add", "support", "feature", "wish", "allow", "option", "request", "could"),
        "It asks for new behaviour rather than reporting a defect.",
    ),
    (
        "question",
        ("?", "<interrogative>"),
        "It is a question that needs an answer more than a change.",
    ),
    (
        "complaint",
        ("slow", "bad", "terrible", "worst", "refund", "late", "expensive", "annoying"),
        "It expresses dissatisfaction that deserves a follow-up.",
    ),
    (
        "praise",
        ("great", "love", "excellent", "thanks", "thank", "awesome", "good", "nice"),
        "It is positive feedback; no action is needed.",
    ),
)


def _h(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _url_note(item: str) -> dict[str, Any]:
    parts = urlsplit(item)
    host = (parts.hostname or "").lower()
    host = host.removeprefix("www.")
    words = [w for w in _words(parts.path + " " + parts.query.replace("=", " ")) if w not in _NOISE]
    topic = " ".join(words[:6]) if words else "home page"
    kind, category = "web page", "web"
    for fragment, k, c in _SOURCE_KINDS:
        if fragment in host:
            kind, category = k, c
            break
    terms = ", ".join(words[:4]) if words else host
    body = (
        f"Research note on {item}. This {kind} on {host} covers {topic}. "
        f"It is a {category} source relevant to the task; key terms: {terms}."
    )
    return {
        "title": f"{host}: {topic}",
        "body": body,
        "category": category,
        "confidence": round(0.6 + (_h(item) % 30) / 100, 2),
        "location": item,
    }


def _line_note(item: str) -> dict[str, Any]:
    text = item.strip()
    lowered = text.lower()
    tokens = set(_words(text))
    if "?" in text:
        tokens.add("?")
    words = _words(text)
    if words and words[0] in _INTERROGATIVES:
        tokens.add("<interrogative>")
    category, sentence = "other", "It does not fit a more specific category."
    best = 0
    for cat, keywords, sent in _LINE_CLASSES:
        # the class with the most keyword hits wins; ties go to the class listed first
        hits = sum(1 for k in keywords if k in tokens)
        if hits > best:
            category, sentence, best = cat, sent, hits
    short = text if len(text) <= 160 else text[:159] + "…"
    head = " ".join(lowered.split()[:8]) or "(empty item)"
    return {
        "title": f"{category.replace('-', ' ').capitalize()}: {head}",
        "body": f'The item "{short}" reads as a {category.replace("-", " ")}. {sentence}',
        "category": category,
        "confidence": round(0.55 + (_h(text) % 40) / 100, 2),
    }


def note_for_item(item: str) -> dict[str, Any]:
    """One ``submit_result`` item for one list item (a URL gets a research note, a line a classification)."""
    stripped = item.strip()
    if _URL.match(stripped):
        return _url_note(stripped)
    return _line_note(item)


def verdict_for(text: str, *, refute_pct: float, unsure_pct: float) -> dict[str, str]:
    """A verifier verdict decided by where a hash of the judged text falls in [0, 100)."""
    pct = (_h(text) % 10_000) / 100
    if pct < refute_pct:
        return {"verdict": "refute", "reason": "The evidence quoted in the result does not support it as stated."}
    if pct < refute_pct + unsure_pct:
        return {"verdict": "unsure", "reason": "The result cannot be confirmed or refuted from the information given."}
    return {"verdict": "confirm", "reason": "The result is consistent with the evidence quoted in it."}


def plain_answer(text: str) -> str:
    """A deterministic prose answer for a request that offers no tools."""
    words = [w for w in _words(text) if len(w) > 3 and w not in _STOPWORDS]
    counts = Counter(words)
    first_seen = {w: i for i, w in reversed(list(enumerate(words)))}
    terms = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))[:5]
    flat = " ".join(text.split())
    quoted = flat if len(flat) <= 160 else flat[:159] + "…"
    answer = f'Simulated answer. The request asked: "{quoted}".'
    if terms:
        answer += f" Key terms: {', '.join(terms)}."
    return answer


_AT_MOST = re.compile(r"at most (\d+) sub-tasks")
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSES = re.compile(r",\s*|\s+and\s+")


def plan_for_goal(system: str, user: str) -> dict[str, Any]:
    """A planner's answer: each sentence after the first is a sub-task; a one-sentence goal with a
    colon splits its list of clauses; else one sub-task. At most the number the system prompt allows."""
    goal = user.split("Goal:", 1)[-1].strip()
    m = _AT_MOST.search(system)
    limit = int(m.group(1)) if m else 10
    sentences = [s.strip() for s in _SENTENCES.split(goal) if s.strip()]
    subtasks = sentences[1:] if len(sentences) > 2 else []
    if not subtasks and ":" in goal:
        head, _, rest = goal.partition(":")
        clauses = [c.strip(" .") for c in _CLAUSES.split(rest) if c.strip(" .")]
        subtasks = [f"{head.strip()}: {c}" for c in clauses] if len(clauses) > 1 else []
    if not subtasks:
        return {"subtasks": [goal], "why": "a simple request: one sub-task"}
    return {"subtasks": subtasks[:limit], "why": f"{len(subtasks[:limit])} independent parts of the goal"}


# The harness's compaction prompt starts so (agent_fleet.brain.context.COMPACT_SYSTEM_PROMPT).
COMPACT_PREFIX = "Compact this agent conversation."
_TURN_LINE = re.compile(r"^Turn (\d+): .*?called (\w+)\(", re.MULTILINE)
_RANGE = re.compile(r"^Turns (\d+)-(\d+):$", re.MULTILINE)
_EARLIER = re.compile(r"^Summary of turns (\d+)-\d+:", re.MULTILINE)


def compaction_summary(text: str) -> str:
    """A short summary for a compaction request: the turns it covers and the tools they called."""
    span = _RANGE.search(text)
    earlier = _EARLIER.search(text)
    first = earlier.group(1) if earlier else (span.group(1) if span else "1")
    last = span.group(2) if span else first
    calls = Counter(m.group(2) for m in _TURN_LINE.finditer(text))
    done = ", ".join(f"{name} {n} times" for name, n in sorted(calls.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"Turns {first}-{last}: the agent called {done or 'no tools'}. Nothing was left unfinished in them."
