"""A result item: one finding an agent submitted (SPEC.md, results.jsonl)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResultItem"]


@dataclass(frozen=True, slots=True)
class ResultItem:
    id: str
    partition_id: str
    session_id: str
    title: str
    body: str
    category: str | None = None
    confidence: float | None = None
    location: str | None = None
    duplicates: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # severity, priority … as the agent gave them

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "partition_id": self.partition_id,
            "session_id": self.session_id,
            "title": self.title,
            "body": self.body,
            "category": self.category,
            "confidence": self.confidence,
            "location": self.location,
            "duplicates": list(self.duplicates),
        }
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultItem:
        known = {
            "id",
            "partition_id",
            "session_id",
            "title",
            "body",
            "category",
            "confidence",
            "location",
            "duplicates",
        }
        conf = data.get("confidence")
        return cls(
            id=str(data["id"]),
            partition_id=str(data.get("partition_id", "")),
            session_id=str(data.get("session_id", "")),
            title=str(data.get("title", "")),
            body=str(data.get("body", "")),
            category=data.get("category"),
            confidence=float(conf) if conf is not None else None,
            location=data.get("location"),
            duplicates=tuple(data.get("duplicates", ())),
            extra={k: v for k, v in data.items() if k not in known},
        )
