"""Keys: the integers the workload writes to, each one partition of one topic (Jepsen's model)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class KeySpace:
    """``keys`` keys spread over ``topics`` topics: key k is partition ``k // topics`` of topic
    ``k % topics``, so consecutive keys land on different topics.

    Topic 0 is named ``base``; topic i > 0 ``f"{base}-{i}"``. Raises ``ValueError`` for fewer
    keys than topics.
    """

    base: str = "kafka-chaos"
    keys: int = 6
    topics: int = 1

    def __post_init__(self) -> None:
        if self.topics < 1 or self.keys < self.topics:
            raise ValueError(f"{self.keys} keys cannot spread over {self.topics} topics")

    def topic_name(self, i: int) -> str:
        """Name of topic ``i`` (0-based)."""
        return self.base if i == 0 else f"{self.base}-{i}"

    @property
    def topic_partitions(self) -> dict[str, int]:
        """``{topic: partition count}`` to create."""
        return {self.topic_name(i): len(range(i, self.keys, self.topics))
                for i in range(self.topics)}

    def tp(self, key: int) -> tuple[str, int]:
        """``(topic, partition)`` of ``key``."""
        return self.topic_name(key % self.topics), key // self.topics

    def key(self, topic: str, partition: int) -> int:
        """The key of ``topic``-``partition``; ``KeyError`` for a partition not in the space."""
        names = {self.topic_name(i): i for i in range(self.topics)}
        k = partition * self.topics + names[topic]
        if k >= self.keys:
            raise KeyError((topic, partition))
        return k

    def header(self) -> dict[str, list]:
        """``{"key": [topic, partition]}`` for the history header."""
        return {str(k): list(self.tp(k)) for k in range(self.keys)}
