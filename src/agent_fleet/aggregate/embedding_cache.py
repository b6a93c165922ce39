"""A persistent embedding cache: one SQLite file, keyed by (embedder name, content hash).

A resumed run feeds the same results to a fresh aggregator; every text it embedded before is read
back here instead of being embedded again. Vectors are stored as float32 (the embedders' own
precision), so a cached vector compares exactly like a fresh one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from agent_fleet.aggregate.vectors import Vector, decode_vector, encode_vector
from agent_fleet.errors import StoreError

__all__ = ["EmbeddingCache"]

# A rowid table: a vector (a kilobyte or more) is far above the row size a WITHOUT ROWID table suits
# (about a twentieth of a page), and filling one took five times the CPU. A file made with the
# earlier WITHOUT ROWID schema is read and written as it is.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    embedder TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, content_hash)
)
"""


class EmbeddingCache:
    """Thread-safe; ``path`` may be ``":memory:"`` for a cache that lives as long as the object."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the embedding cache {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_many(self, embedder: str, hashes: Sequence[str]) -> dict[str, Vector]:
        found: dict[str, Vector] = {}
        wanted = list(dict.fromkeys(hashes))
        with self._lock:
            # SQLite limits bound parameters; 500 per query stays well under every build's limit.
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT content_hash, vector FROM embeddings WHERE embedder = ? AND content_hash IN ({marks})",
                    (embedder, *part),
                ).fetchall()
                for h, blob in rows:
                    found[h] = decode_vector(blob)
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    def put_many(self, embedder: str, entries: Iterable[tuple[str, Vector]]) -> None:
        rows = [(embedder, h, encode_vector(v)) for h, v in entries]
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def count(self, embedder: str | None = None) -> int:
        with self._lock:
            if embedder is None:
                row = self._db.execute("SELECT count(*) FROM embeddings").fetchone()
            else:
                row = self._db.execute("SELECT count(*) FROM embeddings WHERE embedder = ?", (embedder,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache(path={self.path!r}, hits={self.hits}, misses={self.misses})"
