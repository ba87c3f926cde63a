"""The KRaft quorum's membership changed under the run (Jepsen's membership nemesis, on
Kafka's dynamic quorum: KIP-853, Kafka 3.9+): a voter removed, or replaced, and added back.

A removed voter keeps running as an observer (it fetches the metadata log, votes no more); a
replaced one is stopped, removed, its metadata log directory wiped and formatted anew (a new
directory id), and started, as Kafka's operations docs replace a controller whose disk
failed. ``add-voter`` adds every removed voter back once it has caught up as an observer
(the leader refuses, ``REQUEST_TIMED_OUT``, an observer that lags). Removing the quorum's own
leader (``target: controller``) is the path of KAFKA-17608 (a leader that removed itself
kept acting as leader; fixed before dynamic quorums shipped in 3.9): the leader commits the
new voter set, then resigns.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_chaos.clusters import raft, wire
from kafka_chaos.clusters.base import DynamicQuorum
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.targets import quorum_endpoints
from kafka_chaos.waiting import WaitTimeout, wait_until

#: How long a change is retried (another change in flight, a leader election), seconds.
CHANGE_TIMEOUT_S = 30.0
#: How long ``add-voter`` waits for a removed voter to catch up as an observer, seconds.
CATCH_UP_S = 60.0
#: An observer counts as caught up within this many records of the high watermark (the
#: leader's own bound is ``controller.quorum.fetch.timeout.ms`` of fetch time, KIP-853).
CAUGHT_UP_RECORDS = 10


class MembershipNemesis(Nemesis):
    """fs:
      - ``remove-voter``: ``value`` ``{"target": "one" | "controller" | [node id]}``: a voter
        (``controller``: the quorum leader) taken out of the voter set; ok ``{"removed":
        id, "directory_id": str, "voters": [[before], [after]], "leader": [before, after],
        "epoch": [before, after]}`` (and, for the leader, ``"resigned_s"``: seconds until
        another answered as leader; still itself after ``CHANGE_TIMEOUT_S`` is KAFKA-17608);
      - ``replace-voter``: the same, but the voter is stopped first, and its metadata
        wiped and formatted anew before it starts again; ok adds ``"new_directory_id"``;
      - ``add-voter``: every voter removed so far added back; ok ``{"added": {id: directory
        id}, "voters": [...], "leader": id, "epoch": int}``.
    Raises ``NemesisError`` when the cluster's quorum is not dynamic, no leader answers,
    no voter is left to remove (a quorum of one), or a change is not committed within
    ``CHANGE_TIMEOUT_S`` (Kafka's error named).
    """

    fs = frozenset({"remove-voter", "replace-voter", "add-voter"})
    name = "membership"

    def __init__(self, cluster, rng) -> None:
        super().__init__(cluster, rng)
        #: node id -> the directory id it is to be added back under
        self.removed: dict[int, str] = {}
        #: a removal was asked for: the heal checks the voter set (else it has nothing to do)
        self.changed = False

    def invoke(self, f: str, value: Any) -> Any:
        if not (isinstance(self.cluster, DynamicQuorum) and self.cluster.dynamic_quorum):
            raise NemesisError("membership faults need a dynamic KRaft quorum (KIP-853): a "
                               "cluster of the tool's own on Kafka 3.9+, set up with one")
        if f == "add-voter":
            return self._add_back()
        self.changed = True
        _, before = self._leader()
        voters = sorted(before["voters"])
        if len(voters) < 2:
            raise NemesisError(f"the quorum has {len(voters)} voter: none to remove")
        target = (value or {}).get("target", "one")
        if target == "controller":
            victim = before["leader"]
        elif isinstance(target, list):
            victim = next((i for i in target if i in before["voters"]), None)
            if victim is None:
                raise NemesisError(f"none of {target} is a voter ({voters})")
        else:
            victim = self.rng.choice(voters)
        directory = before["voters"][victim]["directory_id"]
        node = self.cluster.node(victim)
        out: dict[str, Any] = {"removed": victim, "directory_id": directory}
        # known before the call: a removal Kafka appended but did not commit in time may
        # still commit later, and the heal must then add this voter back
        self.removed[victim] = directory
        if f == "replace-voter":
            self.cluster.stop(node)
        try:
            self._change(lambda ep: raft.remove_voter(ep, victim, directory,
                                                      security=self.cluster.security),
                         f"remove voter {victim}")
            if f == "replace-voter":
                self.removed[victim] = out["new_directory_id"] = self.cluster.reformat(node)
        finally:
            if f == "replace-voter":
                self.cluster.start(node)
        _, after = self._leader()
        if victim == before["leader"]:  # it commits its removal, then resigns (KIP-853)
            start = time.monotonic()
            while after["leader"] == victim and time.monotonic() - start < CHANGE_TIMEOUT_S:
                time.sleep(0.5)
                _, after = self._leader()
            out["resigned_s"] = round(time.monotonic() - start, 1)
        return {**out, "voters": [voters, sorted(after["voters"])],
                "leader": [before["leader"], after["leader"]],
                "epoch": [before["epoch"], after["epoch"]]}

    def _add_back(self) -> dict[str, Any]:
        """Every controller missing from the voter set added back (those this nemesis
        removed, and any whose removal it saw fail but Kafka committed later), under the
        directory id it was removed or replaced with, else the one it observes under."""
        added = {}
        _, state = self._leader()
        missing = [n for n in self.cluster.nodes
                   if n.is_controller and n.node_id not in state["voters"]]
        for node in missing:
            victim = node.node_id
            directory = self.removed.get(victim) or next(
                (o["directory_id"] for o in reversed(state["observers"]) if o["id"] == victim),
                None)
            if directory is None:
                raise NemesisError(f"controller {victim} is neither a voter nor an observer")
            if not self.cluster.is_running(node):
                self.cluster.start(node)
            self._caught_up(victim, directory)
            self._change(lambda ep: raft.add_voter(
                ep, victim, directory, ("CONTROLLER", node.host, node.controller_port),
                security=self.cluster.security), f"add voter {victim}")
            added[str(victim)] = directory
        self.removed.clear()
        _, after = self._leader()
        return {"added": added, "voters": sorted(after["voters"]), "leader": after["leader"],
                "epoch": after["epoch"]}

    def _leader(self) -> tuple[str, dict[str, Any]]:
        """``(endpoint, raft.describe answer)`` of the quorum leader, asked of every
        controller in turn until one answers as leader (within ``CHANGE_TIMEOUT_S``: a
        removed leader resigns, and an election follows)."""
        found: list = []

        def answered() -> bool:
            for node, endpoint in quorum_endpoints(self.cluster.nodes):
                if not self.cluster.is_running(node):
                    continue
                try:
                    state = raft.describe(endpoint, security=self.cluster.security)
                except wire.WireError:
                    continue
                if state["leader"] >= 0:
                    found[:] = [endpoint, state]
                    return True
            return False

        try:
            wait_until(answered, CHANGE_TIMEOUT_S, 0.5, "a quorum leader to answer")
        except WaitTimeout as exc:
            raise NemesisError(str(exc)) from None
        return found[0], found[1]

    def _change(self, call, what: str) -> None:
        """``call(leader endpoint)`` until it succeeds; Kafka refuses a change while another
        is uncommitted or the leader is new to its epoch (KIP-853), so a refusal is retried
        until ``CHANGE_TIMEOUT_S``. Raises ``NemesisError`` with the last refusal."""
        deadline = time.monotonic() + CHANGE_TIMEOUT_S
        while True:
            endpoint, _ = self._leader()
            try:
                call(endpoint)
                return
            except wire.WireError as exc:
                if time.monotonic() > deadline or self.ending.is_set():
                    raise NemesisError(f"{what}: {exc}") from None
                time.sleep(1.0)

    def _caught_up(self, victim: int, directory: str) -> None:
        """Wait until the leader lists ``victim`` under ``directory`` as an observer within
        ``CAUGHT_UP_RECORDS`` of its high watermark. Raises ``NemesisError``."""
        def close() -> bool:
            _, state = self._leader()
            observers = [o for o in state["observers"]
                         if o["id"] == victim and o["directory_id"] == directory]
            return bool(observers) and state["high_watermark"] >= 0 and (
                observers[0]["log_end_offset"] >= state["high_watermark"] - CAUGHT_UP_RECORDS)

        try:
            wait_until(close, CATCH_UP_S, 0.5, f"voter {victim} caught up as an observer")
        except WaitTimeout as exc:
            raise NemesisError(str(exc)) from None

    def teardown(self) -> Any:
        if not self.changed:
            return None
        healed = self._add_back()
        controllers = sorted(n.node_id for n in self.cluster.nodes if n.is_controller)
        if healed["voters"] != controllers:
            raise NemesisError(f"voters {healed['voters']} after the heal, not {controllers}")
        return healed
