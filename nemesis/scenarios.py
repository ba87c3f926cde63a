"""Scripted scenarios: a fixed fault sequence that must expose a known anomaly.

``isr-shrink-unclean`` is the 2013 Jepsen Kafka case (seeds 000/001: "a committed message is not
lost as long as one in-sync replica is alive" — so make the leader the only one, then lose it):

1. cut only the replication traffic (the broker listener) between the leader L of partition 0
   and its followers; in KRaft the ISR changes through the controller, so the controller
   listener stays open and L can shrink the ISR to ``[L]`` (``replica.lag.time.max.ms``);
2. keep writing: with ``acks=all`` and ``min.insync.replicas=1`` L acknowledges alone;
3. SIGKILL L, heal the network;
4. enable ``unclean.leader.election.enable`` and force an unclean election: an out-of-sync
   follower becomes leader without L's acknowledged writes;
5. keep writing, then restart L, which truncates its log to the new leader's (lost writes).

With ``min.insync.replicas=2`` the leader refuses step 2's writes (NOT_ENOUGH_REPLICAS), so none
is acknowledged and none can be lost.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from confluent_kafka import KafkaException

from clusters import admin
from nemesis.faults import leader_of

#: Broker settings the scenario needs on top of the run's (fast ISR shrink, no auto unclean).
SCENARIO_BROKER_CONFIG = {"replica.lag.time.max.ms": "3000",
                          "unclean.leader.election.enable": "false"}


def isr_shrink_unclean(cluster, run_op: Callable, topic: str, stop: threading.Event,
                       log: Callable[[str], None], phase_s: float = 5.0) -> dict:
    """Run the scenario's fault sequence while the workload writes. Returns observations.

    Args:
        cluster: a cluster that can kill and partition.
        run_op: ``Scheduler.run_op`` (records each step as a nemesis op).
        topic: the workload topic; partition 0 is the target.
        stop: set on Ctrl-C: the scenario returns early (the runner heals).
        log: progress messages for the user.
        phase_s: seconds of writing in each phase.
    """
    seen: dict = {}
    if stop.wait(phase_s):
        return seen
    leader = leader_of(cluster, topic, 0)
    if leader is None:
        seen["error"] = "partition 0 has no leader"
        return seen
    seen["old_leader"] = leader.name
    log(f"cutting replication between leader {leader.name} and its followers")
    run_op("partition", {"target": "leader-replication", "topic": topic, "partition": 0})
    a = admin.client(cluster.bootstrap_servers, 5.0)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not stop.is_set():
        try:
            states = [s for s in admin.partitions(a, topic) if s.partition == 0]
        except KafkaException:
            states = []  # metadata briefly unavailable: ask again
        if states and states[0].isr == (leader.node_id,):
            seen["isr_shrunk_after_s"] = round(40 - (deadline - time.monotonic()), 1)
            break
        time.sleep(0.5)
    log(f"ISR of {topic}-0 shrunk to the leader alone: {'isr_shrunk_after_s' in seen}")
    if stop.wait(phase_s):
        return seen
    log(f"killing leader {leader.name}")
    run_op("kill", {"target": "leader", "topic": topic, "partition": 0})
    run_op("heal", None)
    deadline = time.monotonic() + 60
    unclean_on = False
    while time.monotonic() < deadline and not stop.is_set():
        # the killed leader may have been the active controller: config changes can time out
        # until the quorum has elected another one, so both steps are retried
        unclean_on = unclean_on or run_op("unclean-on", {"topic": topic}) is not None
        run_op("elect-unclean", {"topic": topic})
        new = leader_of(cluster, topic, 0)
        if new is not None and new != leader:
            seen["new_leader"] = new.name
            break
        time.sleep(2)
    log(f"new leader after unclean election: {seen.get('new_leader')}")
    if stop.wait(phase_s):
        return seen
    log(f"restarting {leader.name}")
    run_op("start", None)
    stop.wait(phase_s / 2)
    return seen
