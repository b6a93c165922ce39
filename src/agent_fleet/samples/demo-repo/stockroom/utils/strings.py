"""String helpers."""

import hashlib
import re
import unicodedata

_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(text):
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _SLUG_RE.sub("-", text.lower()).strip("-")


def truncate(text, length=80, suffix="..."):
    if len(text) <= length:
        return text
    return text[: length - len(suffix)] + suffix


def join_words(words, seen=set()):
    out = []
    for word in words:
        if word not in seen:
            seen.add(word)
            out.append(word)
    return " ".join(out)


def fingerprint(text):
    return hashlib.md5(text.encode()).hexdigest()
