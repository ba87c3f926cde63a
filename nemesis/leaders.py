"""Leadership moved on purpose: a partition's replicas reordered (AlterPartitionReassignments,
KIP-455) so that an in-sync follower becomes the preferred leader, then a preferred leader
election (ElectLeaders, KIP-460) to make it leader; and the way back. No data moves: the
replica set stays the same, so the fault is the leader change alone, as an operator's
``kafka-reassign-partitions`` or ``kafka-leader-election`` would cause."""

from __future__ import annotations

from typing import Any

from kafka_chaos.clusters import admin, wire
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import partition_of
from kafka_chaos.waiting import WaitTimeout, wait_until

#: How long a move waits for the metadata to show the new leader, seconds.
MOVE_TIMEOUT_S = 20.0


class LeaderNemesis(Nemesis):
    """fs:
      - ``move-leader``: ``value`` ``{"topic": t, "partition": p, "target":
        "in-sync-follower" or [node ids]}``; a random in-sync follower of ``t``-``p`` (one
        of those nodes, when given) is put first in its replica list and elected; ok
        ``{"partition": "t-p", "replicas": [before, after], "leader": [old, new]}``;
      - ``restore-leader``: every partition moved so far gets its first replica list back and
        a preferred election; ok ``{"restored": {"t-p": {"replicas": [...], "leader": id}}}``.
    Raises ``NemesisError`` when there is no leader or no in-sync follower (among the given
    nodes), or when the new leader does not show within ``MOVE_TIMEOUT_S``.
    """

    fs = frozenset({"move-leader", "restore-leader"})
    name = "leader"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        self.original: dict[tuple[str, int], list[int]] = {}

    def invoke(self, f: str, value: Any) -> Any:
        if f == "restore-leader":
            restored = {}
            for (topic, p), replicas in sorted(self.original.items()):
                restored[f"{topic}-{p}"] = {"replicas": replicas,
                                            "leader": self._move(topic, p, replicas)}
            self.original.clear()
            return {"restored": restored}
        topic, p = value["topic"], value.get("partition", 0)
        state = partition_of(self.cluster, topic, p)
        if state is None or state.leader < 0:
            raise NemesisError(f"{topic}-{p} has no leader to move")
        followers = [i for i in state.isr if i != state.leader]
        if isinstance(value.get("target"), list):  # a scenario's mark: that node only
            followers = [i for i in followers if i in value["target"]]
        if not followers:
            raise NemesisError(f"{topic}-{p} has no in-sync follower to lead among "
                               f"{value.get('target')} (leader {state.leader}, ISR "
                               f"{list(state.isr)})")
        new = self.rng.choice(sorted(followers))
        before = list(state.replicas)
        after = [new] + [i for i in before if i != new]
        self.original.setdefault((topic, p), before)
        return {"partition": f"{topic}-{p}", "replicas": [before, after],
                "leader": [state.leader, self._move(topic, p, after)]}

    def _move(self, topic: str, p: int, replicas: list[int]) -> int:
        """Give ``topic``-``p`` the replica list ``replicas`` and elect its first; returns the
        leader the metadata shows then."""
        errors = []
        for node in (n for n in self.cluster.brokers if self.cluster.is_running(n)):
            try:
                wire.alter_partition_reassignments(node.client_endpoint, topic, {p: replicas},
                                                   security=self.cluster.security)
                break
            except wire.WireError as exc:
                errors.append(str(exc))
        else:
            raise NemesisError(f"no broker took the reassignment of {topic}-{p}: {errors}")
        client = admin.client(self.cluster.bootstrap_servers, 5.0, self.cluster.security)
        last: list = [None]

        def elected() -> bool:
            admin.elect(client, topic, [p], "preferred", 5.0)
            last[0] = partition_of(self.cluster, topic, p)
            return last[0] is not None and last[0].leader == replicas[0]

        try:
            wait_until(elected, MOVE_TIMEOUT_S, 0.5, f"{replicas[0]} to lead {topic}-{p}")
        except WaitTimeout:
            raise NemesisError(f"{topic}-{p}: leader {last[0] and last[0].leader}, not "
                               f"{replicas[0]}, {MOVE_TIMEOUT_S:g} s after the move") from None
        return last[0].leader

    def teardown(self) -> Any:
        return self.invoke("restore-leader", None) if self.original else None
