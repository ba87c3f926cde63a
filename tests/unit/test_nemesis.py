"""The scheduler's history bookkeeping, the cluster-state monitor and the scenario verdict,
without Kafka: what they write must stay a readable history whatever interrupts them."""

from __future__ import annotations

import itertools
import random
import socket
import threading

import pytest

from kafka_chaos.clusters.base import Killable, Node, Partitionable
from kafka_chaos.history import HistoryWriter, read_history
from kafka_chaos.verdict import judge_run
from kafka_chaos.verdict import exit_code
from kafka_chaos.nemesis.base import Composed, Nemesis, NemesisError
from kafka_chaos.nemesis.monitor import Monitor, partition_state
from kafka_chaos.catalogue.faults import PACKAGES, parse_targets
from kafka_chaos.nemesis.schedule import Scheduler, plan, schedule_rng, unhealed
from kafka_chaos.nemesis.targets import pick


class _Interrupted(Nemesis):
    fs = frozenset({"kill", "start"})

    def __init__(self):
        super().__init__(cluster=None, rng=random.Random(0))
        self.healed = 0

    def invoke(self, f, value):
        raise KeyboardInterrupt

    def teardown(self):
        self.healed += 1
        return {"started": []}


def test_ctrl_c_during_a_nemesis_op_completes_it_before_heal_all(tmp_path):
    """Ctrl-C while a scenario step runs used to leave the op open, and heal-all then made
    the history unreadable ("invoked again while op 2 is still open")."""
    nemesis = _Interrupted()
    samples = []
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, header={"config": {}}) as history:
        scheduler = Scheduler(Composed([nemesis]), history, [], 1.0, random.Random(0), "t",
                              after_op=samples.append)
        with pytest.raises(KeyboardInterrupt):
            scheduler.run_op("kill", {"target": "leader"})
        scheduler.finish()
    ops = read_history(path)
    assert [(op.f, op.type.value) for op in ops] == [
        ("kill", "invoke"), ("kill", "info"), ("heal-all", "invoke"), ("heal-all", "ok")]
    assert ops[1].error == "KeyboardInterrupt: "
    assert nemesis.healed == 1
    assert samples == ["heal-all"]  # the interrupted op gets no sample: Ctrl-C goes on up


class _Killing(Nemesis):
    fs = frozenset({"kill", "start"})

    def __init__(self):
        super().__init__(cluster=None, rng=random.Random(0))

    def invoke(self, f, value):
        return {"killed": ["n1"]} if f == "kill" else {"started": ["n1"]}

    def teardown(self):
        return {"started": []}


def test_the_monitor_samples_right_before_and_after_every_nemesis_op(tmp_path):
    """An election a fault causes then lies after the sample before it began: the window of
    a write acknowledged before that sample holds the whole of it (issue 49, class 1)."""
    seen = []
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, header={"config": {}}) as history:
        def sample(when):
            return lambda f: (seen.append(f"{when} {f}"),
                              history.append("monitor", "invoke", "cluster-state", when),
                              history.append("monitor", "ok", "cluster-state", {}))
        scheduler = Scheduler(Composed([_Killing()]), history, [], 1.0, random.Random(0), "t",
                              after_op=sample("after"), before_op=sample("before"))
        scheduler.run_op("kill", {"target": "leader"})
        scheduler.finish()
    assert seen == ["before kill", "after kill", "before heal-all", "after heal-all"]
    ops = read_history(path)
    assert [(op.process, op.f) for op in ops if op.type.value == "invoke"] == [
        ("monitor", "cluster-state"), ("nemesis", "kill"), ("monitor", "cluster-state"),
        ("monitor", "cluster-state"), ("nemesis", "heal-all"), ("monitor", "cluster-state")]


class _Waiting(Nemesis):
    """An op that waits for a condition of the cluster which never comes (a lone leader whose
    followers keep up), unless the run ends."""
    fs = frozenset({"kill"})

    def __init__(self):
        super().__init__(cluster=None, rng=random.Random(0))
        self.waiting = threading.Event()

    def invoke(self, f, value):
        self.waiting.set()
        return {"killed": [], "run_ended": self.ending.wait(120)}


def test_the_end_of_a_run_ends_the_wait_of_the_nemesis_op_in_flight(tmp_path):
    """A lone-leader kill waits up to 45 s for the ISR to shrink; the quick start once spent
    15 s past its 30 s time limit waiting for one. ``finish`` tells the op the run is over,
    and the op's own completion says so."""
    nemesis = _Waiting()
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, header={"config": {}}) as history:
        scheduler = Scheduler(Composed([nemesis]), history, [], 1.0, random.Random(0), "t")
        op = threading.Thread(target=scheduler.run_op, args=("kill", {"target": "lone-leader"}))
        op.start()
        assert nemesis.waiting.wait(60)
        scheduler.finish()
        op.join()
    ops = read_history(path)
    assert [(o.f, o.type.value) for o in ops] == [
        ("kill", "invoke"), ("kill", "ok"), ("heal-all", "invoke"), ("heal-all", "ok")]
    assert ops[1].value == {"killed": [], "run_ended": True}


class _Cluster:
    """Two nodes on ports of this host: one answers nothing (a closed port), one accepts TCP
    but never replies (like a paused JVM, whose kernel still completes handshakes)."""

    security = None  # plaintext, as Cluster's default

    def __init__(self, silent_port: int, closed_port: int) -> None:
        self.nodes = [Node(1, "n1", "127.0.0.1", ("broker", "controller"), closed_port, 1),
                      Node(2, "n2", "127.0.0.1", ("broker",), silent_port)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_monitor_records_paired_samples_and_a_silent_node_does_not_answer(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts, never replies
    cluster = _Cluster(silent.getsockname()[1], _free_port())
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    with HistoryWriter(path, header={"config": {}}) as history:
        monitor = Monitor(cluster, history, ["t"], period_s=0.05)
        monitor.start()
        state = monitor.wait_for(lambda s: True, 5.0, stop)
        assert monitor.wait_for(lambda s: False, 0.3, stop) is None  # times out
        stop.set()
        assert monitor.wait_for(lambda s: True, 5.0, stop) is None  # stopped: returns at once
        monitor.sample("after kill")
        monitor.stop()
        assert monitor.sample("late") is None
    silent.close()
    assert state["answering"] == {"1": False, "2": False}
    assert state["partitions"] is None and state["controller"] is None
    ops = read_history(path)
    assert len(ops) == 2 * monitor.samples >= 6
    assert {op.process for op in ops} == {"monitor"}
    assert [op.type.value for op in ops[:2]] == ["invoke", "ok"]
    assert {"trigger": "after kill"} in [op.value for op in ops]
    assert not any(op.value == {"trigger": "late"} for op in ops)


def test_partition_state_picks_the_partition():
    state = {"partitions": {"t": [{"partition": 0, "leader": 2}, {"partition": 1, "leader": 3}]}}
    assert partition_state(state, "t", 1)["leader"] == 3
    assert partition_state(state, "t", 7) is None and partition_state({}, "t", 0) is None


@pytest.mark.parametrize("valid, expected, code", [
    (True, "unknown", 2), (False, False, 1), ("unknown", "unknown", 2)])
def test_an_unmet_scenario_precondition_is_never_valid(valid, expected, code):
    result = {"valid": valid, "unknown_reasons": [], "anomaly_types": []}
    facts = {"scenario": {"old_leader": "n1", "unmet": "ISR of t-0 shrank to [1]"}}
    judge_run(result, facts)
    judge_run(result, facts)  # re-analysing adds the reason once
    assert result["valid"] == expected and exit_code(result) == code
    assert result["unknown_reasons"] == ["scenario precondition not met: ISR of t-0 shrank to [1]"]
    assert judge_run({"valid": True}, {"scenario": {"new_leader": "n2"}})["valid"] is True


def test_a_heal_that_leaves_something_is_never_valid():
    class Cluster:
        nodes = [Node(1, "n1", "h", ("broker",)), Node(2, "n2", "h", ("broker",))]

        def is_running(self, node):
            return node.node_id == 1

    healed = {"ProcessNemesis": {"start": {"started": ["n2"]}},
              "PartitionNemesis": "error: CommandFailed: iptables on n1 failed"}
    left = unhealed(Cluster(), healed)
    assert left == ["PartitionNemesis: error: CommandFailed: iptables on n1 failed",
                    "n2 is not running"]
    result = judge_run({"valid": True, "unknown_reasons": []}, {"heal_left": left})
    assert result["valid"] == "unknown" and exit_code(result) == 2
    assert result["unknown_reasons"][0].startswith("the final heal did not complete: ")


def test_a_client_driver_that_failed_during_the_workload_makes_the_verdict_unknown():
    """A JVM of the Java client that died leaves every later op info: "valid" would be a
    verdict on a workload that stopped writing."""
    facts = {"client": {"name": "java", "failed": "the Java client JVM ended"}}
    result = judge_run({"valid": True, "unknown_reasons": []}, facts)
    assert result["valid"] == "unknown" and exit_code(result) == 2
    assert "the Java client JVM ended" in result["unknown_reasons"][0]
    assert judge_run({"valid": False}, facts)["valid"] is False  # violations stay


@pytest.mark.parametrize("found, valid", [("consumer", True), ("classic", "unknown"),
                                          ("unknown: timed out", "unknown")])
def test_a_kip_848_run_is_valid_only_if_its_group_ran_that_protocol(found, valid):
    facts = {"group": {"asked": "consumer", "type": found}}
    assert judge_run({"valid": True, "unknown_reasons": []}, facts)["valid"] == valid


def test_the_heal_is_read_back_rules_and_clocks_included():
    from kafka_chaos.clusters.base import Skewable

    class Leaky(_Clocks):
        def rules_left(self):
            return ["n2: -A INPUT -s 10.0.0.1/32 -j DROP"]

        def clock_offset(self, node):
            return {3: -12.5}.get(node.node_id, 0.0)

    Partitionable.register(Leaky)
    Skewable.register(Leaky)
    assert unhealed(Leaky(), {}) == ["rule left on n2: -A INPUT -s 10.0.0.1/32 -j DROP",
                                     "n3's clock is -12.5 s off"]

    class Unreadable(Leaky):
        def rules_left(self):
            raise OSError("ssh connection lost")

    assert unhealed(Unreadable(), {}) == [
        "the heal could not be checked: OSError: ssh connection lost"]


class _Net:
    """A cluster view that records cuts instead of making them (shapes are pure logic)."""

    def __init__(self, n: int = 5) -> None:
        self.nodes = [Node(i, f"n{i}", f"10.0.0.{i}", ("broker", "controller"))
                      for i in range(1, n + 1)]
        self.cuts: set[tuple[int, int, int | None]] = set()
        self.one_way: set[tuple[int, int]] = set()  # (from, to) whose packets are dropped
        self.losses: set[float | None] = set()

    def drop(self, node, peers, port=None, inbound_only=False, loss=None):
        self.cuts |= {(node.node_id, p.node_id, port) for p in peers}
        self.one_way |= {(p.node_id, node.node_id) for p in peers if inbound_only}
        self.losses.add(loss)


def _shape(target: str, seed: int = 1, net: _Net | None = None) -> tuple[dict, set]:
    from kafka_chaos.nemesis.faults import PartitionNemesis

    Partitionable.register(_Net)
    net = net or _Net()
    nemesis = PartitionNemesis(net, random.Random(seed))
    return nemesis.invoke("partition", {"target": target}), net.cuts


def test_partition_shapes_cut_exactly_between_their_groups():
    for target in ("isolate-one", "halves", "bridge"):
        done, cuts = _shape(target)
        a, b = done["isolated"]
        ids = {n: int(n[1:]) for n in a + b}
        expected = {(ids[x], ids[y], None) for x in a for y in b}
        assert cuts == expected | {(y, x, None) for x, y, _ in expected}, target
        assert len(a) + len(b) == (4 if target == "bridge" else 5) and a and b
        if target == "bridge":
            assert done["bridge"] not in a + b  # it keeps every link
    with pytest.raises(NemesisError, match="choose from isolate-one"):
        _shape("majorities-sphere")


def test_a_loss_makes_the_same_shape_lossy_and_is_healed_like_a_partition():
    from kafka_chaos.clusters.netfaults import drop_rules
    from kafka_chaos.nemesis.faults import PartitionNemesis

    cut, lossy = _Net(), _Net()
    Partitionable.register(_Net)
    done = PartitionNemesis(cut, random.Random(3)).invoke("partition", {"target": "halves"})
    lost = PartitionNemesis(lossy, random.Random(3)).invoke("loss", {"target": "halves",
                                                                    "loss": 0.25})
    assert lost == {**done, "loss": 0.25} and lossy.cuts == cut.cuts
    assert cut.losses == {None} and lossy.losses == {0.25}
    default = _Net()
    assert PartitionNemesis(default, random.Random(3)).invoke(
        "loss", {"target": "isolate-one"})["loss"] == PartitionNemesis.LOSS == 0.3
    with pytest.raises(NemesisError, match="between 0 and 1"):
        PartitionNemesis(_Net(), random.Random(3)).invoke("loss", {"loss": 1.5})
    peer = Node(2, "n2", "10.0.0.2", ("broker",))
    assert drop_rules(peer, 9092, loss=0.25)[0] == [
        "INPUT", "-s", "10.0.0.2", "-p", "tcp", "--dport", "9092", "-m", "statistic",
        "--mode", "random", "--probability", "0.250000", "-j", "DROP"]
    assert drop_rules(peer, None)[1] == ["OUTPUT", "-d", "10.0.0.2", "-j", "DROP"]
    with pytest.raises(ValueError, match="between 0 and 1"):
        drop_rules(peer, None, loss=0.0)


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_majorities_ring_each_node_hears_a_majority_no_two_the_same(n):
    net = _Net(n)
    done, _ = _shape("majorities-ring", seed=n, net=net)
    hears = {name: frozenset(h) for name, h in done["hears"].items()}
    assert all(len(h) > n // 2 for h in hears.values()) and len(set(hears.values())) == n
    for name, h in hears.items():  # exactly the others it does not hear are dropped
        me = int(name[1:])
        deaf = {int(x.name[1:]) for x in net.nodes} - {int(x[1:]) for x in h}
        assert {f for f, to in net.one_way if to == me} == deaf


def test_one_way_drops_only_what_one_node_sends():
    net = _Net()
    done, _ = _shape("one-way", net=net)
    [[src], dsts] = done["dropped"]
    assert net.one_way == {(int(src[1:]), int(d[1:])) for d in dsts} and len(dsts) == 4


def test_process_targets_are_drawn_among_live_nodes():
    net = _Net()
    live = net.nodes[:4]  # n5 is down
    rng = random.Random(3)
    assert len(pick(net, rng, live, {"target": "minority"})) == 2
    assert len(pick(net, rng, live, {"target": "majority"})) == 3
    assert pick(net, rng, live, {"target": "all"}) == live  # all that are up
    assert [n.name for n in pick(net, rng, live, {"target": [2, 5]})] == ["n2"]
    assert set(pick(net, rng, live, {"target": "one"})) <= set(live)
    with pytest.raises(NemesisError, match="or a list of node ids"):
        pick(net, rng, live, {"target": "primaries"})


def test_targets_option_routes_each_target_to_the_faults_that_take_it():
    out = parse_targets("controller, 2, halves", ["kill", "partition"])
    assert out == {"kill": ["controller", [2]], "partition": ["halves"]}
    assert parse_targets("", ["pause"])["pause"] == list(PACKAGES["pause"].targets)
    assert parse_targets("majority", ["kill", "partition"])["partition"] == \
        list(PACKAGES["partition"].targets)  # none of its kind given: its defaults
    with pytest.raises(ValueError, match="'halves' is no target of kill"):
        parse_targets("halves", ["kill"])
    with pytest.raises(ValueError, match="no target of partition"):
        parse_targets("3", ["partition"])
    assert parse_targets("2, in-sync-follower", ["roll", "leader"]) == {
        "roll": [[2]], "leader": ["in-sync-follower"]}
    with pytest.raises(ValueError, match="leader in-sync-follower"):
        parse_targets("in-sync-follower", ["kill"])


class _Recorder(Nemesis):
    fs = frozenset({"kill", "start", "pause", "resume", "partition", "heal"})

    def __init__(self, rng):
        super().__init__(cluster=None, rng=rng)

    def invoke(self, f, value):
        self.rng.random()  # node picks consume the nemeses' stream a varying number of times
        return {"f": f}


def _schedule(seed: int, tmp_path, name: str) -> list:
    path = tmp_path / name
    with HistoryWriter(path, header={"config": {}}) as history:
        scheduler = Scheduler(Composed([_Recorder(random.Random())]), history,
                              ["kill", "pause", "partition"], 0.002, random.Random(seed), "t",
                              targets=parse_targets("", ["kill", "pause", "partition"]))
        scheduler.start()
        while sum(1 for op in read_history(path) if op.type.value == "invoke") < 40:
            pass
        scheduler.finish()
    return [(op.f, op.value) for op in read_history(path) if op.type.value == "invoke"][:40]


def test_one_seed_gives_one_sequence_of_nemesis_invokes(tmp_path):
    first = _schedule(7, tmp_path, "a.jsonl")
    assert first == _schedule(7, tmp_path, "b.jsonl")
    assert first != _schedule(8, tmp_path, "c.jsonl")
    packages = ["kill", "pause", "partition"]
    assert first == list(itertools.islice(plan(random.Random(7), packages,
                                               parse_targets("", packages), "t"), 40))
    assert schedule_rng(3).random() == schedule_rng(3).random() != schedule_rng(4).random()
    assert {f for f, _ in first} >= {"kill", "pause", "partition", "start", "resume", "heal"}


def test_a_fault_asked_for_that_never_started_is_named(tmp_path):
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, header={"config": {}}) as history:
        scheduler = Scheduler(Composed([_Recorder(random.Random())]), history,
                              ["kill", "pause", "partition"], 30.0, random.Random(1), "t")
        assert scheduler.not_run() == ["kill", "pause", "partition"]
        scheduler.run_op("pause", {"target": "one"})
        scheduler.run_op("resume", None)  # a stop is no start
        assert scheduler.not_run() == ["kill", "partition"]
        scheduler.finish()


def test_every_fault_asked_for_happens_once_in_each_round():
    """The quick start's ``--nemesis kill,partition`` once drew three partitions and no kill
    in 60 s; rounds of every package once, shuffled, rule that out for any seed."""
    packages = ["kill", "stop", "pause", "partition", "roll", "leader", "clock",
                "lose-unfsynced", "unclean"]
    orders = set()
    for seed in range(30):
        ops = itertools.islice(plan(schedule_rng(seed), packages,
                                    parse_targets("", packages), "t"), 4 * 2 * len(packages))
        fs = [f for i, (f, _) in enumerate(ops) if i % 2 == 0]
        for r in range(4):
            names = [_package(f) for f in fs[r * len(packages):(r + 1) * len(packages)]]
            assert sorted(names) == sorted(packages), (seed, r, names)
        orders.add(tuple(fs[:len(packages)]))
    assert len(orders) > 20  # shuffled anew, not one fixed order


def _package(start: str) -> str:
    return next(p for p, pkg in PACKAGES.items() if start in pkg.start)


def test_unclean_election_is_turned_off_where_it_was_turned_on():
    ops = list(itertools.islice(plan(random.Random(1), ["unclean"],
                                     parse_targets("", ["unclean"]), "t"), 20))
    for (on, value), (off, undo) in zip(ops[::2], ops[1::2]):
        assert (on, off) == ("unclean-on", "unclean-off") and undo == value
    assert {v["target"] for _, v in ops} == {"topic", "cluster"}


class _Clocks:
    """A cluster that records clock offsets (the ``Skewable`` ability) and nothing else."""

    clock = True

    def __init__(self):
        self.nodes = [Node(i, f"n{i}", f"10.0.0.{i}", ("broker", "controller"))
                      for i in (1, 2, 3)]
        self.offsets = {n.node_id: [] for n in self.nodes}

    def node(self, node_id):
        return next(n for n in self.nodes if n.node_id == node_id)

    def is_running(self, node):
        return True

    def set_clock(self, node, offset_s):
        self.offsets[node.node_id].append(offset_s)


def test_clock_faults_bump_strobe_and_reset_only_what_they_skewed(monkeypatch):
    from kafka_chaos.clusters.base import Skewable
    from kafka_chaos.nemesis import clock

    Skewable.register(_Clocks)
    cluster = _Clocks()
    nemesis = clock.ClockNemesis(cluster, random.Random(3))
    done = nemesis.invoke("clock-bump", {"target": [2]})
    offset = done["offsets_s"]["n2"]
    assert 0.1 <= abs(offset) <= clock.MAX_BUMP_S and cluster.offsets[2] == [offset]
    monkeypatch.setattr(clock.time, "sleep", lambda s: None)
    ticks = itertools.count()
    monkeypatch.setattr(clock.time, "monotonic", lambda: next(ticks) * 1.0)
    strobe = nemesis.invoke("clock-strobe", {"target": [3]})
    delta = strobe["strobed"]["n3"]
    assert clock.STROBE_PERIOD_S[0] <= strobe["period_s"] <= clock.STROBE_PERIOD_S[1]
    assert cluster.offsets[3][:2] == [delta, 0.0] and cluster.offsets[3][-1] == 0.0
    assert strobe["flips"] == len(cluster.offsets[3]) - 1 >= 2
    assert nemesis.teardown() == {"reset": ["n2", "n3"]} and cluster.offsets[2][-1] == 0.0
    assert nemesis.teardown() is None and cluster.offsets[1] == []  # nothing left to reset
    with pytest.raises(NemesisError, match="cannot skew clocks"):
        clock.ClockNemesis(object(), random.Random(0)).invoke("clock-bump", {})


def test_a_package_with_several_starts_draws_one_and_the_plan_stays_seeded():
    targets = parse_targets("", ["clock"])
    starts = [f for f, _ in itertools.islice(plan(schedule_rng(1), ["clock"], targets, "t"), 40)]
    assert set(starts[0::2]) == {"clock-bump", "clock-strobe"}
    assert set(starts[1::2]) == {"clock-reset"}
    again = [f for f, _ in itertools.islice(plan(schedule_rng(1), ["clock"], targets, "t"), 40)]
    assert again == starts


class _Steps(_Net):
    """A cluster view that records kills, cuts and heals in order, as ``steps``."""

    def __init__(self, n: int, steps: list) -> None:
        super().__init__(n)
        self.steps = steps

    def kill(self, node):
        self.steps.append(("kill", node.node_id))

    def heal_network(self):
        self.steps.append(("heal",))

    def is_running(self, node):
        return True

    def drop(self, node, peers, port=None, inbound_only=False, loss=None):
        self.steps.append(("drop", node.node_id, sorted(p.node_id for p in peers), port))


def test_a_lagging_leader_is_killed_after_its_replication_was_cut_and_the_cut_healed(
        monkeypatch):
    from kafka_chaos.nemesis import faults
    from kafka_chaos.nemesis.targets import LAG_S

    steps: list = []
    Killable.register(_Steps)
    Partitionable.register(_Steps)
    net = _Steps(3, steps)
    monkeypatch.setattr(faults, "leader_of", lambda cluster, topic, p: net.nodes[1])
    monkeypatch.setattr(faults.time, "sleep", lambda s: steps.append(("sleep", s)))
    nemesis = faults.ProcessNemesis(net, random.Random(1))
    done = nemesis.invoke("kill", {"target": "lagging-leader", "topic": "t", "partition": 0})
    port = net.nodes[1].broker_port
    assert steps == [("drop", 2, [1, 3], port), ("sleep", LAG_S), ("kill", 2), ("heal",)]
    assert done == {"killed": ["n2"], "lagged_s": LAG_S, "isolated": [["n2"], ["n1", "n3"]],
                    "port": port}
    assert nemesis.killed == {2}
    # only kill takes it; a schedule of pauses refuses it
    assert parse_targets("lagging-leader", ["kill", "pause"]) == {
        "kill": ["lagging-leader"], "pause": list(PACKAGES["pause"].targets)}
    with pytest.raises(ValueError, match="kill also lagging-leader"):
        parse_targets("lagging-leader", ["pause"])


@pytest.mark.parametrize("shrinks", [True, False])
def test_a_lone_leader_is_killed_only_once_its_isr_is_itself_alone(monkeypatch, shrinks):
    from types import SimpleNamespace

    from kafka_chaos.nemesis import faults, targets

    steps: list = []
    clock = itertools.count()
    Killable.register(_Steps)
    Partitionable.register(_Steps)
    net = _Steps(3, steps)
    reads = iter([[1, 2, 3], [1, 2, 3], [2, 3]] + [[2] if shrinks else [2, 3]] * 1000)
    monkeypatch.setattr(faults, "leader_of", lambda cluster, topic, p: net.nodes[1])
    monkeypatch.setattr(faults, "partition_of", lambda cluster, topic, p: SimpleNamespace(
        leader=2, isr=next(reads)))
    monkeypatch.setattr(faults.time, "sleep", lambda s: steps.append(("sleep", s)))
    monkeypatch.setattr(faults.time, "monotonic", lambda: float(next(clock)))
    nemesis = faults.ProcessNemesis(net, random.Random(1))
    # the wait for the ISR polls on the run's end event: recorded, not slept (the clock is
    # this test's own)
    monkeypatch.setattr(nemesis.ending, "wait", lambda s=None: steps.append(("poll", s)))
    done = nemesis.invoke("kill", {"target": "lone-leader", "topic": "t", "partition": 0})
    assert steps[0] == ("drop", 2, [1, 3], net.nodes[1].broker_port) and steps[-1] == ("heal",)
    if shrinks:
        assert steps[-3:] == [("sleep", targets.LONE_HOLD_S), ("kill", 2), ("heal",)]
        assert done["killed"] == ["n2"] and done["alone_after_s"] > 0 and nemesis.killed == {2}
    else:  # the precondition never held: nothing killed, and the record says why
        assert ("kill", 2) not in steps and nemesis.killed == set()
        assert done["killed"] == [] and done["alone_after_s"] is None and done["isr"] == [2, 3]
    assert parse_targets("lone-leader", ["kill", "lose-unfsynced", "pause"]) == {
        "kill": ["lone-leader"], "lose-unfsynced": ["lone-leader"],
        "pause": list(PACKAGES["pause"].targets)}


def test_the_freshest_view_of_a_partition_is_the_newest_epoch_then_the_furthest_metadata():
    """An ISR change keeps the leader epoch: among views in the newest epoch the monitor takes
    the one of the broker whose metadata log reaches furthest (a broker on a slow disk kept
    the ISR from before the shrink, seen in a real run of ``slow-disk-follower``)."""
    from kafka_chaos.nemesis.monitor import _freshest

    def view(epoch, isr, leader=3):
        return {"t": [{"partition": 0, "leader": leader, "leader_epoch": epoch, "isr": isr}]}

    slow, fresh = (1, view(0, [3, 1, 2])), (2, view(0, [3, 2]))
    assert _freshest([slow, fresh], {1: 120, 2: 180, 3: 180})["t"][0]["isr"] == [3, 2]
    # without the quorum's offsets: the first view in the newest epoch, as before
    assert _freshest([slow, fresh])["t"][0]["isr"] == [3, 1, 2]
    # a newer leader epoch wins whatever the metadata offsets say
    newer = (1, view(1, [2], leader=2))
    assert _freshest([fresh, newer], {1: 0, 2: 500})["t"][0]["isr"] == [2]
