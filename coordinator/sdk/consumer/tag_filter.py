"""RocketMQ's tag expressions: `*` (every message), or tags joined by `||`.

A subscription names a topic and an expression; a message matches if the expression is
`*` (or empty), or its tag is one of the expression's. A message without a tag matches only
`*`, as in RocketMQ. Messages that do not match are skipped by the consumer and count as
consumed: its group's offset moves past them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALL", "TagFilter"]

#: The expression that matches every message.
ALL = "*"


@dataclass(frozen=True)
class TagFilter:
    """A parsed tag expression; `tags` None means every message."""

    expression: str
    tags: frozenset[str] | None

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        """Parse `expression` ("*", "TagA", "TagA || TagB"); ValueError if it is malformed."""
        text = (expression or ALL).strip()
        if text in ("", ALL):
            return cls(ALL, None)
        tags = [part.strip() for part in text.split("||")]
        if any(not tag for tag in tags):
            raise ValueError(f"tag expression {expression!r}: an empty tag between '||'")
        if ALL in tags:
            raise ValueError(f"tag expression {expression!r}: '*' cannot be combined with tags")
        return cls(" || ".join(tags), frozenset(tags))

    def matches(self, tag: str | None) -> bool:
        """Return whether a message tagged `tag` (None: untagged) is subscribed."""
        return self.tags is None or (tag is not None and tag in self.tags)
