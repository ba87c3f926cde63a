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
from typing import Callable

from nemesis.monitor import Monitor, partition_state

#: Run options (``RunConfig`` fields) each scenario sets unless the user gave them: one
#: targeted partition, a fast ISR shrink, no unclean election until the nemesis enables it.
SCENARIO_SETTINGS = {
    "isr-shrink-unclean": {"keys": 1, "topics": 1, "replica_lag_time_max_ms": 3000,
                           "unclean_leader_election": False},
}

#: Seconds each precondition may take to show in the monitor's samples.
ISR_SHRINK_TIMEOUT_S = 40.0
NEW_LEADER_TIMEOUT_S = 60.0


def isr_shrink_unclean(cluster, run_op: Callable, monitor: Monitor, topic: str,
                       stop: threading.Event, log: Callable[[str], None],
                       phase_s: float = 5.0) -> dict:
    """Run the scenario's fault sequence while the workload writes. Returns observations:
    ``{"old_leader", "isr_shrunk_after_s", "new_leader", "new_leader_epoch"}`` as far as they
    happened, and ``"unmet"`` naming the first precondition that did not (the run's verdict is
    then unknown: lost writes cannot be expected of a fault that did not happen).

    Args:
        cluster: a cluster that can kill and partition.
        run_op: ``Scheduler.run_op`` (records each step as a nemesis op).
        monitor: the run's cluster-state monitor; preconditions are read from its samples.
        topic: the workload topic; partition 0 is the target.
        stop: set on Ctrl-C: the scenario returns early (the runner heals).
        log: progress messages for the user.
        phase_s: seconds of writing in each phase.
    """
    seen: dict = {}

    def unmet(step: str) -> dict:
        if not stop.is_set():
            seen["unmet"] = step
            log(f"scenario precondition not met: {step}")
        return seen

    if stop.wait(phase_s):
        return seen
    state = monitor.wait_for(lambda s: (partition_state(s, topic, 0) or {}).get("leader", -1) >= 0,
                             10.0, stop)
    if state is None:
        return unmet(f"{topic}-0 has a leader")
    leader = cluster.node(partition_state(state, topic, 0)["leader"])
    seen["old_leader"] = leader.name
    log(f"cutting replication between leader {leader.name} and its followers")
    cut_at = monitor.samples
    run_op("partition", {"target": "leader-replication", "topic": topic, "partition": 0})
    state = monitor.wait_for(
        lambda s: monitor.samples > cut_at
        and (partition_state(s, topic, 0) or {}).get("isr") == [leader.node_id],
        ISR_SHRINK_TIMEOUT_S, stop)
    if state is None:
        return unmet(f"ISR of {topic}-0 shrank to [{leader.node_id}] (its leader "
                     f"{leader.name}) within {ISR_SHRINK_TIMEOUT_S:.0f} s")
    seen["isr_shrunk"] = True
    log(f"ISR of {topic}-0 shrunk to the leader alone")
    if stop.wait(phase_s):
        return seen
    log(f"killing leader {leader.name}")
    run_op("kill", {"target": "leader", "topic": topic, "partition": 0})
    run_op("heal", None)

    def new_leader(s: dict) -> bool:
        p = partition_state(s, topic, 0) or {}
        return p.get("leader", -1) not in (-1, leader.node_id)

    unclean_on = False
    state = None
    for _ in range(int(NEW_LEADER_TIMEOUT_S / 2)):
        # the killed leader may have been the active controller: config changes can time out
        # until the quorum has elected another one, so both steps are retried
        unclean_on = unclean_on or run_op("unclean-on", {"topic": topic}) is not None
        run_op("elect-unclean", {"topic": topic})
        state = monitor.wait_for(new_leader, 2.0, stop)
        if state is not None or stop.is_set():
            break
    if state is None:
        return unmet(f"{topic}-0 got a leader other than {leader.name} after an unclean "
                     f"election within {NEW_LEADER_TIMEOUT_S:.0f} s")
    p = partition_state(state, topic, 0)
    seen["new_leader"] = cluster.node(p["leader"]).name
    seen["new_leader_epoch"] = p["leader_epoch"]
    log(f"new leader after unclean election: {seen['new_leader']} (epoch {p['leader_epoch']})")
    if stop.wait(phase_s):
        return seen
    log(f"restarting {leader.name}")
    run_op("start", None)
    stop.wait(phase_s / 2)
    return seen
