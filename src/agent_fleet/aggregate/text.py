"""What of a result is compared: the normalised text behind the exact-duplicate hash, and the text embedded.

Exact duplicates are found by a hash of the *normalised full text* (title and body, lowercased,
punctuation removed, whitespace collapsed) before anything is embedded, so formatting noise never
costs an embedding. The hash is also the key of the embedding cache: the same text is embedded once
per embedder, across runs and resumes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from agent_fleet.domain.results import ResultItem

__all__ = [
    "EMBEDDED_CHARS",
    "content_hash",
    "embedding_text",
    "full_text",
    "normalize_text",
    "rank_key",
    "raw_hash",
    "text_hash",
    "valid_text",
]

# What an embedder sees of a result: its start. Past this a report's subject is settled, and a result
# of a megabyte would cost the local model minutes (its windows are embedded one by one).
EMBEDDED_CHARS = 8_000

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
# ASCII in one pass: letters and digits lowercased, every other byte (the underscore too) a space
_ASCII_FOLD = bytes(ord(ch.lower()) if ch.isascii() and ch.isalnum() else 32 for ch in map(chr, range(256)))


def normalize_text(text: str) -> str:
    """Lowercase, strip punctuation and symbols, collapse whitespace.

    NFKC first so that full-width forms and ligatures compare equal to their plain spelling; the
    underscore counts as punctuation (``foo_bar`` and ``foo bar`` are the same words to a reader).
    ASCII text takes a byte table instead: NFKC leaves it as it is, and there a word character is
    a letter, a digit or the underscore.
    """
    if text.isascii():
        return " ".join(text.encode("ascii").translate(_ASCII_FOLD).decode("ascii").split())
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_WORD.sub(" ", folded).replace("_", " ").split())


def full_text(item: ResultItem) -> str:
    """Title and body as one text; the title alone when the body repeats it."""
    title, body = item.title.strip(), item.body.strip()
    if not body or body == title:
        return title
    if not title:
        return body
    return f"{title}\n{body}"


def text_hash(text: str) -> str:
    return hashlib.blake2b(normalize_text(text).encode("utf-8"), digest_size=16).hexdigest()


def raw_hash(text: str) -> str:
    """A hash of the text exactly as written (byte-identical texts only)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def content_hash(item: ResultItem) -> str:
    """The exact-duplicate key of a result: a hash of its normalised full text."""
    return text_hash(full_text(item))


def embedding_text(item: ResultItem) -> str:
    """The text an embedder sees: the full text as written (models use case and punctuation), its first
    :data:`EMBEDDED_CHARS` characters."""
    return full_text(item)[:EMBEDDED_CHARS]


def valid_text(text: str) -> str:
    """``text`` with what UTF-8 cannot carry (a lone surrogate, as a JSON line may hold) replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def rank_key(item: ResultItem, arrival: int) -> tuple[float, int, int]:
    """Sort key of "the best version": highest confidence, then the most complete body, then the earliest.

    A result without a confidence ranks below every result that has one.
    """
    conf = item.confidence if item.confidence is not None else float("-inf")
    return (-conf, -len(item.body.strip()), arrival)
