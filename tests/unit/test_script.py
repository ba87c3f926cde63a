"""Schedule files: validation names the key path and line; the runner proves each step from
monitor samples and stops at the first that does not hold."""

from __future__ import annotations

import threading

import pytest

from kafka_chaos.clusters.base import Node
from kafka_chaos.admission import load_scenario
from kafka_chaos.nemesis import script


def _write(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, words", [
    ("name: x\nsteps:\n  - do: kill\n    targte: one\n", ["line 4", "steps.0.targte", "Extra"]),
    ("name: x\nsteps:\n  - do: explode\n", ["line 3", "unknown fault 'explode'"]),
    ("name: x\nsteps:\n  - do: kill\n    until: {leader: not L}\n",
     ["'L' is no mark made before it"]),
    ("name: x\nsteps:\n  - do: kill\n    target: M\n", ["steps.0.target", "'M' is no mark"]),
    ("name: x\nsteps:\n  - do: heal\n    retry_every: 2\n", ["retry_every needs until"]),
    ("name: x\nsteps:\n  - after: -1\n", ["steps.0.after", "greater than or equal to 0"]),
    ("name: x\nsteps: []\n", ["steps", "at least 1"]),
    ("name: x\nsteps:\n  - do: request-fault\n", ["request goes with do: request-fault"]),
    ("name: x\nsteps:\n  - do: partition\n    loss: 0.2\n", ["loss (a packet loss"]),
    ("name: x\nsteps:\n  - do: loss\n    loss: 2\n", ["steps.0.loss", "less than 1"]),
    ("name: x\nsteps:\n  - do: disk-full\n    slow_ms: 50\n", ["slow_ms (each write's"]),
    ("name: x\nsteps:\n  - do: kill\n    until: {in_sync: {F: false}}\n",
     ["'F' is no mark made before it"]),
    ("name: x\nsteps:\n  - do: request-fault\n    request: {fault: delay, apis: [EndTnx]}\n",
     ["line 4", "steps.0.request.apis", "'EndTnx' is no Kafka API"]),
])
def test_bad_schedule_files_are_refused_naming_where(tmp_path, text, words):
    with pytest.raises(ValueError) as err:
        load_scenario(str(_write(tmp_path, text)))
    assert all(w in str(err.value) for w in words), str(err.value)
    assert str(err.value).startswith("--scenario ")


def test_built_in_scenarios_load_and_unknown_names_are_refused():
    assert {"isr-shrink-unclean", "zombie-leader"} <= set(script.names())
    for name in script.names():
        assert load_scenario(name).name == name
    with pytest.raises(ValueError, match="choose from acks1-lagging-follower, acks1-leader-move, "
                       "damaged-last-replica, delayed-end-txn"):
        load_scenario("split-brain")


class _Cluster:
    nodes = [Node(i, f"n{i}", "127.0.0.1", ("broker", "controller")) for i in (1, 2, 3)]

    def node(self, node_id):
        return next(n for n in self.nodes if n.node_id == node_id)


class _Monitor:
    """Serves one scripted state per nemesis op (the state the cluster is in after it)."""

    def __init__(self, states):
        self.states = list(states)
        self.samples = 1
        self.hw_drops: dict = {}

    @property
    def state(self):
        return self.states[0]

    def advance(self):
        if len(self.states) > 1:
            self.states.pop(0)
        self.samples += 1

    def wait_for(self, condition, timeout_s, stop):
        return self.state if not stop.is_set() and condition(self.state) else None


def _state(leader, isr, answering=(1, 2, 3)):
    return {"answering": {str(i): i in answering for i in (1, 2, 3)}, "controller": None,
            "partitions": {"t": [{"partition": 0, "leader": leader, "leader_epoch": 0,
                                  "isr": list(isr)}]}}


def _run(states, steps, done=None):
    """Run ``steps`` against ``states``; each op ``f`` completes with ``done.get(f)``."""
    monitor = _Monitor(states)
    ops = []

    def run_op(f, value):
        ops.append((f, value))
        monitor.advance()
        return (done or {}).get(f)

    s = script.Script(name="x", steps=steps)
    seen = script.Runner(_Cluster(), run_op, monitor, "t", threading.Event(),
                         lambda m: None).run(s)
    return seen, ops


def test_marks_target_nodes_and_conditions_hold_in_order():
    steps = [{"mark": "L", "do": "partition", "target": "leader-replication",
              "until": {"isr": ["L"]}},
             {"do": ["kill", "heal"], "target": "L", "expect": {"answering": {"L": False}}},
             {"do": ["unclean-on", "elect-unclean"], "until": {"leader": "not L"},
              "retry_every": 0.01, "timeout": 5},
             {"do": "start"}]
    states = [_state(2, [1, 2, 3]), _state(2, [2]), _state(2, [2], (1, 3)),
              _state(2, [2], (1, 3)), _state(-1, [2], (1, 3)), _state(-1, [2], (1, 3)),
              _state(3, [3], (1, 3))]
    seen, ops = _run(states, steps)
    assert seen == {"steps_done": 4, "marks": {"L": "n2"}}
    assert ops[0] == ("partition", {"target": "leader-replication", "topic": "t", "partition": 0})
    assert ops[1] == ("kill", {"target": [2], "topic": "t", "partition": 0})
    assert ops[2] == ("heal", None) and ops[3] == ("unclean-on", {"topic": "t"})
    assert [f for f, _ in ops[3:]] == ["unclean-on", "elect-unclean"] * 2 + ["start"]
    _, ops = _run([_state(2, [1, 2, 3])], [{"do": "loss", "target": "halves", "loss": 0.2},
                                           {"do": "loss"}])
    assert ops == [("loss", {"target": "halves", "topic": "t", "partition": 0, "loss": 0.2}),
                   ("loss", {"target": "one", "topic": "t", "partition": 0})]


def test_a_step_that_does_not_happen_ends_the_script_naming_it():
    steps = [{"name": "shrink", "mark": "L", "do": "partition", "until": {"isr": ["L"]},
              "timeout": 0.05},
             {"do": "kill", "target": "L"}]
    seen, ops = _run([_state(1, [1, 2, 3])], steps)
    assert seen["unmet"] == "shrink: isr ['L'] not seen within 0.05 s"
    assert seen["steps_done"] == 0 and [f for f, _ in ops] == ["partition"]
    seen, _ = _run([_state(1, [1, 2, 3])],
                   [{"mark": "L", "do": "kill", "target": "L",
                     "expect": {"answering": {"L": False}}}])
    assert seen["unmet"] == "step 1 (kill): expected answering {'L': False}"
    seen, ops = _run([_state(-1, [])], [{"mark": "L", "do": "kill"}])
    assert seen["unmet"].endswith("t-0 had no leader to mark as L") and ops == []


def test_a_truncation_shows_below_the_highest_watermark_and_a_crash_must_crash_clients():
    """``truncated`` counts the monitor's samples whose high watermark fell below the highest
    before it, since the step began (one the step's wait never looked at included)."""
    def hw(value):
        state = _state(2, [2], (2, 3))
        state["partitions"]["t"][0]["hw"] = value
        return state
    step = {"do": "elect-unclean", "until": {"leader": "not 1", "truncated": True},
            "timeout": 0.05}
    for drops, unmet in ((1, None), (0, "step 1 (elect-unclean): leader not 1, truncated "
                                         "True not seen within 0.05 s")):
        monitor = _Monitor([hw(90)])
        monitor.hw_drops = {("t", 0): 2}

        def run_op(f, v, monitor=monitor, drops=drops):  # samples taken while it ran
            monitor.hw_drops = {("t", 0): 2 + drops}
            monitor.advance()
        seen = script.Runner(_Cluster(), run_op, monitor, "t", threading.Event(),
                             lambda m: None).run(script.Script(name="x", steps=[step]))
        assert (seen.get("unmet") or "").startswith(unmet or "") and (
            "unmet" in seen) == (unmet is not None), seen
    for done, unmet in (({"crashed": [0, 1]}, None), (None, "step 1 (crash-clients): no "
                                                          "client crashed")):
        seen = script.Runner(_Cluster(), lambda f, v: done, _Monitor([hw(1)]), "t",
                             threading.Event(), lambda m: None).run(
            script.Script(name="x", steps=[{"do": "crash-clients"}]))
        assert seen.get("unmet") == unmet


def test_a_power_loss_step_needs_lost_log_bytes_and_a_targeted_start_aims_at_its_node():
    lost = {"lost": {"n2": {"truncated_files": 3, "logs": {"t-0/00000000000000000000.log": 120},
                            "sole_in_sync_replica_of": ["t-0"]}}}
    for done, unmet in ((lost, None), ({"lost": {"n2": {"truncated_files": 1, "logs": {}}}},
                                       "no un-fsynced write of t-0 was lost"), (None, "was lost")):
        monitor = _Monitor([_state(2, [2])])
        ops = []

        def run_op(f, value):
            ops.append((f, value))
            monitor.advance()
            return done if f == "lose-unfsynced" else {}

        steps = [{"mark": "L", "do": "lose-unfsynced", "target": "L"},
                 {"do": "start", "target": "L"}, {"do": "start"}]
        seen = script.Runner(_Cluster(), run_op, monitor, "t", threading.Event(),
                             lambda m: None).run(script.Script(name="x", steps=steps))
        if unmet is None:
            assert seen["steps_done"] == 3 and ops[1:] == [("start", {
                "target": [2], "topic": "t", "partition": 0}), ("start", None)]
        else:
            assert unmet in seen["unmet"] and [f for f, _ in ops] == ["lose-unfsynced"]


def test_a_request_fault_step_gives_its_fault_and_its_end_must_show_it_acted():
    """A request fault that met no request (or forwarded none it delayed) proves nothing:
    the step is unmet, and the run unknown."""
    applied = {"fault": "delay", "apis": ["EndTxn"], "applied": 1,
               "requests": [{"forwarded_ns": 5}]}
    for report, unmet in ((applied, None), ({**applied, "applied": 0}, "met no request"),
                          ({**applied, "requests": [{"forwarded_ns": None}]}, "delay of EndTxn")):
        monitor = _Monitor([_state(2, [2])])
        ops = []

        def run_op(f, value):
            ops.append((f, value))
            monitor.advance()
            return {"ended": [report]} if f == "request-heal" else {}

        steps = [{"do": "request-fault",
                  "request": {"fault": "delay", "apis": ["EndTxn"], "delay_ms": 5000}},
                 {"after": 0.01, "do": "request-heal"}]
        seen = script.Runner(_Cluster(), run_op, monitor, "t", threading.Event(),
                             lambda m: None).run(script.Script(name="x", steps=steps))
        assert ops == [("request-fault", {"request": {"fault": "delay", "apis": ["EndTxn"],
                                                      "delay_ms": 5000}}),
                       ("request-heal", None)]
        if unmet is None:
            assert seen["steps_done"] == 2
        else:
            assert unmet in seen["unmet"] and seen["steps_done"] == 1


@pytest.mark.parametrize("seen, met", [
    ({"AddPartitionsToTxn": 5, "EndTxn": 3}, True),    # the next transaction open
    ({"Produce": 5}, True),                            # transactions v2: its first Produce
    ({"AddPartitionsToTxn": 5, "EndTxn": 7}, False),   # that one had ended too
    ({"EndTxn": 3}, False),                            # a retry of its own only
    ({}, False)])
def test_a_late_request_must_have_found_its_clients_next_transaction_open(seen, met):
    done = {"ended": [{"fault": "delay", "apis": ["EndTxn"], "applied": 1,
                       "requests": [{"forwarded_ns": 9, "overtaken_by": seen}]}]}
    monitor = _Monitor([_state(2, [2])])
    steps = [{"do": "request-heal", "into_open_txn": True}]
    seen_ = script.Runner(_Cluster(), lambda f, v: done, monitor, "t", threading.Event(),
                          lambda m: None).run(script.Script(name="x", steps=steps))
    assert ("unmet" not in seen_) == met, seen_


@pytest.mark.parametrize("api, seen, met", [
    ("Produce", {"EndTxn": 5}, True),                 # its client had ended the transaction
    ("Produce", {"InitProducerId": 5}, True),         # or begun a new producer epoch
    ("Produce", {"Fetch": 5, "Produce": 6}, False),   # only its own retries and reads
    ("EndTxn", {"EndTxn": 5}, False)])                # no Produce at all
def test_a_late_produce_must_have_come_after_its_transaction_ended(api, seen, met):
    done = {"ended": [{"fault": "hold", "apis": [api], "applied": 1,
                       "requests": [{"api": api, "forwarded_ns": 9, "overtaken_by": seen}]}]}
    steps = [{"do": "request-heal", "after_txn_end": True}]
    seen_ = script.Runner(_Cluster(), lambda f, v: done, _Monitor([_state(2, [2])]), "t",
                          threading.Event(), lambda m: None).run(
        script.Script(name="x", steps=steps))
    assert ("unmet" not in seen_) == met, seen_
    with pytest.raises(ValueError, match="after_txn_end goes with do: request-heal"):
        script.Script(name="x", steps=[{"do": "heal", "after_txn_end": True}])


def _quorum(leader, voters=(1, 2, 3)):
    return {**_state(1, [1, 2, 3]),
            "controller": None if leader is None else {
                "leader": leader, "epoch": 1, "high_watermark": 9,
                "voters": {str(v): 9 for v in voters}, "observers": {}}}


def test_quorum_marks_and_conditions_read_the_controller_sample():
    steps = [{"mark_controller": "Q", "mark_voter": "V", "do": "partition", "target": "V"},
             {"do": "remove-voter", "target": "Q",
              "until": {"voting": {"Q": False, "V": True}, "quorum_leader": "not Q"}},
             {"do": "add-voter", "until": {"voting": {"Q": True}}}]
    states = [_quorum(2), _quorum(2), _quorum(3, (1, 3)), _quorum(3)]
    seen, ops = _run(states, steps)
    assert seen == {"steps_done": 3, "marks": {"Q": "n2", "V": "n1"}}, seen
    assert ops[0] == ("partition", {"target": [1], "topic": "t", "partition": 0})
    assert ops[1] == ("remove-voter", {"target": [2], "topic": "t", "partition": 0})
    assert ops[2] == ("add-voter", None)
    # the leader still Q, or no leader answering: the step does not hold
    seen, _ = _run([_quorum(2), _quorum(2, (1, 3))],
                   [{"mark_controller": "Q", "do": "remove-voter", "target": "Q",
                     "until": {"quorum_leader": "not Q"}, "timeout": 0.05}])
    assert seen["unmet"].endswith("quorum_leader not Q not seen within 0.05 s"), seen
    seen, _ = _run([_quorum(None)], [{"mark_controller": "Q", "do": "kill"}])
    assert seen["unmet"].endswith("the KRaft quorum had no leader to mark"), seen
    seen, _ = _run([_quorum(2, (2,))], [{"mark_voter": "V", "do": "kill"}])
    assert seen["unmet"].endswith("no voter besides its leader to mark"), seen


def test_a_quorum_condition_names_only_marks_made_before_it(tmp_path):
    text = "name: x\nsteps:\n  - do: add-voter\n    until: {voting: {Q: true}}\n"
    with pytest.raises(ValueError, match="'Q' is no mark made before it"):
        load_scenario(str(_write(tmp_path, text)))


def test_a_file_step_is_unmet_without_a_file_and_a_rollback_without_a_change():
    seen, _ = _run([_state(1, [1, 2, 3])], [{"do": "snapshot-file", "file": "segment"}])
    assert seen["unmet"].endswith("no segment to copy on the target"), seen
    seen, _ = _run([_state(1, [1, 2, 3])], [{"do": "zero", "running": True}])
    assert seen["unmet"].endswith("no file to damage on the target"), seen
    seen, _ = _run([_state(1, [1, 2, 3])], [{"do": "restore-file"}])
    assert seen["unmet"].endswith("nothing was rolled back"), seen
    unchanged = {"restored": {"n1": {"sha256": ["a", "a"]}}}
    changed = {"restored": {"n1": {"sha256": ["a", "a"]}, "n2": {"sha256": ["b", "a"]}}}
    assert not script._rolled_back(unchanged) and script._rolled_back(changed)


def test_a_follower_mark_an_isr_condition_and_a_disk_heal_that_must_have_acted():
    steps = [{"mark": "L", "mark_follower": "F", "do": "disk-slow", "target": "F",
              "slow_ms": 5000, "until": {"in_sync": {"F": False, "L": True}}},
             {"do": "disk-heal", "until": {"isr": [1, 2, 3]}}]
    states = [_state(2, [1, 2, 3]), _state(2, [2, 3]), _state(2, [1, 2, 3])]
    acted = {"disk-heal": {"state": {"n1": {"refused": 0, "delayed": 3}}}}
    seen, ops = _run(states, steps, acted)
    assert seen == {"steps_done": 2, "marks": {"L": "n2", "F": "n1"}}, seen
    assert ops[0] == ("disk-slow", {"target": [1], "topic": "t", "partition": 0,
                                    "slow_ms": 5000})
    # F still in the ISR: the first step does not hold
    seen, _ = _run([_state(2, [1, 2, 3])], [{**steps[0], "timeout": 0.05}], acted)
    assert seen["unmet"].endswith("in_sync {'F': False, 'L': True} not seen within 0.05 s")
    idle = {"disk-heal": {"state": {"n1": {"refused": 0, "delayed": 0},
                                    "n3": {"refused": 2, "delayed": 0}}}}
    seen, _ = _run(states, steps, idle)
    assert seen["unmet"].endswith("the disk fault on n1 refused or delayed no write"), seen
    seen, ops = _run([_state(2, [2])], [{"mark_follower": "F", "do": "kill"}])
    assert seen["unmet"].endswith("t-0 had no in-sync follower to mark as F") and ops == []
