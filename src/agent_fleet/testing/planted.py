"""Planted findings for deduplication runs: 100 distinct findings, 40 of them reported again in other words.

:func:`planted_findings` gives 161 findings over a small codebase's files: each of the 100 distinct
findings once, plus 61 rewordings of 40 of them (a family: the finding and its rewordings, each at
another place in another file, so other sessions report them). A rewording reorders the sentences,
swaps a word or two, adds a lead-in or changes case and punctuation — what several reviewers writing
up one bug do — and stays at cosine >= 0.955 from the original under all-MiniLM-L6-v2. Distinct
findings differ in what they claim (the bug, the function, the consequence). Deterministic: the same
seed gives the same findings, and every confidence is distinct, so "the most confident member" is one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["FAMILIES", "PlantedFinding", "planted_files", "planted_findings"]

FAMILIES = 40

# (category, title, sentences with {fn} {mod} {what}); each class has four instances below.
_CLASSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "security",
        "SQL injection in {fn}",
        (
            "{fn} in {mod} formats {what} straight into the SQL text it executes.",
            "A value containing a quote changes the statement, so a caller can read or delete rows.",
            "Pass the value as a bound parameter instead.",
        ),
    ),
    (
        "security",
        "Shell command built from {what} in {fn}",
        (
            "{fn} in {mod} passes {what} to subprocess with shell=True.",
            "Characters such as ; or $( ) in it run extra commands with the service's rights.",
            "Call subprocess with an argument list and shell=False.",
        ),
    ),
    (
        "security",
        "Hard-coded credential in {mod}",
        (
            "{mod} keeps {what} as a string literal next to {fn}.",
            "Anyone with read access to the repository can use it, and rotating it needs a release.",
            "Read it from the environment or the secret store at start-up.",
        ),
    ),
    (
        "security",
        "Unsafe deserialisation of {what}",
        (
            "{fn} in {mod} calls pickle.loads on {what}.",
            "A crafted payload executes arbitrary code while it is being loaded.",
            "Use json for data that crosses a trust boundary.",
        ),
    ),
    (
        "security",
        "Path traversal through {what}",
        (
            "{fn} in {mod} joins {what} to the upload directory without normalising it.",
            "A name with ../ segments reads or overwrites files outside that directory.",
            "Resolve the path and check that it stays under the root.",
        ),
    ),
    (
        "correctness",
        "Mutable default argument in {fn}",
        (
            "{fn} in {mod} declares {what} with a list as its default value.",
            "The list is created once and shared, so entries from one call leak into the next.",
            "Default to None and create the list inside the function.",
        ),
    ),
    (
        "correctness",
        "Bare except hides errors in {fn}",
        (
            "{fn} in {mod} wraps {what} in a bare except that passes.",
            "KeyboardInterrupt and programming errors vanish and the caller gets an empty result.",
            "Catch the specific exception and log it.",
        ),
    ),
    (
        "correctness",
        "Off-by-one in {fn}",
        (
            "{fn} in {mod} stops its loop over {what} one element early.",
            "The last entry is never processed, so totals are short by one item.",
            "Iterate to the end of the range inclusive of the final index.",
        ),
    ),
    (
        "correctness",
        "Integer division truncates {what}",
        (
            "{fn} in {mod} divides {what} with // before scaling.",
            "Fractions are dropped, so small amounts round down to zero.",
            "Scale first or use Decimal for the division.",
        ),
    ),
    (
        "correctness",
        "Naive datetime compared with aware one in {fn}",
        (
            "{fn} in {mod} compares {what} built with datetime.now() against UTC timestamps.",
            "Python raises TypeError, or the check is off by the server's offset after conversion.",
            "Use datetime.now(timezone.utc) everywhere.",
        ),
    ),
    (
        "concurrency",
        "Race on {what} in {fn}",
        (
            "{fn} in {mod} reads and then writes {what} without holding the lock.",
            "Two threads interleave and one update is lost under load.",
            "Hold the lock across the read-modify-write.",
        ),
    ),
    (
        "concurrency",
        "Blocking call inside async {fn}",
        (
            "{fn} in {mod} calls time.sleep while waiting for {what}.",
            "The whole event loop stops for that long and every other request stalls.",
            "Await asyncio.sleep or run the blocking work in a thread.",
        ),
    ),
    (
        "concurrency",
        "Task created and never awaited in {fn}",
        (
            "{fn} in {mod} starts a task for {what} and drops the reference.",
            "The task can be garbage collected mid-flight and its exception is never seen.",
            "Keep the task and await it, or use a TaskGroup.",
        ),
    ),
    (
        "performance",
        "Quadratic membership test in {fn}",
        (
            "{fn} in {mod} checks each element of {what} with `in` against a list.",
            "With ten thousand entries the loop performs a hundred million comparisons.",
            "Build a set once before the loop.",
        ),
    ),
    (
        "performance",
        "N+1 queries in {fn}",
        (
            "{fn} in {mod} issues one query per row of {what}.",
            "A page of 500 rows makes 501 round trips to the database.",
            "Fetch the related rows in one joined query.",
        ),
    ),
    (
        "performance",
        "File read whole into memory in {fn}",
        (
            "{fn} in {mod} calls read() on {what} before parsing it.",
            "A multi-gigabyte upload exhausts the worker's memory and it is killed.",
            "Stream the file in chunks.",
        ),
    ),
    (
        "reliability",
        "Missing timeout on HTTP call in {fn}",
        (
            "{fn} in {mod} requests {what} with no timeout.",
            "A peer that never answers holds the worker forever and the pool drains.",
            "Pass a connect and read timeout.",
        ),
    ),
    (
        "reliability",
        "File handle leaked in {fn}",
        (
            "{fn} in {mod} opens {what} without a with block.",
            "On an exception the descriptor stays open until the process runs out of them.",
            "Open the file in a context manager.",
        ),
    ),
    (
        "reliability",
        "Retry loop without backoff in {fn}",
        (
            "{fn} in {mod} retries {what} immediately in a tight loop.",
            "During an outage it hammers the dependency and burns the CPU.",
            "Back off exponentially with jitter and cap the attempts.",
        ),
    ),
    (
        "reliability",
        "Unchecked None from lookup in {fn}",
        (
            "{fn} in {mod} uses the result of get() for {what} without checking it.",
            "A missing key raises AttributeError far from the cause.",
            "Handle the missing case explicitly.",
        ),
    ),
    (
        "maintainability",
        "Duplicated validation logic in {fn}",
        (
            "{fn} in {mod} repeats the checks on {what} that the schema already performs.",
            "The two copies have drifted and accept different inputs.",
            "Validate in one place and reuse it.",
        ),
    ),
    (
        "maintainability",
        "Magic number in {fn}",
        (
            "{fn} in {mod} compares {what} against the literal 86400.",
            "Readers cannot tell it means one day and a change misses the other copies.",
            "Name the constant.",
        ),
    ),
    (
        "security",
        "Weak hash for {what}",
        (
            "{fn} in {mod} hashes {what} with MD5.",
            "Collisions are cheap to find, so the digest cannot protect integrity.",
            "Use SHA-256 or a keyed HMAC.",
        ),
    ),
    (
        "security",
        "Secret written to logs in {fn}",
        (
            "{fn} in {mod} logs the full {what} at info level.",
            "Tokens end up in the log store that many people can read.",
            "Redact the secret before logging.",
        ),
    ),
    (
        "correctness",
        "Float used for money in {fn}",
        (
            "{fn} in {mod} sums {what} as binary floats.",
            "Cents drift, so invoices disagree with the ledger by a cent now and then.",
            "Keep amounts as Decimal or integer cents.",
        ),
    ),
)

# Four instances of each class: (function, module, what it handles)
_INSTANCES: tuple[tuple[str, str, str], ...] = (
    ("login_user", "auth/session.py", "the submitted user name"),
    ("export_report", "reports/export.py", "the sort column from the query string"),
    ("sync_inventory", "stock/sync.py", "the warehouse code"),
    ("render_invoice", "billing/invoice.py", "the customer's reference"),
)


@dataclass(frozen=True, slots=True)
class PlantedFinding:
    finding: int  # which of the 100 distinct findings this reports
    family: int | None  # which of the 40 reworded findings it belongs to (None: reported once)
    path: str  # the file it is reported in
    line: int
    title: str
    body: str
    category: str
    confidence: float

    def to_item(self) -> dict[str, object]:
        return {
            "title": self.title,
            "body": self.body,
            "category": self.category,
            "confidence": self.confidence,
            "location": f"{self.path}:{self.line}",
        }


def _distinct() -> list[tuple[str, str, str, str]]:
    """The 100 distinct findings: (category, title, body, module)."""
    out = []
    for k, (category, title, sentences) in enumerate(_CLASSES):
        for j in range(4):
            fn, mod, what = _INSTANCES[(j + k) % 4]
            fn = f"{fn}_{k:02d}"
            mod = mod.replace(".py", f"_{k:02d}.py")
            fill = {"fn": fn, "mod": mod, "what": what}
            out.append((category, title.format(**fill), " ".join(s.format(**fill) for s in sentences), mod))
    return out


_SWAPS = (
    ("so", "and so"),
    ("instead", "rather"),
    ("without", "with no"),
    ("calls", "invokes"),
    ("every", "each"),
    ("the", "this"),
)


def _reword(title: str, body: str, how: int) -> tuple[str, str]:
    sentences = [s.strip() for s in body.split(". ") if s.strip()]
    if how == 0:  # the remedy first
        sentences = sentences[-1:] + sentences[:-1]
        return title, ". ".join(s.rstrip(".") for s in sentences) + "."
    if how == 1:  # a word or two swapped
        words = body.split(" ")
        for old, new in _SWAPS:
            if old in words:
                words[words.index(old)] = new
                break
        return title, " ".join(words)
    if how == 2:  # a reviewer's lead-in
        return title, f"Note: {body}"
    return title.upper(), body.upper().replace(".", " .")  # shouting: the same words after normalising


def planted_files() -> list[str]:
    """The codebase the findings are reported in: every module the distinct findings name, plus one
    copy per rewording's place."""
    return sorted({f.path for f in planted_findings()})


def planted_findings(seed: int = 28) -> list[PlantedFinding]:
    """161 findings: the 100 distinct ones, and 61 rewordings of 40 of them (21 reworded twice)."""
    rng = random.Random(seed)
    distinct = _distinct()
    reworded = sorted(rng.sample(range(len(distinct)), FAMILIES))
    twice = set(rng.sample(reworded, 21))
    confidences = rng.sample(range(500, 990), 161)  # distinct: one most confident member per family
    out: list[PlantedFinding] = []
    for n, (category, title, body, mod) in enumerate(distinct):
        family = reworded.index(n) if n in reworded else None
        out.append(PlantedFinding(n, family, mod, 10 + n, title, body, category, confidences.pop() / 1000))
        if family is None:
            continue
        for copy in range(2 if n in twice else 1):
            how = rng.randrange(4)
            t, b = _reword(title, body, how)
            place = mod.replace(".py", f"_copy{copy}.py")  # the same bug, seen again in a copied module
            out.append(PlantedFinding(n, family, place, 20 + copy, t, b, category, confidences.pop() / 1000))
    rng.shuffle(out)
    return out
